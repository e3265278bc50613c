"""Layer: server. One MPC server: the TLS listener, who is calling, and the life of its jobs.

One TLS port serves both peers and clients; the certificate names who calls
(``mpcnet.identity``): a server of the deployment is a peer, a client has its configured role.
The first frame of every connection is a hello (``mpcnet.net.wire``): a ``ClientHello`` opens
a session (``parties.session``); a ``PeerHello`` is a reachability probe, the coordinator
starting a job with its specification, or another server joining a job's mesh
(``parties.mesh``).

Jobs are coordinated by the first server of the deployment file: analysts send their signed
requests to it; it queues them (one at a time, so every server runs jobs in one order) and
starts each by dialing the others with the job's specification. Every server checks the job
against the request and its own copy of the dataset (``parties.jobs``), joins the mesh, runs
its part (``parties.runner``) and records how it ended. A server that fails or loses a peer
stops the job, tells its peers why, and records the error naming the server.

Logs name this server on every line and carry events, names, shapes and figures only: never a
share, a key or a value.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from mpcnet import __version__
from mpcnet.config import NAME_RE, Deployment
from mpcnet.errors import AccessDenied, HandshakeError, MPCError, PeerError
from mpcnet.identity import Identity
from mpcnet.jobrequest import load_ca
from mpcnet.net import wire
from mpcnet.net.framing import FrameProtocol
from mpcnet.net.tls import client_context, describe, server_context
from mpcnet.parties.jobs import Job, JobBook
from mpcnet.parties.logs import event
from mpcnet.parties.mesh import Mesh
from mpcnet.parties.metrics import duration, failed_check
from mpcnet.parties.runner import JobRunner, Runtime
from mpcnet.parties.session import ClientSession
from mpcnet.parties.storage import Storage

log = logging.getLogger("mpcnet.party")


class PartyServer:
    """The server called ``name`` in deployment ``dep``, running jobs on ``runtime``."""

    MAX_CONNECTIONS = 512  # beyond this, new connections are dropped at once (floods)

    def __init__(self, dep: Deployment, name: str, runtime: Runtime | None = None) -> None:
        self.dep, self.name = dep, name
        self.me = dep.server(name)
        self.party = dep.party(name)
        self.storage = Storage(self.me.data_dir)
        self.server_ctx = server_context(dep.ca, self.me.cert, self.me.key)
        self.jobs = JobBook(dep, name, self.storage, load_ca(dep.ca))
        self.mesh = Mesh(dep, name, client_context(dep.ca, self.me.cert, self.me.key))
        self.runner = JobRunner(dep, name, self.storage, runtime or Runtime())
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self.stopped = asyncio.Event()
        self._ended: dict[str, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.AbstractServer | None = None
        self._open = 0

    @property
    def is_coordinator(self) -> bool:
        return self.party == 0

    # -- life cycle ------------------------------------------------------------------------
    async def start(self) -> None:
        self.storage.open()
        self.jobs.load()
        t = self.dep.timeouts
        try:
            self._server = await asyncio.get_running_loop().create_server(
                self._protocol, self.me.bind, self.me.port, ssl=self.server_ctx,
                ssl_handshake_timeout=t.handshake, reuse_address=True)
        except OSError as exc:
            raise PeerError(f"{self.name}: cannot listen on {self.me.bind}:{self.me.port} "
                            f"({exc.strerror}); is another server using the port?") from None
        if self.is_coordinator:
            self._spawn(self._worker())
        role = "coordinator" if self.is_coordinator else "member"
        log.info("listening on %s:%d as party %d of %d (%s); data in %s", self.me.bind,
                 self.me.port, self.party, len(self.dep.servers), role, self.me.data_dir,
                 extra=event("server.listening", bind=self.me.bind, port=self.me.port,
                             party=self.party, role=role))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        self.storage.close()
        self.stopped.set()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def load(self) -> dict[str, int]:
        """Open connections, live tasks, parked mesh connections and resident memory: what a
        failed job or a hostile client could leak (``status`` reports it)."""
        import psutil

        return {"connections": self._open, "tasks": len(self._tasks),
                "parked": self.mesh.parked, "rss": psutil.Process().memory_info().rss}

    # -- jobs ------------------------------------------------------------------------------
    def ended(self, job_id: str) -> asyncio.Event:
        """Set once job ``job_id`` has ended here (``job`` requests long-poll on it)."""
        return self._ended.setdefault(job_id, asyncio.Event())

    def view(self, job: Job) -> dict[str, Any]:
        return job.view(self.runner.progress(job.id))

    def submit(self, wire_request: Any, analyst: str, kind: str = "select") -> Job:
        """Coordinator: queue the job of an analyst's signed request of ``kind``."""
        job = self.jobs.submit(wire_request, analyst, kind)
        self.queue.put_nowait(job)
        log.info("job %s queued by %s: %s %s on %s, k=%d, %s -> result %s", job.id, analyst,
                 job.kind, job.score, job.dataset, job.k, job.security, job.result,
                 extra=event("job.queued", job=job.id, kind=job.kind, security=job.security,
                             analyst=analyst, queued=self.queue.qsize()))
        return job

    def spec_of(self, job: Job) -> dict[str, Any]:
        """What the coordinator sends the members to start ``job``."""
        return job.spec()

    async def _worker(self) -> None:
        """Coordinator: run queued jobs one at a time."""
        while True:
            job = await self.queue.get()
            try:
                await self.lead(job)
            except Exception:  # noqa: BLE001 - the queue must survive any job
                log.exception("job %s: internal error", job.id)

    async def lead(self, job: Job) -> None:
        """Coordinator: start ``job`` on every member, then run it."""
        try:
            self.jobs.before_start(job)
            self.jobs.start(job)
            conns = await self.mesh.start(job.id, self.spec_of(job), job.n_parties)
        except MPCError as exc:
            self._end(job, f"{type(exc).__name__}: {exc}", None)
            return
        await self.run(job, conns)

    async def _follow(self, job: Job, leader: FrameProtocol) -> None:
        """Member: join the job's mesh, then run it."""
        try:
            conns = await self.mesh.join(job.id, job.n_parties, leader)
        except MPCError as exc:
            self._end(job, f"{type(exc).__name__}: {exc}", None)
            return
        await self.run(job, conns)

    async def run(self, job: Job, conns: dict[int, FrameProtocol]) -> None:
        """This server's part of ``job`` on its mesh, and the record of how it ended."""
        peers = sorted(c.peer_name or "?" for c in conns.values())
        log.info("job %s running with %s", job.id, ", ".join(peers),
                 extra=event("job.running", job=job.id, kind=job.kind, security=job.security,
                             peers=peers))
        error, figures = await self.runner.run(job, conns)
        self._end(job, error, figures)

    def _end(self, job: Job, error: str | None, figures: dict[str, Any] | None) -> None:
        self.jobs.finish(job, error, figures)
        if error:
            log.warning("job %s failed: %s", job.id, error, extra=event(
                "job.failed", job=job.id, kind=job.kind, security=job.security, error=error,
                check=failed_check(job), seconds=duration(job)))
        self.ended(job.id).set()

    # -- connections -----------------------------------------------------------------------
    def _protocol(self) -> FrameProtocol:
        proto = FrameProtocol(0, "incoming connection")  # no array before the hello
        self._spawn(self._handle(proto))
        return proto

    async def _handle(self, conn: FrameProtocol) -> None:
        t = self.dep.timeouts
        self._open += 1
        try:
            await asyncio.wait_for(conn.connected, t.handshake)
            if self._open > self.MAX_CONNECTIONS:
                raise PeerError(f"{self._open} open connections; dropping one from "
                                f"{conn.address}")
            conn.set_label(f"connection from {conn.address}")
            header, body = await conn.recv(timeout=t.handshake)
            hello = wire.decode(header, body, conn.label)
            if not isinstance(hello, wire.ClientHello | wire.PeerHello):
                raise PeerError(f"{conn.label}: expected a hello, got {header.get('k')!r}")
            who = conn.peer_identity()
            conn.set_max_body(self.dep.max_frame_bytes)  # the other end waits for our answer
            if isinstance(hello, wire.PeerHello):
                await self._peer(conn, hello, who)
            else:
                await self._client(conn, hello, who)
        except HandshakeError as exc:
            fields = event("connection.refused", address=conn.address, reason=str(exc))
            if conn.closed:  # TLS refused the certificate
                log.info("%s: %s", conn.label, exc, extra=fields)
            else:  # a certificate that does not match the identity claimed: say so
                log.warning("%s refused: %s", conn.label, exc, extra=fields)
                self._refuse(conn, exc)
            conn.close()
        except (PeerError, TimeoutError) as exc:
            if not conn.closed or not str(exc).endswith("(see its log)"):
                log.info("%s: %s", conn.label, str(exc) or f"no TLS session within "
                         f"{t.handshake} s (the handshake failed or timed out)")
            conn.close()
        except MPCError as exc:
            log.warning("%s refused: %s", conn.label, exc, extra=event(
                "connection.refused", address=conn.address, reason=str(exc)))
            self._refuse(conn, exc)
            conn.close()
        except asyncio.CancelledError:
            conn.close()
            raise
        except Exception:  # noqa: BLE001 - a bug must not take the server down
            log.exception("internal error on %s", conn.label)
            conn.close()
        finally:
            self._open -= 1

    @staticmethod
    def _refuse(conn: FrameProtocol, exc: MPCError) -> None:
        with contextlib.suppress(PeerError):
            conn.send(*wire.encode(wire.Refused(exc)))

    async def _peer(self, conn: FrameProtocol, hello: wire.PeerHello, who: Identity) -> None:
        frm = hello.sender
        if frm != who.name or not self.dep.is_server(frm):
            raise HandshakeError(f"{conn.label}: certificate of {who.name!r} does not belong "
                                 f"to a server of this deployment (claimed {frm!r})")
        if not who.serves:
            raise HandshakeError(f"{conn.label}: the certificate named {frm!r} is a client "
                                 "certificate (no TLS server usage); only the deployment's "
                                 "servers, with certificates from mpc-certs, join jobs")
        peer = self.dep.party(frm)
        self.mesh.peers.seen(frm, "up")
        conn.set_label(describe(frm, conn.address.rsplit(":", 1)[0], self.dep.server(frm).port))
        conn.peer_name = frm
        if hello.probe:
            conn.send(*wire.encode(wire.Ok({"server": self.name, "version": __version__})))
            conn.close()
            return
        if hello.job is None or not NAME_RE.fullmatch(hello.job) or peer == self.party:
            raise PeerError(f"{conn.label}: malformed peer hello")
        if hello.spec is not None:
            if peer != 0:
                raise AccessDenied(f"{frm} is not the coordinator; only "
                                   f"{self.dep.leader.name} starts jobs")
            job = self.jobs.accept(hello.spec)
            log.info("job %s started by the coordinator: %s on %s, k=%d, %s", job.id,
                     job.score, job.dataset, job.k, job.security,
                     extra=event("job.accepted", job=job.id, kind=job.kind,
                                 security=job.security, analyst=job.submitted_by))
            conn.send(*wire.encode(wire.Ok()))
            self._spawn(self._follow(job, conn))
            return
        if peer > self.party:
            raise PeerError(f"{conn.label}: party {peer} must not dial party {self.party}")
        conn.send(*wire.encode(wire.Ok()))
        self.mesh.park(hello.job, peer, conn)

    async def _client(self, conn: FrameProtocol, hello: wire.ClientHello, who: Identity
                      ) -> None:
        name = who.name
        if hello.name and hello.name != name:
            raise HandshakeError(f"{conn.label}: claims to be {hello.name!r} but its "
                                 f"certificate names {name!r}")
        if self.dep.is_client(name) and not who.serves:
            role = self.dep.client(name).role
        elif self.dep.is_server(name) and who.serves:
            role = "server"
        else:
            raise AccessDenied(f"{name!r} is not a client of this deployment (or its "
                               "certificate is not a client certificate); ask the operators "
                               "to add it to [[clients]] with a role")
        conn.set_label(f"client {name} ({conn.address})")
        conn.send(*wire.encode(wire.Ok({"server": self.name, "party": self.party,
                                        "version": __version__, "role": role})))
        session = ClientSession(self, conn, name, role)
        try:
            await session.serve()
        finally:
            session.discard()
