"""Layer: client. Sessions with a deployment's servers, and what every client may ask them.

Every server is reached over mutually authenticated TLS with the identity's own certificate
(``--as NAME``). A session sends typed requests (``mpcnet.net.wire``) and gets answers or the
server's own typed error (``AccessDenied``, ``InputError``...), raised here with the server's
name. ``Connections`` keeps one session per server and answers ``status`` and the listings;
the owners' and analysts' operations build on it (``client.uploads``, ``client.jobs``,
``client.results``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

from mpcnet.config import Deployment, ServerConfig
from mpcnet.errors import HandshakeError, MPCError, PeerError
from mpcnet.net import wire
from mpcnet.net.framing import FrameProtocol
from mpcnet.net.tls import client_context, dial


def default_security(dep: Deployment) -> str:
    """passive3 on a three-server deployment, active4 on a four-server one."""
    return "passive3" if len(dep.servers) == 3 else "active4"


class ServerSession:
    """One TLS session with one server."""

    def __init__(self, server: ServerConfig, conn: FrameProtocol, timeout: float) -> None:
        self.server = server
        self.conn = conn
        self.timeout = timeout
        self.info: dict[str, Any] = {}
        self._turn = asyncio.Lock()  # one request and its answer at a time on the connection

    @property
    def name(self) -> str:
        return self.server.name

    @classmethod
    async def open(cls, dep: Deployment, identity: str, server: ServerConfig) -> ServerSession:
        """A session with ``server``: connected, TLS handshake done and hello answered, each
        within ``probe_timeout``, so that a client never waits long on a server that is down
        or frozen (servers wait longer for each other)."""
        cert, key = dep.identity(identity)
        ctx = client_context(dep.ca, cert, key)
        probe = dep.timeouts.probe
        conn = await dial(server.name, server.host, server.port, ctx,
                          max_frame=dep.max_frame_bytes, deadline=time.monotonic() + probe,
                          handshake_timeout=dep.timeouts.handshake, bound="probe_timeout")
        session = cls(server, conn, dep.timeouts.request)
        try:
            conn.send(*wire.encode(wire.ClientHello(identity)))
            session.info = await session._reply(timeout=probe, close=False)
        except HandshakeError:
            raise
        except PeerError as exc:
            if not conn.closed:
                conn.close()
                raise PeerError(f"{conn.label} did not answer the session's hello within "
                                f"{probe} s (probe_timeout in the deployment file bounds the "
                                "wait); is the server overloaded?") from None
            # TLS 1.3 reports a refused client certificate only after the handshake
            raise HandshakeError(
                f"{conn.label} refused the session before answering ({exc}); most likely it "
                f"does not accept the certificate {cert} of {identity!r} (signed by another CA "
                "or expired?). Check the deployment's [tls] files") from None
        return session

    async def _receive(self, timeout: float | None = None
                       ) -> tuple[wire.Message, np.ndarray | None]:
        """The next message; a refusal is raised as the server's typed error."""
        header, body = await self.conn.recv(timeout=timeout or self.timeout)
        message = wire.decode(header, body, self.conn.label)
        if isinstance(message, wire.Refused):
            raise wire.error_of(header, prefix=f"{self.name}: ")
        return message, body

    async def _reply(self, timeout: float | None = None, close: bool = True) -> dict[str, Any]:
        """The answer to the request just sent; if none comes (or the link fails), the session
        is closed (unless not ``close``), so that a late answer is never read as the next
        request's."""
        try:
            message, _ = await self._receive(timeout)
        except PeerError:
            if close:
                self.conn.close()
            raise
        if not isinstance(message, wire.Ok):
            raise PeerError(f"{self.conn.label} answered with an unexpected "
                            f"{type(message).__name__} message")
        return message.fields

    async def request(self, op: str, timeout: float | None = None, **args: Any) -> dict[str, Any]:
        """Send ``op`` and wait for its answer; concurrent callers take turns, so that each
        gets the answer to its own request."""
        async with self._turn:
            self.conn.send(*wire.encode(wire.Request(op, args)))
            return await self._reply(timeout)

    async def send_block(self, name: str, block: np.ndarray, start: int = 0) -> None:
        """Send a named array, or the block of its rows from row ``start`` on."""
        self.conn.send(wire.encode(wire.NamedArray(name, start))[0], block)
        await self.conn.drain()

    async def recv_array(self) -> tuple[str, np.ndarray]:
        message, arr = await self._receive()
        if not isinstance(message, wire.NamedArray) or arr is None:
            raise PeerError(f"{self.conn.label} sent an unexpected frame instead of an array")
        return message.name, arr

    def close(self) -> None:
        self.conn.close()




class Connections:
    """The sessions of identity ``identity`` with the servers of deployment ``dep``."""

    def __init__(self, dep: Deployment, identity: str) -> None:
        self.dep = dep
        self.identity = identity
        dep.identity(identity)  # ConfigError if unknown
        self.sessions: dict[str, ServerSession] = {}

    async def session(self, server: ServerConfig) -> ServerSession:
        """The session with ``server``, opened if need be (within the probe timeout)."""
        s = self.sessions.get(server.name)
        if s is None or s.conn.closed:
            s = await ServerSession.open(self.dep, self.identity, server)
            self.sessions[server.name] = s
        return s

    async def sessions_for(self, servers: list[ServerConfig]) -> list[ServerSession]:
        """Sessions with every one of ``servers``, opened at once; if some cannot be reached,
        the error names them all."""
        got = await asyncio.gather(*(self.session(s) for s in servers), return_exceptions=True)
        failed = [g for g in got if isinstance(g, BaseException)]
        if len(failed) == 1 or any(type(g) is not PeerError for g in failed):
            raise failed[0]  # one server, or a refusal that is no outage (certificate...)
        if failed:
            raise PeerError(f"{len(failed)} servers cannot be reached: "
                            + "; ".join(str(g) for g in failed))
        return list(got)  # type: ignore[arg-type]

    def close(self) -> None:
        for s in self.sessions.values():
            s.close()
        self.sessions.clear()

    # -- status and listings ------------------------------------------------------------------
    async def probe_session(self, server: ServerConfig) -> ServerSession:
        """A fresh, short-lived session (connect within the probe timeout), not kept."""
        return await ServerSession.open(self.dep, self.identity, server)

    async def status(self, only: list[str] | None = None, mesh: bool = True
                     ) -> list[dict[str, Any]]:
        servers = [s for s in self.dep.servers if not only or s.name in only]

        async def one(s: ServerConfig) -> dict[str, Any]:
            try:
                sess = await self.probe_session(s)
                try:
                    r = await sess.request("status", mesh=mesh)
                finally:
                    sess.close()
                ok = all(v == "ok" for v in r.get("mesh", {}).values())
                return {"server": s.name, "address": s.address, "reachable": True,
                        "version": r.get("version"), "mesh": r.get("mesh", {}),
                        "mesh_ok": ok, "running": r.get("running", []),
                        "queued": r.get("queued", 0), "load": r.get("load", {})}
            except MPCError as exc:
                return {"server": s.name, "address": s.address, "reachable": False,
                        "error": str(exc), "mesh_ok": False}
        return list(await asyncio.gather(*(one(s) for s in servers)))

    async def listing(self, op: str) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
        """``op`` (datasets, results, jobs) as answered by each server that answers, and why
        each of the others did not (all asked at once, none waited on past the probe
        timeout)."""
        async def one(s: ServerConfig) -> list[dict[str, Any]]:
            session = await self.session(s)
            answer = await session.request(op, timeout=self.dep.timeouts.probe)
            return answer[op]  # type: ignore[no-any-return]

        got = await asyncio.gather(*(one(s) for s in self.dep.servers), return_exceptions=True)
        answered, missing = {}, {}
        for s, g in zip(self.dep.servers, got, strict=True):
            if type(g) is PeerError:  # unreachable; a refused certificate is raised
                missing[s.name] = str(g)
            elif isinstance(g, BaseException):
                raise g
            else:
                answered[s.name] = g
        return answered, missing

