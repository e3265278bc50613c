"""Layer: client. A data owner shares a CSV file: read, check, encode, secret-share, commit.

Sharing is all-or-nothing: the file is read, checked against the dataset's schema (fetched from
the servers, which must agree on it) and encoded before anything is sent; each server then
receives only its own shares into a staging area (``parties.uploads``), and only when every
server has staged its part does the client commit, first on the coordinator (which numbers the
contribution) and then on the others with that number. A failure before the commits aborts
every staged part; a failure between commits withdraws the ones made.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mpcnet.client.connection import Connections, ServerSession, default_security
from mpcnet.client.encoding import Encoded, encode_contribution
from mpcnet.config import ServerConfig, check_name
from mpcnet.errors import AccessDenied, InputError, MPCError, PeerError
from mpcnet.parties.statements import contribution_parts
from mpcnet.schemes.registry import held, holders, sharing_of
from mpcnet.signing import SALT_BYTES, ComponentHash, Signed

if TYPE_CHECKING:
    from mpcnet.dataset import Dialect

SHARE_BLOCK_BYTES = 16 << 20
"""Plaintext bytes per block of rows shared and sent at once (each server's part is a few
times this: bounded memory and frames whatever the file's size)."""


@dataclass
class ShareSummary:
    """What one ``share`` did; ``schema`` says how the file was read if a declared schema
    decided it; ``new_classes`` and ``new_categories``, what it added to the dataset's
    lists (a later owner's classes and categories that no earlier one had)."""

    dataset: str
    rows: int
    columns: int
    label: str | None
    total_rows: int
    seconds: float
    bytes_per_server: int
    schema: str | None = None
    new_classes: list[str] = field(default_factory=list)
    new_categories: dict[str, list[str]] = field(default_factory=dict)


def read_declared(path: str | Path) -> Any:
    """A declared schema from its TOML file (``parties.declared``)."""
    from mpcnet.parties.declared import Declared

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the schema file ({exc.strerror})") from None
    return Declared.from_toml(text, str(path))


class Sharing(Connections):
    """What a data owner does: share a file as one contribution to a dataset."""

    # -- share --------------------------------------------------------------------------------
    async def share(self, path: str | Path, dataset: str, *, label: str | None = None,
                    layout: str = "rows", categorical: str = "refuse", missing: str = "refuse",
                    drop: tuple[str, ...] = (), ordinal: tuple[str, ...] = (),
                    security: str | None = None, schema: str | Path | None = None,
                    release: tuple[str, ...] = ("values",), table: Any = None,
                    id_column: str | None = None, id_key: str | Path | None = None,
                    missing_categorical: str = "category", delimiter: str = ",",
                    quotechar: str = '"') -> ShareSummary:
        """Read, check, encode and secret-share ``path`` as one contribution to ``dataset``;
        ``schema`` is a declared schema's TOML file (for a new dataset), ``release`` what an
        analyst may receive of results on it (``catalog.RELEASES``; () for shares only); the
        reading options as ``dataset.EncodingOptions``. With ``id_column`` (by columns only)
        the rows are keyed by that column's record IDs, hashed here with the owners' key in
        the file ``id_key`` (``mpcnet.recordids``)."""
        from mpcnet.dataset import Dialect, EncodingOptions
        from mpcnet.schemes import registry

        t0 = time.perf_counter()
        check_name("dataset", dataset)
        if layout not in ("rows", "columns"):
            raise InputError(f"layout must be rows or columns, not {layout!r}")
        ids = None
        if id_column is not None:
            if layout != "columns" or id_key is None:
                raise InputError("record IDs (--id) key a contribution by columns: pass "
                                 "--columns and the owners' --id-key FILE")
            ids = _hashed_ids(path, id_column, id_key, Dialect(delimiter, quotechar))
            layout, drop = "keyed", (*drop, id_column)
        security = security or default_security(self.dep)
        sharing, n = sharing_of(security)
        info = registry.get(security)  # its share function makes the stored sharing
        if n > len(self.dep.servers):
            raise InputError(f"{security} needs {n} servers; the deployment has "
                             f"{len(self.dep.servers)}")
        options = EncodingOptions(categorical, missing,  # type: ignore[arg-type]
                                  ordinal_columns=ordinal,
                                  missing_categorical=missing_categorical,  # type: ignore[arg-type]
                                  delimiter=delimiter, quotechar=quotechar)
        declared = None if schema is None else read_declared(schema)
        sessions = await self.sessions_for(list(self.dep.servers[:n]))
        given = table
        for attempt in (1, 2):
            view = await self._view(sessions, dataset)
            done = await self._encode(
                path, dataset, view, table=given, label=label, layout=layout,
                sharing=sharing, security=info.name, drop=drop, options=options,
                declared=declared, release=tuple(release))
            meta = done.meta
            try:
                nbytes = await self._upload_all(sessions, meta, self._blocks(done, info, ids))
            except InputError:
                # Two owners who start the same dataset at once both encode with their own
                # schema; the coordinator commits one first and refuses the other. Encode
                # again once with the schema that won (a real mismatch fails again).
                if attempt == 1 and await self._view(sessions[:1], dataset) != view:
                    continue
                raise
            break
        fixed = view is not None and view["layout"] == "rows"
        total = (view["rows"] + meta["rows"]) if fixed and view else meta["rows"]
        return ShareSummary(dataset, meta["rows"], len(meta["columns"]), meta["label"],
                            total if layout == "rows" else meta["rows"],
                            time.perf_counter() - t0, nbytes,
                            None if done.declared is None else
                            f"read by the dataset's declared schema (missing = "
                            f"{done.declared.missing})", *_added(view if fixed else None, meta))

    async def schema_toml(self, dataset: str) -> str:
        """The dataset's schema as a TOML file: the declared one, or the one its contributions
        made (the first owner's columns and scales, the lists as they are now)."""
        from mpcnet.parties.declared import Column, Declared

        check_name("dataset", dataset)
        view = await self._view(await self.sessions_for(list(self.dep.servers)), dataset)
        if view is None:
            raise InputError(f"dataset {dataset!r} is not stored; nothing to print")
        schema = view["schema"]
        if schema.get("declared") is not None:
            return Declared.from_dict(schema["declared"]).to_toml(
                f"declared schema of dataset {dataset!r}")
        if view["layout"] != "rows" or schema["label"] is None:
            raise InputError(f"dataset {dataset!r} is split by columns; its schema is each "
                             "owner's own (a declared schema is for datasets split by rows)")
        columns = tuple(Column(name, "categorical", categories=tuple(schema["categories"][name]))
                        if name in schema["categories"] else Column(name, "numeric", exp)
                        for name, exp in zip(schema["columns"], schema["exponents"],
                                             strict=True))
        return Declared(schema["label"], columns, tuple(schema["classes"])).to_toml(
            f"schema of dataset {dataset!r} as its contributions made it (nothing declared);\n"
            "to declare it for a new dataset, edit it (max_abs = the largest |value| of a "
            "column, missing)\nand pass it to the first share with --schema")

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
                      table: Any, **how: Any) -> Encoded:
        """Read, check and encode the file (``client.encoding``), off the event loop."""
        return await asyncio.to_thread(encode_contribution, path, view, dataset=dataset,
                                       owner=self.identity, table=table, **how)

    @staticmethod
    def _blocks(done: Encoded, info: Any, ids: np.ndarray | None
                ) -> Iterator[tuple[str, int, list[np.ndarray]]]:
        """(array name, first row, each server's shares) of the contribution, a block of
        rows at a time: no more than one block's shares exist at once; ``ids`` the rows'
        record-ID hashes, if keyed."""
        from mpcnet.dataset import indicators
        from mpcnet.ring import to_ring

        width = max(len(done.table.columns), len(done.meta["classes"] or []), 1)
        rows = max(1, SHARE_BLOCK_BYTES // (8 * width))
        for first, values in done.blocks():
            for start in range(0, values.shape[0], rows):
                yield "data", first + start, info.share(to_ring(values[start:start + rows]))
        classes = done.meta["classes"]
        if done.codes is not None and classes is not None:
            for start in range(0, done.table.rows, rows):
                codes = done.codes[start:start + rows]
                yield "labels", start, info.share(indicators(codes, len(classes)))
        if ids is not None:
            for start in range(0, ids.shape[0], rows):
                yield "ids", start, info.share(ids[start:start + rows])

    async def _upload_all(self, sessions: list[ServerSession], meta: dict[str, Any],
                          blocks: Iterator[tuple[str, int, list[np.ndarray]]]) -> int:
        """Stage the contribution on every server (each gets its shares block by block), then
        commit it, first on the coordinator; undo everything if any of it fails. Returns the
        bytes of shares each server received."""
        sent = 0
        n = len(sessions)
        parts = contribution_parts(meta)
        salts = {part: [secrets.token_bytes(SALT_BYTES) for _ in range(n)] for part in parts}
        hashes = {part: [ComponentHash(salt, shape) for salt in salts[part]]
                  for part, shape in parts.items()}

        async def describe(party: int, s: ServerSession) -> set[str]:
            mine = {part: {str(c): salts[part][c].hex() for c in held(n, party)}
                    for part in parts}
            return set((await s.request("upload", meta=meta, salts=mine)).get("send", []))

        async def stream() -> None:
            expected = {"data"} | ({"labels"} if meta.get("label") is not None else set()) \
                | ({"ids"} if meta["layout"] == "keyed" else set())
            wants = await asyncio.gather(*(describe(p, s) for p, s in enumerate(sessions)))
            for s, wanted in zip(sessions, wants, strict=True):
                if wanted != expected:
                    raise InputError(f"{s.name} expects the arrays {sorted(wanted)}")
            nonlocal sent
            for name, start, shares in blocks:
                sent += shares[0].nbytes
                for c, h in enumerate(hashes[name]):
                    holder = holders(n, c)[0]
                    h.update(shares[holder][held(n, holder).index(c)])
                for party, s in enumerate(sessions):
                    try:
                        await s.send_block(name, shares[party], start)
                    except PeerError:  # it may have said why before it hung up
                        await s._reply(timeout=self.dep.timeouts.probe)
                        raise
            got = await asyncio.gather(*(s._reply() for s in sessions), return_exceptions=True)
            errors = [g for g in got if isinstance(g, BaseException)]
            if errors:
                raise errors[0]

        try:
            await stream()
        except BaseException:
            await self._quietly(sessions, "abort", id=meta["id"])
            raise
        # what every server holds, signed with this owner's own key: a server that loses its
        # disk checks the components its peers give back against it (parties.rebuild)
        cert, key = self.dep.identity(self.identity)
        statement = {"kind": "contribution", "meta": meta,
                     "components": {part: {"shape": list(shape),
                                           "digests": {str(c): h.hexdigest()
                                                       for c, h in enumerate(hashes[part])}}
                                    for part, shape in parts.items()}}
        signed = Signed.sign(self.identity, statement, key, cert).to_wire()
        committed: list[ServerSession] = []
        try:
            first = await sessions[0].request("commit", id=meta["id"], signed=signed)
            committed.append(sessions[0])
            rest = await asyncio.gather(*(s.request("commit", id=meta["id"], seq=first["seq"],
                                                    signed=signed)
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
        return sent

    # -- withdraw -------------------------------------------------------------------------------
    async def withdraw(self, dataset: str) -> dict[str, Any]:
        """Withdraw this owner's contribution to ``dataset`` from every server that holds it
        and can be reached (``parties.uploads.withdraw_dataset`` states the rule each server
        checks). Each server is asked at the digest read from that server: jobs are pinned to
        one digest on every server, so servers that differ (one already withdrawn, one down)
        only stop jobs and must not keep the contribution anywhere else. ``still_held`` names
        the servers that may still hold it and why; running withdraw again finishes there."""
        check_name("dataset", dataset)
        role = self.dep.client(self.identity).role
        if role != "owner":  # as every server would refuse it (parties.access)
            raise AccessDenied(f"{self.identity} (role {role}) may not use `mpc-client "
                               "withdraw`; it needs the role owner")

        async def one(server: ServerConfig) -> list[str] | None:
            """The ids withdrawn from ``server``; None if it holds nothing of this owner."""
            session = await self.session(server)
            view = (await session.request("schema", dataset=dataset))["manifest"]
            if view is None or self.identity not in view["owners"]:
                return None
            answer = await session.request("withdraw", dataset=dataset, digest=view["digest"])
            remaining[server.name] = answer["remaining"]
            return list(answer["withdrawn"])

        remaining: dict[str, bool] = {}
        servers = list(self.dep.servers)
        answers = await asyncio.gather(*(one(s) for s in servers), return_exceptions=True)
        for a in answers:
            if isinstance(a, BaseException) and not isinstance(a, MPCError):
                raise a
        still = {s.name: str(a) for s, a in zip(servers, answers, strict=True)
                 if isinstance(a, BaseException)}
        done = {s.name: a for s, a in zip(servers, answers, strict=True)
                if isinstance(a, list)}
        if not done and not still:
            raise InputError(f"no server holds a contribution of {self.identity} to dataset "
                             f"{dataset!r}; nothing to withdraw")
        return {"dataset": dataset, "servers": sorted(done),
                "withdrawn": sorted({i for ids in done.values() for i in ids}),
                "dataset_removed": bool(done) and not any(remaining.values()),
                "still_held": still}

    @staticmethod
    async def _quietly(sessions: list[ServerSession], op: str, **args: Any) -> None:
        async def one(s: ServerSession) -> None:
            try:
                await s.request(op, **args)
            except MPCError:
                pass
        await asyncio.gather(*(one(s) for s in sessions if not s.conn.closed))


def _hashed_ids(path: str | Path, column: str, key_file: str | Path, dialect: Dialect
                ) -> np.ndarray:
    """The keyed hashes of the file's record IDs (``mpcnet.recordids``), its checks passed."""
    from mpcnet.dataset import read_cells
    from mpcnet.recordids import hashed, read_key

    return hashed(read_cells(path, column, dialect), read_key(key_file), str(path))

def _added(view: dict[str, Any] | None, meta: dict[str, Any]
           ) -> tuple[list[str], dict[str, list[str]]]:
    """The classes and categories that ``meta`` adds to the dataset split by rows ``view``."""
    if view is None:
        return [], {}
    schema = view["schema"]
    classes = (meta["classes"] or [])[len(schema["classes"] or []):]
    categories = {c: cats[len(schema["categories"].get(c, [])):]
                  for c, cats in meta["categories"].items()}
    return classes, {c: cats for c, cats in categories.items() if cats}
