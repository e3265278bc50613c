"""Layer: server. Running one selection job on its mesh: load the shares, run pi_GINI-FS, commit.

Every server loads its shares of the dataset (checked against their SHA-256), runs the
protocol of the job's security setting over the job's TLS channel, stages its share of D',
exchanges one final all-party round and commits the result under the analyst's name. Stored
datasets are never touched; a failure stops the job on every server (the channel tells the
peers why and, for cheating, which check failed) and leaves nothing stored.

``Runtime`` says what a job runs on: the channel, the scheme of a setting, and the server's own
input shares as loaded. The product uses the defaults; the cheating-server harness of the tests
(tests/cheating_party.py) passes its own, so nothing in the product reads a fault setting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.config import Deployment
from mpcnet.errors import CheatingDetected, InputError, MPCError, PeerError
from mpcnet.featsel.source import ShareSource
from mpcnet.net.engine import RoundEngine
from mpcnet.net.framing import FrameProtocol
from mpcnet.net.tls import TLSChannel
from mpcnet.parties import catalog, statements
from mpcnet.parties.heap import release_freed_memory
from mpcnet.parties.jobs import Job
from mpcnet.parties.logs import event
from mpcnet.parties.storage import Storage
from mpcnet.plain.logreg import Training
from mpcnet.schemes import registry
from mpcnet.schemes.base import Scheme, Shared
from mpcnet.schemes.registry import held
from mpcnet.signing import Signed

log = logging.getLogger("mpcnet.party")
Shares = tuple[ShareSource, np.ndarray | None]
IDLE_RELEASE_S = 30.0  # seconds after a job before the freed heap is handed back, if idle
MAX_STATEMENT = 1 << 16  # bytes of a server's signed statement of a result (a few kB)


def _setting(security: str) -> type[Scheme]:
    return registry.get(security).scheme


def _as_loaded(data: ShareSource, labels: np.ndarray | None) -> Shares:
    return data, labels


KeyedParts = list[tuple[np.ndarray, np.ndarray]]
"""Per contribution of a keyed dataset: this server's shares of its ID hashes and columns."""


def _keyed_as_loaded(parts: KeyedParts) -> KeyedParts:
    return parts


async def agreed_budget(engine: RoundEngine, mine: int) -> int:
    """The smallest ``memory_budget`` of the job's servers: every server must lay the job out
    alike (column and row blocks, the top-k method), and each server's deployment file may
    set its own. Two rounds: the budgets, then the minimum each server took, which must
    agree (a server that told two others different budgets is caught here, not by a layout
    that differs later). A server that claims a tiny budget can only make the job refuse,
    which it could do anyway."""
    async def exchange(value: int, what: str) -> list[int]:
        values = [value]
        for peer, got in (await engine.broadcast(np.array([value], dtype=np.uint64))).items():
            if got.dtype != np.uint64 or got.shape != (1,):
                raise PeerError(f"party {peer} sent a malformed {what}")
            values.append(int(got[0]))
        return values

    agreed = min(await exchange(mine, "memory budget"))
    if len(set(await exchange(agreed, "agreed memory budget"))) != 1:
        raise CheatingDetected("memory budget", "the servers took different memory budgets: "
                                                "one of them sent different ones to the others")
    return agreed


def _salts(scheme: Scheme, parts: list[str]) -> dict[str, list[tuple[int, bytes]]]:
    """A 32-byte salt per component of every array of a result, known to the component's
    holders only: a random replicated sharing (no communication), whose component c each of
    its holders derives from their common key (Araki et al. 2016; Fantastic Four, section 3)."""
    words = scheme.random_binary((len(parts), 4)).data  # (slot, part, 4 words)
    comps = held(scheme.n_parties, scheme.party)
    return {part: [(c, words[slot, i].tobytes()) for slot, c in enumerate(comps)]
            for i, part in enumerate(parts)}


@dataclass(frozen=True)
class Runtime:
    """What a job runs on (the defaults are the product's)."""

    channel: Callable[[int, int, str, dict[int, FrameProtocol]], TLSChannel] = TLSChannel
    scheme: Callable[[str], type[Scheme]] = _setting
    inputs: Callable[[ShareSource, np.ndarray | None], Shares] = _as_loaded
    keyed_inputs: Callable[[KeyedParts], KeyedParts] = _keyed_as_loaded


@dataclass
class JobRunner:
    """Runs this server's part of jobs; ``engines`` holds the running ones (progress)."""

    dep: Deployment
    name: str
    storage: Storage
    runtime: Runtime = field(default_factory=Runtime)
    engines: dict[str, RoundEngine] = field(default_factory=dict)

    def _release_if_idle(self) -> None:
        """``IDLE_RELEASE_S`` after a job ends, the heap it freed goes back to the kernel
        unless a job is running then (``parties.heap``): jobs in a row reuse it."""
        if not self.engines:
            release_freed_memory()

    def progress(self, job_id: str) -> dict[str, Any] | None:
        engine = self.engines.get(job_id)
        if engine is None:
            return None
        return {"phase": engine.current_phase, "rounds": engine.rounds,
                "bytes_sent": engine.bytes_sent}

    async def run(self, job: Job, conns: dict[int, FrameProtocol]
                  ) -> tuple[str | None, dict[str, Any] | None]:
        """(why it failed or None, the job's figures), once the job has ended here."""
        party, t = self.dep.party(self.name), self.dep.timeouts
        channel = self.runtime.channel(party, job.n_parties, job.id, conns)
        engine = RoundEngine(channel, t.round + t.handshake)
        channel.recv_timeout = t.round  # the channel's timeout names the silent peer
        self.engines[job.id] = engine
        staged: Path | None = None
        start = time.perf_counter()
        closing = contextlib.ExitStack()
        try:
            compute = self._train if job.kind == "train" else self._select
            scheme, outputs, manifest, plan = await compute(job, engine, closing)
            arrays = {name: await scheme.output(x) for name, x in outputs.items()}
            staged, files = self.storage.stage_result(arrays, _salts(scheme, sorted(arrays)))
            manifest = dict(manifest, files=files)
            with engine.phase("commit"):  # all staged: the signed statements, then commit
                signed = await self._statements(engine, job, manifest, arrays)
            self.storage.commit_result(dict(manifest, statements=signed), staged)
            staged = None
            figures = dict(engine.report(), seconds=round(time.perf_counter() - start, 4),
                           plan=plan, wire=self._wire(channel))
            log.info("job %s done in %.3f s: %s rounds, %s bytes sent; result %s stored",
                     job.id, figures["seconds"], figures["rounds"], figures["bytes_sent"],
                     job.result, extra=event(
                         "job.done", job=job.id, kind=job.kind, security=job.security,
                         seconds=figures["seconds"], rounds=figures["rounds"],
                         bytes_sent=figures["bytes_sent"], wire=figures["wire"]))
            return None, figures
        except (MPCError, OSError) as exc:
            channel.abort(f"{self.name}: {exc}",
                          exc.check if isinstance(exc, CheatingDetected) else None)
            return self._failed(job, f"{type(exc).__name__}: {exc}", engine, channel, start)
        except Exception as exc:  # noqa: BLE001 - report, never crash the server
            log.exception("job %s: internal error", job.id)
            channel.abort(f"{self.name}: internal error")
            return self._failed(job, f"{type(exc).__name__} on {self.name}: {exc}", engine,
                                channel, start)
        finally:
            closing.close()
            if staged is not None:
                self.storage.discard(staged)
            self.engines.pop(job.id, None)
            await channel.close()
            asyncio.get_running_loop().call_later(IDLE_RELEASE_S, self._release_if_idle)

    async def _statements(self, engine: RoundEngine, job: Job, manifest: dict[str, Any],
                          arrays: dict[str, np.ndarray]) -> dict[str, Any]:
        """Every server's signed statement of the result (``parties.statements``): this
        server signs its components' digests and sends the statement to its peers in one
        round, checks theirs (their signatures, the same result, job and manifest, and the
        digests of the components it holds too) and keeps them all, so that a server that
        loses its disk can take its components back and check them (``parties.rebuild``)."""
        n = job.n_parties
        shapes = {part: tuple(a.shape[1:]) for part, a in arrays.items()}
        mine = statements.result_statement(manifest, manifest["files"], shapes)
        server = self.dep.server(self.name)
        signed = Signed.sign(self.name, mine, server.key, server.cert).to_wire()
        payload = np.frombuffer(json.dumps(signed).encode(), dtype=np.uint8)
        got = await engine.broadcast(payload)
        out = {self.name: signed}
        for peer, data in got.items():
            name = self.dep.servers[peer].name
            try:
                if data.dtype != np.uint8 or data.ndim != 1 or data.size > MAX_STATEMENT:
                    raise ValueError(f"a {data.dtype} message of shape {data.shape}")
                theirs = Signed.from_wire(json.loads(data.tobytes()))
                fields = theirs.verify(self.dep, name)
            except (ValueError, MPCError) as exc:
                raise CheatingDetected("result statement", f"{name} sent no valid signed "
                                                           f"statement of the result: {exc}"
                                       ) from None
            statements.check_result_statement(fields, mine, name, n, peer)
            out[name] = theirs.to_wire()
        return out

    async def _setup(self, job: Job, engine: RoundEngine) -> tuple[Scheme, int]:
        """The job's scheme and the memory budget its servers agreed on."""
        with engine.phase("setup"):
            scheme = await self.runtime.scheme(job.security).setup(engine)
            return scheme, await agreed_budget(engine, self.dep.memory_budget)

    async def _select(self, job: Job, engine: RoundEngine, closing: contextlib.ExitStack
                      ) -> tuple[Scheme, dict[str, Shared], dict[str, Any], Any]:
        """pi_GINI-FS on the job's dataset: the scheme, what to store, the result's manifest
        (without its files) and the plan."""
        from mpcnet.featsel.gini_fs import select_stored

        stored_as = self.storage.dataset(job.dataset)
        if stored_as is not None and stored_as["layout"] == "keyed":
            return await self._select_keyed(job, engine)
        # reading and checking (SHA-256) the shares may take long: not on the event loop
        manifest, stored, labels = await asyncio.to_thread(self.storage.load_dataset,
                                                           job.dataset)
        closing.callback(stored.close)
        # a contribution committed after the job was checked must not be computed on: the
        # job runs on exactly the dataset every server checked (its digest), with the
        # security its owners asked for
        if catalog.digest(manifest) != job.digest:
            raise InputError(f"dataset {job.dataset!r} changed after the job was checked "
                             "(a contribution was committed meanwhile); run it again")
        catalog.ready_for_selection(manifest, job.k, job.security, job.score)
        data, labels = self.runtime.inputs(stored, labels)
        if labels is None:
            raise InputError(f"dataset {job.dataset!r} has no label")
        schema = manifest["schema"]
        scheme, budget = await self._setup(job, engine)
        res = await select_stored(scheme, data, labels, len(schema["classes"]), job.k,
                                  np.asarray(schema["exponents"], dtype=np.int64), budget,
                                  score_name=job.score)
        del data, labels
        return await self._finish(job, engine, scheme, manifest, res, budget)

    async def _select_keyed(self, job: Job, engine: RoundEngine
                            ) -> tuple[Scheme, dict[str, Shared], dict[str, Any], Any]:
        """``_select`` on a dataset keyed by record IDs: its contributions aligned first
        (``mpcnet.ops.join``), in memory (``select_keyed`` empties ``parts`` once they are
        input); the result lists the aligned rows."""
        from mpcnet.featsel.gini_fs import select_keyed

        manifest, parts = await asyncio.to_thread(self.storage.load_keyed, job.dataset)
        if catalog.digest(manifest) != job.digest:
            raise InputError(f"dataset {job.dataset!r} changed after the job was checked "
                             "(a contribution was committed meanwhile); run it again")
        catalog.ready_for_selection(manifest, job.k, job.security, job.score)
        parts = self.runtime.keyed_inputs(parts)
        schema = manifest["schema"]
        label_part = next(o for o, c in enumerate(manifest["contributions"])
                          if c.get("label") is not None)
        scheme, budget = await self._setup(job, engine)
        res, rows = await select_keyed(scheme, parts, label_part, len(schema["classes"]),
                                       job.k, np.asarray(schema["exponents"], dtype=np.int64),
                                       budget, job.score)
        return await self._finish(job, engine, scheme, manifest, res, budget, rows=rows)

    async def _finish(self, job: Job, engine: RoundEngine, scheme: Scheme,
                      manifest: dict[str, Any], res: Any, budget: int, **extra: Any
                      ) -> tuple[Scheme, dict[str, Shared], dict[str, Any], Any]:
        """A selection's end: under ``--k auto`` the k chosen first (D' of the chosen k is a
        prefix of the largest candidate's, its columns in rank order), then what to store."""
        from mpcnet.train.choose import choose_k

        k, plan = job.k, res.plan
        if job.candidates:
            with engine.phase("k-choice"):
                # the labels' MACs made again: an error on them that passed the selection's
                # check must not reach the choice's products times data (docs/active3.md,
                # "Checking the MACs in parts would leak"); D' carries no MAC
                labels = await scheme.refresh(res.labels)
                k, figures = await choose_k(scheme, res.reduced, labels,
                                            tuple(job.candidates), memory_budget=budget)
            plan = dict(plan, k=k, **figures)
        return scheme, self._outputs(scheme, manifest, res, k), \
            dict(self._manifest(job, manifest), k=k, **extra), plan

    @staticmethod
    def _outputs(scheme: Scheme, manifest: dict[str, Any], res: Any, k: int
                 ) -> dict[str, Shared]:
        """What a selection stores: D' of k columns, its exponents, the label's one-hot shares
        (for training, never fetched), and the labels and indices where the owners release
        them."""
        from mpcnet.featsel.gini_fs import label_codes

        release = catalog.release_of(manifest)
        outputs = {"reduced": res.reduced[:, :k], "exponents": res.exponents[:k],
                   "training_labels": res.labels}
        if "label" in release:
            outputs["labels"] = label_codes(scheme, res.labels)
        if "names" in release:
            outputs["indices"] = res.indices[:k]
        return outputs

    async def _train(self, job: Job, engine: RoundEngine, closing: contextlib.ExitStack
                     ) -> tuple[Scheme, dict[str, Shared], dict[str, Any], Any]:
        """Logistic regression on the analyst's selection result (Fig. 1, step 2B): its
        shares input again (checked by their holders, authenticated by active schemes),
        the model stored for its owner."""
        from mpcnet.train.model import train_on_result

        source, arrays = await asyncio.to_thread(self.storage.load_result, job.submitted_by,
                                                 job.dataset)
        if catalog.digest(source) != job.digest:
            raise InputError(f"result {job.dataset!r} changed after the job was checked; "
                             "run it again")
        catalog.ready_for_training(source, job.security, job.model_owner)
        scheme, budget = await self._setup(job, engine)
        outputs, plan = await train_on_result(scheme, arrays, len(source["class_names"]),
                                              Training(**job.training), budget)
        manifest = {"name": job.result, "kind": "model", "dataset": source["dataset"],
                    "source": job.dataset, "job": job.id, "k": source["k"],
                    "score": job.score, "security": job.security, "sharing": source["sharing"],
                    "rows": source["rows"], "party": self.dep.party(self.name),
                    "release": ["values"], "classes": source["class_names"],
                    "columns": source.get("columns"), "label": source.get("label"),
                    "parties": source["parties"], "owner": job.model_owner,
                    "share_with": [], "analyst": job.submitted_by, "training": job.training,
                    "request": job.request}
        return scheme, outputs, manifest, plan

    def _manifest(self, job: Job, dataset: dict[str, Any]) -> dict[str, Any]:
        release = catalog.release_of(dataset)
        schema = dataset["schema"]
        return {"name": job.result, "kind": "select", "dataset": job.dataset, "job": job.id,
                "k": job.k, "score": job.score, "security": job.security,
                "sharing": dataset["sharing"], "rows": dataset["rows"],
                "party": self.dep.party(self.name), "release": release,
                "label": schema["label"] if "label" in release else None,
                "classes": schema["classes"] if "label" in release else None,
                "columns": schema["columns"] if "names" in release else None,
                "parties": [s.name for s in self.dep.servers[:job.n_parties]],
                "owner": job.submitted_by, "share_with": job.request.get("share_with", []),
                "request": job.request, "value_bits": catalog.value_bits(dataset),
                "class_names": schema["classes"], "label_name": schema["label"]}

    def _wire(self, channel: TLSChannel) -> dict[str, dict[str, int]]:
        """Bytes on the wire to and from each peer of the job, framing included."""
        return {self.dep.servers[p].name: {"sent": a, "recv": b}
                for p, (a, b) in channel.bytes_by_peer().items()}

    def _failed(self, job: Job, error: str, engine: RoundEngine, channel: TLSChannel,
                start: float) -> tuple[str, dict[str, Any]]:
        log.warning("job %s failed: %s", job.id, error)
        return error, dict(engine.report(), seconds=round(time.perf_counter() - start, 4),
                           wire=self._wire(channel))
