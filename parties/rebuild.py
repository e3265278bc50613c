"""Layer: server. Rebuild a server's lost data folder from its peers (``mpc-party --rebuild``).

In replicated sharing every component a server holds is held by another server too (rep3:
each of the three by two servers; rep4: each of the four by three), so a server whose disk is
gone can take its components back without the owners. It connects to each peer as a server of
the deployment, takes its inventory (``parties.inventory``), and for every dataset and result it
held:

1. the manifest: a dataset's must be the same on every peer that holds it (its catalogue
   digest), or, with four servers, on a majority of them (a dissenting peer is named); each
   contribution's description is the one its owner signed, and the schema is assembled again
   from those descriptions. A result's is checked against this server's own signed statement
   of it, which its peers kept (and every other server's statement against that one), and
   the copies so confirmed must be the same job's on every peer (with four, on a majority):
   a server signs an aborted job's result too, so a peer could replay one;
2. every component it held, asked of another holder (never one it did not hold: the peer
   refuses; a result's by its job), the next holder if one refuses or, for a result, differs,
   and checked against a signed digest: its owner's for a dataset, this server's own for a
   result. A component that differs, sent by a peer that listed the copy agreed on, is that
   peer cheating: it is named, and unless another holder sent it right that dataset or result
   is refused (nothing of it stored); the others are rebuilt;
3. written to staging and committed as an upload or a job would (``parties.storage``).

Job records (the history of jobs and their figures) are not rebuilt; the other servers keep
theirs, and each of them still refuses a request that was used before.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.client.connection import Connections, ServerSession
from mpcnet.config import Deployment
from mpcnet.errors import CheatingDetected, InputError, MPCError, PeerError, StorageError
from mpcnet.parties import catalog, statements
from mpcnet.parties.sharefiles import ShareFileWriter
from mpcnet.parties.storage import FILE_MODE, Storage, write_array
from mpcnet.schemes.registry import for_sharing, held, holders
from mpcnet.signing import Signed, component_digest, salt_of

log = logging.getLogger("mpcnet.rebuild")


@dataclass
class Summary:
    """What a rebuild did: the datasets and results rebuilt, those refused and why, the bytes
    of components received and the time it took."""

    datasets: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)
    named: dict[str, str] = field(default_factory=dict)
    bytes_received: int = 0
    seconds: float = 0.0
    cheated: bool = False

    def lines(self) -> list[str]:
        out = [f"rebuilt {len(self.datasets)} datasets and {len(self.results)} results and "
               f"models ({self.bytes_received / 2**20:,.1f} MiB received) in "
               f"{self.seconds:.2f} s"]
        out += [f"unreachable: {name}: {why}" for name, why in self.unreachable.items()]
        out += [f"refused {what}: {why}" for what, why in self.refused.items()]
        out += [f"cheating: {name} {why}" for name, why in self.named.items()]
        return out


class Rebuild:
    """Server ``name`` taking back, from its peers, what it held under the sharing."""

    def __init__(self, dep: Deployment, name: str, storage: Storage) -> None:
        self.dep, self.name, self.storage = dep, name, storage
        self.party = dep.party(name)
        self.summary = Summary()
        self.sessions: dict[int, ServerSession] = {}
        self.turns: dict[int, asyncio.Lock] = {}  # one component at a time on a session

    async def run(self) -> Summary:
        start = time.perf_counter()
        if self.storage.dataset_names() or self.storage.all_results():
            raise StorageError(f"{self.storage.root} is not empty: --rebuild fills the empty "
                               "data folder of a server that lost its own; move this one away "
                               "first")
        conns = Connections(self.dep, self.name)
        try:
            inventories = await self._inventories(conns)
            if len(inventories) < 2:  # with three servers both, with four a majority
                raise PeerError("a rebuild needs two of the other servers, to learn what "
                                "this one held and check it; cannot reach "
                                + "; ".join(self.summary.unreachable.values()))
            for name, views in self._by_name(inventories, "datasets").items():
                await self._refusing(f"dataset {name!r}", self._dataset(name, views))
            for key, views in self._by_name(inventories, "results").items():
                await self._refusing(f"result {key[1]!r} of {key[0]}",
                                     self._result(views))
        finally:
            conns.close()
        self.summary.seconds = round(time.perf_counter() - start, 3)
        return self.summary

    async def _inventories(self, conns: Connections) -> dict[int, dict[str, Any]]:
        out = {}
        for server in self.dep.servers:
            peer = self.dep.party(server.name)
            if peer == self.party:
                continue
            try:
                session = await conns.session(server)
                out[peer] = await session.request("inventory")
                self.sessions[peer] = session
                self.turns[peer] = asyncio.Lock()
            except PeerError as exc:
                self.summary.unreachable[server.name] = str(exc)
        return out

    def _by_name(self, inventories: dict[int, dict[str, Any]], kind: str
                 ) -> dict[Any, dict[int, dict[str, Any]]]:
        """Each dataset (by name) or result (by analyst and name) with every peer's view; a
        view without its names is left out, naming its peer."""
        out: dict[Any, dict[int, dict[str, Any]]] = {}
        for peer, inv in inventories.items():
            for view in inv.get(kind, []) if isinstance(inv.get(kind), list) else []:
                names = (view.get("name"), view.get("owner")) if isinstance(view, dict) \
                    else (None, None)
                if not isinstance(names[0], str) or kind == "results" and \
                        not isinstance(names[1], str):
                    log.warning("%s lists a malformed %s entry; ignored",
                                self._peer_name(peer), kind)
                    continue
                out.setdefault(names[0] if kind == "datasets" else names[::-1], {})[peer] = view
        return dict(sorted(out.items()))

    async def _refusing(self, what: str, job: Any) -> None:
        """Run one dataset's or result's rebuild; a failure refuses it alone."""
        try:
            await job
        except MPCError as exc:
            self.summary.refused[what] = f"{type(exc).__name__}: {exc}"
            self.summary.cheated |= isinstance(exc, CheatingDetected)
            log.warning("refused %s: %s", what, exc)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # a manifest a peer sent without a field the checks read
            self.summary.refused[what] = (f"a peer sent a malformed manifest "
                                          f"({type(exc).__name__}: {exc})")
            log.warning("refused %s: a peer sent a malformed manifest", what)

    def _peer_name(self, peer: int) -> str:
        return self.dep.servers[peer].name

    # -- a dataset ---------------------------------------------------------------------------
    def _agreed(self, name: str, views: dict[int, dict[str, Any]]
                ) -> tuple[dict[str, Any], int, list[int]]:
        """The manifest the peers that hold the dataset agree on, the number of parties of
        its sharing and the peers that list that manifest: both other holders with
        three, two of the three with four (one may be down, or dissent: it is named)."""
        digests = {p: catalog.digest(v) for p, v in views.items()}
        top, count = Counter(digests.values()).most_common(1)[0]
        if count < 2 and len(digests) > 1:
            raise CheatingDetected("rebuild manifest",
                                   f"the peers do not agree on dataset {name!r}: "
                                   + ", ".join(f"{self._peer_name(p)} has {d[:12]}"
                                               for p, d in digests.items()))
        view = next(v for p, v in views.items() if digests[p] == top)
        n = for_sharing(str(view.get("sharing"))).n_parties
        others = [p for p in range(min(n, len(self.dep.servers))) if p != self.party]
        down = [self._peer_name(p) for p in others if p not in self.sessions]
        silent = [self._peer_name(p) for p in others if p in self.sessions and p not in views]
        if count < 2 or n == 3 and (down or silent):
            raise PeerError(f"dataset {name!r} needs " + ("both other holders" if n == 3 else
                                                          "two other holders that agree")
                            + (f"; {', '.join(down)} cannot be reached" if down else "")
                            + (f"; {', '.join(silent)} does not list it (did it lose its "
                               "data folder too?)" if silent else ""))
        for p, d in digests.items():
            if d != top:
                log.warning("%s describes dataset %s otherwise than the other holders",
                            self._peer_name(p), name)
        return view, n, [p for p in digests if digests[p] == top]

    async def _dataset(self, name: str, views: dict[int, dict[str, Any]]) -> None:
        view, n, listing = self._agreed(name, views)
        signed = {c["id"]: self._owner_statement(name, c, n) for c in view["contributions"]}
        entries = [dict(catalog.entry(signed[c["id"]]["meta"], c["owner"]), seq=c["seq"],
                        signed=c["signed"]) for c in view["contributions"]]
        again = catalog.assemble(name, view["layout"], view["sharing"], entries)
        if catalog.digest(again) != catalog.digest(view):
            raise CheatingDetected("rebuild manifest", f"dataset {name!r}: its schema is not "
                                                       "the one its owners' signed "
                                                       "descriptions make")
        staged = self.storage.stage("rebuild")
        try:
            contributions = []
            for c in view["contributions"]:
                files = await self._contribution(name, c, signed[c["id"]], n, staged,
                                                 listing)
                contributions.append(dict(c, files=files, stored=time.time()))
            self.storage.commit_contribution(dict(view, contributions=contributions), staged)
        except BaseException:
            self.storage.discard(staged)
            raise
        self.summary.datasets.append(name)
        log.info("dataset %s rebuilt: %d contributions, %d rows", name,
                 len(contributions), view["rows"])

    def _owner_statement(self, name: str, c: dict[str, Any], n: int) -> dict[str, Any]:
        """The statement the owner of contribution ``c`` signed, describing it."""
        if "signed" not in c:
            raise InputError(f"dataset {name!r}: contribution {c['id']} of {c['owner']} was "
                             "stored without its owner's signed statement (by an earlier "
                             "version); its owner must share it again")
        statement = Signed.from_wire(c["signed"]).verify(self.dep, c["owner"])
        meta = statement.get("meta")
        if statement.get("kind") != "contribution" or not isinstance(meta, dict) or any(
                v != c.get(k) for k, v in catalog.entry(meta, c["owner"]).items()
                if k != "files"):
            raise CheatingDetected("rebuild manifest", f"dataset {name!r}: contribution "
                                                       f"{c['id']} is not the one its owner "
                                                       f"{c['owner']} signed")
        statements.check_components(statement.get("components"),
                                    statements.contribution_parts(meta), n, every=True)
        return statement

    async def _contribution(self, name: str, c: dict[str, Any], statement: dict[str, Any],
                            n: int, staged: Path, listing: list[int]) -> dict[str, Any]:
        """This server's files of contribution ``c``, every component checked against what
        its owner signed."""
        lead = (len(held(n, self.party)),)
        files = {}
        for part, shape in statements.contribution_parts(statement["meta"]).items():
            writer = ShareFileWriter(staged / f"{uuid.uuid4().hex}.{part}.npy", lead + shape,
                                     FILE_MODE)
            got = await asyncio.gather(*(
                self._fetch_rows(writer, slot, comp, {"dataset": name, "upload": c["id"],
                                                      "part": part}, n, listing)
                for slot, comp in enumerate(held(n, self.party))))
            salts = [salt for salt, _ in got]
            if not writer.complete:
                raise PeerError(f"dataset {name!r}: the peers sent too few rows of {part}")
            entry = writer.entry(list(zip(held(n, self.party), salts, strict=True)))
            signed = statement["components"][part]["digests"]
            for comp, (_, peer) in zip(held(n, self.party), got, strict=True):
                if entry["components"][str(comp)]["digest"] != signed[str(comp)]:
                    sender = self._peer_name(peer)
                    if peer not in listing:  # it listed another manifest: not named
                        raise InputError(f"{sender} sent component {comp} of {part} of "
                                         f"{c['owner']}'s contribution to dataset {name!r} "
                                         "of another manifest than the one agreed on")
                    raise CheatingDetected(
                        "rebuild component", f"{sender} sent component {comp} of {part} of "
                        f"{c['owner']}'s contribution to dataset {name!r}, and it differs "
                        "from what its owner signed")
            files[part] = entry
        return files

    def _holders(self, n: int, comp: int, listing: list[int]) -> list[int]:
        """The peers to ask for ``comp``, in turn: the other holders that answer (with three
        servers there is one; with four, up to two), first those that list the copy agreed on.
        What any of them sends is checked against a signed digest."""
        others = [p for p in holders(n, comp) if p != self.party]
        found = sorted((p for p in others if p in self.sessions), key=lambda p: p not in listing)
        if not found:
            raise PeerError(f"no holder of component {comp} is reachable "
                            f"({', '.join(self._peer_name(p) for p in others)})")
        return found

    async def _fetch_rows(self, writer: ShareFileWriter, slot: int, comp: int,
                          what: dict[str, Any], n: int, listing: list[int]
                          ) -> tuple[bytes, int]:
        """Component ``comp`` from a holder (the next one if it refuses), block by block into
        ``slot`` of ``writer``; its salt and the holder."""
        failures = []
        for peer in self._holders(n, comp, listing):
            try:
                async with self.turns[peer]:
                    salt = await self._rows_from(self.sessions[peer], writer, slot, comp,
                                                 what)
                return salt, peer
            except InputError as exc:
                failures.append(f"{self._peer_name(peer)}: {exc}")
        raise InputError(f"no holder of component {comp} of {what['part']} sent it: "
                         + "; ".join(failures))

    async def _rows_from(self, session: ServerSession, writer: ShareFileWriter, slot: int,
                         comp: int, what: dict[str, Any]) -> bytes:
        """One holder's component ``comp``, into ``slot`` of ``writer``."""
        head = await session.request("component", component=comp, **what)
        rows, at = int(head["shape"][0]), 0
        while at < rows:
            _, block = await session.recv_array()
            if block.dtype != np.uint64 or block.ndim != 2:
                raise CheatingDetected("rebuild component",
                                       f"{session.name} sent a malformed block")
            try:
                await asyncio.to_thread(writer.write_rows, at, block, slot)
            except ValueError as exc:
                raise CheatingDetected("rebuild component",
                                       f"{session.name}: {exc}") from None
            at += block.shape[0]
            self.summary.bytes_received += block.nbytes
        return salt_of(head.get("salt"))

    # -- a result ----------------------------------------------------------------------------
    def _signed_result(self, view: dict[str, Any]) -> dict[str, Any]:
        """This server's own statement of the result a peer describes as ``view``, once the
        view is the one it signed and carries every server's statement, each consistent
        with it (``parties.statements``)."""
        servers = view.get("parties")
        if servers != [s.name for s in self.dep.servers[:len(servers or [])]] or \
                self.name not in servers:
            raise CheatingDetected("rebuild manifest", f"result {view['name']!r}: made by "
                                                       f"{servers}, not by this deployment's "
                                                       "servers with this one")
        stored = view.get("statements")
        mine = Signed.from_wire(stored.get(self.name) if isinstance(stored, dict) else None
                                ).verify(self.dep, self.name)
        if mine.get("meta") != statements.result_meta(view) or mine.get("owner") != \
                view["owner"] or mine.get("name") != view["name"]:
            raise CheatingDetected("rebuild manifest", f"result {view['name']!r}: its manifest "
                                                       f"is not the one {self.name} signed")
        statements.verified_statements(stored, mine, self.dep, servers)
        return mine

    def _accepted(self, views: dict[int, dict[str, Any]]
                  ) -> tuple[dict[str, Any], dict[str, Any], list[int]]:
        """This server's own statement of a result, the peers' copy it confirms and the
        peers that list that copy. Every peer's copy is checked (a malformed one, or one this
        server did not sign, is dropped and its peer named); the copies left must be the same
        (manifest digest, hence job): with three servers both, with four a majority. A server
        signs every job's result it stores, an aborted one's too, so its signature alone does
        not tell which job's copy is stored (docs/reliability.md)."""
        failures: list[str] = []
        confirmed: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        for peer, candidate in views.items():
            try:
                confirmed[peer] = (self._signed_result(candidate), candidate)
            except MPCError as exc:
                why = str(exc)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                why = f"a malformed manifest ({type(exc).__name__}: {exc})"
            else:
                continue
            failures.append(f"{self._peer_name(peer)}'s: {why}")
            log.warning("%s describes result %s otherwise than %s signed it: %s",
                        self._peer_name(peer), candidate.get("name"), self.name, why)
        if not confirmed:
            raise CheatingDetected("rebuild manifest", "; ".join(failures))
        metas = {p: statements.result_meta(v) for p, (_, v) in confirmed.items()}
        top, count = Counter(metas.values()).most_common(1)[0]
        mine, view = next(confirmed[p] for p in confirmed if metas[p] == top)
        if count < len(metas) and (len(view["parties"]) == 3 or count < 2):
            raise CheatingDetected("rebuild manifest",
                                   f"the peers do not agree on result {view['name']!r} (each "
                                   f"copy signed by {self.name}): " + ", ".join(
                                       f"{self._peer_name(p)} has job "
                                       f"{confirmed[p][1].get('job')}" for p in metas))
        for p, meta in metas.items():
            if meta != top:
                log.warning("%s lists another job's result %s than the other holders",
                            self._peer_name(p), view["name"])
        return mine, view, [p for p in metas if metas[p] == top]

    async def _result(self, views: dict[int, dict[str, Any]]) -> None:
        """A result or a model: the copy the peers agree on and this server's own statement
        confirms (``_accepted``), then its components from the peers that list that copy."""
        mine, view, listing = self._accepted(views)
        n = len(view["parties"])
        staged = self.storage.stage("rebuild")
        try:
            files = {}
            for part, entry in mine["components"].items():
                got = await asyncio.gather(*(self._fetch_whole(comp, view, part, entry, n,
                                                               listing)
                                             for comp in held(n, self.party)))
                files[part] = write_array(staged / f"{part}.npy",
                                          np.stack([a for _, a in got]),
                                          [(comp, salt) for comp, (salt, _) in
                                           zip(held(n, self.party), got, strict=True)])
            self.storage.commit_result(dict(view, party=self.party, files=files), staged)
        except BaseException:
            self.storage.discard(staged)
            raise
        self.summary.results.append(f"{view['owner']}/{view['name']}")
        log.info("result %s of %s rebuilt", view["name"], view["owner"])

    async def _fetch_whole(self, comp: int, view: dict[str, Any], part: str,
                           entry: dict[str, Any], n: int, listing: list[int]
                           ) -> tuple[bytes, np.ndarray]:
        """Component ``comp`` of ``part`` of the result ``view`` (of its job only) and its
        salt, from the first holder listing the accepted copy whose component is the one this
        server signed (``entry``); a holder that refuses is passed over, one that sends
        another is named."""
        failures: list[str] = []
        cheaters: list[str] = []
        for peer in self._holders(n, comp, listing):
            session = self.sessions[peer]
            try:
                async with self.turns[peer]:
                    head = await session.request("component", component=comp,
                                                 owner=view["owner"], result=view["name"],
                                                 job=view["job"], part=part)
                    _, array = await session.recv_array()
            except InputError as exc:
                failures.append(f"{session.name}: {exc}")
                continue
            self.summary.bytes_received += array.nbytes
            salt = salt_of(head.get("salt"))
            if array.dtype == np.uint64 and list(array.shape) == entry["shape"] and \
                    component_digest(salt, array) == entry["digests"][str(comp)]:
                for cheater in cheaters:
                    self.summary.named[cheater] = f"sent a wrong component of result " \
                                                  f"{view['name']!r}"
                self.summary.cheated |= bool(cheaters)
                return salt, array
            if peer not in listing:  # it listed another copy: not the one it was asked for
                failures.append(f"{session.name} (whose own copy was passed over) sent one "
                                f"that differs from what {self.name} signed")
                continue
            cheaters.append(session.name)
            log.warning("%s sent component %d of %s of result %s, and it differs from what "
                        "%s signed", session.name, comp, part, view["name"], self.name)
        if cheaters:
            raise CheatingDetected("rebuild component", f"{', '.join(cheaters)} sent "
                                   f"component {comp} of {part} of result {view['name']!r}, "
                                   f"and it differs from what {self.name} signed")
        raise InputError(f"no holder of component {comp} of result {view['name']!r} sent it"
                         + (": " + "; ".join(failures) if failures else ""))
