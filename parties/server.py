"""Layer: server. One MPC server: the TLS listener, who is calling, and the life of its jobs.

One TLS port serves both peers and clients; the certificate names who calls and its key must be
the one this server's deployment file pins for that name (``mpcnet.pins``): a server of the
deployment is a peer, a client has its configured role.
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

The operator edits its own copy of the deployment file and reloads it (SIGHUP or ``mpc-party
--reload``): the file is checked, then applied to new connections and requests at once, without
touching running jobs; a client it no longer admits (removed, unpinned or with another role) has
its open sessions closed and its queued jobs refused (``reload``). The servers themselves
(names, order, addresses, data folders) change only by a restart; their pins may change (a key
change).

Logs name this server on every line and carry events, names, shapes and figures only: never a
share, a key or a value.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import Any

from cryptography import x509

from mpcnet import __version__, config
from mpcnet.config import NAME_RE, Deployment
from mpcnet.errors import AccessDenied, ConfigError, HandshakeError, MPCError, PeerError
from mpcnet.net import wire
from mpcnet.net.framing import FrameProtocol
from mpcnet.net.tls import client_context, describe, load_identity, server_context, trust
from mpcnet.parties.jobs import Job, JobBook
from mpcnet.parties.logs import event
from mpcnet.parties.mesh import Mesh
from mpcnet.parties.metrics import duration, failed_check
from mpcnet.parties.runner import JobRunner, Runtime
from mpcnet.parties.session import ClientSession
from mpcnet.parties.storage import Storage
from mpcnet.pins import (
    admit,
    check_certificate,
    days_left,
    fingerprint,
    trust_store,
    unfound_pins,
)

log = logging.getLogger("mpcnet.party")
EXPIRY_WARNING_DAYS = 30.0  # a server warns at start and reload when its own certificate is due


class PartyServer:
    """The server called ``name`` in deployment ``dep``, running jobs on ``runtime``."""

    MAX_CONNECTIONS = 512  # beyond this, new connections are dropped at once (floods)
    session_class = ClientSession  # what answers a client (tests pass one that misbehaves)

    def __init__(self, dep: Deployment, name: str, runtime: Runtime | None = None) -> None:
        self.dep, self.name = dep, name
        self.me = dep.server(name)
        self.party = dep.party(name)
        self.storage = Storage(self.me.data_dir)
        check_own_key(dep, name)
        self.server_ctx = server_context(self.me.cert, self.me.key, trust_store(dep))
        self.client_ctx = client_context(self.me.cert, self.me.key)
        self.jobs = JobBook(dep, name, self.storage)
        self.mesh = Mesh(dep, name, self.client_ctx)
        self.runner = JobRunner(dep, name, self.storage, runtime or Runtime())
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self.stopped = asyncio.Event()
        self._ended: dict[str, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.AbstractServer | None = None
        self._open = 0
        self._sessions: set[ClientSession] = set()

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
        _warn_unfound(self.dep)

    # -- the deployment file ---------------------------------------------------------------
    def reload(self) -> dict[str, Any]:
        """Re-read, check and apply this server's deployment file (its operator edited it):
        new connections and requests follow it at once, running jobs go on, and every client
        it no longer admits loses its sessions and its queued jobs. ``ConfigError`` (the file
        is left unapplied) when it does not load, changes the servers or does not pin this
        server's own key."""
        new = config.load(self.dep.path)
        changed = [s.name for s, t in zip(self.dep.servers, new.servers, strict=False)
                   if dataclasses.replace(s, pins=()) != dataclasses.replace(t, pins=())]
        if changed or len(new.servers) != len(self.dep.servers):
            what = ", ".join(changed) or "their number"
            raise ConfigError(f"{new.path}: the servers changed ({what}); names, order, "
                              "addresses and data folders of servers change only by a restart "
                              "of every server (their pins may change)")
        check_own_key(new, self.name)
        client_context(self.me.cert, self.me.key)  # the (maybe new) own key loads: apply it
        for ctx in (self.server_ctx, self.client_ctx):
            load_identity(ctx, self.me.cert, self.me.key)
        trust(self.server_ctx, trust_store(new))
        old, self.dep = self.dep, new
        self.jobs.dep = self.mesh.dep = self.runner.dep = new
        revoked = [sess for sess in self._sessions if not sess.admitted(new)]
        for sess in revoked:
            sess.conn.close()  # its serve() ends, which discards its staged uploads
        closed = [sess.name for sess in revoked]
        dropped = [up for sess in self._sessions if sess not in revoked
                   for up in sess.drop_disallowed(new)]
        refused = self.jobs.refuse_unadmitted(new)
        summary = {"added": sorted(set(new.names) - set(old.names)),
                   "removed": sorted(set(old.names) - set(new.names)),
                   "repinned": sorted(n for n in set(old.names) & set(new.names)
                                      if old.pins(n) != new.pins(n)),
                   "sessions_closed": sorted(set(closed)), "uploads_dropped": sorted(dropped),
                   "jobs_refused": refused}
        log.info("reloaded %s: %s", new.path, "; ".join(
            f"{k.replace('_', ' ')} {', '.join(v)}" for k, v in summary.items() if v)
            or "no change", extra=event("deployment.reloaded", **summary))
        _warn_unfound(new)
        return summary

    def reload_logged(self) -> None:
        """``reload`` on SIGHUP: a file that does not check is logged and not applied; the
        outcome is recorded for ``mpc-party --reload``."""
        outcome: dict[str, Any] = {"at": time.time(), "file": str(self.dep.path)}
        try:
            outcome["changes"] = self.reload()
        except MPCError as exc:
            log.error("reload refused, still running on the previous file: %s", exc,
                      extra=event("deployment.reload_refused", reason=str(exc)))
            outcome["error"] = str(exc)
        self.storage.record_reload(outcome)

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
            if job.state != "queued":  # refused while it waited (its analyst was removed)
                continue
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
            cert = conn.peer_certificate()
            who = admit(self.dep, cert, conn.label)  # NotPinned unless its key is pinned
            conn.set_max_body(self.dep.max_frame_bytes)  # the other end waits for our answer
            if isinstance(hello, wire.PeerHello):
                await self._peer(conn, hello, who)
            else:
                await self._client(conn, hello, who, cert)
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

    async def _peer(self, conn: FrameProtocol, hello: wire.PeerHello, who: str) -> None:
        frm = hello.sender
        if frm != who or not self.dep.is_server(frm):
            raise HandshakeError(f"{conn.label}: the key pinned for {who!r} does not belong "
                                 f"to a server of this deployment (claimed {frm!r})")
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

    async def _client(self, conn: FrameProtocol, hello: wire.ClientHello, name: str,
                      cert: x509.Certificate) -> None:
        if hello.name and hello.name != name:
            raise HandshakeError(f"{conn.label}: claims to be {hello.name!r} but its "
                                 f"certificate names {name!r}")
        role = self.dep.client(name).role if self.dep.is_client(name) else "server"
        conn.set_label(f"client {name} ({conn.address})")
        conn.send(*wire.encode(wire.Ok({"server": self.name, "party": self.party,
                                        "version": __version__, "role": role})))
        session = self.session_class(self, conn, name, role, fingerprint(cert))
        self._sessions.add(session)
        try:
            await session.serve()
        finally:
            self._sessions.discard(session)
            session.discard()


def check_own_key(dep: Deployment, name: str) -> None:
    """Server ``name``'s own certificate is pinned for it in ``dep``: a server whose operator's
    file does not admit its own key would be refused by every peer."""
    me = dep.server(name)
    try:
        cert = x509.load_pem_x509_certificate(me.cert.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{name}: its certificate {me.cert} cannot be read ({exc}); make "
                          f"its key with `mpc-certs keygen {name}`") from None
    check_certificate(name, cert, dep.pins(name), f"{name}'s own certificate {me.cert} "
                      f"(deployment file {dep.path})")
    if (left := days_left(cert)) < EXPIRY_WARNING_DAYS:
        log.warning("%s's own certificate expires in %.0f days: make a new key (mpc-certs "
                    "renew) for the others to pin", name, left)


def _warn_unfound(dep: Deployment) -> None:
    for name, missing in unfound_pins(dep).items():
        log.warning("%s: no certificate in %s holds the key pinned for %s (%s): it cannot "
                    "connect until its certificate is put there", dep.path.name, dep.tls_dir,
                    name, ", ".join(missing))
