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
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from client.connection import Connections, ServerSession, default_security
from mpcnet.config import check_name
from mpcnet.errors import InputError, MPCError, RangeError
from mpcnet.schemes.registry import sharing_of
from parties import catalog


@dataclass
class ShareSummary:
    dataset: str
    rows: int
    columns: int
    label: str | None
    total_rows: int
    seconds: float
    bytes_per_server: int



class Sharing(Connections):
    """What a data owner does: share a file as one contribution to a dataset."""

    # -- share --------------------------------------------------------------------------------
    async def share(self, path: str | Path, dataset: str, *, label: str | None = None,
                    layout: str = "rows", categorical: str = "refuse", missing: str = "refuse",
                    drop: tuple[str, ...] = (), ordinal: tuple[str, ...] = (),
                    security: str | None = None, table: Any = None) -> ShareSummary:
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
                categorical=categorical, missing=missing, drop=drop, ordinal=ordinal,
                table=given)
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
                      categorical: str, missing: str, drop: tuple[str, ...],
                      ordinal: tuple[str, ...], table: Any
                      ) -> tuple[dict[str, Any], list[dict[str, np.ndarray]]]:
        """Read and check the file against ``view``, encode and share it: the description of
        the upload and each server's share arrays."""
        from mpcnet.dataset import EncodingOptions, class_codes, indicators, read_csv
        from mpcnet.fixedpoint import auto_exponents, encode
        from mpcnet.ring import to_ring

        schema = view["schema"] if view else None
        fixed = view is not None and view["layout"] == "rows"
        known = dict(schema["categories"]) if fixed and schema else {}
        if table is None:
            options = EncodingOptions(categorical=categorical,  # type: ignore[arg-type]
                                      missing=missing,  # type: ignore[arg-type]
                                      known_categories=known, ordinal_columns=ordinal)
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
            classes, codes = class_codes(table.labels, agreed)
        meta = catalog.contribution_meta(
            dataset=dataset, upload_id=uuid.uuid4().hex[:12], layout=layout, sharing=sharing,
            rows=table.values.shape[0], columns=columns,
            exponents=[] if exps is None else exps.tolist(),
            categories={k: v for k, v in table.categories.items() if k in columns},
            label=label if table.labels is not None else None, classes=classes,
            security=info.name)
        if exps is None:
            meta["exponents"] = [0] * len(columns)
        catalog.check_against(view, meta, self.identity)
        assert exps is not None
        try:
            values = to_ring(encode(table.values, exps, columns))
        except RangeError as exc:  # it names the row and column; say which file and why
            why = ("the dataset's first contribution fixed the column's scale; rescale the "
                   "column (other units) in every owner's file and share them to a new "
                   "--dataset") if fixed else "rescale the column (other units)"
            raise RangeError(f"{path}: {exc}; {why}") from None
        arrays_by_party: list[dict[str, np.ndarray]] = [
            {"data": d} for d in info.share(values)]
        if codes is not None and classes is not None:
            for party, lab in enumerate(info.share(indicators(codes, len(classes)))):
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

