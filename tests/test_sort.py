"""The oblivious odd-even merge sort of mpcnet.ops.sort: the network sorts every input, and under
every scheme the columns come out sorted with their payload."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.ops.sort import sort_columns, stages
from mpcnet.schemes.base import concat


def _run_network(values: np.ndarray) -> np.ndarray:
    """The network's comparators applied in plaintext to the rows of ``values`` (m, ...)."""
    out = values.copy()
    for lower, upper in stages(out.shape[0]):
        low, high = out[lower], out[upper]
        out[lower], out[upper] = np.minimum(low, high), np.maximum(low, high)
    return out


@pytest.mark.parametrize("m", range(1, 15))
def test_the_network_sorts_every_zero_one_input(m: int) -> None:
    """The 0-1 principle: a comparator network that sorts every 0/1 input sorts every input;
    all 2^m of them at once, one per column."""
    inputs = np.array(list(itertools.product([0, 1], repeat=m)), dtype=np.int64).T
    np.testing.assert_array_equal(_run_network(inputs), np.sort(inputs, axis=0))


@pytest.mark.parametrize("m", [31, 100, 126, 513, 632])
def test_the_network_sorts_random_columns_with_ties(m: int) -> None:
    values = np.random.default_rng(m).integers(-5, 5, size=(m, 20))
    np.testing.assert_array_equal(_run_network(values), np.sort(values, axis=0))


def test_comparators_past_the_rows_are_left_out() -> None:
    """No comparator touches a row past m, and a stage never uses a row twice."""
    for m in (5, 126, 1000):
        for lower, upper in stages(m):
            rows = np.concatenate([lower, upper])
            assert rows.max() < m and np.unique(rows).size == rows.size
            assert np.all(lower < upper)
    assert sum(lo.size for lo, _ in stages(8378)) == 380192  # 433,390 for a cut bitonic sort
    assert sum(1 for _ in stages(8378)) == 14 * 15 // 2


def test_sort_columns_moves_the_payload_with_the_keys(scheme: str) -> None:
    rng = np.random.default_rng(5)
    m, p = 37, 4
    keys = rng.integers(-3, 3, size=(m, p))
    keys[:, 0] = 7  # a constant column
    keys[:3, 1] = [2**38 - 1, -(2**38) + 1, 0]  # the widest encoded values
    payload = rng.integers(0, 2, size=(2, m, p))

    async def body(s, keys, payload):  # type: ignore[no-untyped-def]
        both = concat([keys.reshape(1, m, p), payload]).reshape(3, m, p)
        return await s.open(await sort_columns(s, both, batch=50))

    out = opened(run_protocol(scheme, {"keys": keys, "payload": payload}, body)).view(np.int64)
    np.testing.assert_array_equal(out[0], np.sort(keys, axis=0))
    for j in range(p):  # each column holds the same (key, payload) rows as before
        before = sorted(zip(keys[:, j], payload[0, :, j], payload[1, :, j], strict=True))
        after = sorted(zip(out[0, :, j], out[1, :, j], out[2, :, j], strict=True))
        assert before == after
