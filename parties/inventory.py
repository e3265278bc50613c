"""Layer: server. What a server gives a peer that rebuilds its lost data folder.

A server that lost its disk asks each of its peers, as a server of the deployment
(``parties.rebuild``), for its *inventory*: the manifests of the datasets and results the two
of them hold under the sharing, with the owners' and servers' signed statements but without
this server's file entries (their salts belong to this server's components). It then asks for
each *component* it held: this server sends it only if both of them hold that component under
the sharing (rep3: two holders of each of three; rep4: three of each of four), so no server
ever receives a component it did not hold: nobody learns more than before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from mpcnet.config import Deployment, check_name
from mpcnet.errors import AccessDenied, InputError
from mpcnet.parties.sharefiles import ShareFile
from mpcnet.parties.storage import Storage, inside
from mpcnet.schemes.registry import for_sharing, held

BLOCK_BYTES = 16 << 20  # a component travels in blocks of rows of about this size


def _dataset_view(manifest: dict[str, Any]) -> dict[str, Any]:
    return dict(manifest, contributions=[{k: v for k, v in c.items() if k != "files"}
                                         for c in manifest["contributions"]])


def _result_view(manifest: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in manifest.items() if k not in ("files", "party", "stored")}


def inventory(storage: Storage, dep: Deployment, peer: str) -> dict[str, Any]:
    """The datasets and results that server ``peer`` holds with this one."""
    party = dep.party(peer)
    datasets = [_dataset_view(m) for m in map(storage.dataset, storage.dataset_names())
                if m is not None and party < for_sharing(m["sharing"]).n_parties]
    results = [_result_view(m) for m in storage.all_results()
               if peer in m.get("parties", [])]
    return {"datasets": datasets, "results": results}


def _component(dep: Deployment, me: int, peer: str, n_parties: int, component: Any) -> int:
    """The slot of ``component`` here, once both this server and ``peer`` hold it (both are
    parties of the sharing: a fourth server holds nothing of a three-party one)."""
    if not isinstance(component, int) or isinstance(component, bool) \
            or not 0 <= component < n_parties:
        raise InputError(f"no component {component!r} of a sharing among {n_parties}")
    if dep.party(peer) >= n_parties or component not in held(n_parties, dep.party(peer)):
        raise AccessDenied(f"{peer} does not hold component {component} under the sharing; "
                           "a server takes back only what it held")
    if me >= n_parties or component not in held(n_parties, me):
        raise InputError(f"component {component} is not held here")
    return held(n_parties, me).index(component)


def component(storage: Storage, dep: Deployment, me: int, peer: str, args: dict[str, Any]
              ) -> tuple[dict[str, Any], Blocks]:
    """The salt and shape of one component that ``peer`` held, and its blocks of rows
    (each stored file checked against its SHA-256 first): of a contribution's array
    (``dataset``, ``upload``, ``part``) or of a result's (``owner``, ``result``, ``job``,
    ``part``: that job's copy only, never an aborted job's of the same name)."""
    part = str(args.get("part"))
    if "dataset" in args:
        manifest = storage.dataset(check_name("dataset", str(args["dataset"])))
        if manifest is None:
            raise InputError(f"dataset {args['dataset']!r} is not stored here")
        entries = [c for c in manifest["contributions"] if c["id"] == args.get("upload")]
        if not entries or part not in entries[0]["files"]:
            raise InputError(f"dataset {manifest['name']!r} has no array {part!r} of upload "
                             f"{args.get('upload')!r}")
        n = for_sharing(manifest["sharing"]).n_parties
        slot = _component(dep, me, peer, n, args.get("component"))
        entry = entries[0]["files"][part]
        salt = _salt(entry, args["component"])
        f = storage.checked_file(inside(storage.datasets, manifest["name"], "dataset"), entry)
        return {"salt": salt, "shape": list(f.shape[-2:])}, Blocks(f, slot)
    owner = check_name("owner", str(args.get("owner")))
    name = check_name("result", str(args.get("result")))
    stored = storage.result(owner, name)
    if stored is None or part not in stored["files"]:
        raise InputError(f"no array {part!r} of result {name!r} of {owner} here")
    if stored.get("job") != args.get("job"):  # an aborted job's copy is never handed back
        raise InputError(f"result {name!r} of {owner} is stored here from job "
                         f"{stored.get('job')}, not {args.get('job')}")
    if stored["parties"] != [s.name for s in dep.servers[:len(stored["parties"])]]:
        raise InputError(f"result {name!r} of {owner} was made by other servers")
    n = len(stored["parties"])
    slot = _component(dep, me, peer, n, args.get("component"))
    salt = _salt(stored["files"][part], args["component"])
    _, arrays = storage.load_result(owner, name)
    return ({"salt": salt, "shape": list(arrays[part].shape[1:])},
            Blocks(None, slot, arrays[part][slot]))


def _salt(entry: dict[str, Any], component: int) -> str:
    salt = entry.get("components", {}).get(str(component), {}).get("salt")
    if not isinstance(salt, str):
        raise InputError("this array was stored without its components' salts (by an earlier "
                         "version); it cannot be handed back")
    return salt


class Blocks(Iterator[np.ndarray]):
    """One component to send: of a share file (``f``, open; read a block of rows at a time,
    closed by ``close``) or of a result (``whole``, in memory, in one block)."""

    def __init__(self, f: ShareFile | None, slot: int, whole: np.ndarray | None = None
                 ) -> None:
        self.f, self.slot, self.whole, self.at = f, slot, whole, 0

    def __next__(self) -> np.ndarray:
        if self.f is None:
            if self.whole is None:
                raise StopIteration
            block, self.whole = self.whole, None
            return block
        if self.at >= self.f.rows:
            raise StopIteration
        rows = max(1, BLOCK_BYTES // (8 * max(1, self.f.shape[-1])))
        start, self.at = self.at, min(self.f.rows, self.at + rows)
        return self.f.read_rows(start, self.at, self.slot)

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f, self.at = None, 0
