"""Tests for mpcnet.ops.wordsort: shuffled rows sorted by distinct keys under every scheme,
and keys out of range refused before any comparison is opened."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.errors import InputError
from mpcnet.ops.wordsort import KEY_BOUND, word_order
from mpcnet.schemes.base import Scheme, Shared

EDGES = np.array([-KEY_BOUND, KEY_BOUND - 1, -KEY_BOUND + 1, KEY_BOUND - 2, 0, 1, -1],
                 dtype=np.int64)


def _sorted_by_the_parties(scheme: str, keys: np.ndarray, lengths: list[int]) -> np.ndarray:
    async def body(s: Scheme, keys: Shared) -> np.ndarray:
        return await word_order(s, keys, lengths)

    return opened(run_protocol(scheme, {"keys": keys}, body))


def test_groups_are_sorted_up_to_the_edges_of_the_range(scheme: str) -> None:
    rng = np.random.default_rng(7)
    wide = rng.integers(-KEY_BOUND, KEY_BOUND, 120, dtype=np.int64)
    keys = np.concatenate([EDGES, wide, rng.permutation(40) - 20])
    lengths = [EDGES.size, wide.size, 1, 39]
    order = _sorted_by_the_parties(scheme, keys, lengths)
    bounds = np.cumsum([0, *lengths])
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        assert sorted(order[a:b].tolist()) == list(range(a, b))  # rows stay in their group
        np.testing.assert_array_equal(keys[order[a:b]], np.sort(keys[a:b]))


def test_more_than_a_word_of_outcomes_per_batch_unpacks_in_order(scheme: str) -> None:
    """A batch of 199 comparisons opens 4 packed words; every outcome lands on its pair."""
    keys = np.random.default_rng(3).permutation(200).astype(np.int64) * 3 - 300
    order = _sorted_by_the_parties(scheme, keys, [200])
    np.testing.assert_array_equal(keys[order], np.sort(keys))


@pytest.mark.parametrize("bad", [KEY_BOUND, -KEY_BOUND - 1, 2**63 - 1, -2**63])
def test_a_key_out_of_range_is_refused(bad: int) -> None:
    """Differences with such a key can wrap, so that the comparisons make a cycle whose
    outcomes depend on the other keys: refused before any comparison is opened."""
    keys = np.array([5, bad, -3, 0], dtype=np.int64)
    with pytest.raises(InputError, match="1 of the 4 values to sort lie outside"):
        _sorted_by_the_parties("passive3", keys, [4])
