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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from client.connection import Connections, ServerSession
from mpcnet.config import check_name
from mpcnet.errors import CheatingDetected, InputError, MPCError
from mpcnet.jobrequest import SignedRequest, load_ca


@dataclass
class Fetched:
    manifest: dict[str, Any]
    shares: dict[int, dict[str, np.ndarray]]  # party -> {"reduced", "exponents"}



class Fetching(Connections):
    """What an analyst does with a result."""

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
        try:  # as of when it was made: a result outlives its request's validity
            signed = SignedRequest.from_wire(manifest.get("request"))
            request = signed.verify(self.dep, load_ca(self.dep.ca), now=signed.request.issued)
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


