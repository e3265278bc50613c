"""Layer: network. The round engine: one exchange per protocol round, with metrics.

Protocol code never touches a channel directly. It calls ``exchange`` once per round with at
most one array per peer (queue, exchange once, finalise: the batched style of MP-SPDZ), and the
engine counts rounds and bytes per peer, split by named phase, for every job.

Independent computations (the blocks of a large job) can share rounds: ``together`` runs them in
lockstep, so that their r-th exchanges travel as one message per peer (``mpcnet.net.bundle``)
and a round costs one latency for all of them (docs/design.md, "Rounds that do not grow with
the data").
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from mpcnet.errors import PeerError
from mpcnet.net import bundle
from mpcnet.net.channel import Channel

T = TypeVar("T")


@dataclass
class PhaseMetrics:
    """Rounds, bytes and wall time spent in one phase of a job."""

    rounds: int = 0
    bytes_sent: dict[int, int] = field(default_factory=dict)
    bytes_recv: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def total_sent(self) -> int:
        return sum(self.bytes_sent.values())

    def as_dict(self) -> dict[str, object]:
        return {"rounds": self.rounds, "bytes_sent": self.total_sent,
                "bytes_recv": sum(self.bytes_recv.values()), "seconds": round(self.seconds, 4),
                "bytes_sent_per_peer": {str(k): v for k, v in sorted(self.bytes_sent.items())}}


@dataclass
class _Request:
    """One member's exchange, waiting for the group's round."""

    sends: dict[int, np.ndarray]
    sources: list[int]
    answer: asyncio.Future[dict[int, np.ndarray]]


class _Group:
    """The members of one ``together`` call: who is still running, who waits for a round."""

    def __init__(self, size: int) -> None:
        self.running = set(range(size))
        self.waiting: dict[int, _Request] = {}
        self.wake = asyncio.Event()

    def ready(self) -> bool:
        """Every running member waits: their round can go."""
        return bool(self.running) and len(self.waiting) == len(self.running)


_MEMBER: contextvars.ContextVar[tuple[_Group, int] | None] = contextvars.ContextVar(
    "mpcnet_round_member", default=None)
"""The group and index of the ``together`` member the current task runs, if any."""


class RoundEngine:
    """Runs protocol rounds over a channel and records what they cost."""

    def __init__(self, channel: Channel, round_timeout: float | None = None) -> None:
        self.channel = channel
        self.party = channel.party
        self.n_parties = channel.n_parties
        self.round_timeout = round_timeout
        self.phases: dict[str, PhaseMetrics] = {}
        self._phase = "setup"
        self._since = time.perf_counter()

    @property
    def peers(self) -> list[int]:
        return [p for p in range(self.n_parties) if p != self.party]

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Attribute the rounds, bytes and wall time of the enclosed block to ``name``; time in
        a phase nested inside it counts for the inner phase only, so a phase entered twice
        (an operation that names its own phase, called within it) is not counted twice."""
        previous, self._phase = self._phase, name
        self.phases.setdefault(name, PhaseMetrics())
        self._charge(previous)
        try:
            yield
        finally:
            self._charge(name)
            self._phase = previous

    def _charge(self, name: str) -> None:
        """Add the time since the last phase change to phase ``name``."""
        now = time.perf_counter()
        self.phases.setdefault(name, PhaseMetrics()).seconds += now - self._since
        self._since = now

    @property
    def current_phase(self) -> str:
        """The phase the job is in now (for progress reports)."""
        return self._phase

    @property
    def rounds(self) -> int:
        return sum(m.rounds for m in self.phases.values())

    @property
    def bytes_sent(self) -> int:
        return sum(m.total_sent for m in self.phases.values())

    def report(self) -> dict[str, object]:
        """Per-phase and total figures (never any value, only counts and times)."""
        return {"phases": {k: v.as_dict() for k, v in self.phases.items()},
                "rounds": self.rounds, "bytes_sent": self.bytes_sent}

    async def exchange(self, sends: Mapping[int, np.ndarray],
                       recv_from: Iterable[int]) -> dict[int, np.ndarray]:
        """One round: send one array to each peer in ``sends``, receive one from each peer in
        ``recv_from``. Raises ``PeerError`` naming the peer if it does not answer in time.
        Within ``together``, the round waits for the other members' and travels with them."""
        member = _MEMBER.get()
        if member is None:
            return await self._round(sends, recv_from)
        group, index = member
        answer: asyncio.Future[dict[int, np.ndarray]] = (
            asyncio.get_running_loop().create_future())
        group.waiting[index] = _Request(dict(sends), list(recv_from), answer)
        if group.ready():
            group.wake.set()
        return await answer

    def alone(self, what: str) -> None:
        """Refuse ``what`` inside ``together``. Refused there: a scheme's checks
        (``verify``, ``checkpoint``, a check of inputs noted before) and coins (spdz3's
        ``output_matmul``: Freivalds' vector), which must draw their randomness after every
        value they test is fixed while the other members still compute (a checkpoint's rounds
        may join a group only through ``Scheme.checkpoint_later``, which fixes what they test
        before the group; ``Scheme.input`` may, since it checks the sharings it makes before
        anyone holds them); and the openings of
        results (``open``, ``open_binary`` of spdz3 and rep4, spdz3's ``output``), which run
        those checks first (rep4's ``output`` only when inputs are pending: its ``verify`` is
        the input check alone). Allowed: ``open_masked`` (``b2a_masked``'s w - r, a perfect
        truncation's x + r), which reveals a value masked uniformly over the ring and so
        nothing of the data, whatever a cheater or the other members do; rep4 vouches for it
        in its own round (the second holder's digest), spdz3 leaves its MAC records to the
        job's next ``verify``. rep3 (passive) has no checks and guards nothing."""
        if _MEMBER.get() is not None:
            raise RuntimeError(f"party {self.party}: {what} inside RoundEngine.together; run "
                               "checks and openings after the group")

    async def together(self, *jobs: Awaitable[T]) -> list[T]:
        """Run independent computations in lockstep and return their results in order: the
        r-th exchange of every member still running travels in one message per peer, so the
        group costs as many rounds as its longest member, not their sum.

        Every party must pass the same members in the same order, and a member may await
        nothing but this engine's exchanges (no sleeps, no other tasks, no phases of its
        own, no checks, coins or unmasked openings: ``alone``): after each round the members
        resume one after another in their order, each until its next exchange, so their local
        steps (a scheme's correlated randomness, its queued check records) happen in the same
        order at every party. The first member to fail cancels the others and its error is
        raised."""
        if not jobs:
            return []
        group = _Group(len(jobs))

        async def member(index: int, job: Awaitable[T]) -> T:
            _MEMBER.set((group, index))
            try:
                return await job
            finally:
                group.running.discard(index)
                group.wake.set()

        tasks = [asyncio.ensure_future(member(i, job)) for i, job in enumerate(jobs)]
        try:
            while group.running:
                await group.wake.wait()
                group.wake.clear()
                for t in tasks:
                    error = t.exception() if t.done() and not t.cancelled() else None
                    if error is not None:
                        raise error
                if group.ready():  # in a member's task, the round goes through its group
                    requests, group.waiting = group.waiting, {}
                    answers = await self._group_round(requests)
                    for index in sorted(requests):  # resumed in member order
                        requests[index].answer.set_result(answers[index])
            return [t.result() for t in tasks]
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def staggered(self, *jobs: Awaitable[T]) -> list[T]:
        """``together`` with member i starting i rounds after the first (``idle`` rounds
        before it): the r-th round of member i travels with the (r + 1)-th of member i - 1,
        so n members of L rounds each cost n - 1 + L rounds, and only about L of them are
        in flight at once (a large job's blocks: docs/design.md, "Rounds that do not grow
        with the data"). A member is not started before its turn, so it holds nothing
        until then."""
        return await self.together(*(self._after(i, job) for i, job in enumerate(jobs)))

    async def _after(self, rounds: int, job: Awaitable[T]) -> T:
        for _ in range(rounds):
            await self.idle()
        return await job

    async def idle(self) -> None:
        """Sit out one round of the ``together`` group the current task is a member of (a
        round in which no member sends anything costs nothing); nothing outside a group."""
        if _MEMBER.get() is not None:
            await self.exchange({}, [])

    async def _group_round(self, requests: dict[int, _Request]) -> dict[int, dict[int, np.ndarray]]:
        """The one round of the waiting members: to each peer a bundle of the arrays the
        members send it (tagged with the member's index), and from each peer the bundle of
        what it sends the members that expect it. A lone member's round is not bundled (both
        ends know the group's size). A round in which nobody sends or receives is free."""
        peers = sorted({p for r in requests.values() for p in r.sends})
        sources = sorted({p for r in requests.values() for p in r.sources})
        answers: dict[int, dict[int, np.ndarray]] = {i: {} for i in requests}
        if not peers and not sources:  # inside another group's member, the outer round
            await self.idle()  # goes on too (its other members may be what this one awaits)
            return answers
        if len(requests) == 1:
            ((index, only),) = requests.items()
            return {index: await self.exchange(only.sends, only.sources)}
        sends = {p: bundle.pack({i: r.sends[p] for i, r in sorted(requests.items())
                                 if p in r.sends}) for p in peers}
        got = await self.exchange(sends, sources)
        for peer in sources:
            parts = bundle.unpack(got[peer], f"party {peer}")
            expected = sorted(i for i, r in requests.items() if peer in r.sources)
            if sorted(parts) != expected:
                raise PeerError(f"party {self.party}: party {peer} sent arrays of computations "
                                f"{sorted(parts)} in a round where {expected} expected one; "
                                "check that every server runs the same mpcnet version and job")
            for index, array in parts.items():
                answers[index][peer] = array
        return answers

    async def _round(self, sends: Mapping[int, np.ndarray],
                     recv_from: Iterable[int]) -> dict[int, np.ndarray]:
        """One round on the channel, counted in the current phase."""
        metrics = self.phases.setdefault(self._phase, PhaseMetrics())
        metrics.rounds += 1
        sources = list(recv_from)
        for peer, payload in sends.items():
            metrics.bytes_sent[peer] = metrics.bytes_sent.get(peer, 0) + payload.nbytes
            await self.channel.send(peer, payload)
        out: dict[int, np.ndarray] = {}
        try:
            async with asyncio.timeout(self.round_timeout):
                for peer in sources:  # each peer's messages queue independently
                    out[peer] = await self.channel.recv(peer)
        except TimeoutError as exc:
            missing = [p for p in sources if p not in out]
            raise PeerError(f"party {self.party}: no answer within {self.round_timeout} s in "
                            f"phase {self._phase!r} from parties {missing}; check that every "
                            "server is running and reachable") from exc
        for peer, payload in out.items():
            metrics.bytes_recv[peer] = metrics.bytes_recv.get(peer, 0) + payload.nbytes
        return out

    async def broadcast(self, payload: np.ndarray) -> dict[int, np.ndarray]:
        """Send the same array to every peer and receive one from each."""
        return await self.exchange({p: payload for p in self.peers}, self.peers)
