"""Layer: server. The connections between servers: probes, and one mesh of TLS links per job.

Party i dials every party j > i for a job, so every pair has exactly one connection per job and
frames of two jobs never mix. The coordinator (party 0) dials the members with the job's
specification; a member dials the parties above it and waits for those below it, whose
connections arrive as peer hellos and are parked here until the job claims them. A parked
connection nobody claims in time (its job failed before joining, or never ran here) is
dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from mpcnet.config import Deployment
from mpcnet.errors import HandshakeError, MPCError, PeerError
from mpcnet.net import wire
from mpcnet.net.framing import FrameProtocol
from mpcnet.net.tls import TLSChannel, describe, dial
from mpcnet.parties.peers import PeerStates

log = logging.getLogger("mpcnet.party")


class Mesh:
    """This server's side of the connections to the other servers."""

    def __init__(self, dep: Deployment, name: str, client_ctx: Any) -> None:
        self.dep, self.name, self.ctx = dep, name, client_ctx
        self.party = dep.party(name)
        self.t = dep.timeouts
        self._parked: dict[tuple[str, int], asyncio.Future[FrameProtocol]] = {}
        self.peers = PeerStates([s.name for s in dep.servers if s.name != name])

    @property
    def parked(self) -> int:
        return len(self._parked)

    async def dial(self, peer: int, hello: wire.PeerHello, probe: bool = False
                   ) -> FrameProtocol:
        """A connection to server ``peer`` that answered ``hello`` with ok (its refusal is
        raised as the error it reported), within ``connect_timeout`` (``probe_timeout`` for a
        reachability ``probe``)."""
        s = self.dep.servers[peer]
        wait, bound = ((self.t.probe, "probe_timeout") if probe
                       else (self.t.connect, "connect_timeout"))
        try:
            conn = await dial(s.name, s.host, s.port, self.ctx,
                              max_frame=self.dep.max_frame_bytes,
                              deadline=time.monotonic() + wait,
                              handshake_timeout=min(self.t.handshake, wait), bound=bound)
            conn.send(*wire.encode(hello))
            try:
                header, body = await conn.recv(timeout=min(self.t.handshake, wait))
                reply = wire.decode(header, body, conn.label)
            except PeerError:
                conn.close()
                raise
        except PeerError as exc:
            self.peers.seen(s.name, "refused" if isinstance(exc, HandshakeError) else "down",
                            str(exc))
            raise
        self.peers.seen(s.name, "up")  # it answered, even if to refuse
        if isinstance(reply, wire.Refused):
            conn.close()
            raise wire.error_of(header, prefix=f"{s.name} refused: ")
        return conn

    async def reachability(self) -> dict[str, str]:
        """Every other server: "ok" or why it cannot be reached (``status``)."""
        async def one(i: int) -> tuple[str, str]:
            s = self.dep.servers[i]
            try:
                conn = await asyncio.wait_for(
                    self.dial(i, wire.PeerHello(self.name, probe=True), probe=True),
                    self.t.probe + 1.0)
                conn.close()
                return s.name, "ok"
            except (MPCError, TimeoutError) as exc:
                return s.name, str(exc) or f"no answer within {self.t.probe} s"
        return dict(await asyncio.gather(*(one(i) for i in range(len(self.dep.servers))
                                           if i != self.party)))

    # -- parked connections of a job ----------------------------------------------------------
    def park(self, job: str, peer: int, conn: FrameProtocol) -> None:
        """A lower party's connection for ``job``: kept until the job joins its mesh."""
        fut = self._future(job, peer)
        if fut.done():
            raise PeerError(f"{conn.label}: second connection for job {job}")
        fut.set_result(conn)
        asyncio.get_running_loop().create_task(self._expire(job, peer))

    def _future(self, job: str, peer: int) -> asyncio.Future[FrameProtocol]:
        key = (job, peer)
        if key not in self._parked:
            self._parked[key] = asyncio.get_running_loop().create_future()
        return self._parked[key]

    async def _expire(self, job: str, peer: int) -> None:
        await asyncio.sleep(self.t.connect + self.t.handshake)
        fut = self._parked.pop((job, peer), None)
        if fut is not None and fut.done() and not fut.cancelled():
            conn = fut.result()
            if not conn.closed:
                log.info("%s: dropping its unclaimed connection for job %s", conn.label, job)
            conn.close()

    # -- forming a job's mesh -----------------------------------------------------------------
    async def start(self, job: str, spec: dict[str, Any], n_parties: int
                    ) -> dict[int, FrameProtocol]:
        """The coordinator: dial every member with the job's specification. Every member is
        dialed even when one refuses (each then records the job and why); the first refusal
        is raised after closing the others."""
        members = range(1, n_parties)
        got = await asyncio.gather(
            *(self.dial(p, wire.PeerHello(self.name, job, spec)) for p in members),
            return_exceptions=True)
        conns = {p: c for p, c in zip(members, got, strict=True)
                 if isinstance(c, FrameProtocol)}
        errors = [c for c in got if isinstance(c, BaseException)]
        if errors:
            TLSChannel(self.party, n_parties, job, conns).abort(str(errors[0]))
            raise errors[0]
        return conns

    async def join(self, job: str, n_parties: int, leader: FrameProtocol
                   ) -> dict[int, FrameProtocol]:
        """A member: dial the parties above, wait for those below (the coordinator's own
        connection is ``leader``). On failure every connection made is closed."""
        conns: dict[int, FrameProtocol] = {0: leader}
        higher, lower = range(self.party + 1, n_parties), range(1, self.party)
        try:
            dialed, waited = await asyncio.gather(
                asyncio.gather(*(self.dial(p, wire.PeerHello(self.name, job)) for p in higher),
                               return_exceptions=True),
                asyncio.gather(*(asyncio.wait_for(self._future(job, p),
                                                  self.t.connect + self.t.handshake)
                                 for p in lower), return_exceptions=True))
            pairs = [*zip(higher, dialed, strict=True), *zip(lower, waited, strict=True)]
            conns.update({p: c for p, c in pairs if isinstance(c, FrameProtocol)})
            for p, c in pairs:
                if isinstance(c, TimeoutError):
                    s = self.dep.servers[p]
                    raise PeerError(f"{describe(s.name, s.host, s.port)} did not join job "
                                    f"{job} within {self.t.connect:.0f} s; is it running?")
                if isinstance(c, BaseException):
                    raise c
        except MPCError as exc:
            TLSChannel(self.party, n_parties, job, conns).abort(str(exc))
            raise
        finally:
            for p in range(n_parties):
                self._parked.pop((job, p), None)
        return conns
