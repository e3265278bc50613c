"""Tests of mpcnet.ring128 (Z_2^128 on two uint64 limbs) against Python int arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpcnet import ring128 as r

MOD = 1 << 128
EDGES = [0, 1, 2, 3, (1 << 32) - 1, 1 << 32, (1 << 64) - 1, 1 << 64, (1 << 64) + 1,
         1 << 127, (1 << 127) - 1, MOD - 1, MOD - 2]
elements = st.one_of(st.sampled_from(EDGES), st.integers(0, MOD - 1))
vectors = st.lists(elements, min_size=1, max_size=12)


def pair_of_vectors() -> st.SearchStrategy[tuple[list[int], list[int]]]:
    return st.integers(1, 12).flatmap(
        lambda n: st.tuples(st.lists(elements, min_size=n, max_size=n),
                            st.lists(elements, min_size=n, max_size=n)))


def ints(a: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(r.to_int(a), dtype=object).ravel()]


@given(vectors)
def test_round_trip(xs: list[int]) -> None:
    assert ints(r.from_int(xs)) == xs


@given(st.lists(st.integers(-(1 << 200), 1 << 200), min_size=1, max_size=8))
def test_from_int_reduces(xs: list[int]) -> None:
    assert ints(r.from_int(xs)) == [x % MOD for x in xs]


@given(pair_of_vectors())
def test_add_sub(xy: tuple[list[int], list[int]]) -> None:
    x, y = xy
    a, b = r.from_int(x), r.from_int(y)
    assert ints(r.add(a, b)) == [(u + v) % MOD for u, v in zip(x, y, strict=True)]
    assert ints(r.sub(a, b)) == [(u - v) % MOD for u, v in zip(x, y, strict=True)]


@given(vectors)
def test_neg(xs: list[int]) -> None:
    assert ints(r.neg(r.from_int(xs))) == [(-v) % MOD for v in xs]


@given(pair_of_vectors())
def test_mul(xy: tuple[list[int], list[int]]) -> None:
    x, y = xy
    assert ints(r.mul(r.from_int(x), r.from_int(y))) == [
        (u * v) % MOD for u, v in zip(x, y, strict=True)]


@given(st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=10),
       st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=10))
def test_mul64_full(x: list[int], y: list[int]) -> None:
    n = min(len(x), len(y))
    lo, hi = r.mul64_full(np.array(x[:n], dtype=np.uint64), np.array(y[:n], dtype=np.uint64))
    got = [int(a) + (int(b) << 64) for a, b in zip(lo, hi, strict=True)]
    assert got == [u * v for u, v in zip(x[:n], y[:n], strict=True)]


@given(vectors, st.integers(0, (1 << 64) - 1))
def test_mul_u64(xs: list[int], c: int) -> None:
    assert ints(r.mul_u64(r.from_int(xs), c)) == [(v * c) % MOD for v in xs]


@st.composite
def matrices(draw: st.DrawFn) -> tuple[list[list[int]], list[list[int]]]:
    m, n, k = draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 5))
    a = [[draw(elements) for _ in range(n)] for _ in range(m)]
    b = [[draw(elements) for _ in range(k)] for _ in range(n)]
    return a, b


@given(matrices())
def test_matmul(ab: tuple[list[list[int]], list[list[int]]]) -> None:
    a, b = ab
    n = len(b)
    want = [[sum(a[i][t] * b[t][j] for t in range(n)) % MOD for j in range(len(b[0]))]
            for i in range(len(a))]
    got = r.to_int(r.matmul(r.from_int(a), r.from_int(b)))
    assert got.tolist() == want


def test_matmul_all_ones_large_inner() -> None:
    """Worst case for the exactness bound: every piece at its maximum, long inner dimension."""
    n = 3000
    a = r.from_int(np.full((2, n), MOD - 1, dtype=object))
    b = r.from_int(np.full((n, 3), MOD - 1, dtype=object))
    want = (n * (MOD - 1) * (MOD - 1)) % MOD
    assert set(r.to_int(r.matmul(a, b)).ravel().tolist()) == {want}


def test_matmul_random_against_ints() -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(0, 1 << 64, size=(2, 30, 100), dtype=np.uint64)
    b = rng.integers(0, 1 << 64, size=(2, 100, 7), dtype=np.uint64)
    ai, bi = r.to_int(a), r.to_int(b)
    want = (ai.dot(bi)) % MOD
    assert (r.to_int(r.matmul(a, b)) == want).all()


def test_matmul_with_a_left_factor_below_2_64() -> None:
    """A left factor without high limbs takes the shortcut with fewer pieces: same result."""
    rng = np.random.default_rng(8)
    a = r.from_u64(rng.integers(0, 1 << 64, size=(30, 100), dtype=np.uint64))
    b = rng.integers(0, 1 << 64, size=(2, 100, 7), dtype=np.uint64)
    want = (r.to_int(a).dot(r.to_int(b))) % MOD
    assert (r.to_int(r.matmul(a, b)) == want).all()


def test_matmul_mixing_left_entries_below_and_above_2_64() -> None:
    """Entries of the left factor without a high limb take two products, the others three:
    a mix of both in every row gives the exact product."""
    rng = np.random.default_rng(9)
    a = rng.integers(0, 1 << 64, size=(2, 30, 100), dtype=np.uint64)
    a[1][rng.random((30, 100)) < 0.5] = 0
    b = rng.integers(0, 1 << 64, size=(2, 100, 7), dtype=np.uint64)
    want = (r.to_int(a).dot(r.to_int(b))) % MOD
    assert (r.to_int(r.matmul(a, b)) == want).all()


def test_replicated_dot_against_ints() -> None:
    """sum_t r0 (z0 + z1) + r1 z0 over the last axis, leading axes broadcast."""
    rng = np.random.default_rng(10)
    rr = rng.integers(0, 1 << 64, size=(2, 2, 1, 50), dtype=np.uint64)  # (limb, slot, 1, n)
    zz = rng.integers(0, 1 << 64, size=(2, 2, 3, 50), dtype=np.uint64)  # (limb, slot, 3, n)
    r0, r1 = r.to_int(rr[:, 0]), r.to_int(rr[:, 1])
    z0, z1 = r.to_int(zz[:, 0]), r.to_int(zz[:, 1])
    want = (r0 * (z0 + z1) + r1 * z0).sum(axis=-1) % MOD
    assert (r.to_int(r.replicated_dot(rr, zz)) == want).all()


def test_matmul_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="do not align"):
        r.matmul(r.zeros((2, 3)), r.zeros((4, 2)))


@given(vectors, st.integers(0, 127))
def test_shifts(xs: list[int], s: int) -> None:
    a = r.from_int(xs)
    assert ints(r.shl(a, s)) == [(v << s) % MOD for v in xs]
    assert ints(r.shr(a, s)) == [v >> s for v in xs]
    signed = [v - MOD if v >= 1 << 127 else v for v in xs]
    assert ints(r.sar(a, s)) == [(v >> s) % MOD for v in signed]


def test_shift_range() -> None:
    with pytest.raises(ValueError):
        r.shl(r.zeros(1), 128)


@given(pair_of_vectors())
def test_comparisons(xy: tuple[list[int], list[int]]) -> None:
    x, y = xy
    a, b = r.from_int(x), r.from_int(y)

    def signed(v: int) -> int:
        return v - MOD if v >= 1 << 127 else v

    assert r.eq(a, b).tolist() == [u == v for u, v in zip(x, y, strict=True)]
    assert r.eq(a, a).all()
    assert r.ult(a, b).tolist() == [u < v for u, v in zip(x, y, strict=True)]
    assert r.slt(a, b).tolist() == [signed(u) < signed(v) for u, v in zip(x, y, strict=True)]


@given(vectors, st.integers(0, 127))
def test_bits(xs: list[int], i: int) -> None:
    a = r.from_int(xs)
    assert r.msb(a).tolist() == [v >> 127 for v in xs]
    assert r.bit(a, i).tolist() == [(v >> i) & 1 for v in xs]


@given(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=1, max_size=10))
def test_extend(xs: list[int]) -> None:
    arr = np.array(xs, dtype=np.int64)
    assert ints(r.from_i64(arr)) == [v % MOD for v in xs]
    assert ints(r.from_u64(arr.view(np.uint64))) == [v % (1 << 64) for v in xs]
    assert [int(v) for v in r.low64(r.from_i64(arr))] == [v % (1 << 64) for v in xs]
    assert np.asarray(r.to_signed_int(r.from_i64(arr))).tolist() == xs


@settings(max_examples=50)
@given(st.lists(elements, min_size=1, max_size=40))
def test_sum(xs: list[int]) -> None:
    a = r.from_int(np.array(xs, dtype=object).reshape(1, -1))
    assert ints(r.sum_(a, 1)) == [sum(xs) % MOD]
    assert ints(r.sum_(a, -1)) == [sum(xs) % MOD]


def test_compiled_loops_follow_numpy_broadcasting_and_strides() -> None:
    """Leading axes broadcast, transposed (strided) operands, batches of matrices and result
    rows wider than the kernel's row buffer (256) are all exact."""
    rng = np.random.default_rng(9)
    x = rng.integers(0, 1 << 64, size=(2, 4, 1, 5), dtype=np.uint64)
    y = rng.integers(0, 1 << 64, size=(2, 3, 5), dtype=np.uint64)
    xi, yi = r.to_int(x), r.to_int(y)
    assert (r.to_int(r.mul(x, y)) == (xi * yi) % MOD).all()
    assert (r.to_int(r.dot2(x, y, y, x)) == (2 * xi * yi) % MOD).all()
    assert (r.to_int(r.sub(y, x)) == (yi - xi) % MOD).all()
    t = rng.integers(0, 1 << 64, size=(2, 7, 300), dtype=np.uint64)
    ti = r.to_int(t)  # (7, 300); its transpose (300, 7) is a strided view
    assert (r.to_int(r.sum_(np.swapaxes(t, 1, 2), 0)) == ti.sum(axis=1) % MOD).all()
    wide = rng.integers(0, 1 << 64, size=(2, 7, 600), dtype=np.uint64)
    want = ti.T.dot(r.to_int(wide)) % MOD
    assert (r.to_int(r.matmul(np.swapaxes(t, 1, 2), wide)) == want).all()
    batch = rng.integers(0, 1 << 64, size=(2, 3, 2, 7), dtype=np.uint64)
    got = r.matmul(batch, wide)
    for q in range(3):
        assert (r.to_int(got[:, q]) == r.to_int(batch[:, q]).dot(r.to_int(wide)) % MOD).all()


def test_single_elements_and_vectors() -> None:
    """0-d results work; a vector is no matrix (a clear error)."""
    assert ints(r.mul_u64(r.from_int(5), 4)) == [20]
    assert ints(r.sum_(r.from_int([1, MOD - 1, 7]), 0)) == [7]
    with pytest.raises(ValueError, match="needs matrices"):
        r.matmul(r.from_int([1, 2]), r.from_int([[3], [4]]))
