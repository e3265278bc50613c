"""Tests for mpcnet.ops.wordsort: shuffled rows sorted by any distinct words in signed order,
under every scheme, with what the parties open."""

from __future__ import annotations

import numpy as np
from conftest import opened, run_protocol

from mpcnet.ops.wordsort import word_order
from mpcnet.schemes.base import Scheme, Shared

EXTREMES = np.array([-2**63, 2**63 - 1, -2**63 + 1, 2**62, -2**62, 0, 1, -1], dtype=np.int64)


def _sorted_by_the_parties(scheme: str, keys: np.ndarray, lengths: list[int]) -> np.ndarray:
    async def body(s: Scheme, keys: Shared) -> np.ndarray:
        return await word_order(s, keys, lengths)

    return opened(run_protocol(scheme, {"keys": keys}, body))


def test_groups_of_any_words_are_sorted_in_signed_order(scheme: str) -> None:
    """Words whose differences wrap the ring (a dishonest owner may send any) are ordered as
    signed integers all the same, so the comparisons are those of a total order."""
    rng = np.random.default_rng(7)
    wide = rng.integers(-2**63, 2**63 - 1, 120, dtype=np.int64, endpoint=True)
    keys = np.concatenate([EXTREMES, wide, rng.permutation(40) - 20])
    lengths = [EXTREMES.size, wide.size, 1, 39]
    order = _sorted_by_the_parties(scheme, keys, lengths)
    bounds = np.cumsum([0, *lengths])
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        assert sorted(order[a:b].tolist()) == list(range(a, b))  # rows stay in their group
        np.testing.assert_array_equal(keys[order[a:b]], np.sort(keys[a:b]))  # signed order


def test_more_than_a_word_of_outcomes_per_batch_unpacks_in_order(scheme: str) -> None:
    """A batch of 199 comparisons opens 4 packed words; every outcome lands on its pair."""
    keys = np.random.default_rng(3).permutation(200).astype(np.int64) * 3 - 300
    order = _sorted_by_the_parties(scheme, keys, [200])
    np.testing.assert_array_equal(keys[order], np.sort(keys))
