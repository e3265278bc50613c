"""Layer: server. One MPC server: TLS listener, job mesh, storage, jobs and access control.

One TLS port serves both peers and clients; the certificate name tells them apart (a server's
name is a peer, a client's name has its configured role). The first frame of every connection
is a ``hello``:

- ``{"as": "client", "name": N}`` opens a request/response session (see ``OPS``).
- ``{"as": "peer", "from": N, "probe": true}`` is a reachability probe (``status``).
- ``{"as": "peer", "from": N, "job": J, "spec": {...}}`` comes from the coordinator (party 0)
  and starts job J here; ``{"as": "peer", "from": N, "job": J}`` is the connection of another
  server to the mesh of job J. Party i dials every party j > i, so each pair has exactly one
  connection per job, and a job's frames cannot mix with another job's.

Jobs are coordinated by the first server of the deployment file (the *coordinator*): analysts
send ``select`` to it; it validates, queues (one job at a time, so every server runs jobs in one
order), and starts each job by dialing the other servers with the job's specification. Every
server then checks the dataset against its own copy (by digest), joins the mesh, runs the
protocol, stages its result share, and after a final all-party round commits it. A server that
fails or loses a peer aborts the job, tells its peers why, and records the error naming the
server; stored data is never touched by a failed job.

Logs name this server on every line and carry events, names, shapes and figures only: never a
share, a key or a value.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet import __version__
from mpcnet.config import NAME_RE, Deployment, check_name
from mpcnet.errors import (
    AccessDenied,
    CheatingDetected,
    HandshakeError,
    InputError,
    MPCError,
    PeerError,
)
from mpcnet.identity import Identity
from mpcnet.jobrequest import JobRequest, SignedRequest, load_ca
from mpcnet.net.engine import RoundEngine
from mpcnet.net.framing import FrameProtocol, large_message
from mpcnet.net.tls import TLSChannel, client_context, describe, dial, server_context
from parties import catalog
from parties.storage import Storage, StorageError

log = logging.getLogger("mpcnet.party")

SCORES = ("ms-gini",)
IDLE_TIMEOUT = 3600.0  # a client session may stay idle this long
JOB_ID_RE = re.compile(r"[0-9a-f]{12}")  # what ``submit`` makes (uuid4 hex); checked by members
DIGEST_RE = re.compile(r"[0-9a-f]{16}")  # ``catalog.digest``


def sharing_of(security: str) -> tuple[str, int]:
    """(sharing family, number of parties) of a security setting: datasets are stored in the
    input sharing of the setting they were shared for and work with every setting of the same
    family (``SchemeInfo.sharing`` if the registry defines it, else the setting's name)."""
    from mpcnet.schemes import registry

    info = registry.get(security)
    return info.sharing, info.n_parties


def sharing_info(sharing: str) -> Any:
    """The registry entry of the first security setting whose input sharing is ``sharing``
    (its ``share`` function makes shares in that format), or ``InputError``."""
    from mpcnet.schemes import registry

    for info in registry.SCHEMES.values():
        if info.sharing == sharing:
            return info
    raise InputError(f"unknown sharing {sharing!r}; known: "
                     f"{', '.join(sorted({i.sharing for i in registry.SCHEMES.values()}))}")


def error_frame(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, CheatingDetected):
        return {"k": "err", "type": "CheatingDetected", "msg": str(exc), "check": exc.check}
    return {"k": "err", "type": type(exc).__name__, "msg": str(exc)}


@dataclass
class Job:
    """A selection job as every server records it (never a value or share)."""

    id: str
    dataset: str
    digest: str
    k: int
    score: str
    security: str
    result: str
    submitted_by: str
    n_parties: int
    request: dict[str, Any] = field(default_factory=dict)  # as the analyst signed it
    signed: bool = False            # its signature verified here: the request is used up
    state: str = "queued"           # queued -> running -> done | failed
    error: str | None = None
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    figures: dict[str, Any] | None = None
    engine: RoundEngine | None = field(default=None, repr=False, compare=False)
    ended: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    SPEC = ("id", "dataset", "digest", "k", "score", "security", "result", "submitted_by",
            "n_parties", "request")

    @classmethod
    def of(cls, job_id: str, digest: str, r: JobRequest, wire: dict[str, Any]) -> Job:
        """The job a verified request asks for."""
        return cls(id=job_id, dataset=r.dataset, digest=digest, k=r.k, score=r.score,
                   security=r.security, result=r.result, submitted_by=r.analyst,
                   n_parties=sharing_of(r.security)[1], request=wire)

    def spec(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.SPEC}

    def may_read(self, name: str) -> bool:
        """The analyst who asked for the job and those it shared it with see it and its
        result."""
        return name == self.submitted_by or name in self.request.get("share_with", [])

    def record(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__
                if f not in ("engine", "ended")}

    def view(self) -> dict[str, Any]:
        """The record plus live progress while running."""
        d = self.record()
        if self.state == "running" and self.started is not None:
            progress: dict[str, Any] = {"elapsed": round(time.time() - self.started, 2)}
            eng = self.engine
            if eng is not None:
                progress.update(phase=eng.current_phase,
                                rounds=eng.rounds, bytes_sent=eng.bytes_sent)
            d["progress"] = progress
        return d


@dataclass
class _Staged:
    entry: dict[str, Any]
    folder: Path
    files: dict[str, dict[str, Any]]
    layout: str
    sharing: str


class PartyServer:
    """The server called ``name`` in deployment ``dep``."""

    def __init__(self, dep: Deployment, name: str) -> None:
        self.dep = dep
        self.me = dep.server(name)
        self.name = name
        self.party = dep.party(name)
        self.storage = Storage(self.me.data_dir)
        self.server_ctx = server_context(dep.ca, self.me.cert, self.me.key)
        self.client_ctx = client_context(dep.ca, self.me.cert, self.me.key)
        self.ca = load_ca(dep.ca)
        self.jobs: dict[str, Job] = {}
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self._inbound: dict[tuple[str, int], asyncio.Future[FrameProtocol]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.AbstractServer | None = None
        self.stopped = asyncio.Event()
        self.t = dep.timeouts
        self._open = 0

    @property
    def is_coordinator(self) -> bool:
        return self.party == 0

    # -- life cycle ------------------------------------------------------------------------
    async def start(self) -> None:
        self.storage.open()
        for rec in self.storage.load_jobs():
            job = Job(**{k: rec[k] for k in rec if k in Job.__dataclass_fields__})
            if job.state in ("queued", "running"):
                job.state, job.error = "failed", f"{self.name} restarted during the job"
                job.finished = time.time()
                self.storage.save_job(job.record())
            self.jobs[job.id] = job
        loop = asyncio.get_running_loop()
        try:
            self._server = await loop.create_server(
                self._protocol, self.me.bind, self.me.port, ssl=self.server_ctx,
                ssl_handshake_timeout=self.t.handshake, reuse_address=True)
        except OSError as exc:
            raise PeerError(f"{self.name}: cannot listen on {self.me.bind}:{self.me.port} "
                            f"({exc.strerror}); is another server using the port?") from None
        if self.is_coordinator:
            self._spawn(self._worker())
        log.info("listening on %s:%d as party %d of %d (%s); data in %s", self.me.bind,
                 self.me.port, self.party, len(self.dep.servers),
                 "coordinator" if self.is_coordinator else "member", self.me.data_dir)

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

    # -- connections -----------------------------------------------------------------------
    def _protocol(self) -> FrameProtocol:
        proto = FrameProtocol(0, "incoming connection")  # no array before the hello
        self._spawn(self._handle(proto))
        return proto

    MAX_CONNECTIONS = 512  # beyond this, new connections are dropped at once (floods)

    async def _handle(self, conn: FrameProtocol) -> None:
        self._open += 1
        try:
            await asyncio.wait_for(conn.connected, self.t.handshake)
            if self._open > self.MAX_CONNECTIONS:
                raise PeerError(f"{self._open} open connections; dropping one from "
                                f"{conn.address}")
            conn.set_label(f"connection from {conn.address}")
            header, _ = await conn.recv(timeout=self.t.handshake)
            if header.get("k") != "hello":
                raise PeerError(f"{conn.label}: expected a hello, got {header.get('k')!r}")
            who = conn.peer_identity()
            conn.set_max_body(self.dep.max_frame_bytes)  # the other end waits for our answer
            if header.get("as") == "peer":
                await self._peer(conn, header, who)
            else:
                await self._client(conn, header, who)
        except HandshakeError as exc:
            if conn.closed:  # TLS refused the certificate
                log.info("%s: %s", conn.label, exc)
            else:  # a certificate that does not match the identity claimed: say so
                log.warning("%s refused: %s", conn.label, exc)
                with contextlib.suppress(PeerError):
                    conn.send(error_frame(exc))
            conn.close()
        except (PeerError, TimeoutError) as exc:
            if not conn.closed or not str(exc).endswith("(see its log)"):
                log.info("%s: %s", conn.label, str(exc) or f"no TLS session within "
                         f"{self.t.handshake} s (the handshake failed or timed out)")
            conn.close()
        except MPCError as exc:
            log.warning("%s refused: %s", conn.label, exc)
            with contextlib.suppress(PeerError):
                conn.send(error_frame(exc))
            conn.close()
        except asyncio.CancelledError:
            conn.close()
            raise
        except Exception:  # noqa: BLE001 - a bug must not take the server down
            log.error("internal error on %s:\n%s", conn.label, traceback.format_exc())
            conn.close()
        finally:
            self._open -= 1

    # -- peers -----------------------------------------------------------------------------
    async def _peer(self, conn: FrameProtocol, hello: dict[str, Any], who: Identity) -> None:
        frm = hello.get("from")
        if frm != who.name or not self.dep.is_server(frm):
            raise HandshakeError(f"{conn.label}: certificate of {who.name!r} does not belong "
                                 f"to a server of this deployment (claimed {frm!r})")
        if not who.serves:
            raise HandshakeError(f"{conn.label}: the certificate named {frm!r} is a client "
                                 "certificate (no TLS server usage); only the deployment's "
                                 "servers, with certificates from mpc-certs, join jobs")
        peer = self.dep.party(frm)
        conn.set_label(describe(frm, conn.address.rsplit(":", 1)[0],
                                self.dep.server(frm).port))
        conn.peer_name = frm
        if hello.get("probe"):
            conn.send({"k": "ok", "server": self.name, "version": __version__})
            conn.close()
            return
        job_id = hello.get("job")
        if not isinstance(job_id, str) or not NAME_RE.fullmatch(job_id) or peer == self.party:
            raise PeerError(f"{conn.label}: malformed peer hello")
        if "spec" in hello:
            if peer != 0:
                raise AccessDenied(f"{frm} is not the coordinator; only "
                                   f"{self.dep.leader.name} starts jobs")
            job = self._accept_job(hello["spec"])
            conn.send({"k": "ok"})
            self._spawn(self._follow(job, conn))
            return
        if peer > self.party:
            raise PeerError(f"{conn.label}: party {peer} must not dial party {self.party}")
        conn.send({"k": "ok"})
        fut = self._inbound_future(job_id, peer)
        if fut.done():
            raise PeerError(f"{conn.label}: second connection for job {job_id}")
        fut.set_result(conn)
        self._spawn(self._expire(job_id, peer))

    def _inbound_future(self, job_id: str, peer: int) -> asyncio.Future[FrameProtocol]:
        key = (job_id, peer)
        if key not in self._inbound:
            self._inbound[key] = asyncio.get_running_loop().create_future()
        return self._inbound[key]

    async def _expire(self, job_id: str, peer: int) -> None:
        """Drop a parked mesh connection nobody claimed in time: a job claims its connections
        as it joins its mesh (and then removes them from ``_inbound``), so one still parked
        here belongs to a job that failed before joining or that this server never ran."""
        await asyncio.sleep(self.t.connect + self.t.handshake)
        fut = self._inbound.pop((job_id, peer), None)
        if fut is not None and fut.done() and not fut.cancelled():
            conn = fut.result()
            if not conn.closed:
                log.info("%s: dropping its unclaimed connection for job %s", conn.label, job_id)
            conn.close()

    def load(self) -> dict[str, int]:
        """Open connections, live tasks, parked mesh connections and resident memory: what a
        failed job or a hostile client could leak (``status`` reports it)."""
        import psutil

        return {"connections": self._open, "tasks": len(self._tasks),
                "parked": len(self._inbound), "rss": psutil.Process().memory_info().rss}

    async def _dial_peer(self, peer: int, hello: dict[str, Any]) -> FrameProtocol:
        s = self.dep.servers[peer]
        conn = await dial(s.name, s.host, s.port, self.client_ctx,
                          max_frame=self.dep.max_frame_bytes,
                          deadline=time.monotonic() + self.t.connect,
                          handshake_timeout=self.t.handshake)
        conn.send({"k": "hello", "as": "peer", "from": self.name, **hello})
        try:
            reply, _ = await conn.recv(timeout=self.t.handshake)
        except PeerError:
            conn.close()
            raise
        if reply.get("k") == "err":
            conn.close()
            raise _rebuild_error(reply, prefix=f"{s.name} refused: ")
        return conn

    async def probe_mesh(self) -> dict[str, str]:
        """Reachability of every other server ("ok" or the reason)."""
        async def one(i: int) -> tuple[str, str]:
            s = self.dep.servers[i]
            try:
                conn = await asyncio.wait_for(self._probe(i), self.t.probe + 1.0)
                conn.close()
                return s.name, "ok"
            except (MPCError, TimeoutError) as exc:
                return s.name, str(exc) or f"no answer within {self.t.probe} s"
        pairs = await asyncio.gather(*(one(i) for i in range(len(self.dep.servers))
                                       if i != self.party))
        return dict(pairs)

    async def _probe(self, peer: int) -> FrameProtocol:
        s = self.dep.servers[peer]
        conn = await dial(s.name, s.host, s.port, self.client_ctx,
                          max_frame=self.dep.max_frame_bytes,
                          deadline=time.monotonic() + self.t.probe,
                          handshake_timeout=self.t.probe)
        conn.send({"k": "hello", "as": "peer", "from": self.name, "probe": True})
        reply, _ = await conn.recv(timeout=self.t.probe)
        if reply.get("k") != "ok":
            raise _rebuild_error(reply, prefix=f"{s.name}: ")
        return conn

    # -- jobs ------------------------------------------------------------------------------
    def _check_job(self, job: Job, digest: bool = True) -> dict[str, Any]:
        """Checks every server makes before taking part; returns the dataset manifest. The
        dataset must match ``job.digest`` (except when the coordinator makes the job)."""
        if job.score not in SCORES:
            raise InputError(f"unknown score {job.score!r}; available: {', '.join(SCORES)}")
        sharing, n = sharing_of(job.security)
        if n > len(self.dep.servers):
            raise InputError(f"{job.security} needs {n} servers; this deployment has "
                             f"{len(self.dep.servers)}")
        manifest = self.storage.dataset(job.dataset)
        if manifest is None:
            raise InputError(f"dataset {job.dataset!r} is not stored on {self.name}; share it "
                             "first (mpc-client share)")
        if manifest["sharing"] != sharing:
            raise InputError(f"dataset {job.dataset!r} was shared for {manifest['sharing']}; "
                             f"{job.security} needs a dataset shared for {sharing} (share it "
                             f"again with --security {job.security})")
        catalog.ready_for_selection(manifest, job.k)
        if digest and catalog.digest(manifest) != job.digest:
            raise InputError(f"dataset {job.dataset!r} on {self.name} differs from the "
                             "coordinator's copy (an upload did not reach every server); "
                             "share it again under a new name")
        if self.storage.result(job.submitted_by, job.result) is not None:
            raise InputError(f"result {job.result!r} already exists; choose another --result")
        return manifest

    def submit(self, wire: Any, analyst: str) -> Job:
        """Coordinator: verify the analyst's signed request and queue its job."""
        if not self.is_coordinator:
            raise InputError(f"jobs are started by the coordinator {self.dep.leader.name} "
                             f"({self.dep.leader.address}), not by {self.name}")
        signed = SignedRequest.from_wire(wire)
        request = signed.verify(self.dep, self.ca)
        if request.analyst != analyst:
            raise AccessDenied(f"{analyst} sent a job request signed by {request.analyst}")
        check_name("dataset", request.dataset)
        check_name("result", request.result)
        self._check_fresh(request)
        if any(j.result == request.result and j.submitted_by == request.analyst
               and j.state in ("queued", "running") for j in self.jobs.values()):
            raise InputError(f"result {request.result!r} is already being computed by another "
                             "job")
        job = Job.of(uuid.uuid4().hex[:12], "", request, signed.to_wire())
        job.signed = True
        job.digest = catalog.digest(self._check_job(job, digest=False))
        self.jobs[job.id] = job
        self.storage.save_job(job.record())
        self.queue.put_nowait(job)
        log.info("job %s queued by %s: %s on %s, k=%d, %s -> result %s", job.id, analyst,
                 job.score, job.dataset, job.k, job.security, job.result)
        return job

    def _check_fresh(self, request: JobRequest) -> None:
        """A request is used up here the moment its signature verifies, whatever happens to
        its job (the job records, which persist, say which ones did): no job runs on a request
        that was refused, failed or ran before. Records of requests whose signature failed
        use nothing, so a forger cannot use up an analyst's request."""
        used = [j.id for j in self.jobs.values()
                if j.signed and j.request.get("nonce") == request.nonce]
        if used:
            raise InputError(f"the job request was already used by job {used[0]}; a request "
                             "runs once (the client signs a new one for every select)")

    def _accept_job(self, spec: Any) -> Job:
        """Member: the coordinator starts a job here. It runs only if the analyst's signed
        request asks for exactly this job; a refusal is recorded, so that the analyst sees why
        (under active settings a malicious coordinator is in the threat model)."""
        job_id = spec.get("id") if isinstance(spec, dict) else None
        if not isinstance(job_id, str) or not JOB_ID_RE.fullmatch(job_id) or job_id in self.jobs:
            raise InputError(f"job id {job_id!r} from the coordinator is malformed or reused")
        try:
            signed = SignedRequest.from_wire(spec.get("request"))
        except InputError as exc:
            raise CheatingDetected("job request", f"{self.name}: the coordinator's job {job_id} "
                                                  f"carries {exc}") from None
        job = Job.of(job_id, str(spec.get("digest")), signed.request, signed.to_wire())
        try:
            self._check_request(job, signed, spec)
            self._check_job(job)
        except MPCError as exc:
            job.state, job.finished = "failed", time.time()
            job.error = f"{type(exc).__name__}: {exc}"
            self.jobs[job.id] = job
            self.storage.save_job(job.record())
            log.warning("job %s from the coordinator refused: %s", job.id, job.error)
            raise
        job.state, job.started = "running", time.time()
        self.jobs[job.id] = job
        self.storage.save_job(job.record())
        log.info("job %s started by the coordinator: %s on %s, k=%d, %s", job.id, job.score,
                 job.dataset, job.k, job.security)
        return job

    def _check_request(self, job: Job, signed: SignedRequest, spec: dict[str, Any]) -> None:
        """The request is the analyst's (certificate, signature, not used before) and the
        coordinator's job is the one it asks for: ``CheatingDetected("job request")``."""
        def refuse(why: str) -> CheatingDetected:
            return CheatingDetected("job request", f"{self.name} refuses job {job.id}: {why}")

        try:
            signed.verify(self.dep, self.ca)
            self._check_fresh(signed.request)
            job.signed = True
        except (AccessDenied, InputError) as exc:
            raise refuse(str(exc)) from None
        for name in Job.SPEC:
            if name not in ("id", "digest", "request") and spec.get(name) != getattr(job, name):
                raise refuse(f"the coordinator says {name} {spec.get(name)!r}, the analyst's "
                             f"signed request says {getattr(job, name)!r}")
        if not DIGEST_RE.fullmatch(job.digest):
            raise InputError(f"job {job.id}: the coordinator sent no valid dataset digest; "
                             "every server checks its copy of the dataset against it")
        if self.party >= job.n_parties:
            raise InputError(f"{self.name} is not one of the {job.n_parties} parties of "
                             f"{job.security}")

    async def _worker(self) -> None:
        """Coordinator: run queued jobs one at a time."""
        while True:
            job = await self.queue.get()
            try:
                await self._lead(job)
            except Exception:  # noqa: BLE001 - the queue must survive any job
                log.error("job %s: internal error:\n%s", job.id, traceback.format_exc())

    async def _lead(self, job: Job) -> None:
        job.state, job.started = "running", time.time()
        self.storage.save_job(job.record())
        conns: dict[int, FrameProtocol] = {}
        try:
            # the request may have expired, the dataset or result changed, while queued
            SignedRequest.from_wire(job.request).verify(self.dep, self.ca)
            self._check_job(job)
            dials = [self._dial_peer(p, {"job": job.id, "spec": job.spec()})
                     for p in range(1, job.n_parties)]
            got = await asyncio.gather(*dials, return_exceptions=True)
            for p, c in zip(range(1, job.n_parties), got, strict=True):
                if isinstance(c, FrameProtocol):
                    conns[p] = c
            errors = [c for c in got if isinstance(c, BaseException)]
            if errors:
                raise errors[0]
        except MPCError as exc:
            for c in conns.values():
                with contextlib.suppress(PeerError):
                    c.send({"k": "err", "j": job.id, "msg": str(exc)})
                c.close()
            self._finish(job, exc)
            return
        await self._execute(job, conns)

    async def _follow(self, job: Job, leader: FrameProtocol) -> None:
        conns: dict[int, FrameProtocol] = {0: leader}
        try:
            higher = range(self.party + 1, job.n_parties)
            lower = range(1, self.party)
            dialed = asyncio.gather(*(self._dial_peer(p, {"job": job.id}) for p in higher),
                                    return_exceptions=True)
            waits = asyncio.gather(*(asyncio.wait_for(self._inbound_future(job.id, p),
                                                      self.t.connect + self.t.handshake)
                                     for p in lower), return_exceptions=True)
            d, w = await asyncio.gather(dialed, waits)
            for p, c in [*zip(higher, d, strict=True), *zip(lower, w, strict=True)]:
                if isinstance(c, FrameProtocol):
                    conns[p] = c
            for p, c in [*zip(higher, d, strict=True), *zip(lower, w, strict=True)]:
                if isinstance(c, TimeoutError):
                    s = self.dep.servers[p]
                    raise PeerError(f"{describe(s.name, s.host, s.port)} did not join job "
                                    f"{job.id} within {self.t.connect:.0f} s; is it running?")
                if isinstance(c, BaseException):
                    raise c
        except MPCError as exc:
            TLSChannel(self.party, job.n_parties, job.id, conns).abort(str(exc))
            self._finish(job, exc)
            return
        finally:
            for p in range(job.n_parties):
                self._inbound.pop((job.id, p), None)
        await self._execute(job, conns)

    async def _execute(self, job: Job, conns: dict[int, FrameProtocol]) -> None:
        """Run the protocol of ``job`` over the connected mesh and store the result share."""
        from mpcnet.featsel.gini_fs import gini_fs
        from mpcnet.schemes import registry

        channel = TLSChannel(self.party, job.n_parties, job.id, conns)
        engine = RoundEngine(channel, self.t.round + self.t.handshake)
        channel.recv_timeout = self.t.round  # the channel's timeout names the silent peer
        job.engine = engine
        staged: Path | None = None
        start = time.perf_counter()
        try:
            info = registry.get(job.security)
            # reading and checking (SHA-256) the shares may take long: not on the event loop
            manifest, data, labels = await asyncio.to_thread(self.storage.load_dataset,
                                                             job.dataset)
            if labels is None:
                raise InputError(f"dataset {job.dataset!r} has no label")
            schema = manifest["schema"]
            exponents = np.asarray(schema["exponents"], dtype=np.int64)
            with engine.phase("setup"):
                scheme = await info.scheme.setup(engine)
            data_shares, label_shares = await scheme.input(data, labels)
            del data, labels
            res = await gini_fs(scheme, data_shares, label_shares, len(schema["classes"]),
                                job.k, exponents)
            del data_shares, label_shares
            staged, files = self.storage.stage_result(
                {"reduced": scheme.output(res.reduced), "exponents": scheme.output(res.exponents)})
            with engine.phase("commit"):
                await engine.broadcast(np.ones(1, dtype=np.uint8))  # all staged: commit
            result_manifest = {
                "name": job.result, "dataset": job.dataset, "job": job.id, "k": job.k,
                "score": job.score, "security": job.security, "sharing": manifest["sharing"],
                "rows": manifest["rows"], "party": self.party,
                "parties": [s.name for s in self.dep.servers[:job.n_parties]],
                "owner": job.submitted_by, "share_with": job.request.get("share_with", []),
                "request": job.request, "files": files}
            self.storage.commit_result(result_manifest, staged)
            staged = None
            job.figures = dict(engine.report(), seconds=round(time.perf_counter() - start, 4),
                               wire={self.dep.servers[p].name: {"sent": a, "recv": b}
                                     for p, (a, b) in channel.bytes_by_peer().items()})
            self._finish(job, None)
        except (MPCError, OSError) as exc:
            channel.abort(f"{self.name}: {exc}",
                          exc.check if isinstance(exc, CheatingDetected) else None)
            self._finish(job, exc, engine, start)
        except Exception as exc:  # noqa: BLE001 - report, never crash the server
            log.error("job %s: internal error:\n%s", job.id, traceback.format_exc())
            channel.abort(f"{self.name}: internal error")
            self._finish(job, exc, engine, start)
        finally:
            if staged is not None:
                self.storage.discard(staged)
            job.engine = None
            await channel.close()

    def _finish(self, job: Job, exc: BaseException | None, engine: RoundEngine | None = None,
                start: float | None = None) -> None:
        job.finished = time.time()
        if exc is None:
            job.state = "done"
            f = job.figures or {}
            log.info("job %s done in %.3f s: %s rounds, %s bytes sent; result %s stored",
                     job.id, f.get("seconds", 0.0), f.get("rounds"), f.get("bytes_sent"),
                     job.result)
        else:
            job.state = "failed"
            kind = type(exc).__name__
            job.error = f"{kind}: {exc}" if isinstance(exc, MPCError) else \
                f"{kind} on {self.name}: {exc}"
            if engine is not None and start is not None:
                job.figures = dict(engine.report(), seconds=round(time.perf_counter() - start, 4))
            log.warning("job %s failed: %s", job.id, job.error)
        self.storage.save_job(job.record())
        job.ended.set()

    # -- clients ---------------------------------------------------------------------------
    async def _client(self, conn: FrameProtocol, hello: dict[str, Any], who: Identity) -> None:
        name = who.name
        claimed = hello.get("name")
        if claimed is not None and claimed != name:
            raise HandshakeError(f"{conn.label}: claims to be {claimed!r} but its certificate "
                                 f"names {name!r}")
        if self.dep.is_client(name) and not who.serves:
            role = self.dep.client(name).role
        elif self.dep.is_server(name) and who.serves:
            role = "server"
        else:
            raise AccessDenied(f"{name!r} is not a client of this deployment (or its "
                               "certificate is not a client certificate); ask the operators "
                               "to add it to [[clients]] with a role")
        conn.set_label(f"client {name} ({conn.address})")
        conn.send({"k": "ok", "server": self.name, "party": self.party, "version": __version__,
                   "role": role})
        session = _Session(self, conn, name, role)
        try:
            await session.serve()
        finally:
            session.discard()


class _Session:
    """One client connection: requests are answered in order."""

    # role(s) allowed per operation; owners' dataset rights are checked in the operation
    PERMS = {
        "status": {"owner", "analyst", "server"},
        "datasets": {"owner", "analyst"},
        "schema": {"owner"},  # per-column exponents: for the dataset's owners only
        "upload": {"owner"},
        "commit": {"owner"},
        "abort": {"owner"},
        "withdraw": {"owner"},
        "select": {"analyst"},
        "job": {"analyst"},
        "jobs": {"analyst"},
        "results": {"analyst"},
        "fetch": {"analyst"},
    }

    def __init__(self, server: PartyServer, conn: FrameProtocol, name: str, role: str) -> None:
        self.s = server
        self.conn = conn
        self.name = name
        self.role = role
        self.staged: dict[str, _Staged] = {}

    def discard(self) -> None:
        """A session that ends before commit leaves nothing behind."""
        for st in self.staged.values():
            self.s.storage.discard(st.folder)
            log.info("upload %s by %s to %s dropped (not committed)", st.entry["id"], self.name,
                     st.entry.get("dataset"))
        self.staged.clear()

    async def serve(self) -> None:
        while True:
            header, _ = await self.conn.recv(timeout=IDLE_TIMEOUT)
            op = header.get("op")
            try:
                if header.get("k") != "req" or op not in self.PERMS:
                    raise InputError(f"unknown request {op!r}")
                if self.role not in self.PERMS[op]:
                    raise AccessDenied(f"{self.name} (role {self.role}) may not {op}; it needs "
                                       f"the role {' or '.join(sorted(self.PERMS[op]))}")
                reply = await getattr(self, f"op_{op}")(header)
                if reply is not None:
                    self.conn.send(*large_message(reply, "ok"))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                log.warning("malformed %s request from %s: %s", op, self.name, type(exc).__name__)
                self.conn.send(error_frame(InputError(f"malformed {op!r} request")))
            except (MPCError, OSError) as exc:
                if isinstance(exc, PeerError) and self.conn.closed:
                    raise
                if isinstance(exc, AccessDenied):
                    log.warning("refused %s to %s: %s", op, self.name, exc)
                self.conn.send(error_frame(exc if isinstance(exc, MPCError)
                                           else StorageError(str(exc))))

    # -- read-only ---------------------------------------------------------------------------
    async def op_status(self, h: dict[str, Any]) -> dict[str, Any]:
        """Health and this client's own jobs (a server, for healthchecks, sees every job)."""
        mesh = await self.s.probe_mesh() if h.get("mesh", True) else {}
        mine = [j for j in self.s.jobs.values() if self.role == "server" or j.may_read(self.name)]
        return {"server": self.s.name, "party": self.s.party, "version": __version__,
                "mesh": mesh, "coordinator": self.s.is_coordinator,
                "running": [j.id for j in mine if j.state == "running"],
                "queued": sum(j.state == "queued" for j in mine), "pid": os.getpid(),
                "load": self.s.load()}

    async def op_datasets(self, h: dict[str, Any]) -> dict[str, Any]:
        out = []
        for n in self.s.storage.dataset_names():
            m = self.s.storage.dataset(n)
            if m is not None:
                out.append(catalog.summary(m))
        return {"datasets": out}

    async def op_schema(self, h: dict[str, Any]) -> dict[str, Any]:
        ds = check_name("dataset", str(h.get("dataset", "")))
        # the schema holds every column's scale exponent: with it, the exponents of D' (which
        # the analyst reconstructs) would tell which columns were selected
        if self.role != "owner" or not self.s.dep.client(self.name).may_upload(ds):
            raise AccessDenied(f"{self.name} may not contribute to dataset {ds!r}, so it may "
                               "not read its schema")
        m = self.s.storage.dataset(ds)
        return {"manifest": None if m is None else
                {k: m[k] for k in ("name", "layout", "sharing", "schema", "rows")}
                | {"digest": catalog.digest(m), "owners": [c["owner"]
                                                           for c in m["contributions"]]}}

    def _readable(self, manifest: dict[str, Any]) -> bool:
        """A result belongs to the analyst whose request made it and to those it named."""
        return self.name == manifest.get("owner") or self.name in manifest.get("share_with", [])

    async def op_results(self, h: dict[str, Any]) -> dict[str, Any]:
        out = []
        for owner, n in self.s.storage.result_keys():
            m = self.s.storage.result(owner, n)
            if m is not None and self._readable(m):
                out.append({k: m.get(k) for k in ("name", "dataset", "job", "k", "score",
                                                  "security", "rows", "parties", "owner",
                                                  "share_with")}
                           | {"nonce": m.get("request", {}).get("nonce")})
        return {"results": out}

    async def op_jobs(self, h: dict[str, Any]) -> dict[str, Any]:
        return {"jobs": [j.view() for j in sorted(self.s.jobs.values(), key=lambda j: j.created)
                         if j.may_read(self.name)]}

    async def op_job(self, h: dict[str, Any]) -> dict[str, Any]:
        job = self.s.jobs.get(str(h.get("id")))
        if job is None or not job.may_read(self.name):
            raise InputError(f"no job {h.get('id')!r} of yours on {self.s.name}")
        wait = h.get("wait")
        if isinstance(wait, int | float) and wait > 0 and job.state in ("queued", "running"):
            with contextlib.suppress(TimeoutError):  # long poll: answer as soon as it ends
                await asyncio.wait_for(job.ended.wait(), min(float(wait), 30.0))
        return {"job": job.view()}

    # -- uploads -----------------------------------------------------------------------------
    def _owner_may(self, ds: str) -> None:
        if not self.s.dep.client(self.name).may_upload(ds):
            raise AccessDenied(f"{self.name} may not contribute to dataset {ds!r} (allowed: "
                               f"{', '.join(self.s.dep.client(self.name).datasets)})")

    async def op_upload(self, h: dict[str, Any]) -> None:
        """Stage one contribution: check its description, then receive and store the share
        arrays in the staging folder (nothing is visible until ``commit``)."""
        meta = h.get("meta")
        if not isinstance(meta, dict):
            raise InputError("upload without a description")
        ds = check_name("dataset", str(meta.get("dataset", "")))
        self._owner_may(ds)
        upload_id = check_name("upload id", str(meta.get("id", "")))
        if upload_id in self.staged:
            raise InputError("upload needs a fresh id")
        sharing = str(meta.get("sharing"))
        lead_shape = self._lead_shape(sharing)
        manifest = self.s.storage.dataset(ds)
        entry = catalog.entry(meta, self.name)
        catalog.assemble(ds, meta["layout"], sharing,
                         ([*manifest["contributions"]] if manifest else []) + [entry],
                         (manifest["layout"], manifest["sharing"]) if manifest else None)
        expect = {"data": lead_shape + (meta["rows"], len(meta["columns"]))}
        if meta.get("label") is not None:
            expect["labels"] = lead_shape + (meta["rows"], len(meta["classes"]) - 1)
        self.conn.send({"k": "ok", "send": sorted(expect)})
        folder = self.s.storage.stage("upload")
        files: dict[str, dict[str, Any]] = {}
        try:
            for _ in expect:
                header, arr = await self.conn.recv(timeout=self.s.t.request)
                part = header.get("name")
                if header.get("k") != "a" or part not in expect or part in files or arr is None:
                    raise InputError(f"upload: expected the arrays {sorted(expect)}")
                if arr.dtype != np.uint64 or arr.shape != expect[part]:
                    raise InputError(f"upload: {part} must be uint64 of shape {expect[part]}, "
                                     f"got {arr.dtype} {arr.shape}")
                # the server names its files (never after anything the client sent)
                files[part] = await asyncio.to_thread(
                    _write_share, folder, f"{uuid.uuid4().hex}.{part}.npy", arr)
        except BaseException as exc:
            self.s.storage.discard(folder)
            if isinstance(exc, PeerError) and not self.conn.closed:
                # it stopped mid-upload, maybe inside a frame: say why, then end the session
                with contextlib.suppress(PeerError):
                    self.conn.send(error_frame(exc))
                self.conn.close()
            raise
        self.staged[upload_id] = _Staged(entry, folder, files, meta["layout"], sharing)
        log.info("upload %s by %s to %s staged: %d rows x %d columns%s", upload_id, self.name,
                 ds, meta["rows"], len(meta["columns"]),
                 " with label" if "labels" in files else "")
        self.conn.send({"k": "ok", "staged": upload_id})

    def _lead_shape(self, sharing: str) -> tuple[int, ...]:
        info = sharing_info(sharing)
        if self.s.party >= info.n_parties:
            raise InputError(f"{sharing} uses {info.n_parties} servers; {self.s.name} is not "
                             "one of them")
        probe = info.share(np.zeros((1, 1), dtype=np.uint64))[self.s.party]
        return tuple(probe.shape[:-2])

    async def op_commit(self, h: dict[str, Any]) -> dict[str, Any]:
        upload_id = str(h.get("id"))
        st = self.staged.get(upload_id)
        if st is None:
            raise InputError(f"no staged upload {upload_id!r} in this session")
        ds = st.entry["dataset"]
        manifest = self.s.storage.dataset(ds)
        existing = manifest["contributions"] if manifest else []
        seq = h.get("seq")
        if self.s.is_coordinator:
            seq = 1 + max((c.get("seq", 0) for c in existing), default=0)
        elif not isinstance(seq, int):
            raise InputError("commit on a member server needs the coordinator's sequence number")
        entry = dict(st.entry, seq=seq, files=st.files, stored=time.time())
        new = catalog.assemble(ds, st.layout, st.sharing, [*existing, entry],
                               (manifest["layout"], manifest["sharing"]) if manifest else None)
        self.s.storage.commit_contribution(new, st.folder)
        del self.staged[upload_id]
        log.info("upload %s by %s committed to %s as contribution %d (%d rows in total)",
                 upload_id, self.name, ds, seq, new["rows"])
        return {"seq": seq, "digest": catalog.digest(new)}

    async def op_abort(self, h: dict[str, Any]) -> dict[str, Any]:
        st = self.staged.pop(str(h.get("id")), None)
        if st is not None:
            self.s.storage.discard(st.folder)
        return {"aborted": st is not None}

    async def op_withdraw(self, h: dict[str, Any]) -> dict[str, Any]:
        ds = check_name("dataset", str(h.get("dataset", "")))
        self._owner_may(ds)
        manifest = self.s.storage.dataset(ds)
        mine = manifest is not None and any(c["id"] == h.get("id") and c["owner"] == self.name
                                            for c in manifest["contributions"])
        removed = mine and self.s.storage.withdraw(ds, str(h.get("id")))
        if removed:
            log.info("upload %s by %s withdrawn from %s", h.get("id"), self.name, ds)
        return {"withdrawn": bool(removed)}

    # -- jobs and results --------------------------------------------------------------------
    async def op_select(self, h: dict[str, Any]) -> dict[str, Any]:
        job = self.s.submit(h.get("request"), self.name)
        return {"job": job.view()}

    async def op_fetch(self, h: dict[str, Any]) -> None:
        name = check_name("result", str(h.get("result", "")))
        owner = check_name("analyst", str(h.get("owner") or self.name))
        stored = self.s.storage.result(owner, name)
        if stored is None or not self._readable(stored):
            raise InputError(f"no result {name!r} of {owner} that you may read on "
                             f"{self.s.name}; see mpc-client results")
        manifest, arrays = await asyncio.to_thread(self.s.storage.load_result, owner, name)
        self.conn.send({"k": "ok", "manifest": {k: v for k, v in manifest.items()
                                                if k != "files"},
                        "arrays": sorted(arrays)})
        for part in sorted(arrays):
            self.conn.send({"k": "a", "name": part}, arrays[part])
        await self.conn.drain()
        log.info("result %s fetched by %s", name, self.name)


def _write_share(folder: Path, filename: str, arr: np.ndarray) -> dict[str, Any]:
    from parties.storage import write_array
    return write_array(folder / filename, arr)


def _rebuild_error(reply: dict[str, Any], prefix: str = "") -> MPCError:
    """The typed error a peer or server reported in an ``err`` frame."""
    from mpcnet import errors

    kind = str(reply.get("type", "MPCError"))
    msg = prefix + str(reply.get("msg", "unknown error"))
    if kind == "CheatingDetected":
        exc = CheatingDetected.__new__(CheatingDetected)
        exc.check = str(reply.get("check", ""))
        Exception.__init__(exc, msg)
        return exc
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, MPCError):
        return cls(msg)
    if kind == "StorageError":
        return StorageError(msg)
    return MPCError(msg)
