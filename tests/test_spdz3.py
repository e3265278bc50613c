"""Active 3PC (spdz3) specifics: the AND-check plan and attacks aimed at its checks.

The generic behaviour (every block equal to plaintext, every message kind caught) is in the
parametrised suites and tests/test_cheating.py; here are the parts only this scheme has.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import outcomes

from mpcnet import ring128
from mpcnet.errors import CheatingDetected, MPCError
from mpcnet.net.engine import RoundEngine
from mpcnet.net.loopback import loopback_mesh
from mpcnet.ops.compare import msb
from mpcnet.prf import PRF
from mpcnet.schemes import rep3
from mpcnet.schemes.base import Rounds, Shared, all_rounds, concat
from mpcnet.schemes.faults import FaultInjector
from mpcnet.schemes.replicated import RunningHash, digest_words
from mpcnet.schemes.spdz3 import SIGMA, Spdz3, check_plan

U64 = np.uint64


@pytest.mark.parametrize("n", [1, 2, 31, 1000, 65_536, 704_177, 1_048_575, 6_000_000])
def test_check_plan_reaches_the_statistical_security(n: int) -> None:
    pools, size = check_plan(n)
    assert size > n and all(size % d for d in range(2, math.isqrt(size) + 1))  # a prime
    assert pools * math.log2(size) >= SIGMA  # a cheater passes with probability <= size^-pools


@pytest.fixture
def triples(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ANDs checked by triples with cut-and-choose (``and_check``), not by proofs."""
    monkeypatch.setattr(Spdz3, "proves_ands", False)


@pytest.fixture
def proofs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ANDs checked by each party's proof of its messages (``dzkp``), in every check."""
    monkeypatch.setattr(Spdz3, "proves_ands", True)
    monkeypatch.setattr(Spdz3, "proves_alone", True)


class SameErrorEverywhere(FaultInjector):
    """Adds the same word to every word of every AND and triple message of ``party``, in
    place (its own copies agree with what it sent), and commits to the changed triples (the
    digest sent in the same round is theirs): all triples and all ANDs carry the same error,
    which passes every match; only the opened (cut) triples can show it."""

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if party != self.party or kind not in ("and", "triple", "triple-hash"):
            return payload
        if kind == "triple-hash":  # sent after the terms, in the same round
            return Spdz3._commitment(self.salt, self.terms)
        self.fired += 1
        payload += U64(self.delta)
        self.terms = np.ascontiguousarray(payload)
        return payload

    def observe(self, party: int, event: str, value: object) -> None:
        if party == self.party and event == "triple-salt":
            self.salt = value


def _and_then_open(fault: FaultInjector | None) -> list[object]:
    rng = np.random.default_rng(3)
    x, y = (rep3.share(rng.integers(0, 2**63, 500, dtype=np.int64).view(U64), binary=True)
            for _ in range(2))

    async def party(engine: RoundEngine) -> np.ndarray:
        s = await Spdz3.setup(engine, fault=fault)
        a, b = Shared(x[engine.party], 1, True), Shared(y[engine.party], 1, True)
        return await s.open_binary(await s.and_(a, b))

    async def main() -> list[object]:
        engines = [RoundEngine(ch, round_timeout=5) for ch in loopback_mesh(3)]
        return list(await asyncio.gather(*(party(e) for e in engines), return_exceptions=True))

    return asyncio.run(main())


@pytest.mark.parametrize("mode", ["triples", "proofs"])
def test_an_honest_and_opens_correctly(mode: str, request: pytest.FixtureRequest) -> None:
    request.getfixturevalue(mode)
    rng = np.random.default_rng(3)
    x, y = (rng.integers(0, 2**63, 500, dtype=np.int64).view(U64) for _ in range(2))
    for out in _and_then_open(None):
        np.testing.assert_array_equal(out, x & y)


@pytest.mark.usefixtures("triples")
@pytest.mark.parametrize("cheater", range(3))
def test_the_same_error_on_every_and_and_triple_is_caught_by_the_cut(cheater: int) -> None:
    fault = SameErrorEverywhere(cheater, "and", delta=1 << 7)
    outcomes = _and_then_open(fault)
    assert fault.fired >= 2  # the circuit's AND and the triples
    honest = [o for i, o in enumerate(outcomes) if i != cheater]
    assert all(isinstance(o, CheatingDetected) for o in honest), honest
    assert {o.check for o in honest if isinstance(o, CheatingDetected)} <= {"AND"}


PROOF_KINDS = ("and", "and-commit", "and-proof", "and-proof-hash", "and-coin", "and-close")


@pytest.mark.slow  # a party that did not see the abort waits out its round timeout
@pytest.mark.usefixtures("proofs")
@pytest.mark.parametrize("kind", PROOF_KINDS)
@pytest.mark.parametrize("cheater", range(3))
def test_every_message_of_the_and_proofs_is_checked(kind: str, cheater: int) -> None:
    """An error in any message a party sends for the AND proofs, first, middle or last of its
    kind, is caught (``AND``) by an honest party before anything is opened; the other may
    only wait for it in vain (a check that one verifier makes alone, as A's of the
    commitments)."""
    counts: dict[str, int] = {}

    class Counter(FaultInjector):
        def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
            if party == cheater:
                counts[kind] = counts.get(kind, 0) + 1
            return payload

    assert all(isinstance(o, np.ndarray) for o in _and_then_open(Counter(cheater, "and")))
    for after in sorted({0, counts[kind] // 2, counts[kind] - 1}):
        fault = FaultInjector(cheater, kind, after=after, delta=1 << 20)
        honest = [o for i, o in enumerate(_and_then_open(fault)) if i != cheater]
        assert fault.fired == 1
        assert not any(isinstance(o, np.ndarray) for o in honest), honest
        assert {o.check for o in honest if isinstance(o, CheatingDetected)} == {"AND"}, honest


class RushingCheater(Spdz3):
    """Party 0 puts an error into its first AND, then plays the AND check's first two rounds
    out of order (the review's attack): it commits to honest triple terms (without that,
    party 1 sends no coin), reads party 1's coin word of the key it lacks, makes its terms
    cancel the AND error under every pool's shift, and only then sends them to party 2. Before
    the commitment, party 1 sent its coin on party 2's terms alone and this passed always."""

    error = np.array([0xDEADBEEF, 0, 1 << 63], dtype=U64)
    saw_coin = False

    def _and_terms(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = super()._and_terms(a, b)
        if a.shape[1:] == self.error.shape:  # the circuit's AND (triples are (pools, P))
            out[0] ^= self.error
        return out

    async def _check(self, ands: list, sums: np.ndarray | None, proofs: object = None,
                     digests: bool = True) -> AsyncIterator[int]:
        yield 4  # its rounds, announced as Spdz3._check does
        ch, nxt, prv = self.engine.channel, self.next_party, self.prev_party
        triples = self._triple_terms(ands)
        terms = triples[2][0]
        salt_out, _ = self._prev.words(4).tobytes(), self._next.words(4).tobytes()
        await ch.send(nxt, self._commitment(salt_out, terms))  # round 1, half
        triples[2][1] = np.asarray(await ch.recv(nxt)).reshape(terms.shape)  # party 1's
        relay = np.asarray(await ch.recv(prv))  # party 2's digest
        honest_coin = np.asarray(await ch.recv(nxt)).reshape(-1)[:2]  # party 1's round 2
        type(self).saw_coin = True
        back_coin, forward_coin = self._next.words(2), self._prev.words(2)
        seed = (back_coin ^ forward_coin ^ honest_coin).tobytes()
        pools, size = terms.shape
        n = sum(x.shape[1] for x, _, _ in ands)
        error = np.zeros(n, dtype=U64)
        error[:self.error.size] = self.error
        for pool in range(pools):
            digest = hashlib.sha256(b"match" + bytes([pool]) + seed).digest()
            terms[pool, (np.arange(n) + int.from_bytes(digest, "little") % size) % size] ^= error
        await ch.send(prv, np.ascontiguousarray(terms).reshape(-1))  # round 1, late
        await ch.send(prv, back_coin)
        await ch.send(nxt, np.concatenate([forward_coin, relay.reshape(-1)]))
        await ch.recv(prv)  # party 2's round 2
        await self._check_ands(ands, triples, seed)
        await self._compare_digests(("AND", "MAC"))


@pytest.mark.usefixtures("triples")
def test_a_cheater_who_holds_back_its_triples_until_it_sees_a_coin_is_caught() -> None:
    rng = np.random.default_rng(5)
    x, y = (rep3.share(rng.integers(0, 2**63, 3, dtype=np.int64).view(U64), binary=True)
            for _ in range(2))

    async def party(engine: RoundEngine) -> object:
        s = await (RushingCheater if engine.party == 0 else Spdz3).setup(engine)
        a, b = Shared(x[engine.party], 1, True), Shared(y[engine.party], 1, True)
        z = await s.and_(a, b)
        await s.checkpoint()
        return await s.open_binary(z), s

    async def main() -> list[object]:
        engines = [RoundEngine(ch, round_timeout=2) for ch in loopback_mesh(3)]
        return list(await asyncio.gather(*(party(e) for e in engines), return_exceptions=True))

    RushingCheater.saw_coin = False
    outcomes = asyncio.run(main())
    assert RushingCheater.saw_coin  # it read the coin before it sent its terms
    detected = outcomes[2]  # it receives party 0's terms and their relayed digest
    assert isinstance(detected, CheatingDetected) and detected.check == "AND", outcomes
    assert "relayed" in str(detected)
    assert isinstance(outcomes[1], MPCError), outcomes  # it waits for party 2 in vain


class Curious(Spdz3):
    """An honest party that keeps what it sees of the AND check, per party."""

    view: dict[int, dict[str, object]] = {}

    def _observe(self, event: str, value: object) -> None:
        mine = self.view.setdefault(self.party, {})
        if event == "received" and value[0] == "triple-hash":  # type: ignore[index]
            mine["digest"] = np.array(value[2])  # type: ignore[index]
        if event == "triple-salt":
            mine["salt"] = value
        super()._observe(event, value)

    def _triple_terms(self, ands: list) -> object:
        triples = super()._triple_terms(ands)
        self.view.setdefault(self.party, {})["terms"] = None if triples is None else triples[2][0]
        return triples


@pytest.mark.usefixtures("triples")
def test_the_triple_commitment_tells_its_relayer_nothing_about_the_and_inputs() -> None:
    """Party 2's triple terms go to party 1, their commitment to party 0, which lacks them
    but, once rho and sigma are open, can rebuild them from a guess of the ANDs' inputs: an
    unsalted digest matched exactly the right guess of a small secret (review). The digest is
    salted by the key of party 2 and party 1, which party 0 lacks."""
    shares = rep3.share(np.array([-3], dtype=np.int64).view(U64))

    async def party(engine: RoundEngine) -> None:
        s = await Curious.setup(engine)
        (x,) = await s.input(shares[engine.party])
        await msb(s, x)
        await s.checkpoint()

    async def main() -> None:
        engines = [RoundEngine(ch, round_timeout=5) for ch in loopback_mesh(3)]
        await asyncio.gather(*(party(e) for e in engines))

    Curious.view = {}
    asyncio.run(main())
    sender, relayer = Curious.view[2], Curious.view[0]
    terms = np.ascontiguousarray(sender["terms"])
    assert not np.array_equal(relayer["digest"], digest_words(RunningHash(terms)))
    assert np.array_equal(relayer["digest"], Spdz3._commitment(sender["salt"], terms))
    assert relayer["salt"] != sender["salt"]  # the relayer's own salts come from other keys


class FirstProductOff(FaultInjector):
    """Adds 1 to the first element of ``party``'s first product message of a job, in place."""

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if party == self.party and kind == "product" and not self.fired:
            self.fired += 1
            payload.reshape(-1)[0] += U64(1)
        return payload


@pytest.mark.parametrize("mode", ["triples", "proofs"])
def test_a_checkpoint_checks_ands_now_and_folds_macs_into_the_end(
        mode: str, request: pytest.FixtureRequest) -> None:
    """``checkpoint`` (a job scored a block at a time) checks the ANDs queued so far at once
    but only folds the MAC records: a product error passes the checkpoint, frees its record,
    and is still caught by the job's one MAC check at the end; an AND error stops the job at
    the checkpoint (by either AND check)."""
    request.getfixturevalue(mode)
    rng = np.random.default_rng(5)
    x = rep3.share(rng.integers(0, 2**40, 64, dtype=np.int64).view(U64))
    w = [rep3.share(rng.integers(0, 2**63, 64, dtype=np.int64).view(U64), binary=True)
         for _ in range(2)]

    def run(fault: FaultInjector) -> tuple[list[object], set[int]]:
        past_checkpoint: set[int] = set()

        async def party(engine: RoundEngine) -> str:
            s = await Spdz3.setup(engine, fault=fault)
            (a,) = await s.input(x[engine.party])
            await s.mul(a, a)
            await s.and_(Shared(w[0][engine.party], 1, True), Shared(w[1][engine.party], 1, True))
            await s.checkpoint()
            assert not s._macs and not s._ands and not s._proved  # noqa: SLF001 - freed
            past_checkpoint.add(engine.party)
            await s.verify()
            return "completed"

        async def main() -> list[object]:
            engines = [RoundEngine(ch, round_timeout=5) for ch in loopback_mesh(3)]
            return list(await asyncio.gather(*(party(e) for e in engines),
                                             return_exceptions=True))

        return asyncio.run(main()), past_checkpoint

    mac, past = run(FirstProductOff(1, "product"))
    assert {o.check for o in mac if isinstance(o, CheatingDetected)} == {"MAC"}, mac
    assert past == {0, 1, 2}  # caught at the end, not at the checkpoint
    ands, past = run(SameErrorEverywhere(1, "and", delta=1))
    assert {o.check for o in ands if isinstance(o, CheatingDetected)} == {"AND"}, ands
    assert not past & {0, 2}  # the honest parties stopped at the checkpoint


def test_only_uniformly_masked_values_are_opened_before_the_mac_test() -> None:
    """``open_masked`` skips the checks its caller vouches for: its callers are pinned to the
    perfect truncation (x + r, r uniform over the ring), ``b2a_masked`` (w - r) and the
    one-hot products of the labels (zero for well-formed labels whatever the data, acted on
    only after ``verify``: ``featsel.labels.open_one_hot``, docs/active3.md)."""
    import re

    from conftest import ROOT

    callers = {path.relative_to(ROOT).as_posix()
               for path in (ROOT / "mpcnet").rglob("*.py")
               if re.search(r"\.open_masked\(", path.read_text())}
    assert callers == {"mpcnet/ops/truncate.py", "mpcnet/ops/convert.py",
                       "mpcnet/featsel/labels.py"}, callers


@dataclass
class WordOff(FaultInjector):
    """Adds ``delta`` to word ``at`` of ``party``'s first message of ``kind`` after the first
    ``after`` ones, in place."""

    at: int = 0

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if party == self.party and kind == self.kind and not self.fired:
            self.seen += 1
            if self.seen <= self.after:
                return payload
            self.fired += 1
            with np.errstate(over="ignore"):
                payload.reshape(-1)[self.at] += U64(self.delta)
        return payload


def _bit_components(fault: FaultInjector | None) -> list[object]:
    bits = rep3.share(np.random.default_rng(9).integers(0, 2, 100, dtype=np.int64).view(U64),
                      binary=True)

    async def party(engine: RoundEngine) -> tuple[np.ndarray, int]:
        s = await Spdz3.setup(engine, fault=fault)
        sent = engine.bytes_sent
        comps = await s.bit_components(Shared(bits[engine.party], 1, True))
        sent = engine.bytes_sent - sent
        xor = np.zeros(100, dtype=U64)
        for c in comps:
            xor ^= await s.open(c)  # each is a 0/1 component: the MACs checked first
        return xor, sent

    async def main() -> list[object]:
        engines = [RoundEngine(ch, round_timeout=5) for ch in loopback_mesh(3)]
        return list(await asyncio.gather(*(party(e) for e in engines), return_exceptions=True))

    return asyncio.run(main())


def test_bit_components_send_two_words_per_component_bit_and_each_word_is_checked() -> None:
    """Each server sends the MAC terms of the two components it holds (2 limbs each), not of
    the third: 4 words per bit; every one of them is caught by the MAC check if changed."""
    expected = np.random.default_rng(9).integers(0, 2, 100, dtype=np.int64).view(U64)
    for xor, sent in _bit_components(None):
        np.testing.assert_array_equal(xor, expected)
        assert 4 * 8 * 100 <= sent <= 4 * 8 * 100 + 200  # the words and a frame header
    # the message is (limb, [own, next], bit): errors 1 and 2^63 in limb 0, 2^64 in limb 1
    # (2^127 would pass with probability 1/2, changing no output: the module docstring)
    for cheater in range(3):
        for at, delta in ((0, 1), (99, 1 << 63), (100, 1), (199, 1 << 63), (250, 1),
                          (399, 1)):
            out = _bit_components(WordOff(cheater, "product", delta=delta, at=at))
            checks = {o.check for o in out if isinstance(o, CheatingDetected)}
            assert checks == {"MAC"}, (cheater, at, delta, out)


@dataclass
class ConsistentOutputError(FaultInjector):
    """Adds ``delta`` to word ``at`` of its terms of z in ``output_matmul`` and commits to the
    changed terms (the digest it sends in the same round is theirs), so only Freivalds' test
    can see the error."""

    at: int = 0
    compensate: bool = False  # and add E r to its term of w = x (y r), once r is known

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if party != self.party:
            return payload
        if kind == "output-product":
            with np.errstate(over="ignore"):
                payload.reshape(-1)[self.at] += U64(self.delta)
            self.terms = np.ascontiguousarray(payload)
            self.columns = payload.shape[-1]
            self.fired += 1
        elif kind == "output-hash":
            return Spdz3._commitment(self.salt, self.terms)
        elif kind == "product" and self.compensate and hasattr(self, "r"):
            row, col = divmod(self.at % (payload.size // 4 * self.columns), self.columns)
            high = self.at >= payload.size // 4 * self.columns  # the error was in limb 1
            e = (self.delta << (64 * high)) * (int(self.r[0, col, 0]) +
                                               (int(self.r[1, col, 0]) << 64)) % (1 << 128)
            value = payload[:, 0]  # (limb, v, m, 1): the value's term
            x = (int(value[0, row, 0]) + (int(value[1, row, 0]) << 64) + e) % (1 << 128)
            value[0, row, 0], value[1, row, 0] = x & ((1 << 64) - 1), x >> 64
            self.compensate = False
        return payload

    def observe(self, party: int, event: str, value: object) -> None:
        if party == self.party and event == "output-salt":
            self.salt = value
        elif party == self.party and event == "freivalds":
            self.r = np.asarray(value)


def _output_matmul(fault: FaultInjector | None, value_only: bool) -> list[object]:
    rng = np.random.default_rng(11)
    x = rng.integers(-2**40, 2**40, (20, 5), dtype=np.int64).view(U64)
    y = rng.integers(0, 2, (5, 3), dtype=np.int64).view(U64)
    xs, ys = rep3.share(x), rep3.share(y)

    async def party(engine: RoundEngine) -> np.ndarray:
        s = await Spdz3.setup(engine, fault=fault)
        (a,) = await s.input(xs[engine.party], authenticate=not value_only)
        (b,) = await s.input(ys[engine.party])
        z = await s.output_matmul(a, b)
        assert z.data.shape[2] == 1  # value-only: a product with it needs another MAC
        return await s.open(z)

    return outcomes(3, party)


@pytest.mark.parametrize("value_only", [False, True], ids=["authenticated-x", "value-only-x"])
def test_output_matmul_is_the_product_and_each_of_its_messages_is_checked(
        value_only: bool) -> None:
    """D' = D x T without a MAC: a changed term breaks its commitment; a changed term with
    a matching commitment fails Freivalds' test (errors 1 and 2^63 in the low limb, 2^64 in
    the high one); the coin and the product x (y r) are checked as everywhere, also when x
    is value-only (x (y r) is then MAC'd as x (alpha y r))."""
    rng = np.random.default_rng(11)
    x = rng.integers(-2**40, 2**40, (20, 5), dtype=np.int64).view(U64)
    y = rng.integers(0, 2, (5, 3), dtype=np.int64).view(U64)
    for out in _output_matmul(None, value_only):
        np.testing.assert_array_equal(out, x @ y)
    for cheater in range(3):
        faults: list[tuple[FaultInjector, str]] = [
            (ConsistentOutputError(cheater, "output-product", delta=d, at=at), "MAC")
            for at, d in ((0, 1), (17, 1 << 63), (65, 1), (59, 5 << 40))]
        faults += [(FaultInjector(cheater, kind), check) for kind, check in (
            ("output-product", "MAC"), ("output-hash", "MAC"), ("output-relay", "MAC"),
            ("coin", "coin"))]
        faults.append((FaultInjector(cheater, "product", after=1 - value_only), "MAC"))
        faults += [(ConsistentOutputError(cheater, "output-product", delta=d, at=at,
                                          compensate=True), "MAC")  # u = 0: w's MAC fails
                   for at, d in ((0, 1), (17, 1 << 63), (65, 1))]
        for fault, check in faults:
            out = _output_matmul(fault, value_only)
            assert fault.fired == 1, fault
            assert {o.check for o in out if isinstance(o, CheatingDetected)} == {check}, (
                fault, out)


def _value_only(fault: FaultInjector | None) -> list[object]:
    """x input value-only, y authenticated: local sums, products either way round, a matmul,
    opened; and what x's input sent."""
    rng = np.random.default_rng(12)
    x = rng.integers(-2**40, 2**40, (6, 4), dtype=np.int64).view(U64)
    y = rng.integers(-2**20, 2**20, (6, 4), dtype=np.int64).view(U64)
    xs, ys = rep3.share(x), rep3.share(y)

    async def party(engine: RoundEngine) -> tuple[list[np.ndarray], int]:
        s = await Spdz3.setup(engine, fault=fault)
        sent = engine.bytes_sent
        (a,) = await s.input(xs[engine.party], authenticate=False)
        sent = engine.bytes_sent - sent
        (b,) = await s.input(ys[engine.party])
        mixed = [s.add(a, b), s.sub(b, a), s.add_public(a, 7), s.mul_public(a, 3)]
        assert all(v.data.shape[2] == 1 for v in mixed)  # value-only, as a
        products = [await s.mul(a, b), await s.mul(b, a), await s.matmul(a.T, b)]
        rounds = engine.rounds
        for op in (s.mul, s.matmul, s.output_matmul):
            with pytest.raises(TypeError, match="value-only"):
                await op(a, a if op == s.mul else a.T)
        with pytest.raises(TypeError, match="layouts"):
            concat([a, b])
        assert engine.rounds == rounds  # refused before any message
        return [await s.open(v) for v in mixed + products], sent

    return outcomes(3, party)


def test_value_only_inputs_send_no_mac_and_their_products_take_the_other_factors() -> None:
    """A value-only input costs only its holders' digests (no product with alpha); sums with
    it stay value-only; its products are right, MAC'd by the other factor, and a changed
    word of either product's MAC half is caught; two value-only factors, and joining a
    value-only sharing with an authenticated one, are refused before anything is sent."""
    rng = np.random.default_rng(12)
    x = rng.integers(-2**40, 2**40, (6, 4), dtype=np.int64).view(U64)
    y = rng.integers(-2**20, 2**20, (6, 4), dtype=np.int64).view(U64)
    with np.errstate(over="ignore"):
        expected = [x + y, y - x, x + U64(7), x * U64(3), x * y, x * y, x.T @ y]
    for opened, sent in _value_only(None):  # type: ignore[misc]
        for got, want in zip(opened, expected, strict=True):
            np.testing.assert_array_equal(got, want)
        assert sent <= 200  # two digests and their frame headers
    # the product messages after y's MACs: x y, y x (limb, value/MAC, 24), x^T y (.., 16)
    for after, at in ((1, 24), (1, 72 + 5), (2, 30), (3, 16 + 3), (3, 48)):
        out = _value_only(WordOff(1, "product", delta=1, after=after, at=at))
        assert {o.check for o in out if isinstance(o, CheatingDetected)} == {"MAC"}, (after, at)


class RushingOutputProduct(Spdz3):
    """Party ``cheater`` of ``output_matmul`` sends its digest first, waits for the next
    party's coin word (of the key the two honest parties share), derives r, and only then
    sends its terms of z with an error E such that E r = 0 (row 0, columns 0 and 1): u is
    zero with no other deviation, so only the commitment can stop it."""

    async def output_matmul(self, x: Shared, y: Shared) -> Shared:
        a, b = x.data[:, :, 0], y.data[:, :, 0]
        left = np.concatenate([a[:, 0], a[:, 1]], axis=-1)
        right = np.concatenate([ring128.add(b[:, 0], b[:, 1]), b[:, 0]], axis=-2)
        term = ring128.matmul(left, right)
        term = ring128.add(term, self._zero128(term.shape[1:]))
        salt, _ = self._prev.words(4).tobytes(), self._next.words(4).tobytes()
        ch, nxt, prv = self.engine.channel, self.next_party, self.prev_party
        await ch.send(nxt, self._commitment(salt, term))  # round 1, the digest only
        from_next = np.asarray(await ch.recv(nxt)).reshape(term.shape)
        relay = np.asarray(await ch.recv(prv))
        mine = (self._next.words(2), self._prev.words(2))
        coin = np.asarray(await ch.recv(nxt))  # round 2 of the next party: its coin word
        seed = (mine[0] ^ mine[1] ^ coin).tobytes()
        r = PRF(hashlib.sha256(b"freivalds" + seed).digest()[:16]).words((2, 3, 1))
        as_int = [int(r[0, c, 0]) + (int(r[1, c, 0]) << 64) for c in range(3)]
        for col, e in ((0, as_int[1]), (1, -as_int[0])):  # E r = r1 r0 - r0 r1 = 0
            v = (int(term[0, 0, col]) + (int(term[1, 0, col]) << 64) + e) % (1 << 128)
            term[0, 0, col], term[1, 0, col] = v & ((1 << 64) - 1), v >> 64
        await ch.send(prv, term)  # round 1, the terms, now
        await ch.send(prv, mine[0])
        await ch.send(nxt, np.concatenate([mine[1], relay]))
        await ch.recv(prv)
        values = np.stack([term, from_next], axis=1)
        w = await self.matmul(x, Shared(ring128.matmul(y.data, r), 3))
        self._note_zero("MAC", ring128.sub(ring128.matmul(values, r), w.data[:, :, 0]),
                        binary=False)
        return Shared(np.stack([values, np.zeros_like(values)], axis=2), 3)


class WithoutCommitment(Spdz3):
    def _check_commitment(self, *args: object, **kwargs: object) -> None:
        """The flaw the commitment prevents (positive control)."""


@pytest.mark.parametrize("cheater", range(3))
def test_a_cheater_who_reads_the_coin_before_sending_its_terms_of_d_prime_is_caught(
        cheater: int) -> None:
    rng = np.random.default_rng(11)
    x = rng.integers(-2**40, 2**40, (20, 5), dtype=np.int64).view(U64)
    y = np.zeros((5, 3), dtype=U64)
    y[[3, 0, 2], [0, 1, 2]] = 1
    xs, ys = rep3.share(x), rep3.share(y)

    def run(honest: type[Spdz3]) -> list[object]:
        async def party(engine: RoundEngine) -> np.ndarray:
            cls = RushingOutputProduct if engine.party == cheater else honest
            s = await cls.setup(engine)
            a, b = await s.input(xs[engine.party], ys[engine.party])
            return await s.open(await s.output_matmul(a, b))
        out = outcomes(3, party)
        return [o for i, o in enumerate(out) if i != cheater]

    assert {o.check for o in run(Spdz3) if isinstance(o, CheatingDetected)} == {"MAC"}
    wrong = run(WithoutCommitment)  # without it the rushing works: a wrong D', no abort
    assert all(isinstance(o, np.ndarray) and not np.array_equal(o, x @ y) for o in wrong)


class NoMacRecords(Spdz3):
    """active3 after a change that stopped queueing MAC records (so that w = x (y r) of
    ``output_matmul`` leaves none): Freivalds' claim is then the only pending check."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._macs.queue = lambda data: None  # type: ignore[method-assign]


class SkipsWithoutRecords(NoMacRecords):
    """The earlier ``verify``, which returned early when no MAC record, AND or folded sum was
    queued (positive control: the flaw the explicit list of pending checks removes)."""

    async def verify(self) -> None:
        await self.verify_inputs()
        if not (self._macs.pending or self._ands):
            return
        await super().verify()


def test_verify_lists_every_pending_check_and_runs_until_none_is_left() -> None:
    rng = np.random.default_rng(13)
    xs = rep3.share(rng.integers(0, 2**40, (4, 3), dtype=np.int64).view(U64))
    bits = rep3.share(rng.integers(0, 2**63, 4, dtype=np.int64).view(U64), binary=True)

    async def party(engine: RoundEngine) -> list[list[str]]:
        s = await NoMacRecords.setup(engine)
        (x,) = await s.input(xs[engine.party])
        seen = [s.pending_checks()]  # the input's records are dropped, its digests compared
        s.note_input(x)
        seen.append(s.pending_checks())
        await s.verify()
        b = Shared(bits[engine.party], 1, True)
        await s.and_(b, b)
        seen.append(s.pending_checks())
        await s.verify()
        (y,) = await s.input(xs[engine.party].swapaxes(1, 2))
        await s.output_matmul(x, y)
        seen.append(s.pending_checks())
        await s.verify()
        seen.append(s.pending_checks())
        return seen

    for seen in outcomes(3, party):
        assert seen == [[], ["input consistency"], ["AND"], ["zero tests"], []], seen


@pytest.mark.parametrize("cheater", range(3))
def test_a_freivalds_claim_is_checked_even_when_no_mac_record_is_left(cheater: int) -> None:
    """A wrong D' whose terms match their commitment is caught by Freivalds' claim alone
    when nothing else is queued; the earlier early return skipped that claim and opened the
    wrong D' at every party."""
    rng = np.random.default_rng(11)
    x = rng.integers(-2**40, 2**40, (20, 5), dtype=np.int64).view(U64)
    y = rng.integers(0, 2, (5, 3), dtype=np.int64).view(U64)
    xs, ys = rep3.share(x), rep3.share(y)

    def run(cls: type[Spdz3]) -> list[object]:
        fault = ConsistentOutputError(cheater, "output-product", delta=1, at=0)

        async def party(engine: RoundEngine) -> np.ndarray:
            s = await cls.setup(engine, fault=fault)
            a, b = await s.input(xs[engine.party], ys[engine.party])
            z = await s.output_matmul(a, b)
            assert s.pending_checks() == ["zero tests"]
            return await s.open(z)

        out = outcomes(3, party)
        assert fault.fired == 1
        return out

    checked = run(NoMacRecords)
    assert {o.check for o in checked if isinstance(o, CheatingDetected)} == {"MAC"}, checked
    skipped = run(SkipsWithoutRecords)
    assert all(isinstance(o, np.ndarray) and not np.array_equal(o, x @ y) for o in skipped)


class ForgetsTheDigests(Spdz3):
    async def _compare_digests(self, checks: tuple[str, ...]) -> None:
        """A ``verify`` that stopped comparing the zero tests' claims."""


def test_a_verify_that_leaves_a_check_pending_is_refused() -> None:
    xs = rep3.share(np.arange(4, dtype=U64))

    async def party(engine: RoundEngine) -> None:
        s = await ForgetsTheDigests.setup(engine)
        (x,) = await s.input(xs[engine.party])
        await s.mul(x, x)
        await s.verify()

    for out in outcomes(3, party):
        assert isinstance(out, RuntimeError) and "zero tests" in str(out), out


def test_no_check_or_opening_runs_inside_a_group_of_computations() -> None:
    """Inside ``RoundEngine.together`` another member's rounds would travel with a check's, and
    an opening would run while the other members still queue records: verify, checkpoint,
    open, output_matmul (its Freivalds coin) and a pending input check are refused there,
    masked openings and products are not."""
    shares = rep3.share(np.arange(4, dtype=U64))

    async def party(engine: RoundEngine) -> list[str]:
        s = await Spdz3.setup(engine)
        (x,) = await s.input(shares[engine.party])
        refused = []
        for name, step in (("verify", s.verify), ("checkpoint", s.checkpoint),
                           ("open", lambda: s.open(x)), ("output", lambda: s.output(x)),
                           ("output_matmul",
                            lambda: s.output_matmul(x.reshape(2, 2), x.reshape(2, 2)))):
            try:
                await engine.together(step(), s.mul(x, x))
            except RuntimeError as exc:
                assert "inside RoundEngine.together" in str(exc)
                refused.append(name)
        s.note_input(x)
        try:
            await engine.together(s.open_masked(x))
        except RuntimeError:
            refused.append("input check")
        await s.verify_inputs()
        masked, product = await engine.together(s.open_masked(x), s.mul(x, x))
        return refused + [str(await s.open(product) == np.arange(4, dtype=U64) ** 2)]

    async def main() -> list[list[str]]:
        engines = [RoundEngine(ch, round_timeout=5) for ch in loopback_mesh(3)]
        return list(await asyncio.gather(*(party(e) for e in engines)))

    for out in asyncio.run(main()):
        assert out == ["verify", "checkpoint", "open", "output", "output_matmul", "input check",
                       str(np.full(4, True))]


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited")
def test_a_checkpoint_whose_rounds_never_run_is_refused_at_verify() -> None:
    """``checkpoint_later`` hands the ANDs queued so far to the rounds it returns: if a job
    dropped them, those ANDs would go unchecked, so ``verify`` refuses while any has not run;
    once they have run, a wrong AND among them is caught by them."""
    xs = rep3.share(np.arange(8, dtype=U64), binary=True)

    async def dropped(engine: RoundEngine) -> None:
        s = await Spdz3.setup(engine)
        x = Shared(xs[engine.party], 1, True)
        await s.and_(x, x)
        s.checkpoint_later()  # noqa: RUF006 - dropped on purpose
        await s.verify()

    for out in outcomes(3, dropped):
        assert isinstance(out, RuntimeError) and "checkpoint rounds not run" in str(out), out

    async def run(engine: RoundEngine) -> str:
        s = await Spdz3.setup(engine, fault=FaultInjector(1, "and"))
        x = Shared(xs[engine.party], 1, True)
        await s.and_(x, x)
        await all_rounds(s.checkpoint_later())
        return "passed"

    outs = outcomes(3, run)
    assert any(isinstance(o, CheatingDetected) for o in outs), outs


@pytest.mark.parametrize("cheater", [None, 0, 1, 2])
def test_open_of_checks_its_inputs_first_and_leaves_every_mac_record_to_the_job(
        cheater: int | None) -> None:
    """``open_of`` (the best-split Gini's sort) opens a shuffled column once the shuffle's
    MACs pass a check of their own, and keeps every MAC record queued, so that the job's one
    MAC zero test still weighs the shuffle's records with its own coefficients: nothing is
    checked in parts. A wrong shuffle word is caught before the opening."""
    x = np.arange(40, dtype=np.int64).reshape(20, 2).view(U64)
    xs = rep3.share(x)
    fault = None if cheater is None else FaultInjector(cheater, "shuffle", delta=1)

    async def party(engine: RoundEngine) -> tuple[np.ndarray, int, int, list[str]]:
        s = await Spdz3.setup(engine, fault=fault)
        (a,) = await s.input(xs[engine.party])
        mixed = await s.shuffle(a)
        before = len(s._macs)
        column = await s.open_of(mixed[:, 0], [mixed])
        return column, before, len(s._macs), s.pending_checks()

    ran = outcomes(3, party)
    if fault is not None:
        assert fault.fired == 1
        honest = [o for i, o in enumerate(ran) if i != cheater]
        assert {o.check for o in honest if isinstance(o, CheatingDetected)} == {"MAC"}, ran
        return
    for column, before, after, pending in ran:  # type: ignore[misc]
        assert sorted(column.tolist()) == list(range(0, 40, 2))
        assert after == before > 0 and "MAC" in pending


def test_verify_refuses_an_unrun_part_of_a_proof_before_it_runs_any_round() -> None:
    """A checkpoint's proof whose first part ran and whose rest was dropped: the verify that
    follows refuses without running a round (an adversarial review found it running the MAC
    check's rounds and the digests round first, the honest servers sending their claims'
    digests to a cheater that had stopped between the parts)."""
    bits = rep3.share(np.arange(64, dtype=U64) * U64(0x9E3779B97F4A7C15), binary=True)
    values = rep3.share(np.arange(8, dtype=U64))

    async def party(engine: RoundEngine) -> object:
        s = await Spdz3.setup(engine)
        (x,) = await s.input(values[engine.party])
        await s.mul(x, x)  # a MAC'd product: the MAC check has records
        b = Shared(bits[engine.party], 1, True)
        await s.and_(b, b)
        rest = await s.checkpoint_later()  # the proof's first part only
        assert rest is not None  # a small proof takes 13 rounds: two parts
        rest.close()  # type: ignore[attr-defined]  # the job stops between parts
        before = engine.rounds
        try:
            await s.verify()
        except RuntimeError as refused:
            assert "checkpoint rounds not run" in str(refused)
            return engine.rounds - before
        return "verify passed"

    ran = outcomes(3, party)
    assert ran == [0, 0, 0], f"rounds a refused verify ran before refusing: {ran}"


def test_a_check_with_both_triples_and_proofs_passes_an_honest_run() -> None:
    """``Spdz3._check`` checks ``ands`` by triples and ``proofs`` by the proof in the same
    rounds: with both (ANDs queued while ``proves_ands`` was off and others while it was on),
    round 2 relays the triple terms' commitment, not the proof's (an adversarial review found
    the proof's relayed in its place, so that an honest run failed its own commitment)."""
    bits = rep3.share(np.arange(64, dtype=U64) * U64(0x9E3779B97F4A7C15), binary=True)

    async def party(engine: RoundEngine) -> object:
        s = await Spdz3.setup(engine)
        b = Shared(bits[engine.party], 1, True)
        s.proves_ands = False
        await s.and_(b, b)  # by triples
        s.proves_ands = True
        await s.and_(b, b)  # by the proof
        rest: Rounds | None = s.checkpoint_later()  # both kinds of records in one check
        while rest is not None:
            rest = await rest
        return "passed"

    ran = outcomes(3, party)
    assert ran == ["passed"] * 3, ran
