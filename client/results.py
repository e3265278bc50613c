"""Layer: client. An analyst fetches a result: every server's shares, checked, then D'.

How many servers hold shares follows from the result's security setting (the registry), never
from a server's word; the client takes the shares from every one of them, after checking that
each lists the result exactly as the coordinator does, and that the result carries the signed
request that made it, for this result and naming this client (``result request`` check).
Reconstruction checks that the two servers holding each component agree (``CheatingDetected``
otherwise).
"""

from __future__ import annotations

import asyncio
import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.client.connection import Connections, ServerSession
from mpcnet.config import check_name
from mpcnet.errors import CheatingDetected, InputError, MPCError
from mpcnet.jobrequest import SignedRequest
from mpcnet.plain.logreg import Model


@dataclass
class Fetched:
    manifest: dict[str, Any]
    # party -> {"reduced", "exponents"} and, where released, "labels" and "indices"
    shares: dict[int, dict[str, np.ndarray]]



class Fetching(Connections):
    """What an analyst does with a result."""

    async def fetch(self, result: str, owner: str | None = None,
                    what: str = "result") -> Fetched:
        """Every server's shares of ``result`` of analyst ``owner`` (default: this client),
        with the servers' descriptions checked equal.

        How many servers hold shares follows from the result's security setting (the
        registry), not from any server's word: the client fetches from all of them (the
        reconstruction needs every component from two servers), after checking that each
        one lists the result exactly as the coordinator does. ``what`` names it in errors
        (a model owner fetches a "model")."""
        from mpcnet.schemes import registry

        check_name("result", result)
        owner = check_name("owner", owner or self.identity)
        key = (owner, result)
        leader = await self.session(self.dep.leader)
        listed = {(r["owner"], r["name"]): r for r in (await leader.request("results"))["results"]}
        if key not in listed:
            raise InputError(f"no {what} {result!r} of {owner} that you may read on "
                             f"{self.dep.leader.name}; see mpc-client results")
        entry = listed[key]
        security = entry.get("security")
        try:
            n = registry.get(str(security)).n_parties
        except MPCError:
            raise InputError(f"{what} {result!r}: {self.dep.leader.name} lists it with the "
                             f"unknown security setting {security!r}") from None
        if n > len(self.dep.servers):
            raise InputError(f"{what} {result!r} is {security}, which needs {n} servers; the "
                             f"deployment has {len(self.dep.servers)}")
        servers = list(self.dep.servers[:n])
        if entry.get("parties") != [s.name for s in servers]:
            raise InputError(f"{what} {result!r}: {self.dep.leader.name} lists its parties as "
                             f"{entry.get('parties')}, but {security} runs on "
                             f"{', '.join(s.name for s in servers)}; it cannot be trusted")
        sessions = await self.sessions_for(servers)

        async def listing_of(s: ServerSession) -> dict[str, Any] | None:
            return {(r["owner"], r["name"]): r
                    for r in (await s.request("results"))["results"]}.get(key)

        for s, theirs in zip(sessions[1:], await asyncio.gather(
                *(listing_of(s) for s in sessions[1:])), strict=True):
            if theirs is None:
                raise InputError(f"{what} {result!r} is not stored on {s.name} (it is on "
                                 f"{self.dep.leader.name}); it cannot be reconstructed")
            if theirs != entry:
                differ = sorted(k for k in entry.keys() | theirs.keys()
                                if entry.get(k) != theirs.get(k))
                raise InputError(f"{what} {result!r}: {s.name} and {self.dep.leader.name} "
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
        same = ("name", "kind", "job", "dataset", "k", "score", "rows", "security", "sharing",
                "parties", "owner", "share_with", "request", "release", "label", "classes",
                "columns", "source", "analyst", "training")
        if (any({k: m.get(k) for k in same} != {k: first.get(k) for k in same}
                or m.get("party") != p for p, m in enumerate(manifests))
                or any(first.get(k) != v for k, v in described.items())
                or entry.get("nonce") != (first.get("request") or {}).get("nonce")):
            raise InputError(f"{what} {result!r}: the servers hold results of different jobs; "
                             "it cannot be reconstructed")
        self._check_result_request(result, manifests[0])
        return Fetched(manifests[0], {p: a for p, (_, a) in enumerate(got)})

    def _check_result_request(self, result: str, manifest: dict[str, Any]) -> None:
        """The result was made by a request that an analyst signed, for this result, and that
        names this client (every server checked it before the job ran; a client that trusts
        no single server checks it again)."""
        try:  # as of when it was made: a result outlives its request's validity
            signed = SignedRequest.from_wire(manifest.get("request"))
            request = signed.verify(self.dep, now=signed.request.issued)
        except MPCError as exc:
            raise CheatingDetected("result request", f"result {result!r}: {exc}") from None
        if request.kind == "train":  # a model: its owner alone reads it
            made: dict[str, object] = {"name": request.result, "kind": "model",
                                       "source": request.dataset,
                    "score": request.score, "security": request.security,
                    "owner": request.model_owner, "analyst": request.analyst,
                    "share_with": []}
            allowed = self.identity == request.model_owner
        else:
            made = {"name": request.result, "kind": "select", "dataset": request.dataset,
                    "k": request.k, "score": request.score, "security": request.security,
                    "owner": request.analyst, "share_with": list(request.share_with)}
            allowed = request.may_read(self.identity)
            if request.candidates and manifest.get("k") in request.candidates:
                made["k"] = manifest["k"]  # --k auto: the chosen k (every server's, above)
        if any(manifest.get(key, "select" if key == "kind" else None) != value
               for key, value in made.items()):
            raise CheatingDetected("result request", f"result {result!r} does not match the "
                                                     "request that made it")
        if not allowed:
            raise InputError(f"result {result!r} belongs to {made['owner']}, who did not "
                             f"share it with {self.identity}")


@dataclass(frozen=True)
class Reduced:
    """D' as its fixed-point integers (m x k int64) and their scale exponents (k); with the
    selected columns' names and each row's class where the data owners release them."""

    encoded: np.ndarray
    exponents: np.ndarray
    names: list[str] | None = None
    label: str | None = None  # the label column's name
    classes: list[str] | None = None  # each row's class

    @property
    def header(self) -> list[str]:
        names = self.names or [f"f{i + 1}" for i in range(len(self.exponents))]
        return names + ([self.label or "label"] if self.classes is not None else [])

    @property
    def values(self) -> np.ndarray:
        """The m x k floats z * 2**-e (exact: every encoded value is dyadic)."""
        from mpcnet.fixedpoint import decode

        return decode(self.encoded, self.exponents)

    def texts(self) -> list[list[str]]:
        """Rows of decimal texts, each value at the precision of its encoding (see
        ``_column_texts``)."""
        columns = [_column_texts(self.encoded[:, j], int(e))
                   for j, e in enumerate(self.exponents)]
        if self.classes is not None:
            columns.append(self.classes)
        return [list(row) for row in zip(*columns, strict=True)] if columns else []


def reconstruct_encoded(fetched: Fetched) -> Reduced:
    """D' (with the names and the label, where the owners release them) after checking that
    the servers' copies of every share agree (``CheatingDetected`` otherwise). Refused if the
    owners release shares only: the analyst then passes them on (``--shares-dir``)."""
    from mpcnet.ring import to_signed
    from mpcnet.schemes import registry

    m = fetched.manifest
    if m.get("kind") == "model":
        raise InputError(f"result {m['name']!r} is a model; its owner reads it with "
                         "mpc-client model")
    release = m.get("release", ["values"])
    if "values" not in release:
        raise InputError(f"the owners of dataset {m['dataset']!r} release shares only: fetch "
                         "them with --shares-dir (they are for another computation, not to "
                         "be combined)")
    info = registry.get(m["security"])

    def opened(part: str) -> np.ndarray:
        return to_signed(info.reconstruct({p: a[part] for p, a in fetched.shares.items()}))

    names = classes = None
    if "names" in release:
        indices = opened("indices")
        if m.get("columns") is None or not ((0 <= indices) & (indices < len(m["columns"]))).all():
            raise CheatingDetected("result consistency", "the selected indices do not name "
                                                         "columns of the dataset")
        names = [m["columns"][int(i)] for i in indices]
    if "label" in release:
        codes = opened("labels")
        if m.get("classes") is None or not ((0 <= codes) & (codes < len(m["classes"]))).all():
            raise CheatingDetected("result consistency", "a row's class code names no class")
        classes = [m["classes"][int(c)] for c in codes]
    return Reduced(opened("reduced"), opened("exponents").astype(np.int64), names,
                   m.get("label"), classes)


def reconstruct_model(fetched: Fetched, analyst: str | None = None) -> Model:
    """The trained model (``mpcnet.plain.logreg.Model``) after checking that the servers'
    copies of every share agree, and, given ``analyst``, that this analyst trained it (any
    analyst may train a model for a model owner, under any free name); the columns are named
    where the data owners release names (else f1..fk, the order of D')."""
    from mpcnet.ring import to_signed
    from mpcnet.schemes import registry
    from mpcnet.train.model import PARTS, model_of

    m = fetched.manifest
    if m.get("kind") != "model":
        raise InputError(f"result {m['name']!r} is a selection, not a model; fetch it with "
                         "mpc-client fetch")
    if analyst is not None and m.get("analyst") != analyst:
        raise InputError(f"model {m['name']!r} was trained by {m.get('analyst')}, not by "
                         f"{analyst}")
    info = registry.get(m["security"])
    parts = {frozenset(a) for a in fetched.shares.values()}
    if len(parts) != 1 or not set(PARTS) <= next(iter(parts)):
        raise CheatingDetected("result consistency", "the servers sent different parts of "
                                                     "the model")
    values = {part: to_signed(info.reconstruct({p: a[part] for p, a in fetched.shares.items()}))
              for part in PARTS}
    k = len(values["ratio"])
    columns = [f"f{i + 1}" for i in range(k)]
    if "indices" in next(iter(parts)):
        indices = to_signed(info.reconstruct({p: a["indices"]
                                              for p, a in fetched.shares.items()}))
        if m.get("columns") is None or not ((0 <= indices) & (indices < len(m["columns"]))).all():
            raise CheatingDetected("result consistency", "the model's indices do not name "
                                                         "columns of the dataset")
        columns = [m["columns"][int(i)] for i in indices]
    return model_of(values, m["classes"], columns)


def write_model(path: Path, model: Model, *, overwrite: bool = False) -> None:
    """The model as JSON, written whole or not at all and readable by its owner only."""
    import json
    import os

    check_writable(path, overwrite)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(model.as_json(), f, indent=1)
        f.write("\n")
    tmp.replace(path)


def reconstruct(fetched: Fetched) -> np.ndarray:
    """D' as floats (m x k), checked as ``reconstruct_encoded`` does (values only)."""
    return reconstruct_encoded(fetched).values


def decimal_places(exponents: np.ndarray) -> np.ndarray:
    """Per column, decimal places d that always tell the values of the encoding apart: with
    10**-d < 2**-e, rounding z * 2**-e to d places moves it by less than half a step 2**-e, so
    reading the text back and encoding it gives z again."""
    e = np.asarray(exponents, dtype=np.int64)
    return np.where(e > 0, np.floor(e * np.log10(2.0)).astype(np.int64) + 1, 0)


def _column_texts(z: np.ndarray, e: int) -> list[str]:
    """One column's values as the shortest fixed-point decimals that encode back to z at the
    exponent e (0.0012, not 0.001199999824166298 or 0.001200000001)."""
    v = np.ldexp(z.astype(np.float64), -e)
    bound = int(decimal_places(np.array([e]))[0])
    places = np.full(v.shape, bound)
    for d in range(bound - 1, -1, -1):  # the fewest places whose rounding still encodes to z
        fits = np.rint(np.ldexp(np.round(v, d), e)) == z
        places[fits] = d
    texts = [_trim(f"{x:.{d}f}") for x, d in zip(v.tolist(), places.tolist(), strict=True)]
    back = np.rint(np.ldexp(np.array(texts, dtype=np.float64), e))
    for i in np.flatnonzero(back != z):  # np.round and the text's rounding may differ
        texts[i] = _trim(f"{v[i]:.{bound}f}")
    return texts


def write_csv(path: Path, reduced: Reduced, *, overwrite: bool = False) -> None:
    """D' with header f1..fk, each value at the precision of its encoding, written whole or
    not at all and readable by its user only; an existing file is refused unless
    ``overwrite``."""
    import os

    check_writable(path, overwrite)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)  # a file or a planted symlink: never written through
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # D' is secret
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(reduced.header)
        out.writerows(reduced.texts())
    tmp.replace(path)


def check_writable(path: Path, overwrite: bool) -> None:
    """Refuse to replace an existing --out file, or shares in an existing --shares-dir, unless
    told to."""
    taken = path.is_file() or (path.is_dir() and any(path.glob("*.npy")))
    if taken and not overwrite:
        raise InputError(f"{path} exists; choose another path or pass --force to replace it")


def write_shares(folder: Path, fetched: Fetched, servers: list[str], *,
                 overwrite: bool = False) -> None:
    """Each server's shares as ``<server>.<part>.npy`` and the result's manifest as
    ``result.json`` in ``folder``, every file readable by its user only (shares are secrets
    once two of them are together)."""
    import json
    import os

    check_writable(folder, overwrite)
    folder.mkdir(parents=True, exist_ok=True)

    def private(name: str) -> Any:
        path = folder / name
        path.unlink(missing_ok=True)  # a replaced file would keep its old mode
        return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")

    for party, arrays in fetched.shares.items():
        for part, arr in arrays.items():
            with private(f"{servers[party]}.{part}.npy") as f:
                np.save(f, arr)
    with private("result.json") as f:
        f.write(json.dumps(fetched.manifest, indent=1).encode())


def _trim(text: str) -> str:
    """A fixed-point decimal without trailing zeros (and without a bare point)."""
    return text.rstrip("0").rstrip(".") if "." in text else text


