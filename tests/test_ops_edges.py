"""Edge cases of mpcnet.ops.count, ops.compare and the schemes' split products and dealt
counts (written by the adversarial review of the byte cuts and the alignment's comparison):

- active4: a cheater that changes any one joint message (value or digest) of a sign test
  (``compare.msb``: the split addends and ``Rep4.term_product``), a conversion
  (``bit_to_arith``: ``term_product``) or the split counts (``ops.count``: ``Rep4.term_inner``) is
  caught, whichever party it is and whichever message it picks, and no honest party outputs a
  wrong count.
- passive3: the words a server receives in ``Rep3.bit_counts`` and ``Rep3.addends`` look the
  same (uniform bits) whatever the data: all-zero and all-one flags, zero and one weights.
- every setting: ``msb`` and ``bit_counts`` at the ring's edges, ``greater_pairs`` at the edges
  of its words (equal keys, keys that differ in one bit, ties at 0 and 2^32 - 1, odd n).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
from conftest import opened, outcomes, run_protocol
from test_cheating import _messages_of_each_kind

from mpcnet.errors import CheatingDetected
from mpcnet.net.engine import RoundEngine
from mpcnet.ops.compare import greater_pairs, msb, unpacked_bits
from mpcnet.ops.convert import a2b, bit_to_arith
from mpcnet.ops.count import bit_counts
from mpcnet.schemes import registry
from mpcnet.schemes.base import Scheme, Shared, concat, split
from mpcnet.schemes.faults import FaultInjector

U64 = np.uint64
EDGES = np.array([0, 1, -1, 2, -2, 2**31, -(2**31), 2**32, -(2**32), 2**62, -(2**62),
                  2**63 - 1, -(2**63), 2**63 - 2, -(2**63) + 1, 3 << 40, -(5 << 33)],
                 dtype=np.int64)


def _counts_case() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    m, p = 67, 4
    x = rng.integers(-(2**40), 2**40, (m, p), dtype=np.int64)
    labels = (rng.integers(0, 2, m) == 0).astype(np.int64).reshape(m, 1)
    return x, labels


async def _counts_and_flags(s: Scheme, x: Shared, labels: Shared) -> np.ndarray:
    """The sign test, the split counts and a conversion of the same flags, all opened."""
    flags = await msb(s, x)
    counts, in_class = await bit_counts(s, flags, labels)
    arith = await bit_to_arith(s, flags)
    return np.concatenate([np.asarray(await s.open(counts)).reshape(-1),
                           np.asarray(await s.open(in_class)).reshape(-1),
                           np.asarray(await s.open(arith)).reshape(-1)])


def _expected_counts() -> np.ndarray:
    x, labels = _counts_case()
    flags = (x < 0).astype(np.uint64)
    return np.concatenate([flags.sum(axis=0), (flags.T @ labels.astype(np.uint64)).reshape(-1),
                           flags.reshape(-1)])


def _run_active4(fault: FaultInjector | None,
                 body: Callable[..., Awaitable[np.ndarray]] = _counts_and_flags) -> list[object]:
    info = registry.get("active4")
    x, labels = _counts_case()
    data, lab = info.share(x.view(np.uint64)), info.share(labels.view(np.uint64))

    async def party(engine: RoundEngine) -> np.ndarray:
        s = await info.scheme.setup(engine, fault=fault)  # type: ignore[call-arg]
        mine_x, mine_labels = await s.input(data[engine.party], lab[engine.party])
        return await body(s, mine_x, mine_labels)

    return outcomes(info.n_parties, party)


@pytest.mark.slow
@pytest.mark.parametrize("cheater", range(4))
def test_active4_every_message_of_the_split_products_and_counts_is_caught(cheater: int) -> None:
    """Every jmp value and digest the cheater sends in msb, bit_counts and bit_to_arith, one
    at a time (each position, not a sample), with a low-bit error (the one a bit's AND or a
    0/1 term would carry) and a high one, at the message's first, middle and last word."""
    counts = _messages_of_each_kind("active4", _run_active4)
    for kind in ("jmp-value", "jmp-hash"):
        for position in range(counts.get((cheater, kind), 0)):
            for delta, where in ((1, 0), (1, 2), (1 << 40, 1)):
                fault = FaultInjector(cheater, kind, after=position, delta=delta, word=where)
                ran = _run_active4(fault)
                honest = [o for i, o in enumerate(ran) if i != cheater]
                assert fault.fired == 1, (kind, position)
                assert any(isinstance(o, CheatingDetected) for o in honest), \
                    f"cheater {cheater}: {kind} message {position} (+{delta}) not detected"
                for out in honest:
                    if isinstance(out, np.ndarray):
                        np.testing.assert_array_equal(out, _expected_counts())


def _recording(s: Scheme, log: list[np.ndarray]) -> None:
    """Wrap the engine's exchange so that every array received is appended to ``log``."""
    exchange = s.engine.exchange

    async def recorded(sends: Any, recv_from: Any) -> dict[int, np.ndarray]:
        got = await exchange(sends, recv_from)
        log.extend(np.asarray(v, dtype=U64).reshape(-1).copy() for v in got.values())
        return got

    s.engine.exchange = recorded  # type: ignore[method-assign]


def _bit_balance(words: np.ndarray) -> float:
    """Fraction of set bits of the words."""
    return float(np.unpackbits(words.view(np.uint8)).mean())


@pytest.mark.parametrize("flag", [0, 1])
@pytest.mark.parametrize("weight", [0, 1])
def test_passive3_dealt_counts_and_addends_receive_uniform_words(flag: int, weight: int) -> None:
    """Everything a passive3 server receives in the dealt counts (and in the addends of the
    sign test that makes the flags) has about half its bits set, for constant flags and
    weights: a reused or missing mask would show the data (all 0 or all 1, or repeats)."""
    m, p = 512, 6
    x = np.full((m, p), -5 if flag else 5, dtype=np.int64)
    labels = np.full((m, 1), weight, dtype=np.int64)

    async def body(s, x, labels):  # type: ignore[no-untyped-def]
        log: list[np.ndarray] = []
        _recording(s, log)
        counts, in_class = await bit_counts(s, await msb(s, x), labels)
        s.engine.exchange = type(s.engine).exchange.__get__(s.engine)  # type: ignore[method-assign]
        return log, await s.open(counts), await s.open(in_class)

    results = run_protocol("passive3", {"x": x, "labels": labels}, body)
    for log, counts, in_class in results:
        np.testing.assert_array_equal(counts, np.full(p, m * flag))
        np.testing.assert_array_equal(in_class, np.full((p, 1), m * flag * weight))
        received = np.concatenate(log)
        assert received.size > m * p
        assert abs(_bit_balance(received) - 0.5) < 0.01
        assert np.unique(received).size > 0.99 * received.size


@pytest.mark.parametrize("scheme_name", sorted(registry.SCHEMES))
def test_msb_bit_counts_and_a2b_at_the_ring_edges(scheme_name: str) -> None:
    """The sign test (split addends), its counts and a2b (``Rep3.addends`` under passive3)
    on the ring's extreme words."""
    x = np.stack([EDGES, EDGES[::-1], np.roll(EDGES, 3)], axis=1)
    m = x.shape[0]
    labels = (np.arange(m) % 3 == 0).astype(np.int64).reshape(m, 1)

    async def body(s, x, labels):  # type: ignore[no-untyped-def]
        flags = await msb(s, x)
        counts, in_class = await bit_counts(s, flags, labels)
        binary = await a2b(s, x)
        return (await s.open_binary(flags), await s.open(counts), await s.open(in_class),
                await s.open_binary(binary))

    flags, counts, in_class, binary = opened(run_protocol(scheme_name, {"x": x, "labels": labels},
                                                          body))
    np.testing.assert_array_equal(np.asarray(flags) & U64(1), (x < 0).astype(np.uint64))
    np.testing.assert_array_equal(counts, (x < 0).sum(axis=0))
    np.testing.assert_array_equal(in_class, (x < 0).astype(np.uint64).T @ labels.astype(U64))
    np.testing.assert_array_equal(binary, x.view(np.uint64))


@pytest.mark.parametrize("scheme_name", sorted(registry.SCHEMES))
@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, 129])
def test_greater_pairs_at_the_edges_of_its_words(scheme_name: str, n: int) -> None:
    """[(x, a) > (y, b)] for equal keys (the tie decides), keys one bit apart (bits 0, 31, 32,
    63), the extreme words, and ties at 0, 1, 2^31 and 2^32 - 1 (the paired halves' edges),
    n odd and even."""
    rng = np.random.default_rng(n)
    words = np.array([0, 1, 2**31, 2**32, 2**63, 2**64 - 1, 2**61 - 1], dtype=np.uint64)
    x = rng.choice(words, n)
    flip = U64(1) << rng.choice(np.array([0, 31, 32, 63], dtype=np.uint64), n)
    y = np.where(rng.integers(0, 3, n) == 0, x, np.where(rng.integers(0, 2, n) == 0, x ^ flip,
                                                         rng.choice(words, n)))
    ties = np.array([0, 1, 2**31, 2**32 - 1, 2**31 - 1], dtype=np.uint64)
    a, b = rng.choice(ties, n), rng.choice(ties, n)

    async def body(s, x, y, a, b):  # type: ignore[no-untyped-def]
        bx, by, ba, bb = split(await a2b(s, concat([x, y, a, b])), [(n,)] * 4)
        return unpacked_bits(await s.open_binary(await greater_pairs(s, bx, by, ba, bb)), n)

    got = opened(run_protocol(scheme_name, {"x": x, "y": y, "a": a, "b": b}, body))
    expected = ((x > y) | ((x == y) & (a > b))).astype(np.int64)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("scheme_name", sorted(registry.SCHEMES))
@pytest.mark.parametrize(("m", "p", "classes"), [(1, 1, 2), (1, 3, 3), (3, 4, 2), (64, 3, 2),
                                                 (1, 5, 4)])
def test_bit_counts_of_a_last_tile(scheme_name: str, m: int, p: int, classes: int) -> None:
    """``class_counts`` runs per tile of rows, so the last tile may hold one row: the dealt
    blocks and the 64-row words at their smallest, labels sliced from a larger matrix."""
    rng = np.random.default_rng(m + 10 * p + 100 * classes)
    x = rng.integers(-(2**50), 2**50, (m, p), dtype=np.int64)
    codes = rng.integers(0, classes, 2 * m)
    full = (codes[:, None] == np.arange(classes - 1)[None, :]).astype(np.int64)

    async def body(s, x, full):  # type: ignore[no-untyped-def]
        counts, in_class = await bit_counts(s, await msb(s, x), full[m:])
        return await s.open(counts), await s.open(in_class)

    counts, in_class = opened(run_protocol(scheme_name, {"x": x, "full": full}, body))
    flags = (x < 0).astype(np.uint64)
    np.testing.assert_array_equal(counts, flags.sum(axis=0))
    np.testing.assert_array_equal(in_class, flags.T @ full[m:].astype(np.uint64))


@pytest.mark.parametrize("scheme_name", sorted(registry.SCHEMES))
def test_sort_order_in_pieces_of_a_dishonest_owners_equal_keys(scheme_name: str) -> None:
    """A dishonest owner's keys all equal (and one at the top of the 2^61 range, one at 0):
    the order is the order of the secret ties alone, the same in pieces of 1, 7 and all
    comparisons, and with ties at the edges of their 32 bits."""
    from mpcnet.ops.join import sort_order

    rng = np.random.default_rng(3)
    n = 41
    keys = np.full(n, 16 * 12345 + 1, dtype=np.uint64)
    keys[5], keys[9] = np.uint64(2**61 - 1), np.uint64(0)
    ties = rng.permutation(np.concatenate([np.array([0, 2**32 - 1, 2**31, 2**31 - 1, 1]),
                                           rng.integers(2, 2**31 - 1, n - 5)])).astype(np.uint64)
    expected = np.lexsort((ties, keys))

    for piece in (1, 7, None):
        async def body(s, keys, ties, piece=piece):  # type: ignore[no-untyped-def]
            return await sort_order(s, keys, ties, piece)

        order = opened(run_protocol(scheme_name, {"keys": keys, "ties": ties}, body))
        np.testing.assert_array_equal(order, expected)


@pytest.mark.parametrize("scheme_name", sorted(registry.SCHEMES))
def test_msb_where_carries_cross_every_block_of_the_tree(scheme_name: str) -> None:
    """``msb`` after the first round's packing changed (u and v packed once each, p from the
    packed words): sign tests whose carry is generated in one 2-bit block's low or high bit
    and propagated through every block above, or stopped one block short (the differences
    of a quicksort's keys at 0 and 2^62 - 1, equal high bits, one bit apart), at counts that
    leave the last word of each packing level part-filled."""
    top = 2**62 - 1
    keys = [0, 1, top, top - 1, 2**61, 2**61 - 1, 0x5555_5555_5555_5555 >> 2,
            0x2AAA_AAAA_AAAA_AAAA >> 1, (1 << 40) + 3, (1 << 40) + 2]
    pairs = np.array([(a, b) for a in keys for b in keys], dtype=np.int64)
    x = np.concatenate([pairs[:, 0] - pairs[:, 1], [2**k for k in range(63)],
                        [-(2**k) for k in range(64)], [2**k - 1 for k in range(1, 64)]])
    for n in (x.size, 33, 65):
        part = x[:n]

        async def body(s, v):  # type: ignore[no-untyped-def]
            return await s.open_binary(await msb(s, v))

        flags = opened(run_protocol(scheme_name, {"v": part}, body))
        np.testing.assert_array_equal(np.asarray(flags) & U64(1), (part < 0).astype(np.uint64))


def _runs_words(rng: np.random.Generator, n: int) -> np.ndarray:
    """Words of a few runs of ones and zeros: long carries, stopped at random bits."""
    out = np.zeros(n, dtype=U64)
    for i in range(n):
        cuts = np.sort(rng.choice(np.arange(1, 64), rng.integers(0, 5), replace=False))
        word = 0
        start, value = 0, int(rng.integers(0, 2))
        for at in [*cuts.tolist(), 64]:
            if value:
                word |= ((1 << (at - start)) - 1) << start
            start, value = at, value ^ 1
        out[i] = U64(word)
    return out


@pytest.mark.parametrize("scheme_name", sorted(registry.SCHEMES))
def test_msb_and_greater_pairs_on_runs_of_bits(scheme_name: str) -> None:
    rng = np.random.default_rng(7)
    n = 301
    x, y = _runs_words(rng, n), _runs_words(rng, n)
    y[::5] = x[::5]  # ties decided by a, b
    y[1::7] = x[1::7] ^ (U64(1) << rng.integers(0, 64, y[1::7].size).astype(U64))
    a = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    b = np.where(rng.integers(0, 2, n) == 0, a, rng.integers(0, 1 << 32, n, dtype=np.uint64))
    d = (x - y)  # every difference, wrapped: its top bit against msb

    async def body(s, x, y, a, b, d):  # type: ignore[no-untyped-def]
        bx, by, ba, bb = split(await a2b(s, concat([x, y, a, b])), [(n,)] * 4)
        greater = unpacked_bits(await s.open_binary(await greater_pairs(s, bx, by, ba, bb)), n)
        return greater, await s.open_binary(await msb(s, d))

    greater, signs = opened(run_protocol(scheme_name, {"x": x, "y": y, "a": a, "b": b,
                                                        "d": d}, body))
    np.testing.assert_array_equal(greater, ((x > y) | ((x == y) & (a > b))).astype(np.int64))
    np.testing.assert_array_equal(np.asarray(signs) & U64(1), d >> U64(63))
