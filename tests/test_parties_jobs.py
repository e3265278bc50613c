"""parties.jobs without sockets: when the coordinator queues a job and a member takes part.

Two servers' job books (alice, the coordinator, and bob, a member) over real storage folders
holding the same dataset, uploaded through ``parties.uploads``; requests signed with the
analyst's real key (``mpc-certs``). A cheating coordinator is simulated by handing bob
specifications that differ from what the analyst signed.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from signed_uploads import salts, statement

from mpcnet import config
from mpcnet.certs.pki import local_deployment
from mpcnet.client.local import CLIENTS, write_config
from mpcnet.config import Deployment
from mpcnet.errors import AccessDenied, CheatingDetected, InputError
from mpcnet.jobrequest import CLOCK_SKEW, JobRequest, SignedRequest
from mpcnet.parties import catalog
from mpcnet.parties.jobs import JobBook
from mpcnet.parties.storage import Storage
from mpcnet.parties.uploads import Upload
from mpcnet.schemes import registry

ROWS, COLS, K = 20, 4, 2


@dataclasses.dataclass
class World:
    dep: Deployment
    alice: JobBook
    bob: JobBook
    ids: Iterator[int]

    def request(self, who: str = "analyst", **over: Any) -> dict[str, Any]:
        """A fresh request for study/k=2/active3 -> ``top`` (fields overridden), signed by
        ``who``'s key."""
        cert, key = self.dep.identity(who)
        r = dataclasses.replace(JobRequest.new("analyst", "study", K, "ms-gini", "active3", "top"),
                                **over)
        return SignedRequest.sign(r, key, cert).to_wire()

    def spec(self, request: dict[str, Any] | None = None, **over: Any) -> dict[str, Any]:
        """The coordinator's specification of a job for ``request`` (fields overridden; those
        of a fresh request where ``request`` is no request at all)."""
        wire = request if request is not None else self.request()
        r = SignedRequest.from_wire(wire if wire else self.request()).request
        digest = catalog.digest(self.bob.storage.dataset("study"))
        return {"id": f"{next(self.ids):012x}", "dataset": r.dataset, "digest": digest,
                "k": r.k, "score": r.score, "security": r.security, "result": r.result,
                "submitted_by": r.analyst, "n_parties": 3, "request": wire, "kind": r.kind,
                "model_owner": r.model_owner, "training": {},
                "candidates": list(r.candidates)} | over


def _share_dataset(storage: Storage, dep: Deployment, party: int, dataset: str = "study",
                   security: str = "passive3") -> None:
    """The same contribution to ``dataset`` on this server (its own share of it), shared for
    ``security``."""
    meta = catalog.contribution_meta(
        dataset=dataset, upload_id="u1", layout="rows", sharing="passive3", rows=ROWS,
        columns=[f"c{i}" for i in range(COLS)], exponents=[0] * COLS, categories={},
        label="y", classes=["0", "1"], security=security)
    info = registry.for_sharing("passive3")
    shares = {"data": info.share(np.zeros((ROWS, COLS), np.uint64)),
              "labels": info.share(np.zeros((ROWS, 2), np.uint64))}
    up = Upload.describe(storage, dep, party, "hospital-a", meta, salts(meta, party))
    up.receive("data", shares["data"][party])
    up.receive("labels", shares["labels"][party])
    up.commit(dep, is_coordinator=True, seq=None, signed=statement("hospital-a", meta, shares))


def _expired() -> dict[str, float]:
    """A validity that ended before now, beyond the clocks' tolerance."""
    end = time.time() - CLOCK_SKEW - 1
    return {"issued": end - 3600, "expires": end}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    path = write_config(tmp_path, 3, ports=[7001, 7002, 7003],
                        clients=CLIENTS + (("analyst-2", "analyst"),))
    local_deployment(config.load(path))
    dep = config.load(path)
    books = []
    for name in ("alice", "bob"):
        storage = Storage(dep.server(name).data_dir)
        storage.open()
        _share_dataset(storage, dep, dep.party(name))
        _share_dataset(storage, dep, dep.party(name), "guarded", "active3")
        books.append(JobBook(dep, name, storage))
    yield World(dep, books[0], books[1], itertools.count(0xABC000))
    for book in books:
        book.storage.close()


# -- the coordinator ----------------------------------------------------------------------------
def test_the_coordinator_queues_only_a_signed_request_of_the_analyst_itself(world: World) -> None:
    job = world.alice.submit(world.request(), "analyst")
    assert job.state == "queued" and job.signed and job.submitted_by == "analyst"
    assert job.digest == catalog.digest(world.alice.storage.dataset("study"))
    with pytest.raises(AccessDenied, match="analyst-2 sent a job request signed by analyst"):
        world.alice.submit(world.request(), "analyst-2")
    with pytest.raises(InputError, match="already being computed"):
        world.alice.submit(world.request(), "analyst")  # the same result name, still queued
    with pytest.raises(InputError, match="no signed job request"):
        world.alice.submit({}, "analyst")
    with pytest.raises(InputError, match="not stored on alice"):
        world.alice.submit(world.request(dataset="other", result="x"), "analyst")
    with pytest.raises(InputError, match="k must be between 1 and 4"):
        world.alice.submit(world.request(k=COLS + 1, result="y"), "analyst")


def test_a_request_runs_once_even_after_a_restart(world: World) -> None:
    wire = world.request()
    job = world.alice.submit(wire, "analyst")
    world.alice.start(job)
    world.alice.finish(job, "PeerError: bob went away", None)
    with pytest.raises(InputError, match=f"already used by job {job.id}"):
        world.alice.submit(wire, "analyst")  # a failed job's request is used up too
    restarted = JobBook(world.dep, "alice", world.alice.storage)
    restarted.load()
    with pytest.raises(InputError, match="already used"):
        restarted.submit(wire, "analyst")


def test_a_queued_job_whose_request_expired_does_not_start(world: World) -> None:
    job = world.alice.submit(world.request(), "analyst")
    expired = dataclasses.replace(SignedRequest.from_wire(job.request).request,
                                  **_expired())
    cert, key = world.dep.identity("analyst")
    job.request = SignedRequest.sign(expired, key, cert).to_wire()
    with pytest.raises(AccessDenied, match="expired"):
        world.alice.before_start(job)


def test_a_restart_fails_the_jobs_it_interrupted(world: World) -> None:
    queued = world.alice.submit(world.request(result="a"), "analyst")
    running = world.alice.submit(world.request(result="b"), "analyst")
    world.alice.start(running)
    restarted = JobBook(world.dep, "alice", world.alice.storage)
    restarted.load()
    for job_id in (queued.id, running.id):
        rec = restarted.jobs[job_id]
        assert rec.state == "failed" and rec.error == "alice restarted during the job"


def test_an_analyst_sees_its_own_jobs_and_those_shared_with_it(world: World) -> None:
    mine = world.alice.submit(world.request(result="mine"), "analyst")
    shared = world.alice.submit(world.request(result="ours", share_with=("analyst-2",)),
                                "analyst")
    assert [j.id for j in world.alice.visible("analyst", "analyst")] == [mine.id, shared.id]
    assert [j.id for j in world.alice.visible("analyst-2", "analyst")] == [shared.id]
    assert len(world.alice.visible("bob", "server")) == 2  # healthchecks see every job
    with pytest.raises(InputError, match="no job"):
        world.alice.get(mine.id, "analyst-2", "analyst")
    assert world.alice.get(shared.id, "analyst-2", "analyst") is shared


# -- a member -----------------------------------------------------------------------------------
def test_a_member_runs_the_job_the_analyst_signed(world: World) -> None:
    job = world.bob.accept(world.spec())
    assert job.state == "running" and job.signed and job.started is not None
    assert world.bob.storage.load_jobs()[-1]["id"] == job.id  # recorded


def test_a_choice_of_k_runs_on_valid_candidates_only(world: World) -> None:
    """``select --k auto``: k is the largest candidate, and candidates the dataset cannot take
    (k up to p - 1 = 3, 20 rows hold out 5) are refused by coordinator and member alike."""
    job = world.bob.accept(world.spec(world.request(k=3, candidates=(1, 3))))
    assert job.candidates == [1, 3] and job.k == 3
    for over, words in [({"k": 4, "candidates": (1, 4)}, "k must be between|each from 1 to 3"),
                        ({"k": 3, "candidates": (3,)}, "2 to 16 candidates"),
                        ({"k": K, "candidates": (1, 3)}, "selects 3 features first")]:
        with pytest.raises(InputError, match=words):
            world.alice.submit(world.request(**over), "analyst")


def test_a_member_refuses_every_other_job_and_says_why(world: World) -> None:
    w = world
    cases = {
        "a job id climbing out of jobs/": (w.spec(id="../../evil"), InputError, "job id"),
        "a job id with a newline": (w.spec(id="0123456789ab\n"), InputError, "job id"),
        "no signed request": (w.spec({}), CheatingDetected, "no signed job request"),
        "3 parties said for 4": (w.spec(n_parties=4), CheatingDetected, "says n_parties 4"),
        "another k than signed": (w.spec(k=K + 1), CheatingDetected, "says k 3"),
        "a choice of k nobody signed": (w.spec(candidates=[1, K]), CheatingDetected,
                                        "says candidates"),
        "k not an integer": (w.spec(k="2"), CheatingDetected, "says k '2'"),
        "passive3 for a signed active3": (w.spec(security="passive3"), CheatingDetected,
                                          "says security 'passive3'"),
        "another dataset": (w.spec(dataset="other"), CheatingDetected, "says dataset"),
        "another result name": (w.spec(result="stolen"), CheatingDetected, "says result"),
        "another analyst": (w.spec(submitted_by="analyst-2"), CheatingDetected,
                            "says submitted_by"),
        "the request's k changed": (w.spec(w.request() | {"k": K + 1}, k=K + 1),
                                    CheatingDetected, "does not verify"),
        "signed by the coordinator": (w.spec(w.request("alice")), CheatingDetected,
                                      "its certificate names 'alice', not 'analyst'"),
        "expired": (w.spec(w.request(**_expired())), CheatingDetected, "expired"),
        "no dataset digest": (w.spec(digest=""), InputError, "digest"),
        "a dataset digest of another copy": (w.spec(digest="0" * 64), InputError,
                                             "differs from the coordinator's copy"),
    }
    for name, (spec, error, words) in cases.items():
        with pytest.raises(error) as info:
            world.bob.accept(spec)
        assert words in str(info.value), (name, str(info.value))
        if isinstance(spec["id"], str) and spec["id"] in world.bob.jobs:
            rec = world.bob.jobs[spec["id"]]  # recorded for the analyst, never started
            assert rec.state == "failed" and rec.started is None and words in str(rec.error)
    assert not any(j.state == "running" for j in world.bob.jobs.values())


def test_a_dataset_shared_for_active_security_runs_under_active_security_only(
        world: World) -> None:
    """An owner who shared for active3 does not trust every server to follow the protocol:
    no server runs a passive job on its data, even one the analyst signed (an analyst and a
    cheating server together could otherwise read unselected columns through D')."""
    def spec(security: str) -> dict[str, Any]:
        wire = world.request(dataset="guarded", security=security)
        digest = catalog.digest(world.bob.storage.dataset("guarded"))
        return world.spec(wire, dataset="guarded", security=security, digest=digest)

    for book in (world.alice, world.bob):
        with pytest.raises(InputError, match="active security only; run the job with "
                                             "--security active3"):
            book.accept(spec("passive3")) if book is world.bob else book.submit(
                world.request(dataset="guarded", security="passive3"), "analyst")
    assert world.bob.accept(spec("active3")).state == "running"


def test_a_request_is_used_up_once_its_signature_verifies_on_the_member(world: World) -> None:
    wire = world.request()
    with pytest.raises(CheatingDetected, match="says k"):
        world.bob.accept(world.spec(wire, k=K + 1))  # refused, but the request verified
    with pytest.raises(CheatingDetected, match="already used"):
        world.bob.accept(world.spec(wire))  # so it cannot run later, even honestly
    # a forgery whose signature fails uses nothing: the analyst's own request still runs
    honest = world.request()
    forged = honest | {"signature": "00" * 64}
    with pytest.raises(CheatingDetected, match="does not verify"):
        world.bob.accept(world.spec(forged))
    assert world.bob.accept(world.spec(honest)).state == "running"


def test_a_setting_the_deployment_cannot_run_is_refused(world: World) -> None:
    with pytest.raises(InputError, match="active4 needs 4 servers; this deployment has 3"):
        world.bob.accept(world.spec(world.request(security="active4"), n_parties=4))
