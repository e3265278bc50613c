"""Building blocks (comparison, conversion, top-k, argmin) against plaintext, for every scheme."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.ops.compare import eqz, lt, ltz, msb
from mpcnet.ops.convert import bit_to_arith
from mpcnet.ops.topk import argmin, topk_fraction, topk_values

EDGE = np.array([0, 1, -1, 2, -2, 2**62, -(2**62), 2**63 - 1, -(2**63), 2**63 - 2,
                 -(2**63) + 1, 4096, -4096], dtype=np.int64)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 1000])
def test_ltz_and_msb(scheme: str, n: int) -> None:
    rng = np.random.default_rng(n)
    x = np.concatenate([EDGE, rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)])

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await ltz(s, x)), await s.open_binary(await msb(s, x))

    arith, binary = opened(run_protocol(scheme, {"x": x}, body))
    np.testing.assert_array_equal(arith, (x < 0).astype(np.uint64))
    np.testing.assert_array_equal(binary, (x < 0).astype(np.uint64))


def test_ltz_keeps_shape(scheme: str) -> None:
    x = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await ltz(s, x))

    np.testing.assert_array_equal(opened(run_protocol(scheme, {"x": x}, body)),
                                  (x < 0).astype(np.uint64))


def test_lt_and_eqz(scheme: str) -> None:
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.integers(-50, 50, 200), [0, 0, 5, -2**62]])
    y = np.concatenate([rng.integers(-50, 50, 200), [0, 1, 5, 2**62]])

    async def body(s, x, y):  # type: ignore[no-untyped-def]
        return await s.open(await lt(s, x, y)), await s.open(await eqz(s, s.sub(x, y)))

    less, equal = opened(run_protocol(scheme, {"x": x, "y": y}, body))
    np.testing.assert_array_equal(less, (x < y).astype(np.uint64))
    np.testing.assert_array_equal(equal, (x == y).astype(np.uint64))


def test_bit_to_arith(scheme: str) -> None:
    words = np.random.default_rng(8).integers(0, 2**63, 300, dtype=np.int64)

    async def body(s, w):  # type: ignore[no-untyped-def]
        bits = s.arith_components(w)[0]
        return await s.open(await bit_to_arith(s, bits)), await s.open_binary(bits)

    arith, binary = opened(run_protocol(scheme, {"w": words}, body))
    np.testing.assert_array_equal(arith, binary & np.uint64(1))
    assert 0 < arith.sum() < arith.size


def _plain_topk(scores: np.ndarray, k: int, largest: bool) -> list[int]:
    order = sorted(range(len(scores)), key=lambda j: (-scores[j] if largest else scores[j], j))
    return order[:k]


def _selected(t: np.ndarray) -> list[int]:
    assert set(np.unique(t)) <= {0, 1}
    assert (t.sum(axis=0) == 1).all()
    return [int(np.flatnonzero(t[:, r])[0]) for r in range(t.shape[1])]


@pytest.mark.parametrize("largest", [False, True])
def test_topk_values_with_ties(scheme: str, largest: bool) -> None:
    scores = np.array([5, -3, 7, -3, 0, 7, 7, 2**40, -(2**40), 0, 5], dtype=np.int64)
    k = 6

    async def body(s, g):  # type: ignore[no-untyped-def]
        return await s.open(await topk_values(s, g, k, largest)), await s.open(await argmin(s, g))

    t, one_hot = opened(run_protocol(scheme, {"g": scores}, body))
    assert _selected(t) == _plain_topk(scores, k, largest)
    np.testing.assert_array_equal(one_hot, np.eye(len(scores), dtype=np.uint64)[8])


def test_topk_fraction_exact(scheme: str) -> None:
    rng = np.random.default_rng(9)
    den = rng.integers(1, 1000, 40)
    num = den * rng.integers(0, 4, 40)  # many exact ties (num/den in {0, 1, 2, 3})
    num[:5] = num[:5] * 3 + 1
    k = 17

    async def body(s, q, d):  # type: ignore[no-untyped-def]
        return await s.open(await topk_fraction(s, q, d, k))

    t = opened(run_protocol(scheme, {"q": num, "d": den}, body))
    from fractions import Fraction
    ratios = [Fraction(int(a), int(b)) for a, b in zip(num, den, strict=True)]
    expected = sorted(range(40), key=lambda j: (-ratios[j], j))[:k]
    assert _selected(t) == expected


def test_topk_rounds_do_not_grow_with_p_or_k(scheme: str) -> None:
    rounds = set()
    for p, k in [(5, 1), (40, 3), (120, 60)]:
        scores = np.random.default_rng(p).integers(-100, 100, p)

        async def body(s, g, k=k):  # type: ignore[no-untyped-def]
            before = s.engine.rounds
            await topk_values(s, g, k)
            return s.engine.rounds - before

        rounds.add(run_protocol(scheme, {"g": scores}, body)[0])
    assert len(rounds) == 1


@pytest.mark.parametrize("bits", [(50, 33), (53, 35)])
def test_topk_fraction_beyond_64_bit_products(scheme: str, bits: tuple[int, int]) -> None:
    """Exercises both branches of the split test: |X| >= 2^d_bits (X decides) and small |X|,
    where X = 0 or X has the opposite sign of the true difference and Y decides."""
    from fractions import Fraction

    from mpcnet.ops.topk import wide_split
    rng = np.random.default_rng(bits[0])
    q_bits, d_bits = bits
    t = wide_split(q_bits, d_bits)
    assert t is not None
    n = 30
    den = rng.integers(2**(d_bits - 2), 2**d_bits, n, dtype=np.int64)
    num = rng.integers(2**(q_bits - 2), 2**q_bits, n, dtype=np.int64)
    # equal high parts (X = 0): the order is decided by the low parts alone
    num[1], den[1] = (num[0] >> t << t) + 5, den[0]
    num[0] = (num[0] >> t << t) + 3
    # X = 5 > 0 but the true difference is negative: Y must overrule X
    num[3], den[3] = 5 << t, 2**(d_bits - 1)
    num[4], den[4] = (5 << t) + (1 << t) - 1, 2**(d_bits - 1) + 1
    num[5], den[5] = num[9], den[9]  # an exact tie, won by the lower index
    num[7], den[7] = num[2] // 2 * 2, den[2] // 2 * 2  # nearly the same ratio
    num[8], den[8] = 2**q_bits - 1, 2**d_bits - 1  # range limits
    k = 12

    async def body(s, q, d):  # type: ignore[no-untyped-def]
        return await s.open(await topk_fraction(s, q, d, k, bits))

    assert int(num.max()) < 2**q_bits and int(den.max()) < 2**d_bits
    branches = set()
    for i in range(n):
        for j in range(i + 1, n):
            x = int(num[i] >> t) * int(den[j]) - int(num[j] >> t) * int(den[i])
            diff = int(num[i]) * int(den[j]) - int(num[j]) * int(den[i])
            if abs(x) < 2**d_bits and diff != 0 and (x == 0 or (x > 0) != (diff > 0)):
                branches.add("zero" if x == 0 else "overruled")
    assert branches == {"zero", "overruled"}
    t_matrix = opened(run_protocol(scheme, {"q": num, "d": den}, body))
    ratios = [Fraction(int(a), int(b)) for a, b in zip(num, den, strict=True)]
    expected = sorted(range(n), key=lambda j: (-ratios[j], j))
    assert _selected(t_matrix) == expected[:k]
    # ranks of the crafted pairs are checked through a full selection (k = n - 1) too
    k = n - 1
    t_matrix = opened(run_protocol(scheme, {"q": num, "d": den}, body))
    assert _selected(t_matrix) == expected[:k]
