"""mpcnet.schemes.spdz3: an active3 cheater cannot know the AND check's coin before it sends
its last AND message of the checked batch (an adversarial review's question); why:

The AND messages are not committed by a digest, but each one is fixed by its receiver: the
record of an AND (``Spdz3.and_``) is queued only once the reshare's message has arrived, and a
batch is taken (``checkpoint_later``, ``verify``) outside ``RoundEngine.together``
(``alone``), so the receiver holds every message of the batch before its check starts. The coin
needs the word of the honest pair's key, which only the two honest servers send, each in round
2 of the check, each only once it holds both neighbours' round-1 messages. The cheater's AND
messages all go to its previous neighbour B, and B sends its round-1 message only after its
batch is complete, so the chain "the cheater's last AND message of the batch -> B's round 1 ->
A's round 2 (coin)" holds whatever the cheater does; an in-order channel gives the cheater no
way to skip a message either (whatever it sends B next is read as the AND message).

- ``WithholdsLastAnd`` plays the attack: it sends its last AND message of the batch only once
  it has the coin, and never gets it (both honest servers stop with a timeout, nothing wrong
  is accepted).
- Beside the next block (``checkpoint_later`` in ``together``) a cheater does see the coin
  before some of its AND messages, as expected: those belong to the next batch. An error put
  into the first of them, after the coin, is caught by the next check, not passed by this one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np

from mpcnet.errors import CheatingDetected, MPCError
from mpcnet.net.engine import RoundEngine
from mpcnet.net.loopback import loopback_mesh
from mpcnet.schemes import rep3
from mpcnet.schemes.base import Shared, all_rounds
from mpcnet.schemes.faults import FaultInjector
from mpcnet.schemes.spdz3 import Spdz3

U64 = np.uint64
ROUND_TIMEOUT = 1.0  # the honest servers' wait per round (s)


def _bits(seed: int, count: int, words: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [rep3.share(rng.integers(0, 2**63, words, dtype=np.int64).view(U64), binary=True)
            for _ in range(count)]


class WithholdsLastAnd(Spdz3):
    """Party 0: its first AND honest; its second (the batch's last) it receives but does not
    send, then plays the check's round 1 towards party 1 only (anything sent to party 2, the
    receiver of its AND messages, would be read as the withheld one) and waits for party 1's
    round 2, the coin word of the key parties 1 and 2 share. Had it arrived, the cheater could
    choose the withheld message knowing every pool's shift and the cut."""

    saw_coin: bool | None = None
    made = 0  # ANDs made so far

    async def and_(self, x: Shared, y: Shared) -> Shared:
        self.made += 1
        if self.made == 1:
            return await super().and_(x, y)
        a, b = np.broadcast_arrays(x.data, y.data)
        out = self._and_terms(a, b)
        got = await self.engine.channel.recv(self.next_party)  # party 1's AND message
        out[1] = np.asarray(got).reshape(out[0].shape)
        self._ands.append((a.reshape(2, -1), b.reshape(2, -1), out.reshape(2, -1)))
        return Shared(out, 1, True)

    async def _check(self, ands: list, sums: np.ndarray | None, proofs: object = None,
                     digests: bool = True) -> AsyncIterator[int]:
        yield 4  # its rounds, announced as Spdz3._check does
        ch, nxt = self.engine.channel, self.next_party
        triples = self._triple_terms(ands)
        assert triples is not None
        salt_out = self._prev.words(4).tobytes()
        self._next.words(4)  # the salt of the terms it would receive, as an honest server
        await ch.send(nxt, self._commitment(salt_out, triples[2][0]))  # round 1, forward
        try:
            await asyncio.wait_for(ch.recv(nxt), 2 * ROUND_TIMEOUT)  # party 1's round 1
            await asyncio.wait_for(ch.recv(nxt), 2 * ROUND_TIMEOUT)  # party 1's coin word
            type(self).saw_coin = True
        except TimeoutError:
            type(self).saw_coin = False
        raise RuntimeError("the cheater gives up: no coin before its last AND message")


class EagerCoin(Spdz3):
    """A broken honest party 1 (the positive control): in the check's round 2 it sends its
    coin word to party 0 as soon as it holds party 0's round-1 message, not waiting for party
    2's (the rule ``Spdz3._check`` keeps). Only for the control: it shows the withholding
    cheater gets the coin exactly when that rule is broken."""

    async def _check(self, ands: list, sums: np.ndarray | None, proofs: object = None,
                     digests: bool = True) -> AsyncIterator[int]:
        yield 4
        ch, nxt, prv = self.engine.channel, self.next_party, self.prev_party
        triples = self._triple_terms(ands)
        assert triples is not None
        salt_out = self._prev.words(4).tobytes()
        self._next.words(4)
        await ch.send(prv, np.ascontiguousarray(triples[2][0]).reshape(-1))
        await ch.send(nxt, self._commitment(salt_out, triples[2][0]))
        await ch.recv(prv)  # party 0's round 1
        await ch.send(prv, self._next.words(2))  # the coin word of the key shared with 2
        await asyncio.wait_for(ch.recv(nxt), ROUND_TIMEOUT)  # party 2's round 1: never


def _withholding(honest_one: type[Spdz3]) -> list[object]:
    x, y = _bits(7, 2, 3)

    async def party(engine: RoundEngine) -> object:
        cls = {0: WithholdsLastAnd, 1: honest_one}.get(engine.party, Spdz3)
        s = await cls.setup(engine)
        a, b = Shared(x[engine.party], 1, True), Shared(y[engine.party], 1, True)
        z = await s.and_(a, b)
        z = await s.and_(z, b)  # the batch's last AND
        await s.checkpoint()
        return await s.open_binary(z)

    async def main() -> list[object]:
        engines = [RoundEngine(ch, round_timeout=ROUND_TIMEOUT) for ch in loopback_mesh(3)]
        return list(await asyncio.gather(*(party(e) for e in engines), return_exceptions=True))

    WithholdsLastAnd.saw_coin = None
    return asyncio.run(main())


def test_a_cheater_withholding_its_last_and_message_until_the_coin_never_gets_the_coin(
        ) -> None:
    outcomes = _withholding(Spdz3)
    assert WithholdsLastAnd.saw_coin is False, outcomes  # the attack ran and got no coin
    assert all(isinstance(o, MPCError) for o in outcomes[1:]), outcomes  # nothing accepted
    assert not any(isinstance(o, np.ndarray) for o in outcomes)


def test_the_withholding_cheater_gets_the_coin_from_a_server_that_does_not_wait() -> None:
    """The positive control: the same cheater against ``EagerCoin`` reads the coin before it
    has sent its last AND message, so the test above can fail."""
    _withholding(EagerCoin)
    assert WithholdsLastAnd.saw_coin is True


class AndErrorAfterCoin(FaultInjector):
    """Party ``party`` flips bit 0 of its first AND message sent after it has seen a check's
    coin (in place, so its own copy agrees), and records the order of what it saw."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.events: list[str] = []

    def observe(self, party: int, event: str, value: object) -> None:
        if party == self.party and event == "coin":
            self.events.append("coin")

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if party == self.party and kind == "and":
            if "coin" in self.events and not self.fired:
                self.fired += 1
                payload.reshape(-1)[0] ^= U64(1)
                self.events.append("and, changed")
            else:
                self.events.append("and")
        return payload


def _blocks_beside(fault: FaultInjector) -> tuple[list[object], set[int]]:
    """Block 1 (two ANDs), its checkpoint's rounds beside block 2 (a chain of eight ANDs),
    then ``verify``; which parties got past block 1's check."""
    x, y = _bits(11, 2, 4)
    past_first: set[int] = set()

    async def party(engine: RoundEngine) -> object:
        s = await Spdz3.setup(engine, fault=fault)
        a, b = Shared(x[engine.party], 1, True), Shared(y[engine.party], 1, True)
        await s.and_(await s.and_(a, b), a)
        check = s.checkpoint_later()

        async def second() -> Shared:
            z = b
            for _ in range(8):
                z = await s.and_(z, a)
            return z

        _, z = await engine.together(all_rounds(check), second())
        past_first.add(engine.party)
        return await s.open_binary(z)

    async def main() -> list[object]:
        engines = [RoundEngine(ch, round_timeout=5) for ch in loopback_mesh(3)]
        return list(await asyncio.gather(*(party(e) for e in engines), return_exceptions=True))

    return asyncio.run(main()), past_first


def test_beside_the_next_block_an_and_error_chosen_after_the_coin_is_caught_by_the_next_check(
        ) -> None:
    for cheater in range(3):
        fault = AndErrorAfterCoin(cheater, "and")
        outcomes, past_first = _blocks_beside(fault)
        events = fault.events
        assert fault.fired == 1, events
        # the cheater had the first check's coin before some AND messages: of block 2 only
        assert events[:2] == ["and", "and"] and "coin" in events[2:events.index("and, changed")]
        assert past_first == {0, 1, 2}, outcomes  # block 1's check passed: not its error
        honest = [o for i, o in enumerate(outcomes) if i != cheater]
        assert all(isinstance(o, CheatingDetected) and o.check == "AND" for o in honest), outcomes


def test_without_a_cheater_both_blocks_open_correctly() -> None:
    x, y = _bits(11, 2, 4)
    expected = y[0][0] ^ y[1][0] ^ y[2][0]
    a = x[0][0] ^ x[1][0] ^ x[2][0]
    for _ in range(8):
        expected = expected & a
    outcomes, past_first = _blocks_beside(FaultInjector(0, "and", times=0))
    assert past_first == {0, 1, 2}
    for out in outcomes:
        np.testing.assert_array_equal(out, expected)
