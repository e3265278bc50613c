"""Tests of mpcnet.schemes.rep4 (Fantastic Four, active 4PC) over in-process channels.

Every primitive against plaintext, the communication of one product,
and malicious-party tests: one party deviates through the test-only ``FaultInjector`` (or by
corrupting its own share), and the honest parties must abort with the named check before any
wrong value is output.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest

from mpcnet.errors import CheatingDetected, PeerError
from mpcnet.net.engine import RoundEngine
from mpcnet.net.local import run_local_sync
from mpcnet.ops.convert import bit_to_arith
from mpcnet.schemes import registry, rep4
from mpcnet.schemes.base import Shared
from mpcnet.schemes.faults import FaultInjector
from mpcnet.schemes.rep4 import Rep4
from mpcnet.schemes.replicated import checked_words

U64 = np.uint64
EDGE = np.array([0, 1, -1, 2, -2, 2**32, 2**62, -(2**62), 2**63 - 1, -(2**63), 3**39, -(5**27)],
                dtype=np.int64).view(U64)


def values(seed: int, n: int = 60) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([EDGE, rng.integers(0, 2**64, n, dtype=U64)])


def run(body: Callable[..., Awaitable[Any]], inputs: dict[str, np.ndarray] | None = None,
        binary: bool = False, fault: FaultInjector | None = None,
        timeout: float = 30.0) -> list[Any]:
    """Share ``inputs`` as a client, run ``body(scheme, **shares)`` at every party, and return
    per party its result or the exception it raised (so cheating tests see every outcome)."""
    shares = {k: rep4.share(v, binary) for k, v in (inputs or {}).items()}

    async def party(engine: RoundEngine) -> Any:
        try:
            s = await Rep4.setup(engine, fault=fault)
            args = {k: Shared(sh[engine.party], 1, binary) for k, sh in shares.items()}
            return await body(s, **args)
        except (CheatingDetected, PeerError) as exc:
            return exc

    return run_local_sync(4, party, round_timeout=timeout)


def agreed(results: list[Any]) -> Any:
    """The result every party returned (asserts none failed and all agree)."""
    for r in results:
        assert not isinstance(r, Exception), r
    for r in results[1:]:
        np.testing.assert_equal(r, results[0])
    return results[0]


# -- layout and client side ----------------------------------------------------------------
def test_layout() -> None:
    for p in range(4):
        assert p not in rep4.held(p)
        assert [rep4.slot(p, c) for c in rep4.held(p)] == [0, 1, 2]
        with pytest.raises(ValueError):
            rep4.slot(p, p)
    # every component is held by exactly three parties
    for c in range(4):
        assert sum(c in rep4.held(p) for p in range(4)) == 3


@pytest.mark.parametrize("binary", [False, True])
def test_share_reconstruct(binary: bool) -> None:
    x = values(1)
    shares = rep4.share(x, binary)
    assert [s.shape for s in shares] == [(3, x.size)] * 4
    for group in [(1, 2, 3), (0, 2, 3), (0, 1, 2, 3)]:
        np.testing.assert_array_equal(rep4.reconstruct({p: shares[p] for p in group}, binary), x)
    for group in [(0,), (0, 1), (2, 3)]:  # some component would be reported by one server only
        with pytest.raises(ValueError, match="two servers"):
            rep4.reconstruct({p: shares[p] for p in group}, binary)
    # the three components a party sees are uniformly random, not the secret
    assert not any(np.array_equal(shares[p][k], x) for p in range(4) for k in range(3))


@pytest.mark.parametrize("party", range(4))
def test_reconstruct_detects_one_bad_server(party: int) -> None:
    x = values(2)
    shares = rep4.share(x)
    shares[party] = shares[party].copy()
    shares[party][1, 5] += U64(1)
    with pytest.raises(CheatingDetected, match="result consistency"):
        rep4.reconstruct(dict(enumerate(shares)))


def test_registered() -> None:
    info = registry.get("active4")
    assert info.n_parties == 4 and info.scheme is Rep4
    assert info.share is rep4.share and info.reconstruct is rep4.reconstruct


# -- primitives against plaintext ----------------------------------------------------------
def test_arithmetic() -> None:
    x, y = values(3), values(4)[::-1].copy()
    c = np.arange(x.size, dtype=U64) * U64(2**61 + 3)

    async def body(s: Rep4, x: Shared, y: Shared) -> tuple[np.ndarray, ...]:
        prod = await s.mul(x, y)
        square = await s.mul(x, x)
        lin = s.add_public(s.mul_public(s.sub(s.add(x, y), s.neg(y)), c), c)
        return (await s.open(prod), await s.open(square), await s.open(lin),
                await s.open(s.public(c)), await s.open(x))

    prod, square, lin, pub, xo = agreed(run(body, {"x": x, "y": y}))
    np.testing.assert_array_equal(prod, x * y)  # wraps mod 2^64
    np.testing.assert_array_equal(square, x * x)
    np.testing.assert_array_equal(lin, (x + y + y) * c + c)
    np.testing.assert_array_equal(pub, c)
    np.testing.assert_array_equal(xo, x)


def test_mul_broadcast_and_shapes() -> None:
    x = values(5, 12).reshape(4, 6)
    y = values(6, 0)[:6]

    async def body(s: Rep4, x: Shared, y: Shared) -> tuple[np.ndarray, ...]:
        prod = await s.mul(x, y)
        empty = await s.mul(x[:0], x[:0])
        one = await s.mul(x[0, :1], y[:1])
        shifted = s.add_public(y, np.arange(24, dtype=U64).reshape(4, 6))
        minus5 = s.add_public(y, -5)
        return (await s.open(prod), await s.open(empty), await s.open(one),
                await s.open(shifted), await s.open(minus5))

    prod, empty, one, shifted, minus5 = agreed(run(body, {"x": x, "y": y}))
    np.testing.assert_array_equal(minus5, y - U64(5))
    np.testing.assert_array_equal(prod, x * y)
    assert empty.shape == (0, 6)
    np.testing.assert_array_equal(one, x[0, :1] * y[:1])
    np.testing.assert_array_equal(shifted, y + np.arange(24, dtype=U64).reshape(4, 6))


@pytest.mark.parametrize("shape", [((9, 5), (5, 4)), ((1, 7), (7, 1)), ((6, 3), (3, 11))])
def test_matmul(shape: tuple[tuple[int, int], tuple[int, int]]) -> None:
    rng = np.random.default_rng(7)
    a = rng.integers(0, 2**64, shape[0], dtype=U64)
    b = rng.integers(0, 2**64, shape[1], dtype=U64)
    a[0, 0], b[0, 0] = U64(2**63), U64(2**63)

    async def body(s: Rep4, a: Shared, b: Shared) -> np.ndarray:
        return await s.open(await s.matmul(a, b))

    np.testing.assert_array_equal(agreed(run(body, {"a": a, "b": b})), a @ b)


def test_matmul_communication_is_result_sized() -> None:
    a = values(8, 0)[:10].reshape(1, 10).repeat(40, axis=0)  # 40 x 10
    b = values(9, 0)[:10].reshape(10, 1).repeat(2, axis=1)  # 10 x 2: result 40 x 2

    async def body(s: Rep4, a: Shared, b: Shared) -> tuple[int, int]:
        before_r, before_b = s.engine.rounds, s.engine.bytes_sent
        await s.matmul(a, b)
        return s.engine.rounds - before_r, s.engine.bytes_sent - before_b

    for rounds, sent in run(body, {"a": a, "b": b}):
        assert rounds == 1
        assert sent <= 80 * 12 + 2 * 32  # 1.5 words per result element, at most 2 digests


def test_binary() -> None:
    x, y = values(10), values(11)
    mask = 0x00FF00FF00FF00FF

    async def body(s: Rep4, x: Shared, y: Shared) -> tuple[np.ndarray, ...]:
        anded = await s.and_(x, y)
        xored = s.xor(x, y)
        pub = s.xor_public(s.and_public(x, mask), 0xF0F0)
        shl, shr = s.shift(x, 3), s.shift(x, -7)
        return (await s.open_binary(anded), await s.open_binary(xored),
                await s.open_binary(pub), await s.open_binary(shl), await s.open_binary(shr))

    anded, xored, pub, shl, shr = agreed(run(body, {"x": x, "y": y}, binary=True))
    np.testing.assert_array_equal(anded, x & y)
    np.testing.assert_array_equal(xored, x ^ y)
    np.testing.assert_array_equal(pub, (x & U64(mask)) ^ U64(0xF0F0))
    np.testing.assert_array_equal(shl, x << U64(3))
    np.testing.assert_array_equal(shr, x >> U64(7))


def test_only_masked_openings_run_inside_a_group_of_computations() -> None:
    """open and open_binary reveal results, after the checks: refused inside
    ``RoundEngine.together``; open_masked (``b2a_masked``'s uniformly masked w - r) is not."""
    x = values(13)

    async def body(s: Rep4, x: Shared) -> list[object]:
        refused = []
        for name, step in (("open", s.open), ("open_binary", s.open_binary)):
            try:
                await s.engine.together(step(x), s.mul(x, x))
            except RuntimeError as exc:
                assert "inside RoundEngine.together" in str(exc)
                refused.append(name)
        opened, square = await s.engine.together(s.open_masked(x), s.mul(x, x))
        xored, _ = await s.engine.together(s.open_masked(x, binary=True), s.mul(x, x))
        return [refused, opened, await s.open(square), xored, await s.open_binary(x)]

    refused, opened, square, xored, alone = agreed(run(body, {"x": x}))
    assert refused == ["open", "open_binary"]
    np.testing.assert_array_equal(opened, x)
    np.testing.assert_array_equal(square, x * x)
    np.testing.assert_array_equal(xored, alone)  # the XOR of the components, as outside


def test_components() -> None:
    x = values(12)

    async def body(s: Rep4, x: Shared) -> tuple[list[np.ndarray], list[np.ndarray]]:
        arith = [await s.open_binary(c) for c in s.arith_components(x)]
        b = s.xor_public(arith_as_binary(x), 1)
        bits = [await s.open(c) for c in await s.bit_components(b)]
        return arith, bits

    def arith_as_binary(x: Shared) -> Shared:
        return Shared(x.data, 1, True)  # the same words read as an XOR sharing

    results = run(body, {"x": x})
    arith, bits = results[0]
    for other in results[1:]:
        np.testing.assert_equal(other, results[0])
    assert len(arith) == 4 and len(bits) == 4
    np.testing.assert_array_equal(arith[0] + arith[1] + arith[2] + arith[3], x)
    xor_of_words = arith[0] ^ arith[1] ^ arith[2] ^ arith[3]  # the words as an XOR sharing
    for b in bits:
        assert set(np.unique(b).tolist()) <= {0, 1}
    np.testing.assert_array_equal(bits[0] ^ bits[1] ^ bits[2] ^ bits[3],
                                  (xor_of_words ^ U64(1)) & U64(1))


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_addends_sum_to_x_in_one_round_without_ands(n: int) -> None:
    """x_0 + x_1 and x_2 + x_3, jointly shared: their ring sum is x, in one round, and the
    four parties send 2 words per value in all (plus one digest per vouching link)."""
    x = np.random.default_rng(n).integers(0, 2**64, n, dtype=U64)

    async def body(s: Rep4, x: Shared) -> tuple[list[np.ndarray], int, int, int]:
        before_r, before_b = s.engine.rounds, s.engine.bytes_sent
        words = await s.addends(x)
        cost = s.engine.rounds - before_r, s.engine.bytes_sent - before_b
        digests = len(s._roles[rep4._ADDENDS].vouch_to)
        return [await s.open_binary(w) for w in words], *cost, digests

    results = run(body, {"x": x})
    for opened, rounds, _, _ in results:
        assert rounds == 1 and len(opened) == 2
        np.testing.assert_array_equal(opened[0] + opened[1], x)
        np.testing.assert_array_equal(opened, results[0][0])
    assert sum(sent - 32 * digests for _, _, sent, digests in results) == 2 * 8 * n


@pytest.mark.parametrize("cheater", range(4))
@pytest.mark.parametrize("kind", ["jmp-value", "jmp-hash"])
def test_tampered_addend(cheater: int, kind: str) -> None:
    x = values(22)

    async def body(s: Rep4, x: Shared) -> list[np.ndarray]:
        return [await s.open_binary(w) for w in await s.addends(x)]

    fault = FaultInjector(cheater, kind, delta=12345)
    results = run(body, {"x": x}, fault=fault, timeout=0.5)
    assert fault.fired >= 1
    assert_aborted(results, "joint-message hash", cheater,
                   lambda r: np.array_equal(r[0] + r[1], x))


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_xor_terms_are_two_bits_whose_xor_is_the_bit(n: int) -> None:
    """c_0 ^ c_1 and c_2 ^ c_3 as arithmetic 0/1 sharings, in one round; bit_to_arith then
    needs one product."""
    b = np.random.default_rng(n).integers(0, 2**64, n, dtype=U64)

    async def body(s: Rep4, b: Shared) -> tuple[list[np.ndarray], int, np.ndarray]:
        before = s.engine.rounds
        terms = await s.xor_terms(b)
        rounds = s.engine.rounds - before
        return [await s.open(t) for t in terms], rounds, await s.open(await bit_to_arith(s, b))

    for terms, rounds, arith in run(body, {"b": b}, binary=True):
        assert rounds == 1 and len(terms) == 2
        assert set(np.unique(np.concatenate(terms)).tolist()) <= {0, 1}
        np.testing.assert_array_equal(terms[0] ^ terms[1], b & U64(1))
        np.testing.assert_array_equal(arith, b & U64(1))


@pytest.mark.parametrize("cheater", range(4))
@pytest.mark.parametrize("kind", ["jmp-value", "jmp-hash"])
def test_tampered_xor_term(cheater: int, kind: str) -> None:
    b = values(23)

    async def body(s: Rep4, b: Shared) -> np.ndarray:
        return await s.open(await bit_to_arith(s, b))

    fault = FaultInjector(cheater, kind, delta=12345)
    results = run(body, {"b": b}, binary=True, fault=fault, timeout=0.5)
    assert fault.fired >= 1
    assert_aborted(results, "joint-message hash", cheater,
                   lambda r: np.array_equal(r, b & U64(1)))


def test_components_are_local() -> None:
    async def body(s: Rep4, x: Shared) -> int:
        before = s.engine.rounds
        s.arith_components(x)
        await s.bit_components(Shared(x.data, 1, True))
        await s.random((5,))
        s.public(np.arange(3, dtype=U64))
        return s.engine.rounds - before

    assert run(body, {"x": values(13)}) == [0, 0, 0, 0]


def test_random() -> None:
    async def body(s: Rep4) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        r1, r2 = await s.random((1000,)), await s.random((1000,))
        return await s.open(r1), await s.open(r2), list(r1.data)

    results = run(body)
    r1, r2, _ = results[0]
    for other in results[1:]:
        np.testing.assert_array_equal(other[0], r1)
    assert not np.array_equal(r1, r2)
    assert len(np.unique(r1)) > 990
    # each component is identical at its three holders
    comps = [{rep4.held(p)[k]: res[2][k] for k in range(3)} for p, res in enumerate(results)]
    for c in range(4):
        copies = [d[c] for d in comps if c in d]
        assert len(copies) == 3
        assert all(np.array_equal(copies[0], cp) for cp in copies)


def test_chained_products() -> None:
    """Several rounds of products and opens, so hash states and PRF streams stay in step."""
    x = values(14, 20)

    async def body(s: Rep4, x: Shared) -> list[np.ndarray]:
        out = []
        acc = x
        for _ in range(5):
            acc = await s.mul(acc, x)
            out.append(await s.open(acc))
            acc = s.add(acc, await s.random(x.shape))
            out.append(await s.open(acc))
        await s.verify()
        return out

    results = agreed(run(body, {"x": x}))
    expect = x.copy()
    for i in range(5):
        np.testing.assert_array_equal(results[2 * i], expect * x)
        expect = results[2 * i + 1]


def test_verify_is_free_when_nothing_pending() -> None:
    async def body(s: Rep4, x: Shared) -> int:
        await s.mul(x, x)
        before = s.engine.rounds
        await s.verify()
        await s.open(x)  # every joint message was checked in its own round
        return s.engine.rounds - before

    assert run(body, {"x": values(15)}) == [1, 1, 1, 1]


# -- communication -------------------------------------------------------------------------
@pytest.mark.parametrize("binary", [False, True])
def test_product_costs_one_round_and_twelve_bytes(binary: bool) -> None:
    n = 100_000

    async def body(s: Rep4) -> tuple[int, int, int]:
        x, y = await s.random((n,)), await s.random((n,))
        if binary:
            x, y = Shared(x.data, 1, True), Shared(y.data, 1, True)
        before_r, before_b = s.engine.rounds, s.engine.bytes_sent
        await (s.and_(x, y) if binary else s.mul(x, y))
        digests = len(s._roles[rep4._JMPS].vouch_to)
        return s.engine.rounds - before_r, s.engine.bytes_sent - before_b, digests

    for rounds, sent, digests in run(body):
        assert rounds == 1
        assert sent == 12 * n + 32 * digests


def test_setup_costs_two_rounds() -> None:
    async def body(s: Rep4) -> int:
        return s.engine.rounds

    assert run(body) == [2, 2, 2, 2]


def test_bad_configuration() -> None:
    with pytest.raises(ValueError, match="fault kind"):
        FaultInjector(0, "nonsense")


# -- malicious parties ---------------------------------------------------------------------
def assert_aborted(results: list[Any], check: str, cheater: int | None,
                   correct: Callable[[Any], bool] = lambda _: False) -> None:
    """Some honest party raised CheatingDetected(check) and no honest party output a wrong
    result: the others detected it too, stalled waiting for an aborted peer (PeerError), or,
    when the tampered message never reached their data, output the correct result (security
    with abort does not promise that all honest parties abort together)."""
    honest = [r for p, r in enumerate(results) if p != cheater]
    detected = [r for r in honest if isinstance(r, CheatingDetected)]
    assert detected, f"no honest party detected cheating: {results}"
    assert all(r.check == check for r in detected), [r.check for r in detected]
    for r in honest:
        assert isinstance(r, Exception) or correct(r), f"honest party output {r!r}"


async def mul_then_open(s: Rep4, x: Shared, y: Shared) -> np.ndarray:
    return await s.open(await s.mul(x, y))


@pytest.mark.parametrize("cheater", range(4))
@pytest.mark.parametrize("kind", ["jmp-value", "jmp-hash"])
def test_tampered_product_message(cheater: int, kind: str) -> None:
    x, y = values(20), values(21)
    fault = FaultInjector(cheater, kind, delta=12345)
    results = run(mul_then_open, {"x": x, "y": y}, fault=fault, timeout=0.5)
    assert fault.fired >= 1
    assert_aborted(results, "joint-message hash", cheater, lambda r: np.array_equal(r, x * y))


def test_tampered_and_gate() -> None:
    x, y = values(26), values(27)

    async def body(s: Rep4, x: Shared, y: Shared) -> np.ndarray:
        return await s.open_binary(await s.and_(x, y))

    fault = FaultInjector(2, "jmp-value", delta=1 << 40)
    results = run(body, {"x": x, "y": y}, binary=True, fault=fault, timeout=0.5)
    assert_aborted(results, "joint-message hash", 2, lambda r: np.array_equal(r, x & y))


def test_tampered_matmul() -> None:
    a, b = values(28, 0)[:12].reshape(3, 4), values(29, 0)[:8].reshape(4, 2)

    async def body(s: Rep4, a: Shared, b: Shared) -> np.ndarray:
        return await s.open(await s.matmul(a, b))

    fault = FaultInjector(1, "jmp-value", delta=7)
    results = run(body, {"a": a, "b": b}, fault=fault, timeout=0.5)
    assert_aborted(results, "joint-message hash", 1, lambda r: np.array_equal(r, a @ b))


@pytest.mark.parametrize("cheater", range(4))
@pytest.mark.parametrize("kind", ["open-value", "open-hash"])
def test_inconsistent_opening(cheater: int, kind: str) -> None:
    x = values(30)

    async def body(s: Rep4, x: Shared) -> np.ndarray:
        return await s.open(x)

    fault = FaultInjector(cheater, kind, delta=99)
    results = run(body, {"x": x}, fault=fault, timeout=0.5)
    victim = (cheater - (1 if kind == "open-value" else 2)) % 4
    assert isinstance(results[victim], CheatingDetected)
    assert_aborted(results, "open consistency", cheater, lambda r: np.array_equal(r, x))


@pytest.mark.parametrize("cheater", range(4))
def test_corrupted_local_share_before_open(cheater: int) -> None:
    """A party that changes its own copy of a component is caught when it sends it."""
    x = values(31)

    async def body(s: Rep4, x: Shared) -> np.ndarray:
        if s.party == cheater:
            data = x.data.copy()
            data[rep4.slot(cheater, (cheater - 1) % 4)] += U64(1)  # the one it will send
            x = Shared(data, 1)
        return await s.open(x)

    results = run(body, {"x": x}, timeout=0.5)
    assert_aborted(results, "open consistency", cheater, lambda r: np.array_equal(r, x))


@pytest.mark.parametrize("cheater", range(4))
@pytest.mark.parametrize("k", range(3))
def test_corrupted_local_share_before_product(cheater: int, k: int) -> None:
    """A corrupted component makes the two joint senders of a cross term disagree."""
    x, y = values(32), values(33)

    async def body(s: Rep4, x: Shared, y: Shared) -> np.ndarray:
        if s.party == cheater:
            data = x.data.copy()
            data[k] ^= U64(1 << 20)
            x = Shared(data, 1)
        return await s.open(await s.mul(x, y))

    results = run(body, {"x": x, "y": y}, timeout=0.5)
    assert_aborted(results, "joint-message hash", cheater, lambda r: np.array_equal(r, x * y))


@pytest.mark.parametrize("party", range(4))
def test_inconsistent_client_input(party: int) -> None:
    """A client that gives the holders of one component different values is caught by the
    queued input check, which runs before the first opening."""
    x = values(34)
    shares = rep4.share(x)
    shares[party] = shares[party].copy()
    shares[party][0, 3] += U64(1)

    async def party_main(engine: RoundEngine) -> Any:
        try:
            s = await Rep4.setup(engine)
            xs = Shared(shares[engine.party], 1)
            s.note_input(xs)
            return await s.open(xs)
        except (CheatingDetected, PeerError) as exc:
            return exc

    results = run_local_sync(4, party_main, round_timeout=0.5)
    assert_aborted(results, "input consistency", None)


def test_consistent_client_input_passes() -> None:
    x = values(35)

    async def body(s: Rep4, x: Shared) -> np.ndarray:
        s.note_input(x)
        return await s.open(x)

    np.testing.assert_array_equal(agreed(run(body, {"x": x})), x)


def test_tampered_input_digest() -> None:
    async def body(s: Rep4, x: Shared) -> None:
        s.note_input(x)
        await s.verify()

    fault = FaultInjector(3, "input-hash", peer=0)
    results = run(body, {"x": values(36)}, fault=fault, timeout=0.5)
    assert isinstance(results[0], CheatingDetected)
    assert_aborted(results, "input consistency", 3, lambda r: r is None)


@pytest.mark.parametrize("cheater", range(4))
def test_tampered_key_confirmation(cheater: int) -> None:
    async def body(s: Rep4) -> None:
        return None

    fault = FaultInjector(cheater, "key-confirm", peer=(cheater + 1) % 4)
    results = run(body, fault=fault, timeout=0.5)
    assert isinstance(results[(cheater + 1) % 4], CheatingDetected)
    assert_aborted(results, "key agreement", cheater, lambda r: r is None)


def test_malformed_message_is_rejected() -> None:
    ok = checked_words(np.zeros(4, dtype=U64), 4, "open consistency", 0, 1)
    assert ok.shape == (4,)
    with pytest.raises(CheatingDetected, match="open consistency"):
        checked_words(np.zeros(3, dtype=U64), 4, "open consistency", 0, 1)
    with pytest.raises(CheatingDetected, match="open consistency"):
        checked_words(np.zeros(4, dtype=np.float64), 4, "open consistency", 0, 1)


def test_fault_injector_is_off_by_default() -> None:
    """The honest configuration never deviates: the default scheme has no hook."""
    async def body(s: Rep4) -> bool:
        return s._fault is None

    assert run(body) == [True] * 4
