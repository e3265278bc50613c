"""Layer: server. One client's session with a server: requests answered in order.

The asyncio side of every client operation: it reads a ``Request``, checks the operation
against the role (``parties.access``), runs it, and answers ``Ok`` or ``Refused`` with the
typed error. The rules themselves live in ``parties.jobs``, ``parties.uploads`` and
``parties.access``. Every field a request carries is read defensively and a bad one is
answered with an ``InputError`` naming it; any other exception is a bug: the server logs it
with its traceback and ends the session (``parties.server``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from mpcnet import __version__
from mpcnet.config import Deployment, check_name
from mpcnet.errors import AccessDenied, InputError, MPCError, PeerError, StorageError
from mpcnet.net import wire
from mpcnet.net.framing import FrameProtocol
from mpcnet.parties import access, catalog, inventory
from mpcnet.parties.logs import event
from mpcnet.parties.uploads import Upload, withdraw, withdraw_dataset
from mpcnet.signing import Signed

if TYPE_CHECKING:
    from mpcnet.parties.server import PartyServer

log = logging.getLogger("mpcnet.party")
IDLE_TIMEOUT = 3600.0  # a client session may stay idle this long


class ClientSession:
    """The session of client ``name`` (role ``role``, key fingerprint ``key``) on connection
    ``conn``."""

    def __init__(self, server: PartyServer, conn: FrameProtocol, name: str, role: str,
                 key: str) -> None:
        self.s, self.conn, self.name, self.role, self.key = server, conn, name, role, key
        self.uploads: dict[str, Upload] = {}

    def admitted(self, dep: Deployment) -> bool:
        """Whether deployment ``dep`` still admits this session: its key pinned for its
        name, with the same role (else a reload closes it)."""
        role = (dep.client(self.name).role if dep.is_client(self.name)
                else "server" if dep.is_server(self.name) else None)
        return role == self.role and self.key in dep.pins(self.name)

    def drop_disallowed(self, dep: Deployment) -> list[str]:
        """Abort the staged uploads that deployment ``dep`` (just reloaded) no longer lets
        their owner contribute; their ids."""
        dropped = [up for up in self.uploads.values() if not up.allowed(dep)]
        for up in dropped:
            up.abort()
            del self.uploads[up.id]
            log.info("upload %s by %s to %s dropped: the deployment file no longer lets it "
                     "contribute there", up.id, self.name, up.dataset,
                     extra=event("upload.dropped", upload=up.id, client=self.name))
        return [up.id for up in dropped]

    def discard(self) -> None:
        """A session that ends before its commits leaves nothing behind."""
        for up in self.uploads.values():
            if up.abort():
                log.info("upload %s by %s to %s dropped (not committed)", up.id, self.name,
                         up.dataset, extra=event("upload.dropped", upload=up.id,
                                                 client=self.name))
        self.uploads.clear()

    def send(self, message: wire.Message, array: np.ndarray | None = None) -> None:
        header, body = wire.encode(message)
        self.conn.send(header, body if array is None else array)

    async def serve(self) -> None:
        while True:
            header, body = await self.conn.recv(timeout=IDLE_TIMEOUT)
            try:
                request = wire.decode(header, body, self.conn.label)
            except PeerError:
                request = None  # answered below as an unknown request; the session goes on
            args = request.args if isinstance(request, wire.Request) else {}
            op = request.op if isinstance(request, wire.Request) else None
            try:
                op = access.check_operation(self.name, self.role, op)
                reply = await getattr(self, f"op_{op}")(args)
                if reply is not None:
                    self.send(wire.Ok(reply))
            except (MPCError, OSError) as exc:
                if isinstance(exc, PeerError) and self.conn.closed:
                    raise
                if isinstance(exc, AccessDenied):
                    log.warning("refused %s to %s: %s", op, self.name, exc, extra=event(
                        "client.refused", client=self.name, role=self.role, op=op,
                        reason=str(exc)))
                self.send(wire.Refused(exc if isinstance(exc, MPCError)
                                       else StorageError(str(exc))))

    # -- read-only ------------------------------------------------------------------------
    async def op_status(self, args: dict[str, Any]) -> dict[str, Any]:
        """Health and this client's own jobs (a server, for healthchecks, sees every job and the
        server's load)."""
        mesh = await self.s.mesh.reachability() if args.get("mesh", True) else {}
        mine = self.s.jobs.visible(self.name, self.role)
        out = {"server": self.s.name, "party": self.s.party, "version": __version__,
               "mesh": mesh, "coordinator": self.s.is_coordinator,
               "running": [j.id for j in mine if j.state == "running"],
               "queued": sum(j.state == "queued" for j in mine)}
        if self.role == "server":  # the server's load would tell a client of others' jobs
            out |= {"pid": os.getpid(), "load": self.s.load()}
        return out

    async def op_datasets(self, args: dict[str, Any]) -> dict[str, Any]:
        st = self.s.storage
        return {"datasets": [catalog.summary(m) for m in map(st.dataset, st.dataset_names())
                             if m is not None]}

    async def op_schema(self, args: dict[str, Any]) -> dict[str, Any]:
        ds = check_name("dataset", str(args.get("dataset", "")))
        m = self.s.storage.dataset(ds)
        owners = [] if m is None else [c["owner"] for c in m["contributions"]]
        if m is not None and self.role == "owner" and self.name in owners \
                and not self.s.dep.client(self.name).may_upload(ds):
            # an owner no longer allowed to upload may still withdraw (access.check_withdrawer):
            # it reads the digest and owners it needs for that, not the schema
            return {"manifest": {"name": ds, "digest": catalog.digest(m), "owners": owners}}
        access.check_schema_reader(self.s.dep, self.name, self.role, ds)
        return {"manifest": None if m is None else
                {k: m[k] for k in ("name", "layout", "sharing", "schema", "rows")}
                | {"digest": catalog.digest(m), "owners": owners}}

    async def op_results(self, args: dict[str, Any]) -> dict[str, Any]:
        out = []
        for m in self.s.storage.results_for(self.name):
            if access.may_read_result(self.name, m):
                out.append({k: m.get(k) for k in ("name", "dataset", "job", "k", "score",
                                                  "security", "rows", "parties", "owner",
                                                  "share_with", "release", "analyst")}
                           | {"kind": m.get("kind", "select")}
                           | {"nonce": m.get("request", {}).get("nonce")})
        return {"results": out}

    async def op_jobs(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"jobs": [self.s.view(j) for j in self.s.jobs.visible(self.name, self.role)]}

    async def op_job(self, args: dict[str, Any]) -> dict[str, Any]:
        job = self.s.jobs.get(str(args.get("id")), self.name, self.role)
        wait = args.get("wait")
        if isinstance(wait, int | float) and wait > 0 and job.active:
            with contextlib.suppress(TimeoutError):  # long poll: answer as soon as it ends
                await asyncio.wait_for(self.s.ended(job.id).wait(), min(float(wait), 30.0))
        return {"job": self.s.view(job)}

    # -- a peer rebuilding its data folder ----------------------------------------------------
    async def op_inventory(self, args: dict[str, Any]) -> dict[str, Any]:
        """What this server holds with the server calling (``parties.inventory``)."""
        log.info("%s asks what it held here (rebuilding its data folder)", self.name)
        return inventory.inventory(self.s.storage, self.s.dep, self.name)

    async def op_component(self, args: dict[str, Any]) -> None:
        """One component the calling server held, its salt and shape, then its blocks."""
        head, blocks = await asyncio.to_thread(inventory.component, self.s.storage, self.s.dep,
                                               self.s.party, self.name, args)
        try:
            self.send(wire.Ok(head))
            while (block := await asyncio.to_thread(next, blocks, None)) is not None:
                self.send(wire.NamedArray(str(args.get("part"))), block)
                await self.conn.drain()
        finally:
            blocks.close()  # the share file too, if the peer went away

    # -- uploads ----------------------------------------------------------------------------
    async def op_upload(self, args: dict[str, Any]) -> None:
        """Stage one contribution: check its description, then receive and store the share
        arrays in the staging folder (nothing is visible until ``commit``)."""
        up = Upload.describe(self.s.storage, self.s.dep, self.s.party, self.name,
                             args.get("meta"), args.get("salts"))
        if up.id in self.uploads:
            up.abort()
            raise InputError("upload needs a fresh id")
        self.send(wire.Ok({"send": sorted(up.expect)}))
        try:
            while up.state == "receiving":
                header, arr = await self.conn.recv(timeout=self.s.dep.timeouts.request)
                message = wire.decode(header, arr, self.conn.label)
                part, start = ((message.name, message.start)
                               if isinstance(message, wire.NamedArray) else (None, 0))
                await asyncio.to_thread(up.receive, part, arr, start)
        except BaseException as exc:
            up.abort()
            if isinstance(exc, OSError):  # the disk: say so, not where the server keeps data
                exc = StorageError(f"{self.s.name} cannot store the upload "
                                   f"({exc.strerror or type(exc).__name__})")
            if isinstance(exc, MPCError) and not self.conn.closed:
                # it stopped mid-upload (a bad block, the disk, the link): the client may
                # still be sending blocks, which must not be read as requests: say why, then
                # end the session
                with contextlib.suppress(PeerError):
                    self.send(wire.Refused(exc))
                self.conn.close()
                raise exc from None
            raise
        self.uploads[up.id] = up
        log.info("upload %s by %s to %s staged: %d rows x %d columns%s", up.id, self.name,
                 up.dataset, up.meta["rows"], len(up.meta["columns"]),
                 " with label" if "labels" in up.files else "",
                 extra=event("upload.staged", upload=up.id, client=self.name,
                             rows=up.meta["rows"], columns=len(up.meta["columns"])))
        self.send(wire.Ok({"staged": up.id}))

    async def op_commit(self, args: dict[str, Any]) -> dict[str, Any]:
        up = self.uploads.get(str(args.get("id")))
        if up is None:
            raise InputError(f"no staged upload {args.get('id')!r} in this session")
        signed = Signed.from_wire(args.get("signed"))
        signed.verify(self.s.dep, self.name)  # the owner's own key signed it
        try:
            done = up.commit(self.s.dep, self.s.is_coordinator, args.get("seq"), signed)
        finally:
            if up.state != "staged":  # committed, or aborted: its permission was removed
                del self.uploads[up.id]
        log.info("upload %s by %s committed to %s as contribution %d (%d rows in total)",
                 up.id, self.name, up.dataset, done["seq"], done["rows"],
                 extra=event("upload.committed", upload=up.id, client=self.name,
                             seq=done["seq"], rows=done["rows"]))
        return {"seq": done["seq"], "digest": done["digest"]}

    async def op_abort(self, args: dict[str, Any]) -> dict[str, Any]:
        up = self.uploads.pop(str(args.get("id")), None)
        return {"aborted": up is not None and up.abort()}

    async def op_withdraw(self, args: dict[str, Any]) -> dict[str, Any]:
        if "digest" in args:  # mpc-client withdraw: all of this owner's contributions
            ds = args.get("dataset")
            busy = any(j.active and j.kind == "select" and j.dataset == ds
                       for j in self.s.jobs.jobs.values())
            ids = withdraw_dataset(self.s.storage, self.s.dep, self.name, ds,
                                   args.get("digest"), busy)
            if ids:
                log.info("contribution(s) %s by %s withdrawn from %s", ", ".join(ids),
                         self.name, ds, extra=event("dataset.withdrawn", client=self.name))
            return {"withdrawn": ids, "remaining": self.s.storage.dataset(str(ds)) is not None}
        removed = withdraw(self.s.storage, self.s.dep, self.name, args.get("dataset", ""),
                           args.get("id"))
        if removed:
            log.info("upload %s by %s withdrawn from %s", args.get("id"), self.name,
                     args.get("dataset"), extra=event("upload.withdrawn", client=self.name))
        return {"withdrawn": removed}

    # -- jobs and results ---------------------------------------------------------------------
    async def op_select(self, args: dict[str, Any]) -> dict[str, Any]:
        job = self.s.submit(args.get("request"), self.name)
        return {"job": self.s.view(job)}

    async def op_train(self, args: dict[str, Any]) -> dict[str, Any]:
        job = self.s.submit(args.get("request"), self.name, "train")
        return {"job": self.s.view(job)}

    async def op_fetch(self, args: dict[str, Any]) -> None:
        name = check_name("result", str(args.get("result", "")))
        owner = check_name("owner", str(args.get("owner") or self.name))
        stored = self.s.storage.result(owner, name)
        if stored is None or not access.may_read_result(self.name, stored):
            raise InputError(f"no result {name!r} of {owner} that you may read on "
                             f"{self.s.name}; see mpc-client results")
        manifest, arrays = await asyncio.to_thread(self.s.storage.load_result, owner, name)
        for part in access.SERVER_ONLY_PARTS:
            arrays.pop(part, None)
        self.send(wire.Ok({"manifest": {k: v for k, v in manifest.items()
                                        if k not in access.SERVER_ONLY},
                           "arrays": sorted(arrays)}))
        for part in sorted(arrays):
            self.send(wire.NamedArray(part), arrays[part])
        await self.conn.drain()
        log.info("result %s of %s fetched by %s", name, owner, self.name,
                 extra=event("result.fetched", client=self.name, owner=owner))
