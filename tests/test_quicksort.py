"""Tests for mpcnet.ops.quicksort: the opened quicksort's driver on plaintext comparisons."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from mpcnet.ops.quicksort import SAMPLE_FROM, opened_quicksort


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


@pytest.mark.parametrize("lengths", [[63, 64, 65], [64] * 5 + [3, 200, 129], [4000]])
def test_sampled_pivots_sort_parts_at_and_around_the_sample_threshold(
        lengths: list[int]) -> None:
    """Parts of SAMPLE_FROM (64) rows and more take the median of a sample: the sorted
    sample's members must lead each side after the split (the next pivots come from them),
    and a large part is sampled again once they run out (4,000 rows)."""
    keys = np.random.default_rng(len(lengths)).permutation(sum(lengths))
    order, _ = _sort(keys, lengths)
    bounds = np.cumsum([0, *lengths])
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        assert set(order[a:b].tolist()) == set(range(a, b))
        assert np.all(np.diff(keys[order[a:b]]) > 0)


def test_sampled_pivots_need_fewer_comparisons_than_the_first_row() -> None:
    """At 8,192 rows: at most 1.05 n log2 n comparisons (the first row as pivot takes about
    1.39 n log2 n less lower terms, 14.8 per row here; any comparison sort at least 11.6)."""
    keys = np.random.default_rng(3).permutation(8192)
    count = 0

    async def less(rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
        nonlocal count
        count += rows.size
        return (keys[rows] < keys[pivots]).astype(np.int64)

    order = asyncio.run(opened_quicksort(less, np.array([keys.size])))
    assert np.all(np.diff(keys[order]) > 0)
    assert count <= 1.05 * 8192 * 13


def test_outcomes_of_no_total_order_are_refused() -> None:
    """A sample's outcomes must rank its rows 0..s-1 (they do whenever the keys are
    distinct); a cycle ([a < b] exactly when b - a is odd: 0 < 1 < 2 < 0) is refused."""
    async def less(rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
        return (pivots - rows) % 2

    with pytest.raises(ValueError, match="not those of distinct keys"):
        asyncio.run(opened_quicksort(less, np.array([100])))


def _transcript(keys: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The order and every batch's (rows, pivots) the driver asked for."""
    calls: list[np.ndarray] = []

    async def less(rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
        assert rows.shape == pivots.shape
        assert not np.any(rows == pivots), "a row compared with itself"
        calls.append(np.stack([rows, pivots]))
        return (keys[rows] < keys[pivots]).astype(np.int64)

    return asyncio.run(opened_quicksort(less, lengths)), calls


@pytest.mark.parametrize("seed", range(12))
def test_sampled_pivots_sort_and_ask_what_the_ranks_decide(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = np.array([0, 1, 2, 3, SAMPLE_FROM - 1, SAMPLE_FROM, SAMPLE_FROM + 1, 200, 1500])
    lengths = rng.choice(sizes, rng.integers(1, 6))
    n = int(lengths.sum())
    keys = rng.choice(1 << 40, n, replace=False).astype(np.int64)
    order, calls = _transcript(keys, lengths)
    bounds = np.cumsum([0, *lengths])
    assert sorted(order.tolist()) == list(range(n))
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        assert set(order[a:b].tolist()) == set(range(a, b))
        assert np.all(np.diff(keys[order[a:b]]) > 0)
    # another set of keys with the same ranks: the same comparisons, batch by batch
    ranks = np.argsort(np.argsort(keys))
    _, again = _transcript(3 * ranks + 7, lengths)
    assert len(again) == len(calls)
    for one, other in zip(calls, again, strict=True):
        np.testing.assert_array_equal(one, other)
