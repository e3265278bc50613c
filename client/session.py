"""Layer: client. Talk to a deployment's servers: share a CSV file, run a selection, fetch D'.

Every server is reached over mutually authenticated TLS with the identity's own certificate
(``--as NAME``). Requests and answers are framed messages (``mpcnet.net.framing``): a request
``{"k": "req", "op": ...}`` gets ``{"k": "ok", ...}`` or ``{"k": "err", "type": ..., "msg": ...}``
which is raised here as the same typed error (``AccessDenied``, ``InputError``...).

Sharing is all-or-nothing: the file is read, checked against the dataset's schema (fetched from
the servers) and encoded before anything is sent; each server then receives only its own shares
into a staging area, and only when every server has staged its part does the client commit,
first on the coordinator (which numbers the contribution) and then on the others. A failure
before the commits aborts every staged part; a failure between commits withdraws the ones made.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.config import Deployment, ServerConfig, check_name
from mpcnet.errors import CheatingDetected, HandshakeError, InputError, MPCError, PeerError
from mpcnet.jobrequest import (
    CLOCK_SKEW,
    DEFAULT_VALIDITY,
    JobRequest,
    SignedRequest,
    load_ca,
)
from mpcnet.net.framing import FrameProtocol, read_large_message
from mpcnet.net.tls import client_context, describe, dial
from parties import catalog
from parties.server import _rebuild_error, sharing_of


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

    @property
    def name(self) -> str:
        return self.server.name

    @classmethod
    async def open(cls, dep: Deployment, identity: str, server: ServerConfig,
                   connect_timeout: float | None = None) -> ServerSession:
        cert, key = dep.identity(identity)
        ctx = client_context(dep.ca, cert, key)
        conn = await dial(server.name, server.host, server.port, ctx,
                          max_frame=dep.max_frame_bytes,
                          deadline=time.monotonic() + (connect_timeout or dep.timeouts.connect),
                          handshake_timeout=dep.timeouts.handshake)
        session = cls(server, conn, dep.timeouts.request)
        try:
            conn.send({"k": "hello", "as": "client", "name": identity})
            session.info = await session._reply()
        except HandshakeError:
            raise
        except PeerError as exc:
            if not conn.closed:
                raise
            # TLS 1.3 reports a refused client certificate only after the handshake
            raise HandshakeError(
                f"{conn.label} refused the session before answering ({exc}); most likely it "
                f"does not accept the certificate {cert} of {identity!r} (signed by another CA "
                "or expired?). Check the deployment's [tls] files") from None
        return session

    async def _reply(self, timeout: float | None = None) -> dict[str, Any]:
        header, body = await self.conn.recv(timeout=timeout or self.timeout)
        header = read_large_message(header, body)
        if header.get("k") == "err":
            raise _rebuild_error(header, prefix=f"{self.name}: ")
        if header.get("k") != "ok":
            raise PeerError(f"{self.conn.label} answered with an unexpected "
                            f"{header.get('k')!r} frame")
        return header

    async def request(self, op: str, timeout: float | None = None, **args: Any) -> dict[str, Any]:
        self.conn.send({"k": "req", "op": op, **args})
        return await self._reply(timeout)

    async def send_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        for name, arr in arrays.items():
            self.conn.send({"k": "a", "name": name}, arr)
            await self.conn.drain()

    async def recv_array(self) -> tuple[str, np.ndarray]:
        header, arr = await self.conn.recv(timeout=self.timeout)
        if header.get("k") == "err":
            raise _rebuild_error(header, prefix=f"{self.name}: ")
        if header.get("k") != "a" or arr is None:
            raise PeerError(f"{self.conn.label} sent an unexpected frame instead of an array")
        return str(header.get("name")), arr

    def close(self) -> None:
        self.conn.close()


@dataclass
class ShareSummary:
    dataset: str
    rows: int
    columns: int
    label: str | None
    total_rows: int
    seconds: float
    bytes_per_server: int


@dataclass
class Fetched:
    manifest: dict[str, Any]
    shares: dict[int, dict[str, np.ndarray]]  # party -> {"reduced", "exponents"}


class Client:
    """The identity ``identity`` of deployment ``dep``."""

    def __init__(self, dep: Deployment, identity: str) -> None:
        self.dep = dep
        self.identity = identity
        dep.identity(identity)  # ConfigError if unknown
        self.sessions: dict[str, ServerSession] = {}

    async def session(self, server: ServerConfig) -> ServerSession:
        s = self.sessions.get(server.name)
        if s is None or s.conn.closed:
            s = await ServerSession.open(self.dep, self.identity, server)
            self.sessions[server.name] = s
        return s

    async def sessions_for(self, servers: list[ServerConfig]) -> list[ServerSession]:
        got = await asyncio.gather(*(self.session(s) for s in servers), return_exceptions=True)
        for g in got:
            if isinstance(g, BaseException):
                raise g
        return list(got)  # type: ignore[arg-type]

    def close(self) -> None:
        for s in self.sessions.values():
            s.close()
        self.sessions.clear()

    # -- status and listings ------------------------------------------------------------------
    async def status(self, only: list[str] | None = None, mesh: bool = True
                     ) -> list[dict[str, Any]]:
        servers = [s for s in self.dep.servers if not only or s.name in only]

        async def one(s: ServerConfig) -> dict[str, Any]:
            try:
                sess = await ServerSession.open(self.dep, self.identity, s,
                                                connect_timeout=self.dep.timeouts.probe)
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

    async def listing(self, op: str) -> dict[str, list[dict[str, Any]]]:
        """``op`` (datasets, results, jobs) as answered by each server."""
        out: dict[str, list[dict[str, Any]]] = {}
        for s in await self.sessions_for(list(self.dep.servers)):
            out[s.name] = (await s.request(op))[op]
        return out

    # -- share --------------------------------------------------------------------------------
    async def share(self, path: str | Path, dataset: str, *, label: str | None = None,
                    layout: str = "rows", categorical: str = "refuse", missing: str = "refuse",
                    drop: tuple[str, ...] = (), security: str | None = None,
                    table: Any = None) -> ShareSummary:
        """Read, check, encode and secret-share ``path`` as one contribution to ``dataset``."""
        from mpcnet.schemes import registry

        t0 = time.perf_counter()
        check_name("dataset", dataset)
        if layout not in catalog.LAYOUTS:
            raise InputError(f"layout must be rows or columns, not {layout!r}")
        security = security or default_security(self.dep)
        sharing, n = sharing_of(security)
        info = registry.get(security)  # its share function makes the stored sharing
        if n > len(self.dep.servers):
            raise InputError(f"{security} needs {n} servers; the deployment has "
                             f"{len(self.dep.servers)}")
        sessions = await self.sessions_for(list(self.dep.servers[:n]))
        given = table
        for attempt in (1, 2):
            view = await self._view(sessions, dataset)
            meta, arrays_by_party = await self._encode(
                path, dataset, view, label=label, layout=layout, sharing=sharing, info=info,
                categorical=categorical, missing=missing, drop=drop, table=given)
            try:
                await self._upload_all(sessions, meta, arrays_by_party)
            except InputError:
                # Two owners who start the same dataset at once both encode with their own
                # schema; the coordinator commits one first and refuses the other. Encode
                # again once with the schema that won (a real mismatch fails again).
                if attempt == 1 and await self._view(sessions[:1], dataset) != view:
                    continue
                raise
            break
        fixed = view is not None and view["layout"] == "rows"
        nbytes = sum(a.nbytes for a in arrays_by_party[0].values())
        total = (view["rows"] + meta["rows"]) if fixed and view else meta["rows"]
        return ShareSummary(dataset, meta["rows"], len(meta["columns"]), meta["label"],
                            total if layout == "rows" else meta["rows"],
                            time.perf_counter() - t0, nbytes)

    @staticmethod
    async def _view(sessions: list[ServerSession], dataset: str) -> dict[str, Any] | None:
        """The dataset as the servers describe it (``schema``), checked equal on all of them."""
        views = [(await s.request("schema", dataset=dataset))["manifest"] for s in sessions]
        digests = {None if v is None else v["digest"] for v in views}
        if len(digests) > 1:
            raise InputError(f"dataset {dataset!r}: the servers disagree about it (an earlier "
                             "upload did not complete everywhere); use a new dataset name")
        return views[0]  # type: ignore[no-any-return]

    async def _encode(self, path: str | Path, dataset: str, view: dict[str, Any] | None, *,
                      label: str | None, layout: str, sharing: str, info: Any,
                      categorical: str, missing: str, drop: tuple[str, ...], table: Any
                      ) -> tuple[dict[str, Any], list[dict[str, np.ndarray]]]:
        """Read and check the file against ``view``, encode and share it: the description of
        the upload and each server's share arrays."""
        from mpcnet.dataset import EncodingOptions, class_codes, one_hot, read_csv
        from mpcnet.fixedpoint import auto_exponents, encode
        from mpcnet.ring import to_ring

        schema = view["schema"] if view else None
        fixed = view is not None and view["layout"] == "rows"
        known = dict(schema["categories"]) if fixed and schema else {}
        if table is None:
            options = EncodingOptions(categorical=categorical,  # type: ignore[arg-type]
                                      missing=missing,  # type: ignore[arg-type]
                                      known_categories=known)
            table = await asyncio.to_thread(read_csv, path, label, drop, options)
        columns = list(table.columns)
        if fixed and schema is not None and columns != schema["columns"]:
            exps = None  # check_against names the difference
        elif fixed and schema is not None:
            exps = np.asarray(schema["exponents"], dtype=np.int64)
        else:
            exps = auto_exponents(table.values, columns)
        classes = codes = None
        if table.labels is not None:
            agreed = schema["classes"] if fixed and schema else None
            try:
                classes, codes = class_codes(table.labels, agreed)
            except MPCError as exc:  # it names the row; say which file
                raise InputError(f"{path}: {exc}") from None
        meta = catalog.contribution_meta(
            dataset=dataset, upload_id=uuid.uuid4().hex[:12], layout=layout, sharing=sharing,
            rows=table.values.shape[0], columns=columns,
            exponents=[] if exps is None else exps.tolist(),
            categories={k: v for k, v in table.categories.items() if k in columns},
            label=label if table.labels is not None else None, classes=classes)
        if exps is None:
            meta["exponents"] = [0] * len(columns)
        catalog.check_against(view, meta, self.identity)
        assert exps is not None
        try:
            values = to_ring(encode(table.values, exps, columns))
        except MPCError as exc:  # a RangeError names the row and column; say which file
            raise type(exc)(f"{path}: {exc}") from None
        arrays_by_party: list[dict[str, np.ndarray]] = [
            {"data": d} for d in info.share(values)]
        if codes is not None and classes is not None:
            for party, lab in enumerate(info.share(one_hot(codes, len(classes)))):
                arrays_by_party[party]["labels"] = lab
        return meta, arrays_by_party

    async def _upload_all(self, sessions: list[ServerSession], meta: dict[str, Any],
                          arrays_by_party: list[dict[str, np.ndarray]]) -> None:
        async def stage(party: int, s: ServerSession) -> None:
            self_check = await s.request("upload", meta=meta)
            wanted = set(self_check.get("send", []))
            if wanted != set(arrays_by_party[party]):
                raise InputError(f"{s.name} expects the arrays {sorted(wanted)}")
            await s.send_arrays(arrays_by_party[party])
            await s._reply()

        got = await asyncio.gather(*(stage(p, s) for p, s in enumerate(sessions)),
                                   return_exceptions=True)
        errors = [g for g in got if isinstance(g, BaseException)]
        if errors:
            await self._quietly(sessions, "abort", id=meta["id"])
            raise errors[0]
        committed: list[ServerSession] = []
        try:
            first = await sessions[0].request("commit", id=meta["id"])
            committed.append(sessions[0])
            rest = await asyncio.gather(*(s.request("commit", id=meta["id"], seq=first["seq"])
                                          for s in sessions[1:]), return_exceptions=True)
            for s, r in zip(sessions[1:], rest, strict=True):
                if not isinstance(r, BaseException):
                    committed.append(s)
            errs = [r for r in rest if isinstance(r, BaseException)]
            if errs:
                raise errs[0]
        except BaseException:
            await self._quietly(committed, "withdraw", dataset=meta["dataset"], id=meta["id"])
            await self._quietly([s for s in sessions if s not in committed], "abort",
                                id=meta["id"])
            raise

    @staticmethod
    async def _quietly(sessions: list[ServerSession], op: str, **args: Any) -> None:
        async def one(s: ServerSession) -> None:
            try:
                await s.request(op, **args)
            except MPCError:
                pass
        await asyncio.gather(*(one(s) for s in sessions if not s.conn.closed))

    # -- select -------------------------------------------------------------------------------
    async def select(self, dataset: str, k: int, result: str, *, score: str = "ms-gini",
                     security: str | None = None, share_with: tuple[str, ...] = (),
                     valid_for: float = DEFAULT_VALIDITY, poll: float = 0.5,
                     progress: Callable[[dict[str, Any]], None] | None = None
                     ) -> dict[str, Any]:
        """Sign a request for a selection (its job must start within ``valid_for`` seconds),
        start it on the coordinator and wait for it; returns the job record once every
        server's record shows the job that was asked for."""
        from mpcnet.schemes import registry

        security = security or default_security(self.dep)
        n = registry.get(security).n_parties
        cert, key = self.dep.identity(self.identity)
        request = JobRequest.new(self.identity, dataset, k, score, security, result,
                                 share_with, valid_for)
        wire = SignedRequest.sign(request, key, cert).to_wire()
        leader = await self.session(self.dep.leader)
        job = (await leader.request("select", request=wire))["job"]
        while job["state"] in ("queued", "running"):
            if job["state"] == "queued" and time.time() > request.expires + CLOCK_SKEW:
                raise PeerError(f"job {job['id']} did not start before its request expired "
                                f"(valid for {valid_for:g} s); no server may start it now")
            if progress is not None:
                progress(job)
            try:
                job = (await leader.request("job", id=job["id"], wait=poll))["job"]
            except PeerError as exc:
                raise PeerError(f"lost the coordinator during job {job['id']}: {exc}"
                                + await self._members_report(job["id"])) from None
        if progress is not None:
            progress(job)
        records = dict(await self._member_records(job["id"]))
        if job["state"] == "failed":
            # the coordinator alone could misreport why (it may be the server that deviated):
            # every member's own record goes into the message, and cheating seen by any wins
            errors = [str(job["error"])] + [
                f"{name}: {rec['error']}" for name, rec in records.items()
                if not isinstance(rec, MPCError) and rec.get("error")]
            message = f"job {job['id']} failed: {errors[0]}" + "".join(
                f"; {e}" for e in errors[1:])
            if any("CheatingDetected" in e for e in errors):
                cheat = CheatingDetected("job", "")
                Exception.__init__(cheat, message)
                raise cheat
            kind = PeerError if errors[0].startswith(("PeerError", "HandshakeError")) else MPCError
            raise kind(message)
        self._check_records(job, wire, {s.name: records[s.name]
                                        for s in self.dep.servers[1:n]})
        return job  # type: ignore[no-any-return]

    def _check_records(self, job: dict[str, Any], wire: dict[str, Any],
                       members: dict[str, dict[str, Any] | MPCError]) -> None:
        """A job the coordinator reports done is done on every server of its setting, each
        record holding exactly the request this client signed; ``CheatingDetected`` else."""
        def refuse(why: str) -> CheatingDetected:
            return CheatingDetected("job record", f"job {job['id']}: {why}; its result "
                                                  "cannot be trusted")

        if job.get("request") != wire:
            raise refuse(f"the coordinator {self.dep.leader.name} ran it on another request "
                         "than the one you signed")
        for name, rec in members.items():
            if isinstance(rec, MPCError):
                raise refuse(f"the coordinator reports it done, but {name} has no record of "
                             f"it ({rec})")
            if rec.get("request") != wire:
                raise refuse(f"{name} ran it on another request than the one you signed")
            if rec.get("state") != "done":
                raise refuse(f"the coordinator reports it done, but {name} says "
                             f"{rec.get('state')}" + (f" ({rec['error']})" if rec.get("error")
                                                      else ""))

    async def _member_records(self, job_id: str) -> list[tuple[str, dict[str, Any] | MPCError]]:
        """Every other server's own record of the job, or why it could not be read; the
        servers are asked at once."""
        async def one(s: ServerConfig) -> tuple[str, dict[str, Any] | MPCError]:
            try:
                sess = await ServerSession.open(self.dep, self.identity, s,
                                                connect_timeout=self.dep.timeouts.probe)
                try:
                    return s.name, (await sess.request("job", id=job_id))["job"]
                finally:
                    sess.close()
            except MPCError as exc:
                return s.name, exc

        return list(await asyncio.gather(*(one(s) for s in self.dep.servers[1:])))

    async def _members_report(self, job_id: str) -> str:
        """'; name: state (error)' for every other server, for a lost coordinator."""
        notes = [f"{name}: {rec}" if isinstance(rec, MPCError) else
                 f"{name}: {rec['state']}" + (f" ({rec['error']})" if rec.get("error") else "")
                 for name, rec in await self._member_records(job_id)]
        return "; " + "; ".join(notes) if notes else ""

    # -- fetch --------------------------------------------------------------------------------
    async def fetch(self, result: str, owner: str | None = None) -> Fetched:
        """Every server's shares of ``result`` of analyst ``owner`` (default: this client),
        with the servers' descriptions checked equal.

        How many servers hold shares follows from the result's security setting (the
        registry), not from any server's word: the client fetches from all of them (the
        reconstruction needs every component from two servers), after checking that each
        one lists the result exactly as the coordinator does."""
        from mpcnet.schemes import registry

        check_name("result", result)
        owner = check_name("analyst", owner or self.identity)
        key = (owner, result)
        leader = await self.session(self.dep.leader)
        listed = {(r["owner"], r["name"]): r for r in (await leader.request("results"))["results"]}
        if key not in listed:
            raise InputError(f"no result {result!r} of {owner} that you may read on "
                             f"{self.dep.leader.name}; see mpc-client results")
        entry = listed[key]
        security = entry.get("security")
        try:
            n = registry.get(str(security)).n_parties
        except MPCError:
            raise InputError(f"result {result!r}: {self.dep.leader.name} lists it with the "
                             f"unknown security setting {security!r}") from None
        if n > len(self.dep.servers):
            raise InputError(f"result {result!r} is {security}, which needs {n} servers; the "
                             f"deployment has {len(self.dep.servers)}")
        servers = list(self.dep.servers[:n])
        if entry.get("parties") != [s.name for s in servers]:
            raise InputError(f"result {result!r}: {self.dep.leader.name} lists its parties as "
                             f"{entry.get('parties')}, but {security} runs on "
                             f"{', '.join(s.name for s in servers)}; it cannot be trusted")
        sessions = await self.sessions_for(servers)

        async def listing_of(s: ServerSession) -> dict[str, Any] | None:
            return {(r["owner"], r["name"]): r
                    for r in (await s.request("results"))["results"]}.get(key)

        for s, theirs in zip(sessions[1:], await asyncio.gather(
                *(listing_of(s) for s in sessions[1:])), strict=True):
            if theirs is None:
                raise InputError(f"result {result!r} is not stored on {s.name} (it is on "
                                 f"{self.dep.leader.name}); it cannot be reconstructed")
            if theirs != entry:
                differ = sorted(k for k in entry.keys() | theirs.keys()
                                if entry.get(k) != theirs.get(k))
                raise InputError(f"result {result!r}: {s.name} and {self.dep.leader.name} "
                                 f"describe it differently ({', '.join(differ)}); it cannot "
                                 "be reconstructed")

        async def one(s: ServerSession) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
            head = await s.request("fetch", result=result, owner=owner)
            arrays = dict([await s.recv_array() for _ in head["arrays"]])
            return head["manifest"], arrays

        got = await asyncio.gather(*(one(s) for s in sessions))
        manifests = [m for m, _ in got]
        described = {k: v for k, v in entry.items() if k != "nonce"}
        first = manifests[0]
        same = ("name", "job", "dataset", "k", "score", "rows", "security", "sharing", "parties",
                "owner", "share_with", "request")
        if (any({k: m.get(k) for k in same} != {k: first.get(k) for k in same}
                or m.get("party") != p for p, m in enumerate(manifests))
                or any(first.get(k) != v for k, v in described.items())
                or entry.get("nonce") != (first.get("request") or {}).get("nonce")):
            raise InputError(f"result {result!r}: the servers hold results of different jobs; "
                             "it cannot be reconstructed")
        self._check_result_request(result, manifests[0])
        return Fetched(manifests[0], {p: a for p, (_, a) in enumerate(got)})

    def _check_result_request(self, result: str, manifest: dict[str, Any]) -> None:
        """The result was made by a request that an analyst signed, for this result, and that
        names this client (every server checked it before the job ran; a client that trusts
        no single server checks it again)."""
        try:
            request = SignedRequest.from_wire(manifest.get("request")).verify(
                self.dep, load_ca(self.dep.ca))
        except MPCError as exc:
            raise CheatingDetected("result request", f"result {result!r}: {exc}") from None
        made = {"name": request.result, "dataset": request.dataset, "k": request.k,
                "score": request.score, "security": request.security,
                "owner": request.analyst, "share_with": list(request.share_with)}
        if any(manifest.get(key) != value for key, value in made.items()):
            raise CheatingDetected("result request", f"result {result!r} does not match the "
                                                     "request that made it")
        if not request.may_read(self.identity):
            raise InputError(f"result {result!r} belongs to {request.analyst}, who did not "
                             f"share it with {self.identity}")


def reconstruct(fetched: Fetched) -> np.ndarray:
    """D' as floats (m x k), after checking that the servers' copies of every share agree
    (``CheatingDetected`` otherwise)."""
    from mpcnet.fixedpoint import decode
    from mpcnet.ring import to_signed
    from mpcnet.schemes import registry

    info = registry.get(fetched.manifest["security"])
    reduced = info.reconstruct({p: a["reduced"] for p, a in fetched.shares.items()})
    exps = info.reconstruct({p: a["exponents"] for p, a in fetched.shares.items()})
    return decode(to_signed(reduced), to_signed(exps).astype(np.int64))


def write_csv(path: Path, values: np.ndarray) -> None:
    """The m x k matrix with header f1..fk; exact decimal form of every (dyadic) value."""
    k = values.shape[1]
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(",".join(f"f{i + 1}" for i in range(k)) + "\n")
        for row in values.tolist():
            f.write(",".join(repr(float(v)) for v in row) + "\n")
    tmp.replace(path)


def label_of(server: ServerConfig) -> str:
    return describe(server.name, server.host, server.port)
