"""Fixed-point division and reciprocal, exact small-integer division, under every scheme."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.errors import RangeError
from mpcnet.ops.division import divide, divide_int, precision, reciprocal

F = 16
ULP = 2.0**-F


def _signed(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.uint64).view(np.int64)


def _divisors(n: int, lo: int, hi: int, f: int, rng: np.random.Generator) -> np.ndarray:
    """Integer encodings of divisors in [2^lo, 2^hi) (real), log-uniform, with the edges."""
    edges = [2**lo, 2**hi - 2.0**-f, 2 ** ((lo + hi) // 2), 2 ** ((lo + hi) // 2) - 2.0**-f,
             2**lo + 2.0**-f, 1.5 * 2**lo]
    real = np.concatenate([edges, np.exp2(rng.uniform(lo, hi, n))])
    return np.clip(np.round(real * 2**f), 2 ** (lo + f), 2 ** (hi + f) - 1).astype(np.int64)


def _check(result: np.ndarray, exact: np.ndarray, f: int, lo: int, hi: int, q_bits: int) -> None:
    """The module's stated bound, in units of 2^-f: 1 + 5 * 2^-g + |exact| * 4 * 2^-F."""
    frac, guard = precision(f, lo, hi, q_bits)
    err = np.abs(_signed(result) - exact)
    bound = 1 + 5 * 2.0**-guard + np.abs(exact) * 4 * 2.0**-frac
    assert (err <= bound).all(), f"worst error {err.max()} units, bound {bound[err.argmax()]}"


def test_divide_default_range(scheme: str) -> None:
    rng = np.random.default_rng(1)
    b = _divisors(150, 0, 20, F, rng)
    ratio = rng.uniform(-1, 1, b.size) * np.exp2(rng.uniform(-22, 20, b.size))
    ratio[:6] = [0, 1, -1, 2**20 - 1, -(2**20) + 1, 2**-16]
    a = np.round(ratio * b).astype(np.int64)  # integer encoding of a = ratio * b

    async def body(s, a, b):  # type: ignore[no-untyped-def]
        return await s.open(await divide(s, a, b, F))

    result = opened(run_protocol(scheme, {"a": a, "b": b}, body))
    exact = a / b * 2**F
    _check(result, exact, F, F, F + 20, 20)
    big = np.abs(exact) >= 2**F  # |a/b| >= 1: relative error below 2^-(f-4) (in fact 2^-15)
    rel = np.abs(_signed(result) - exact)[big] / np.abs(exact[big])
    assert rel.max() < 2.0 ** -(F - 1)


def test_divide_other_scales(scheme: str) -> None:
    f, lo, hi, q_bits = 20, -10, 10, 10
    rng = np.random.default_rng(2)
    b = _divisors(100, lo, hi, f, rng)
    ratio = rng.uniform(-1, 1, b.size) * np.exp2(rng.uniform(-20, q_bits, b.size))
    a = np.round(ratio * b).astype(np.int64)

    async def body(s, a, b):  # type: ignore[no-untyped-def]
        return await s.open(await divide(s, a, b, f, b_bits=(lo, hi), q_bits=q_bits))

    result = opened(run_protocol(scheme, {"a": a, "b": b}, body))
    _check(result, a / b * 2**f, f, f + lo, f + hi, q_bits)


def test_reciprocal(scheme: str) -> None:
    x = _divisors(120, 0, 20, F, np.random.default_rng(3))

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await reciprocal(s, x, F))

    result = opened(run_protocol(scheme, {"x": x}, body))
    exact = 2.0 ** (2 * F) / x
    _check(result, exact, F, F, F + 20, 1)
    assert np.abs(_signed(result) - exact).max() < 1.1  # within about one unit everywhere


def test_divide_int_is_exact(scheme: str) -> None:
    rng = np.random.default_rng(4)
    top = 2**24 - 1
    a = np.concatenate([[0, 0, 1, 7, top, top, top, 12345, 2**23, 99],
                        rng.integers(0, top, 150, endpoint=True),
                        rng.integers(0, 1000, 40)])
    b = np.concatenate([[1, top, 1, 7, 1, top, 2, 12346, 3, 100],
                        np.round(np.exp2(rng.uniform(0, 24, 150))).clip(1, top),
                        rng.integers(1, 50, 40)]).astype(np.int64)

    async def body(s, a, b):  # type: ignore[no-untyped-def]
        return await s.open(await divide_int(s, a, b))

    np.testing.assert_array_equal(_signed(opened(run_protocol(scheme, {"a": a, "b": b}, body))),
                                  a // b)


def test_division_rounds_do_not_grow_with_the_batch(scheme: str) -> None:
    def rounds(n: int) -> tuple[int, int]:
        b = _divisors(n, 0, 20, F, np.random.default_rng(n))[:n]

        async def body(s, a, b):  # type: ignore[no-untyped-def]
            before = s.engine.rounds
            await divide(s, a, b, F)
            middle = s.engine.rounds
            await divide_int(s, a, b)
            return middle - before, s.engine.rounds - middle

        return run_protocol(scheme, {"a": b // 3, "b": b}, body)[0]

    small, large = rounds(1), rounds(100)
    assert small == large
    # active3 checks before every opening: 3 or 4 more rounds per opening, one more round per
    # bit conversion (it authenticates the bits' components); active4 checks the inputs
    # before its first opening (one round)
    bound = {"active3": (40, 60), "active4": (22, 33)}.get(scheme, (21, 33))
    assert small[0] <= bound[0] and small[1] <= bound[1], small


def test_impossible_ranges_are_refused() -> None:
    with pytest.raises(RangeError):
        precision(16, 16, 50, 20)  # |a/b| < 2^20 with divisors up to 2^50 overflows the ring
    with pytest.raises(RangeError):
        precision(16, 0, 30, 32)  # too few bits left for the iteration
    with pytest.raises(RangeError):
        precision(16, 5, 5, 10)  # empty divisor range
    assert precision(16, 16, 36, 20) == (21, 4)
