"""GF(2^64) (mpcnet.gf64): the compiled kernels against plain Python references on small
inputs, the modulus irreducible, Lagrange interpolation exact; every test runs with the CPU's
carry-less multiply and with the portable loop (``_gf64.portable``)."""

from __future__ import annotations

import numpy as np
import pytest

from mpcnet import _gf64, gf64  # type: ignore[attr-defined]

U64 = np.uint64


@pytest.fixture(autouse=True, params=["cpu", "portable"])
def _kernels(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param == "portable":
        monkeypatch.setattr(gf64, "_gf64", _gf64.portable)


def _words(rng: np.random.Generator, shape: tuple[int, ...] | int) -> np.ndarray:
    return rng.integers(0, 2**63, shape, dtype=np.int64).view(U64) ^ (
        rng.integers(0, 2, shape, dtype=np.int64).view(U64) << U64(63))


def _reference_mul(a: int, b: int) -> int:
    """a b by schoolbook: shift and add, reducing by x^64 = x^4 + x^3 + x + 1."""
    out = 0
    while b:
        if b & 1:
            out ^= a
        b >>= 1
        a <<= 1
        if a >> 64:
            a ^= (1 << 64) | 0b11011
    return out


def _bits(word: int) -> list[int]:
    return [(word >> b) & 1 for b in range(64)]


def test_the_modulus_is_irreducible() -> None:
    """Rabin: x^(2^64) = x mod f, and gcd(x^(2^32) - x, f) = 1 (64 = 2^6: one prime factor)."""
    def square_times(times: int) -> int:
        y = 2  # x
        for _ in range(times):
            y = _reference_mul(y, y)
        return y

    assert square_times(64) == 2
    # gcd(y, f) = 1 for y = x^(2^32) + x: y^(2^64 - 1) = 1 (``inverse`` is y^(2^64 - 2)),
    # impossible if y shared a factor with f (y would be a zero divisor)
    y = square_times(32) ^ 2
    assert y != 0 and gf64.smul(y, gf64.inverse(y)) == 1


def test_products_match_the_python_reference() -> None:
    rng = np.random.default_rng(1)
    a, b = _words(rng, 200), _words(rng, 200)
    got = gf64.mul(a, b)
    want = [_reference_mul(int(x), int(y)) for x, y in zip(a, b, strict=True)]
    assert [int(v) for v in got] == want
    assert [gf64.smul(int(x), int(y)) for x, y in zip(a, b, strict=True)] == want
    assert gf64.dot(a, b) == int(np.bitwise_xor.reduce(got))
    assert [int(v) for v in gf64.mul(int(a[0]), b)] == [gf64.smul(int(a[0]), int(y)) for y in b]


@pytest.mark.parametrize("count", [1, 2, 5, 16])
def test_lagrange_interpolates_every_polynomial_of_lower_degree(count: int) -> None:
    rng = np.random.default_rng(count)
    coefficients = [int(c) for c in _words(rng, count)]

    def at(x: int) -> int:
        out = 0
        for c in reversed(coefficients):
            out = gf64.smul(out, x) ^ c
        return out

    r = int(_words(rng, 1)[0])
    lam = gf64.lagrange(count, r)
    total = 0
    for point, c in enumerate(lam):
        total ^= gf64.smul(c, at(point))
    assert total == at(r)


def _reference_fold(words: np.ndarray, coefficients: list[int]) -> list[list[int]]:
    """a[b][k] = the sum of coefficients_l over the groups l whose word k has bit b set."""
    out = [[0] * words.shape[1] for _ in range(64)]
    for k in range(words.shape[1]):
        for b in range(64):
            for row, c in enumerate(coefficients):
                if (int(words[row, k]) >> b) & 1:
                    out[b][k] ^= c
    return out


@pytest.mark.parametrize("groups", [1, 5, 11, 16])
def test_fold_two_is_the_weighted_sum_of_each_bit_folded_again_by_its_high_digit(
        groups: int) -> None:
    rng = np.random.default_rng(groups)
    words = _words(rng, (groups, 5))
    coefficients = [int(c) for c in _words(rng, groups)]
    high = [int(c) for c in _words(rng, 8)]
    a = _reference_fold(words, coefficients)
    got = gf64.fold_two(words, coefficients, high)
    for k in range(5):
        for lo in range(8):
            want = 0
            for h in range(8):
                want ^= _reference_mul(high[h], a[8 * h + lo][k])
            assert int(got[lo, k]) == want


@pytest.mark.parametrize("groups", [3, 16])
def test_bits_cross_sums_the_weighted_products_of_the_folded_bits(groups: int) -> None:
    rng = np.random.default_rng(10 + groups)
    count = 3
    p0, p1, q0, q1 = (_words(rng, (groups, count)) for _ in range(4))
    coefficients = [int(c) for c in _words(rng, groups)]
    low, weights = [int(c) for c in _words(rng, 8)], _words(rng, count)
    a = [_reference_fold(v, coefficients) for v in (p0, p1)]
    b = [_reference_fold(v, coefficients) for v in (q0, q1)]
    got = gf64.bits_cross((p0, p1), (q0, q1), coefficients, low, weights)
    for h in range(8):
        for g in range(8):
            want = 0
            for k in range(count):
                for lo in range(8):
                    w = _reference_mul(low[lo], int(weights[k]))
                    for t in range(2):
                        want ^= _reference_mul(_reference_mul(w, a[t][8 * h + lo][k]),
                                               b[t][8 * g + lo][k])
            assert int(got[h, g]) == want


def test_weigh_and_cross_sum_weighted_bits() -> None:
    rng = np.random.default_rng(3)
    groups, count = 3, 4
    p0, p1, q0, q1 = (_words(rng, (groups, count)) for _ in range(4))
    weights, gamma = _words(rng, count), [int(c) for c in _words(rng, 64)]
    tables = gf64.byte_tables(gamma)

    def reference(word: int, k: int) -> int:  # weights_k sum_b gamma_b bit_b
        out = 0
        for b, bit in enumerate(_bits(word)):
            if bit:
                out ^= gamma[b]
        return gf64.smul(int(weights[k]), out)

    want = 0
    for k, w in enumerate(p0[0]):
        want ^= reference(int(w), k)
    assert gf64.weigh(p0[0], weights, tables) == want
    got = gf64.cross((p0, p1), (q0, q1), weights, tables)
    for row in range(groups):
        for m in range(groups):
            want = 0
            for k in range(count):
                g = int(p0[row, k]) & int(q0[m, k]) ^ int(p1[row, k]) & int(q1[m, k])
                want ^= reference(g, k)
            assert int(got[row, m]) == want
