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
from mpcnet.parties import catalog
from mpcnet.parties.heap import release_freed_memory
from mpcnet.parties.jobs import Job
from mpcnet.parties.logs import event
from mpcnet.parties.storage import Storage
from mpcnet.plain.logreg import Training
from mpcnet.schemes import registry
from mpcnet.schemes.base import Scheme, Shared

log = logging.getLogger("mpcnet.party")
Shares = tuple[ShareSource, np.ndarray | None]
IDLE_RELEASE_S = 30.0  # seconds after a job before the freed heap is handed back, if idle


def _setting(security: str) -> type[Scheme]:
    return registry.get(security).scheme


def _as_loaded(data: ShareSource, labels: np.ndarray | None) -> Shares:
    return data, labels


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


@dataclass(frozen=True)
class Runtime:
    """What a job runs on (the defaults are the product's)."""

    channel: Callable[[int, int, str, dict[int, FrameProtocol]], TLSChannel] = TLSChannel
    scheme: Callable[[str], type[Scheme]] = _setting
    inputs: Callable[[ShareSource, np.ndarray | None], Shares] = _as_loaded


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
            staged, files = self.storage.stage_result(
                {name: await scheme.output(x) for name, x in outputs.items()})
            with engine.phase("commit"):
                await engine.broadcast(np.ones(1, dtype=np.uint8))  # all staged: commit
            self.storage.commit_result(dict(manifest, files=files), staged)
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

    async def _setup(self, job: Job, engine: RoundEngine) -> tuple[Scheme, int]:
        """The job's scheme and the memory budget its servers agreed on."""
        with engine.phase("setup"):
            scheme = await self.runtime.scheme(job.security).setup(engine)
            return scheme, await agreed_budget(engine, self.dep.memory_budget)

    async def _select(self, job: Job, engine: RoundEngine, closing: contextlib.ExitStack
                      ) -> tuple[Scheme, dict[str, Shared], dict[str, Any], Any]:
        """pi_GINI-FS on the job's dataset: the scheme, what to store, the result's manifest
        (without its files) and the plan."""
        from mpcnet.featsel.gini_fs import label_codes, select_stored

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
        release = catalog.release_of(manifest)
        # the label's one-hot shares stay on the servers, for training (never fetched)
        outputs = {"reduced": res.reduced, "exponents": res.exponents,
                   "training_labels": res.labels}
        if "label" in release:
            outputs["labels"] = label_codes(scheme, res.labels)
        if "names" in release:
            outputs["indices"] = res.indices
        return scheme, outputs, self._manifest(job, manifest), res.plan

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
