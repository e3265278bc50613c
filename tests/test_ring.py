"""Tests of mpcnet.ring (Z_2^64 on uint64 and bit-sliced helpers) against Python ints."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from mpcnet import ring

MOD = 1 << 64
signed64 = st.one_of(st.sampled_from([0, 1, -1, (1 << 63) - 1, -(1 << 63)]),
                     st.integers(-(1 << 63), (1 << 63) - 1))
unsigned64 = st.one_of(st.sampled_from([0, 1, MOD - 1, 1 << 63]), st.integers(0, MOD - 1))


@given(st.lists(signed64, min_size=1, max_size=20))
def test_signed_round_trip(xs: list[int]) -> None:
    u = ring.to_ring(np.array(xs, dtype=np.int64))
    assert u.dtype == np.uint64
    assert [int(v) for v in u] == [x % MOD for x in xs]
    assert ring.to_signed(u).tolist() == xs


@given(st.lists(st.integers(-(1 << 100), 1 << 100), min_size=1, max_size=10))
def test_to_ring_python_ints(xs: list[int]) -> None:
    u = ring.to_ring(np.array(xs, dtype=object))
    assert [int(v) for v in u] == [x % MOD for x in xs]


@given(st.lists(unsigned64, min_size=1, max_size=10))
def test_to_ring_keeps_uint64(xs: list[int]) -> None:
    u = np.array(xs, dtype=np.uint64)
    assert ring.to_ring(u) is u


@st.composite
def matrices(draw: st.DrawFn) -> tuple[list[list[int]], list[list[int]]]:
    m, n, k = draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 5))
    a = [[draw(unsigned64) for _ in range(n)] for _ in range(m)]
    b = [[draw(unsigned64) for _ in range(k)] for _ in range(n)]
    return a, b


@given(matrices())
def test_matmul_wraps(ab: tuple[list[list[int]], list[list[int]]]) -> None:
    a, b = ab
    got = ring.matmul(np.array(a, dtype=np.uint64), np.array(b, dtype=np.uint64))
    want = [[sum(a[i][t] * b[t][j] for t in range(len(b))) % MOD for j in range(len(b[0]))]
            for i in range(len(a))]
    assert got.dtype == np.uint64
    assert got.tolist() == want


@given(st.lists(signed64, min_size=1, max_size=20))
def test_msb_is_sign(xs: list[int]) -> None:
    u = ring.to_ring(np.array(xs, dtype=np.int64))
    assert ring.msb(u).tolist() == [int(x < 0) for x in xs]


@given(st.lists(unsigned64, min_size=1, max_size=20), st.integers(0, 63))
def test_bit(xs: list[int], i: int) -> None:
    u = np.array(xs, dtype=np.uint64)
    assert ring.bit(u, i).tolist() == [(x >> i) & 1 for x in xs]
    assert ring.bit(u, i).dtype == np.uint64
