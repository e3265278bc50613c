"""Tests for mpcnet.ops.quicksort: the opened quicksort's driver on plaintext comparisons."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from mpcnet.ops.quicksort import opened_quicksort


def _sort(keys: np.ndarray, lengths: list[int]) -> tuple[np.ndarray, int]:
    batches = 0

    async def less(rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
        nonlocal batches
        batches += 1
        return (keys[rows] < keys[pivots]).astype(np.int64)

    return asyncio.run(opened_quicksort(less, np.array(lengths))), batches


@pytest.mark.parametrize("lengths", [[1], [2], [7], [1000], [5, 1, 0, 300, 2]])
def test_each_group_is_sorted_within_itself(lengths: list[int]) -> None:
    rng = np.random.default_rng(sum(lengths))
    keys = rng.permutation(sum(lengths) * 3)[:sum(lengths)]
    order, _ = _sort(keys, lengths)
    bounds = np.cumsum([0, *lengths])
    assert sorted(order.tolist()) == list(range(sum(lengths)))
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        assert set(order[a:b].tolist()) == set(range(a, b))  # rows stay in their group
        assert np.all(np.diff(keys[order[a:b]]) > 0)


def test_batches_grow_with_log_n() -> None:
    keys = np.random.default_rng(1).permutation(1 << 14)
    _, batches = _sort(keys, [keys.size])
    assert 14 <= batches <= 4 * 14
