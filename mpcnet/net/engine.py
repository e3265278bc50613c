"""Layer: network. The round engine: one exchange per protocol round, with metrics.

Protocol code never touches a channel directly. It calls ``exchange`` once per round with at
most one array per peer (queue, exchange once, finalise: the batched style of MP-SPDZ), and the
engine counts rounds and bytes per peer, split by named phase, for every job.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from mpcnet.errors import PeerError
from mpcnet.net.channel import Channel


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
        ``recv_from``. Raises ``PeerError`` naming the peer if it does not answer in time."""
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
