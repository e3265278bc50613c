"""Layer: server. What the owners' and the servers' signed statements say, and the checks on them.

Every stored share array holds its server's components of a replicated sharing (rep3: x_i and
x_{i+1}; rep4: all but x_i; ``mpcnet.schemes.registry.held``). A statement lists, per array
("part"), the logical shape and the salted digest of components (``mpcnet.signing``):

- an owner's statement of a contribution (signed by the owner's client at upload): the upload's
  description as every server received it, and the digest of every component of every part;
  each server checks its own components against it before it commits, and keeps it;
- a server's statement of a result or a model (signed by each server of the job as the job
  commits): whose and which result, the job, a digest of the manifest every server stores alike
  and the digests of this server's components; every server checks its peers' against its own
  components and keeps them all.

A server that lost its disk checks every component it takes back from its peers against these
(``parties.rebuild``). The shapes of the statements live here, once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from mpcnet.errors import CheatingDetected, InputError
from mpcnet.schemes.registry import held
from mpcnet.signing import Signed

PER_SERVER = ("party", "files", "stored", "statements")
"""Keys of a result's manifest that differ from server to server (the rest is alike)."""

Components = dict[str, dict[str, Any]]  # part -> {"shape": [...], "digests": {c: hex}}


def contribution_parts(meta: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """The logical shape of every array of a contribution: the data, the label's class
    indicators when it carries the label, the record IDs' hashes when it is keyed by them."""
    parts = {"data": (int(meta["rows"]), len(meta["columns"]))}
    if meta.get("label") is not None:
        parts["labels"] = (int(meta["rows"]), len(meta["classes"]))
    if meta.get("layout") == "keyed":  # the hashes of the record IDs (mpcnet.recordids)
        parts["ids"] = (int(meta["rows"]), 2)
    return parts


def held_digests(files: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """part -> component -> digest of the components a server stores (its file entries)."""
    return {part: {c: e["digest"] for c, e in entry.get("components", {}).items()}
            for part, entry in files.items()}


def check_components(components: Any, shapes: Mapping[str, tuple[int, ...]], n_parties: int,
                     every: bool) -> Components:
    """``components`` of a statement, well-formed for arrays of ``shapes``: a digest of
    every component (``every``) or of some; ``InputError`` otherwise."""
    if not isinstance(components, dict) or set(components) != set(shapes):
        raise InputError(f"the statement lists the arrays {sorted(components or [])}, not "
                         f"{sorted(shapes)}")
    for part, shape in shapes.items():
        entry = components[part]
        digests = entry.get("digests") if isinstance(entry, dict) else None
        if not isinstance(digests, dict) or entry.get("shape") != list(shape) or not all(
                isinstance(d, str) and len(d) == 64 for d in digests.values()) or (
                every and set(digests) != {str(c) for c in range(n_parties)}) or not set(
                digests) <= {str(c) for c in range(n_parties)}:
            raise InputError(f"the statement's entry for {part} is malformed or is not of a "
                             f"{list(shape)} array")
    return components  # type: ignore[no-any-return]


# -- an owner's contribution -------------------------------------------------------------------
def check_contribution(statement: dict[str, Any], meta: dict[str, Any], n_parties: int,
                       mine: dict[str, dict[str, str]]) -> None:
    """The owner's statement describes the upload as this server received it (``meta``) and
    gives its components (``mine``: part -> component -> digest) the digests it computed;
    ``InputError`` naming the first difference."""
    if statement.get("kind") != "contribution" or statement.get("meta") != meta:
        raise InputError("the owner's signed statement is not of this upload (its description "
                         "differs); share the file again")
    components = check_components(statement.get("components"), contribution_parts(meta),
                                  n_parties, every=True)
    for part, digests in mine.items():
        for c, digest in digests.items():
            if components[part]["digests"][c] != digest:
                raise InputError(f"the owner's signed digest of component {c} of {part} differs "
                                 "from the shares this server received; share the file again")


# -- a server's result -------------------------------------------------------------------------
def result_meta(manifest: dict[str, Any]) -> str:
    """A digest of what every server of a job stores alike in a result's manifest."""
    alike = {k: v for k, v in manifest.items() if k not in PER_SERVER}
    return hashlib.sha256(json.dumps(alike, sort_keys=True).encode()).hexdigest()


def result_statement(manifest: dict[str, Any], files: dict[str, dict[str, Any]],
                     shapes: dict[str, tuple[int, ...]]) -> dict[str, Any]:
    """What a server signs of a result it stores: whose, which, the job, the manifest's
    digest and its own components' digests."""
    return {"kind": "result", "owner": manifest["owner"], "name": manifest["name"],
            "job": manifest["job"], "meta": result_meta(manifest),
            "components": {part: {"shape": list(shapes[part]), "digests": digests}
                           for part, digests in held_digests(files).items()}}


def check_result_statement(statement: dict[str, Any], expected: dict[str, Any], signer: str,
                           n_parties: int, party: int) -> Components:
    """A statement by server ``signer`` (party ``party``) of the result ``expected`` (this
    server's own statement of it, or what a rebuilt server takes back): the same result, job
    and manifest, digests of the signer's components only, equal to ``expected``'s where
    both give one. ``CheatingDetected("result statement")`` naming the signer otherwise."""
    def differs(why: str) -> CheatingDetected:
        return CheatingDetected("result statement", f"{signer}'s signed statement of result "
                                                    f"{expected['name']!r} {why}")

    if any(statement.get(k) != expected[k] for k in ("kind", "owner", "name", "job", "meta")):
        raise differs("is of another result, job or manifest")
    shapes = {part: tuple(e["shape"]) for part, e in expected["components"].items()}
    try:
        components = check_components(statement.get("components"), shapes, n_parties, False)
    except InputError as exc:
        raise differs(str(exc)) from None
    own = {str(c) for c in held(n_parties, party)}
    for part, entry in components.items():
        if set(entry["digests"]) != own:
            raise differs(f"lists other components of {part} than its own")
        for c, digest in entry["digests"].items():
            if expected["components"][part]["digests"].get(c, digest) != digest:
                raise differs(f"gives component {c} of {part} another digest")
    return components


def verified_statements(stored: Any, expected: dict[str, Any], dep: Any, servers: list[str]
                        ) -> dict[str, dict[str, Any]]:
    """Every server's signed statement of a result, each checked against ``expected`` (the
    signature by the key trusted for its server, ``check_result_statement``), as they are
    stored: server name -> the statement as it travels."""
    if not isinstance(stored, dict) or set(stored) != set(servers):
        raise CheatingDetected("result statement", f"result {expected['name']!r} comes without "
                                                   "the signed statement of every server")
    for party, name in enumerate(servers):
        signed = Signed.from_wire(stored[name])
        check_result_statement(signed.verify(dep, name), expected, name, len(servers), party)
    return stored  # type: ignore[no-any-return]
