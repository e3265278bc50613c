"""Layer: server. One owner's upload to one server, as a state machine without sockets.

An upload is *described* (the contribution's metadata, checked against the dataset it joins
before any array is sent), *receives* the share arrays it expects into a staging folder, is
*staged* once it has them all, and is *committed* (made part of the dataset, numbered) or
*aborted* (its staging removed). The client commits only once every server has staged its
part, first on the coordinator, which numbers the contribution, then on the others with that
number, so every server orders contributions alike (``client.uploads``). A session that ends
before its commit aborts it; nothing half-received is ever visible.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.config import Deployment, check_name
from mpcnet.errors import AccessDenied, ConfigError, InputError
from mpcnet.parties import catalog
from mpcnet.parties.access import check_contributor, check_withdrawer
from mpcnet.parties.sharefiles import ShareFileWriter
from mpcnet.parties.statements import check_contribution, held_digests
from mpcnet.parties.storage import FILE_MODE, Storage
from mpcnet.schemes.registry import for_sharing, held
from mpcnet.signing import Signed, salt_of

FREE_MARGIN = 256 << 20
"""Disk space an upload must leave free (for jobs' results and records)."""


class Upload:
    """One contribution being uploaded by ``owner`` to the server ``party``."""

    def __init__(self, storage: Storage, meta: dict[str, Any], owner: str,
                 expect: dict[str, tuple[int, ...]], entry: dict[str, Any], need: int,
                 salts: dict[str, list[tuple[int, bytes]]]) -> None:
        self.storage, self.meta, self.owner = storage, meta, owner
        self.n_parties = for_sharing(str(meta["sharing"])).n_parties
        self.salts = salts  # part -> (component, salt) in the order of this server's slots
        self.need = need  # bytes reserved on the server's disk until it ends
        storage.reserved += need
        self.expect = expect  # part name -> the shape of this server's share array
        self.entry = entry  # the contribution as the manifest will list it
        self.folder: Path = storage.stage("upload")
        self.writers: dict[str, ShareFileWriter] = {}
        self.files: dict[str, dict[str, Any]] = {}
        self.state = "receiving"

    @property
    def id(self) -> str:
        return str(self.meta["id"])

    @property
    def dataset(self) -> str:
        return str(self.meta["dataset"])

    @classmethod
    def describe(cls, storage: Storage, dep: Deployment, party: int, owner: str,
                 meta: Any, salts: Any) -> Upload:
        """Check the description of an upload against the dataset it joins (before any
        array is sent) and open its staging folder. ``salts`` (part -> component -> hex)
        are the owner's salts of this server's components (``mpcnet.signing``)."""
        if not isinstance(meta, dict):
            raise InputError("upload without a description")
        dataset = check_name("dataset", str(meta.get("dataset", "")))
        check_contributor(dep, owner, dataset)
        check_name("upload id", str(meta.get("id", "")))
        sharing = str(meta.get("sharing"))
        try:
            info = for_sharing(sharing)
        except ConfigError as exc:
            raise InputError(str(exc)) from None
        if party >= info.n_parties:
            raise InputError(f"{sharing} uses {info.n_parties} servers; party {party} is not "
                             "one of them")
        lead = tuple(info.share(np.zeros((1, 1), dtype=np.uint64))[party].shape[:-2])
        manifest = storage.dataset(dataset)
        entry = catalog.entry(meta, owner)
        catalog.assemble(dataset, meta["layout"], sharing,
                         ([*manifest["contributions"]] if manifest else []) + [entry],
                         (manifest["layout"], manifest["sharing"]) if manifest else None)
        expect = {"data": lead + (meta["rows"], len(meta["columns"]))}
        if meta.get("label") is not None:
            expect["labels"] = lead + (meta["rows"], len(meta["classes"]))
        if meta["layout"] == "keyed":  # the hashes of the record IDs (mpcnet.recordids)
            expect["ids"] = lead + (meta["rows"], 2)
        mine = held(info.n_parties, party)
        if not isinstance(salts, dict) or set(salts) != set(expect) or not all(
                isinstance(salts[part], dict) and set(salts[part]) == {str(c) for c in mine}
                for part in expect):
            raise InputError(f"upload: the salts of components {list(mine)} of "
                             f"{sorted(expect)} are missing (an older client?)")
        slot_salts = {part: [(c, salt_of(salts[part][str(c)])) for c in mine]
                      for part in expect}
        need = sum(8 * int(np.prod(shape, dtype=np.int64)) for shape in expect.values())
        free = shutil.disk_usage(storage.root).free - storage.reserved
        if need + FREE_MARGIN > free:
            raise InputError(f"upload: its shares need {need / 2**20:,.0f} MiB on this server, "
                             f"which has {max(free, 0) / 2**20:,.0f} MiB free for uploads now; "
                             "try again later, or ask its operator")
        return cls(storage, meta, owner, expect, entry, need, slot_salts)

    def _release(self) -> None:
        self.storage.reserved -= self.need
        self.need = 0

    def receive(self, part: Any, arr: np.ndarray | None, start: int = 0) -> None:
        """One share array, or a block of its rows from row ``start`` on: uint64, of the
        expected shape, each row once. The server names the file (never after anything the
        client sent); it is written in place, block by block, and checksummed once whole."""
        if self.state != "receiving" or part not in self.expect or part in self.files \
                or arr is None:
            raise InputError(f"upload: expected the arrays {sorted(self.expect)}")
        shape = self.expect[part]
        if arr.dtype != np.uint64 or arr.ndim != len(shape) or arr.shape[:-2] != shape[:-2] \
                or arr.shape[-1] != shape[-1]:
            raise InputError(f"upload: {part} must be uint64 of shape {shape} (or blocks of "
                             f"its rows), got {arr.dtype} {arr.shape}")
        if part not in self.writers:
            self.writers[part] = ShareFileWriter(self.folder / f"{uuid.uuid4().hex}.{part}.npy",
                                                 shape, FILE_MODE)
        writer = self.writers[part]
        try:
            writer.write_rows(start, arr)
        except ValueError as exc:
            raise InputError(f"upload: {part}: {exc}") from None
        if writer.complete:
            self.files[part] = writer.entry(self.salts[part])
        if len(self.files) == len(self.expect):
            self.state = "staged"

    def allowed(self, dep: Deployment) -> bool:
        """Whether deployment ``dep`` (maybe reloaded since the upload began) still lets its
        owner contribute to its dataset."""
        return dep.is_client(self.owner) and dep.client(self.owner).may_upload(self.dataset)

    def commit(self, dep: Deployment, is_coordinator: bool, seq: Any, signed: Signed
               ) -> dict[str, Any]:
        """Make the staged contribution part of its dataset: numbered here on the coordinator,
        with the coordinator's number ``seq`` on a member. The owner's permission is checked
        again against ``dep``, the file as it is now: a reload may have removed it since the
        upload was described (then the upload is aborted). ``signed`` is the owner's statement
        of every server's components, its signature verified (``mpcnet.signing``): it must
        describe this upload and the components received here, and is kept with them."""
        if self.state != "staged":
            raise InputError(f"upload {self.id} is not staged; send every array first")
        try:
            check_contributor(dep, self.owner, self.dataset)
        except AccessDenied:
            self.abort()
            raise
        if signed.signer != self.owner:
            raise InputError(f"upload {self.id} is {self.owner}'s; {signed.signer} signed it")
        check_contribution(signed.statement, self.meta, self.n_parties,
                           held_digests(self.files))
        manifest = self.storage.dataset(self.dataset)
        existing = manifest["contributions"] if manifest else []
        if is_coordinator:
            seq = 1 + max((c.get("seq", 0) for c in existing), default=0)
        elif not isinstance(seq, int) or isinstance(seq, bool):
            raise InputError("commit on a member server needs the coordinator's sequence number")
        entry = dict(self.entry, seq=seq, files=self.files, stored=time.time(),
                     signed=signed.to_wire())
        new = catalog.assemble(self.dataset, self.meta["layout"], str(self.meta["sharing"]),
                               [*existing, entry],
                               (manifest["layout"], manifest["sharing"]) if manifest else None)
        self.storage.commit_contribution(new, self.folder)
        self.state = "committed"
        self._release()
        return {"seq": seq, "digest": catalog.digest(new), "rows": new["rows"]}

    def abort(self) -> bool:
        """Drop the staged parts (nothing of them was visible); False if already ended."""
        if self.state in ("committed", "aborted"):
            return False
        self.storage.discard(self.folder)
        self.state = "aborted"
        self._release()
        return True


def withdraw(storage: Storage, dep: Deployment, owner: str, dataset: Any, upload_id: Any
             ) -> bool:
    """Remove a committed contribution of ``owner`` (the client does it when a commit failed
    on another server); False if it has none of that id."""
    dataset = check_name("dataset", str(dataset))
    check_contributor(dep, owner, dataset)
    manifest = storage.dataset(dataset)
    mine = manifest is not None and any(c["id"] == upload_id and c["owner"] == owner
                                        for c in manifest["contributions"])
    return bool(mine and storage.withdraw(dataset, str(upload_id)))


def withdraw_dataset(storage: Storage, dep: Deployment, owner: str, dataset: Any,
                     digest: Any, busy: bool) -> list[str]:
    """Remove every contribution that ``owner`` made to ``dataset`` (``mpc-client
    withdraw``); the ids removed, [] if it has none here (a retry after a partial withdrawal).

    The rule, checked by every server for itself: ``owner`` is the identity that this
    session's TLS certificate authenticates (pinned in the deployment), it has the role owner
    (its permission to upload may have been narrowed since: ``access.check_withdrawer``), and
    only the contributions that the manifest records as made by it are removed (the owner of
    a contribution is recorded at its commit from the session, never from a client's
    message). The client first reads every server's digest of the dataset
    and asks each to withdraw only at that ``digest``: a server whose dataset differs (a
    contribution committed meanwhile) refuses, and so does one with a selection on the
    dataset queued or running (``busy``). A dataset with no contribution left is removed.
    Results selected before stay: they are their analysts'."""
    dataset = check_name("dataset", str(dataset))
    check_withdrawer(dep, owner)
    manifest = storage.dataset(dataset)
    mine = [] if manifest is None else [str(c["id"]) for c in manifest["contributions"]
                                        if c["owner"] == owner]
    if not mine:
        return []
    assert manifest is not None
    if digest != catalog.digest(manifest):
        raise InputError(f"dataset {dataset!r} changed on this server since you read it (a "
                         "contribution was added or withdrawn); withdraw again")
    if busy:
        raise InputError(f"a selection on dataset {dataset!r} is queued or running on this "
                         "server; withdraw once it has ended")
    for upload_id in mine:
        storage.withdraw(dataset, upload_id)
    return mine
