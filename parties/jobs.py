"""Layer: server. Jobs without sockets: the records, and the rules a server applies to take part.

A job moves queued -> running -> done | failed; a job a member refuses is recorded failed and
never starts. ``JobBook`` holds every job this server knows (the records persist in its
``Storage``) and applies the rules:

- the coordinator queues a job only for an analyst's signed request (``mpcnet.jobrequest``)
  that verifies, was never used here, names a dataset it holds that fits the request, and a
  result name the analyst has not used;
- a member takes part only if the coordinator's specification is exactly the job the signed
  request asks for (every field, the nonce never used here, the dataset digest equal to its
  own copy's), and records why it refused otherwise, for the analyst to see;
- a request is used up the moment its signature verifies here, whatever happens to its job;
- an analyst sees its own jobs and those shared with it; a server (healthchecks) sees all.

The asyncio server (``parties.server``) feeds it events and acts on what it returns; the rules
are tested without a socket (``tests/test_parties_jobs.py``).
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from mpcnet.config import Deployment, check_name
from mpcnet.errors import AccessDenied, CheatingDetected, InputError, MPCError, NotPinned
from mpcnet.featsel import scores as featsel_scores
from mpcnet.jobrequest import TRAIN_SCORE, JobRequest, SignedRequest
from mpcnet.parties import catalog
from mpcnet.parties.storage import Storage
from mpcnet.plain.logreg import Training
from mpcnet.schemes.registry import sharing_of
from mpcnet.train.choose import check_candidates
from mpcnet.train.logreg import check_training

SCORES = tuple(featsel_scores.SCORES)
KINDS = ("select", "train")
JOB_ID_RE = re.compile(r"[0-9a-f]{12}")  # what ``submit`` makes (uuid4 hex)
DIGEST_RE = re.compile(r"[0-9a-f]{64}")  # ``catalog.digest``: all of SHA-256
SPEC_FIELDS = ("id", "kind", "dataset", "digest", "k", "score", "security", "result",
               "submitted_by", "model_owner", "training", "n_parties", "request", "candidates")


@dataclass
class Job:
    """A selection or training job as every server records it (never a value or share). A
    training job trains on the analyst's result ``dataset`` and stores the model ``result``
    for ``model_owner``."""

    id: str
    dataset: str
    digest: str
    k: int
    score: str
    security: str
    result: str
    submitted_by: str
    n_parties: int
    request: dict[str, Any] = field(default_factory=dict)  # as the analyst signed it
    kind: str = "select"
    model_owner: str = ""
    training: dict[str, Any] = field(default_factory=dict)  # epochs, learning_rate, l2
    candidates: list[int] = field(default_factory=list)  # --k auto: k is the largest
    signed: bool = False            # its signature verified here: the request is used up
    state: str = "queued"           # queued -> running -> done | failed
    error: str | None = None
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    figures: dict[str, Any] | None = None

    @classmethod
    def of(cls, job_id: str, digest: str, r: JobRequest, wire: dict[str, Any]) -> Job:
        """The job a request asks for."""
        training = ({"epochs": r.epochs, "learning_rate": r.learning_rate, "l2": r.l2}
                    if r.kind == "train" else {})
        return cls(id=job_id, dataset=r.dataset, digest=digest, k=r.k, score=r.score,
                   security=r.security, result=r.result, submitted_by=r.analyst,
                   n_parties=sharing_of(r.security)[1], request=wire, kind=r.kind,
                   model_owner=r.model_owner, training=training,
                   candidates=list(r.candidates))

    @property
    def stored_as(self) -> tuple[str, str]:
        """(whose, name) of what the job stores: a selection's result is its analyst's, a
        model its owner's."""
        return (self.model_owner if self.kind == "train" else self.submitted_by, self.result)

    def spec(self) -> dict[str, Any]:
        """What the coordinator sends the members."""
        return {k: getattr(self, k) for k in SPEC_FIELDS}

    def may_read(self, name: str) -> bool:
        """The analyst who asked for the job and those it shared it with see it and its
        result."""
        return name == self.submitted_by or name in self.request.get("share_with", [])

    @property
    def active(self) -> bool:
        return self.state in ("queued", "running")

    def record(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    def view(self, progress: dict[str, Any] | None = None) -> dict[str, Any]:
        """The record, with live progress while running."""
        d = self.record()
        if self.state == "running" and self.started is not None:
            d["progress"] = {"elapsed": round(time.time() - self.started, 2)} | (progress or {})
        return d


class JobBook:
    """Every job this server knows, and the rules it takes part by."""

    def __init__(self, dep: Deployment, name: str, storage: Storage) -> None:
        self.dep, self.name, self.storage = dep, name, storage
        self.party = dep.party(name)
        self.jobs: dict[str, Job] = {}

    def load(self) -> None:
        """The stored records; a job that was queued or running when the server stopped has
        failed (its peers gave up on it)."""
        for rec in self.storage.load_jobs():
            job = Job(**{k: rec[k] for k in rec if k in Job.__dataclass_fields__})
            if job.active:
                self._end(job, "failed", f"{self.name} restarted during the job")
            self.jobs[job.id] = job

    def get(self, job_id: str, reader: str, role: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None or not (role == "server" or job.may_read(reader)):
            raise InputError(f"no job {job_id!r} of yours on {self.name}")
        return job

    def visible(self, reader: str, role: str) -> list[Job]:
        """The jobs ``reader`` may see, oldest first."""
        return sorted((j for j in self.jobs.values() if role == "server" or j.may_read(reader)),
                      key=lambda j: j.created)

    # -- the coordinator ------------------------------------------------------------------
    def submit(self, wire: Any, analyst: str, kind: str = "select") -> Job:
        """Queue the job of ``analyst``'s signed request (``wire``), a request of ``kind``."""
        if self.party != 0:
            raise InputError(f"jobs are started by the coordinator {self.dep.leader.name} "
                             f"({self.dep.leader.address}), not by {self.name}")
        signed = SignedRequest.from_wire(wire)
        request = signed.verify(self.dep)
        if request.analyst != analyst:
            raise AccessDenied(f"{analyst} sent a job request signed by {request.analyst}")
        if request.kind != kind:
            raise InputError(f"a {request.kind} request was sent as a {kind} request")
        check_name("dataset", request.dataset)
        check_name("result", request.result)
        self._check_fresh(request)
        job = Job.of(uuid.uuid4().hex[:12], "", request, signed.to_wire())
        if any(j.stored_as == job.stored_as and j.active for j in self.jobs.values()):
            raise InputError(f"result {request.result!r} is already being computed by another "
                             "job")
        job.signed = True
        job.digest = catalog.digest(self.check_job(job, digest=False))
        self._save(job)
        return job

    def before_start(self, job: Job) -> None:
        """The coordinator, as a queued job starts: the request may have expired and the
        dataset or the result name changed meanwhile."""
        SignedRequest.from_wire(job.request).verify(self.dep)
        self.check_job(job)

    def refuse_unadmitted(self, dep: Deployment) -> list[str]:
        """The coordinator, on a reload: every queued job whose analyst ``dep`` no longer
        admits with the key that signed it fails at once (never starts). Its ids."""
        refused = []
        for job in self.jobs.values():
            if job.state == "queued":
                try:
                    SignedRequest.from_wire(job.request).verify(dep)
                except MPCError as exc:
                    self._end(job, "failed", f"refused after a reload of {self.name}'s "
                                             f"deployment file: {exc}")
                    refused.append(job.id)
        return refused

    # -- a member ---------------------------------------------------------------------------
    def accept(self, spec: Any) -> Job:
        """The job the coordinator starts here, running; or the refusal, recorded for the
        analyst the request names and raised (``CheatingDetected("job request")`` when the
        job is not the one its analyst signed for)."""
        job_id = spec.get("id") if isinstance(spec, dict) else None
        if not isinstance(job_id, str) or not JOB_ID_RE.fullmatch(job_id) or job_id in self.jobs:
            raise InputError(f"job id {job_id!r} from the coordinator is malformed or reused")
        try:
            signed = SignedRequest.from_wire(spec.get("request"))
        except InputError as exc:
            raise CheatingDetected("job request", f"{self.name}: the coordinator's job {job_id} "
                                                  f"carries {exc}") from None
        job = Job.of(job_id, str(spec.get("digest")), signed.request, signed.to_wire())
        try:
            self._check_request(job, signed, spec)
            self.check_job(job)
        except MPCError as exc:
            self._end(job, "failed", f"{type(exc).__name__}: {exc}")
            raise
        self.start(job)
        return job

    def _check_request(self, job: Job, signed: SignedRequest, spec: dict[str, Any]) -> None:
        def refuse(why: str) -> CheatingDetected:
            return CheatingDetected("job request", f"{self.name} refuses job {job.id}: {why}")

        try:
            signed.verify(self.dep)
            self._check_fresh(signed.request)
            job.signed = True
        except NotPinned as exc:  # this server's operator does not admit that analyst's key
            raise AccessDenied(f"{self.name} does not admit the key that signed job {job.id}: "
                               f"{exc}") from None
        except (AccessDenied, InputError) as exc:
            raise refuse(str(exc)) from None
        for name in SPEC_FIELDS:
            if name not in ("id", "digest", "request") and spec.get(name) != getattr(job, name):
                raise refuse(f"the coordinator says {name} {spec.get(name)!r}, the analyst's "
                             f"signed request says {getattr(job, name)!r}")
        if not DIGEST_RE.fullmatch(job.digest):
            raise InputError(f"job {job.id}: the coordinator sent no valid dataset digest; "
                             "every server checks its copy of the dataset against it")
        if self.party >= job.n_parties:
            raise InputError(f"{self.name} is not one of the {job.n_parties} parties of "
                             f"{job.security}")

    def _check_fresh(self, request: JobRequest) -> None:
        """A request is used up here the moment its signature verifies, whatever happens to
        its job (the records, which persist, say which ones did): no job runs on a request
        that was refused, failed or ran before. Records of requests whose signature failed
        use nothing, so a forger cannot use up an analyst's request."""
        used = [j.id for j in self.jobs.values()
                if j.signed and j.request.get("nonce") == request.nonce]
        if used:
            raise InputError(f"the job request was already used by job {used[0]}; a request "
                             "runs once (the client signs a new one for every select)")

    # -- both -------------------------------------------------------------------------------
    def check_job(self, job: Job, digest: bool = True) -> dict[str, Any]:
        """The manifest of what ``job`` computes on (a dataset, or the result a model is
        trained on), if this server can run it: a known score, enough servers, the input
        stored here for the setting and fit for the job, equal to ``job.digest`` (unless the
        coordinator is making the job) and a free name for what it stores."""
        sharing, n = sharing_of(job.security)
        if n > len(self.dep.servers):
            raise InputError(f"{job.security} needs {n} servers; this deployment has "
                             f"{len(self.dep.servers)}")
        manifest = (self._training_source(job) if job.kind == "train"
                    else self._selection_dataset(job, sharing))
        if digest and catalog.digest(manifest) != job.digest:
            raise InputError(f"{job.kind} input {job.dataset!r} on {self.name} differs from the "
                             "coordinator's copy (an upload or a result did not reach every "
                             "server); share it again under a new name")
        if self.storage.result(*job.stored_as) is not None:
            raise InputError(f"result {job.result!r} already exists; choose another name")
        return manifest

    def _selection_dataset(self, job: Job, sharing: str) -> dict[str, Any]:
        if job.kind != "select" or job.score not in SCORES:
            raise InputError(f"unknown score {job.score!r}; available: {', '.join(SCORES)}")
        manifest = self.storage.dataset(job.dataset)
        if manifest is None:
            raise InputError(f"dataset {job.dataset!r} is not stored on {self.name}; share it "
                             "first (mpc-client share)")
        if manifest["sharing"] != sharing:
            raise InputError(f"dataset {job.dataset!r} was shared for {manifest['sharing']}; "
                             f"{job.security} needs a dataset shared for {sharing} (share it "
                             f"again with --security {job.security})")
        catalog.ready_for_selection(manifest, job.k, job.security, job.score)
        if job.candidates:
            if job.k != max(job.candidates):
                raise InputError(f"a choice of k among {job.candidates} selects "
                                 f"{max(job.candidates)} features first, not {job.k}")
            schema = manifest["schema"]
            check_candidates(tuple(job.candidates), len(schema["columns"]), manifest["rows"])
        return manifest

    def _training_source(self, job: Job) -> dict[str, Any]:
        if job.score != TRAIN_SCORE or job.k != 0:
            raise InputError(f"a training job trains {TRAIN_SCORE}, not {job.score!r}")
        check_training(Training(**job.training))
        source = self.storage.result(job.submitted_by, job.dataset)
        if source is None or source.get("kind", "select") != "select":
            raise InputError(f"no selection result {job.dataset!r} of {job.submitted_by} on "
                             f"{self.name}; run mpc-client select first")
        catalog.ready_for_training(source, job.security, job.model_owner)
        return source

    def start(self, job: Job) -> None:
        job.state, job.started = "running", time.time()
        self._save(job)

    def finish(self, job: Job, error: str | None, figures: dict[str, Any] | None) -> None:
        job.figures = figures
        self._end(job, "failed" if error else "done", error)

    def _end(self, job: Job, state: str, error: str | None) -> None:
        job.state, job.error, job.finished = state, error, time.time()
        self._save(job)

    def _save(self, job: Job) -> None:
        self.jobs[job.id] = job
        self.storage.save_job(job.record())
