"""Building blocks (comparison, conversion, top-k, argmin) against plaintext, for every scheme."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.errors import InputError
from mpcnet.ops.compare import eqz, greater_pairs, lt, ltz, msb, unpacked_bits
from mpcnet.ops.convert import a2b, bit_to_arith
from mpcnet.ops.fraction import Fractions, LimbPlan, digits, whole
from mpcnet.ops.network import schedule, topk_network
from mpcnet.ops.topk import argmin, topk_ranking, topk_values

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


@pytest.mark.parametrize("n", [1, 2, 33, 500])
def test_greater_pairs_orders_word_and_half_word_lexicographically(scheme: str, n: int) -> None:
    """[(x, a) > (y, b)] for words x, y and a, b below 2^32: the edges (0, 2^64 - 1,
    neighbours, equal words with every order of a and b, a and b at 0 and 2^32 - 1), random
    pairs and many equal words, against lexsort's order."""
    rng = np.random.default_rng(n)
    top, half = 2**64 - 1, 2**32 - 1
    x = np.array([0, top, 0, 5, 6, 2**63, 2**63 - 1, 7, 7, 7, top], dtype=np.uint64)
    y = np.array([top, 0, 0, 6, 5, 2**63 - 1, 2**63, 7, 7, 7, top], dtype=np.uint64)
    a = np.array([0, 0, half, 1, 1, 0, 0, 3, 4, 4, half], dtype=np.uint64)
    b = np.array([0, 0, 0, 1, 1, 0, 0, 4, 3, 4, half - 1], dtype=np.uint64)
    x = np.concatenate([x, rng.integers(0, top, n, dtype=np.uint64, endpoint=True)])
    y = np.concatenate([y, rng.integers(0, top, n, dtype=np.uint64, endpoint=True)])
    y[11::2] = x[11::2]
    a = np.concatenate([a, rng.integers(0, half, n, dtype=np.uint64, endpoint=True)])
    b = np.concatenate([b, rng.integers(0, half, n, dtype=np.uint64, endpoint=True)])

    async def body(s, x, y, a, b):  # type: ignore[no-untyped-def]
        x, y, a, b = [await a2b(s, v) for v in (x, y, a, b)]
        return await s.open_binary(await greater_pairs(s, x, y, a, b))

    (words, *_) = run_protocol(scheme, {"x": x, "y": y, "a": a, "b": b}, body)
    want = (x > y) | ((x == y) & (a > b))
    np.testing.assert_array_equal(unpacked_bits(words, x.size), want.astype(np.int64))
    assert np.asarray(words).size == -(-x.size // 64)


@pytest.mark.parametrize("bits", [2, 3, 5, 8, 15, 16, 17, 32])
def test_narrow_sign_tests_within_their_bound(scheme: str, bits: int) -> None:
    """``bits`` < 64: every |x| < 2^(bits-1) (and -2^(bits-1)), its edges and random values,
    with the other bits of the ring words in use by the shares; fewer rounds than 64 bits."""
    half = 1 << (bits - 1)
    rng = np.random.default_rng(bits)
    x = np.concatenate([np.array([0, 1, -1, half - 1, -half, -half + 1, half // 2]),
                        rng.integers(-half, half, 70)]).astype(np.int64).reshape(7, 11)

    async def body(s, x):  # type: ignore[no-untyped-def]
        before = s.engine.rounds
        binary = await msb(s, x, bits)
        narrow_rounds = s.engine.rounds - before
        before = s.engine.rounds
        await msb(s, x)
        wide_rounds = s.engine.rounds - before
        return (await s.open(await ltz(s, x, bits)), await s.open_binary(binary),
                narrow_rounds, wide_rounds)

    arith, binary, narrow, wide = opened(run_protocol(scheme, {"x": x}, body))
    np.testing.assert_array_equal(arith, (x < 0).astype(np.uint64))
    np.testing.assert_array_equal(binary, (x < 0).astype(np.uint64))
    width = 1 << max(1, (bits - 1).bit_length())
    assert narrow == wide - 6 + int(np.log2(width)) < wide


def test_ltz_keeps_shape(scheme: str) -> None:
    x = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await ltz(s, x))

    np.testing.assert_array_equal(opened(run_protocol(scheme, {"x": x}, body)),
                                  (x < 0).astype(np.uint64))


@pytest.mark.parametrize("value", [-5, 0, 7])
def test_sign_and_zero_tests_of_a_scalar(scheme: str, value: int) -> None:
    """A 0-d sharing: ltz and eqz keep its shape (found by review: active3's bit components
    and rep3's AND wrote into 0-d views)."""
    x = np.array(value, dtype=np.int64)

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await ltz(s, x)), await s.open(await eqz(s, x))

    less, zero = opened(run_protocol(scheme, {"x": x}, body))
    assert less.shape == zero.shape == ()
    assert (int(less), int(zero)) == (int(value < 0), int(value == 0))


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


def _expected_fraction_order(num: list[int], den: list[int], k: int) -> list[int]:
    from fractions import Fraction
    ratios = [Fraction(int(a), int(b)) for a, b in zip(num, den, strict=True)]
    return sorted(range(len(num)), key=lambda j: (-ratios[j], j))[:k]


async def _topk(s, fr, k: int, method: str):  # type: ignore[no-untyped-def]
    return await (topk_ranking if method == "ranking" else topk_network)(s, fr, k)


def test_a_network_in_small_pieces_selects_the_same(scheme: str) -> None:
    """With at most 5 comparisons at once, every stage and the final equality tests run in
    pieces one after the other: the same T, more rounds."""
    rng = np.random.default_rng(4)
    den = rng.integers(1, 50, 23)
    num = den * rng.integers(0, 3, 23) + rng.integers(0, 2, 23)
    k = 6
    ties = schedule(23, k).padded

    async def body(s, q, d, batch):  # type: ignore[no-untyped-def]
        before = s.engine.rounds
        t = await topk_network(s, whole(q, d, 200, 50, ties), k, batch)
        return await s.open(t), s.engine.rounds - before

    (small, small_rounds), (large, large_rounds) = (
        opened(run_protocol(scheme, {"q": num, "d": den},
                            lambda s, q, d, b=b: body(s, q, d, b)))  # type: ignore[misc]
        for b in (5, None))
    assert _selected(small) == _selected(large) == _expected_fraction_order(list(num),
                                                                           list(den), k)
    assert small_rounds > large_rounds


@pytest.mark.parametrize("method", ["ranking", "network"])
@pytest.mark.parametrize(("p", "k"), [(40, 17), (37, 1), (9, 8), (16, 16 - 1)])
def test_topk_fraction_exact(scheme: str, method: str, p: int, k: int) -> None:
    rng = np.random.default_rng(9 + p)
    den = rng.integers(1, 1000, p)
    num = den * rng.integers(0, 4, p)  # many exact ties (num/den in {0, 1, 2, 3})
    num[:5] = num[:5] * 3 + 1
    ties = 1 if method == "ranking" else schedule(p, k).padded

    async def body(s, q, d):  # type: ignore[no-untyped-def]
        return await s.open(await _topk(s, whole(q, d, 4000, 1000, ties), k, method))

    t = opened(run_protocol(scheme, {"q": num, "d": den}, body))
    assert _selected(t) == _expected_fraction_order(list(num), list(den), k)


def test_the_network_schedule_selects_the_best_in_order() -> None:
    """The public schedule alone, applied in plaintext to keys with many ties, for block sizes
    from 1 (the tournament) to p (a full sort) and odd numbers of blocks."""
    rng = np.random.default_rng(3)
    for p, k in [(40, 17), (50, 5), (9, 8), (8, 8), (16, 4), (2, 1), (1000, 50), (33, 1)]:
        keys = rng.integers(0, 5, p)
        plan = schedule(p, k)
        order: list[int | None] = list(range(p)) + [None] * (plan.padded - p)

        def better(a: int | None, b: int | None, keys: np.ndarray = keys) -> bool:
            return b is None or (a is not None and (keys[a], -a) > (keys[b], -b))

        for first, second in plan.stages:
            assert len(set(first) | set(second)) == 2 * first.size  # disjoint pairs
            for f, g in zip(first, second, strict=True):
                if better(order[g], order[f]):
                    order[f], order[g] = order[g], order[f]
        assert order[:k] == sorted(range(p), key=lambda j: (-keys[j], j))[:k]


def _deciding_level(num: np.ndarray, den: np.ndarray, plan: LimbPlan) -> int:
    """In plaintext, the level of ``fraction.cascade`` that decides num[:, 0]/den[:, 0]
    against num[:, 1]/den[:, 1] (limbs as rows)."""
    q, d = num.astype(object), den.astype(object)
    x = [sum(q[u, 0] * d[n - u, 1] - q[u, 1] * d[n - u, 0] for u in range(plan.num_limbs)
             if 0 <= n - u < plan.den_limbs) for n in range(plan.levels)]
    z = x[-1]
    for n in range(plan.levels - 1, 0, -1):
        if abs(z) >= plan.threshold:
            return n
        z = z * 2**plan.limb_bits + x[n - 1]
    return 0


def _limbs(values: list[int], count: int, width: int) -> np.ndarray:
    return np.array([[(v >> (width * u)) & ((1 << width) - 1) for v in values]
                     for u in range(count)], dtype=np.uint64)


@pytest.mark.parametrize("method", ["ranking", "network"])
def test_fractions_beyond_64_bit_products(scheme: str, method: str) -> None:
    """70-bit numerators over 46-bit denominators (m = 10^7 rows of MS-GINI: cross products of
    116 bits) as 18-bit limbs: every level of the cascade decides some pair, including pairs
    equal on every level but the lowest, exact ties and a top level that is small but of the
    wrong sign."""
    rng = np.random.default_rng(70)
    width, lq, ld, p, k = 18, 4, 3, 24, 12
    num = [int(v) for v in rng.integers(0, 2**62, p)]
    num = [(v << 8) | int(rng.integers(0, 256)) for v in num]  # 70 bits
    den = [int(v) for v in rng.integers(2**40, 2**46, p)]
    num[1], den[1] = num[0] + 1, den[0]  # differs in the lowest limb only
    num[3], den[3] = num[2] * 2, den[2] * 2  # an exact tie, won by the lower index
    num[5], den[5] = num[4] * 3 + 1, den[4] * 3  # a hair above
    num[7], den[7] = 2**70 - 1, 2**46 - 1  # range limits
    num[8], den[8] = 0, 1
    num[10], den[10] = num[9] + 2**35, den[9]  # decided by a middle level
    ties = 1 if method == "ranking" else schedule(p, k).padded
    plan = LimbPlan(lq, ld, width, 1 << width, 1 << width, ties)
    assert plan.fits() and plan.levels == 6
    deciding = {_deciding_level(_limbs([num[i], num[j]], lq, width),
                                _limbs([den[i], den[j]], ld, width), plan)
                for i in range(p) for j in range(i + 1, p)}
    assert deciding == set(range(plan.levels))

    async def body(s, q, d):  # type: ignore[no-untyped-def]
        return await s.open(await _topk(s, Fractions(q, d, plan), k, method))

    t = opened(run_protocol(scheme, {"q": _limbs(num, lq, width), "d": _limbs(den, ld, width)},
                            body))
    assert _selected(t) == _expected_fraction_order(num, den, k)


def test_digits_split_exactly(scheme: str) -> None:
    values = np.array([0, 1, 2**47 - 1, 123456789012, 2**46], dtype=np.uint64)

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await digits(s, x, 47, 10))

    got = opened(run_protocol(scheme, {"x": values}, body))
    np.testing.assert_array_equal(got, _limbs([int(v) for v in values], 5, 10))


def test_limb_plans_refuse_what_the_ring_cannot_hold() -> None:
    assert LimbPlan(1, 1, 64, 2**40, 2**23).fits()
    assert not LimbPlan(1, 1, 64, 2**40, 2**24 + 1).fits()
    assert LimbPlan(4, 3, 30, 2**30, 2**30).fits()
    assert not LimbPlan(4, 3, 31, 2**31, 2**31).fits()
    with pytest.raises(InputError, match="beyond 2\\^63"):
        whole(None, None, 2**40, 2**25)  # type: ignore[arg-type]


def test_topk_rounds_do_not_grow_with_p_or_k(scheme: str) -> None:
    """Beyond the width of the ranks' sign tests (``signed_bits(max(p, k))``: 8 bits for
    p = 40 and 120), the rounds are those of p = 40."""
    rounds = set()
    for p, k in [(40, 3), (120, 60), (127, 126)]:
        scores = np.random.default_rng(p).integers(-100, 100, p)

        async def body(s, g, k=k):  # type: ignore[no-untyped-def]
            before = s.engine.rounds
            await topk_values(s, g, k)
            return s.engine.rounds - before

        rounds.add(run_protocol(scheme, {"g": scores}, body)[0])
    assert len(rounds) == 1
