"""Fixes of the security review, each checked against real servers where it is networked.

One four-server deployment (``mpc-party`` processes over TLS on 127.0.0.1, started through the
reliability launcher so that one test can slow a dataset load) holds a dataset shared for
active4 and one for passive3, and a result of each. The tests then act as a hostile data owner
(an upload id that climbs out of the data folder), a hostile coordinator (job specifications
a member must refuse, a results listing with fewer parties), and an analyst who tries to learn
every column's scale exponent; and they check the modes of the stored files, that ``status``
answers while a job loads a dataset, names with a trailing newline, and the range error text.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability_common import (
    TIMEOUTS,
    FaultCluster,
    call,
    finish,
    lsvt_slice,
    ok,
    plaintext,
    report,
    start_cli,
)

from client.local import CLIENTS, write_config
from client.session import Client, ServerSession, reconstruct
from mpcnet import config
from mpcnet.config import Deployment, check_name
from mpcnet.errors import (
    AccessDenied,
    ConfigError,
    InputError,
    MPCError,
    PeerError,
    RangeError,
)
from mpcnet.jobrequest import JobRequest, SignedRequest
from mpcnet.net.framing import FrameProtocol
from mpcnet.net.tls import client_context, dial, run
from mpcnet.schemes import registry
from parties import catalog
from parties.server import sharing_of
from parties.storage import Storage, StorageError

K = 3


# -- the deployment ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    folder = tmp_path_factory.mktemp("review")
    path = write_config(folder, 4, timeouts=TIMEOUTS | {"round_timeout": 10.0},
                        clients=CLIENTS,
                        extra_client_lines={"outsider": 'datasets = ["elsewhere"]'})
    c = FaultCluster(folder, config_path=path)
    with c:
        old = os.umask(0o022)  # a common umask: stored files must be private anyway
        try:
            c.start()
        finally:
            os.umask(old)
        csv_path = lsvt_slice(folder / "base.csv", slice(0, 40), list(range(8)))
        ok(c.client("hospital-a", "share", str(csv_path), "--dataset", "base",
                    "--label", "label"))  # active4, the default with four servers
        ok(c.client("hospital-a", "share", str(csv_path), "--dataset", "p3",
                    "--label", "label", "--security", "passive3"))
        ok(c.client("analyst", "select", "--dataset", "base", "--k", str(K),
                    "--result", "base-r"))
        ok(c.client("analyst", "select", "--dataset", "p3", "--k", str(K),
                    "--result", "p3-r", "--security", "passive3"))
        yield c


async def connect(dep: Deployment, who: str, server: str, hello: dict[str, Any]
                  ) -> FrameProtocol:
    """A TLS connection to ``server`` with ``who``'s own certificate; ``hello`` sent."""
    s = dep.server(server)
    cert, key = dep.identity(who)
    conn = await dial(s.name, s.host, s.port, client_context(dep.ca, cert, key),
                      max_frame=1 << 24, deadline=time.monotonic() + 5, handshake_timeout=5)
    conn.send(hello)
    return conn


async def answer(conn: FrameProtocol) -> dict[str, Any] | None:
    """The next frame's header, or None if the server dropped the connection."""
    try:
        header, _ = await conn.recv(timeout=10)
        return header
    except PeerError:
        return None


def escaped(cluster: FaultCluster, stem: str) -> list[Path]:
    """Files named ``stem*`` anywhere around the deployment folder (where ``../`` leads)."""
    return sorted(cluster.folder.parent.rglob(f"{stem}*"))


# -- 1: upload ids and stored file names ------------------------------------------------------
def test_upload_id_cannot_leave_the_data_folder(cluster: FaultCluster,
                                                request: pytest.FixtureRequest) -> None:
    dep = cluster.dep
    sharing = sharing_of("passive3")[0]
    info = registry.get("passive3")
    shares = info.share(np.zeros((4, 2), dtype=np.uint64))
    labels = info.share(np.zeros((4, 1), dtype=np.uint64))
    tried = ["../../../../escape-up", "../escape-dot", "escape-nl\n",
             f"{cluster.folder}/escape-abs", ".escape-hidden", ""]

    async def attempt(upload_id: str) -> dict[str, Any] | None:
        conn = await connect(dep, "hospital-a", "alice",
                             {"k": "hello", "as": "client", "name": "hospital-a"})
        try:
            assert (await answer(conn) or {}).get("k") == "ok"
            meta = catalog.contribution_meta(
                dataset="trav", upload_id=upload_id, layout="rows", sharing=sharing, rows=4,
                columns=["a", "b"], exponents=[0, 0], categories={}, label="y",
                classes=["0", "1"])
            conn.send({"k": "req", "op": "upload", "meta": meta})
            first = await answer(conn)
            if first is not None and first.get("k") == "ok":  # accepted: finish it
                conn.send({"k": "a", "name": "data"}, shares[0])
                conn.send({"k": "a", "name": "labels"}, labels[0])
                staged = await answer(conn)
                conn.send({"k": "req", "op": "commit", "id": upload_id})
                await answer(conn)
                return staged
            return first
        finally:
            conn.close()

    for upload_id in tried:
        got = run(attempt(upload_id))
        assert not escaped(cluster, "escape"), f"{upload_id!r} wrote {escaped(cluster, 'escape')}"
        assert got is not None and got["k"] == "err" and got["type"] == "InputError", \
            f"upload id {upload_id!r} accepted: {got}"
        assert "upload id" in got["msg"], got
    # the server names the stored share files itself, never after the client's upload id
    manifest = json.loads((dep.server("alice").data_dir / "datasets" / "base" /
                           "manifest.json").read_text())
    for c in manifest["contributions"]:
        for entry in c["files"].values():
            assert c["id"] not in entry["file"], entry
    report(request, f"review: {len(tried)}/{len(tried)} upload ids outside the data folder "
           "refused; stored file names chosen by the server")


def test_storage_refuses_paths_outside_its_folders(tmp_path: Path) -> None:
    st = Storage(tmp_path / "data")
    st.open()
    try:
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "manifest.json").write_text("{}")
        (st.datasets / "link").symlink_to(outside)
        checks = [lambda: st.dataset("../outside"), lambda: st.dataset("link"),
                  lambda: st.result("a", ".."), lambda: st.result("a", "a/b"),
                  lambda: st.result("..", "a"), lambda: st.load_result("a", "../datasets"),
                  lambda: st.load_dataset("../../outside"),
                  lambda: st.save_job({"id": "../../outside/job"}),
                  lambda: st.save_job({"id": "x\n"}),
                  lambda: st.load_array(st.datasets, {"file": "../LOCK", "sha256": ""}),
                  lambda: st.withdraw("../outside", "u1"),
                  lambda: st.commit_result({"name": "../escape", "owner": "a"},
                                           st.stage("result")),
                  lambda: st.commit_result({"name": "x", "owner": "../up"},
                                           st.stage("result"))]
        for i, check in enumerate(checks):
            with pytest.raises(StorageError, match="refusing"):
                check()
                pytest.fail(f"check {i} passed")
        assert not list(tmp_path.glob("escape*")) and not (outside / "job.json").exists()
    finally:
        st.close()


# -- 2: members check the coordinator's job specification --------------------------------------
def test_members_check_the_job_specification(cluster: FaultCluster,
                                             request: pytest.FixtureRequest) -> None:
    """A member runs a job only if the analyst's signed request asks for exactly it."""
    dep = cluster.dep
    bob = dep.server("bob").data_dir
    digest = catalog.digest(json.loads((bob / "datasets" / "base" / "manifest.json")
                                       .read_text()))
    ran = json.loads(next((bob / "jobs").glob("*.json")).read_text())
    ids = itertools.count(0xABC000)

    def signed(who: str = "analyst") -> dict[str, Any]:
        """A fresh request for the forged job, signed by ``who`` (the analyst, or the
        coordinator alice signing in the analyst's name): each verified request is used up by
        its first refusal, so every case gets its own."""
        cert, key = dep.identity(who)
        asked = JobRequest.new("analyst", "base", K, "ms-gini", "active4", "forged")
        return SignedRequest.sign(asked, key, cert).to_wire()

    def spec(request: dict[str, Any] | None = None, **over: Any) -> dict[str, Any]:
        return {"id": f"{next(ids):012x}", "dataset": "base", "digest": digest, "k": K,
                "score": "ms-gini", "security": "active4", "result": "forged",
                "submitted_by": "analyst", "n_parties": 4,
                "request": signed() if request is None else request} | over

    cases = {"id climbing out of jobs/": (spec(id="../../../../evil-job"), "job id"),
             "id with a newline": (spec(id="0123456789ab\n"), "job id"),
             "a job id bob already ran": (spec(id=ran["id"]), "job id"),
             "no signed request": (spec(request={}), "no signed job request"),
             "3 parties for active4": (spec(n_parties=3), "says n_parties 3"),
             "5 parties for active4": (spec(n_parties=5), "says n_parties 5"),
             "another k than signed": (spec(k=K + 1), "says k"),
             "k not an integer": (spec(k="3"), "says k"),
             "passive3 for a signed active4": (spec(security="passive3"), "says security"),
             "the request's k changed": (spec(signed() | {"k": K + 1}, k=K + 1),
                                         "does not verify"),
             "signed by the coordinator": (spec(signed("alice")), "certificate of ['alice']"),
             "a request bob already ran": (spec(ran["request"], dataset=ran["dataset"],
                                                k=ran["k"], result=ran["result"]),
                                           "already used"),
             "no dataset digest": (spec(digest=""), "digest")}

    async def one(s: dict[str, Any]) -> dict[str, Any] | None:
        conn = await connect(dep, "alice", "bob", {"k": "hello", "as": "peer", "from": "alice",
                                                   "job": "0123456789ab", "spec": s})
        try:
            return await answer(conn)
        finally:
            conn.close()

    for name, (s, words) in cases.items():
        got = run(one(s))
        assert got is not None and got["k"] == "err", f"{name}: bob accepted it ({got})"
        kind = "InputError" if words in ("job id", "digest") else "CheatingDetected"
        assert got["type"] == kind and words in got["msg"], (name, got)
    assert not escaped(cluster, "evil-job")
    jobs = call(cluster, "analyst", lambda cl: cl.listing("jobs"))["bob"]
    refused = [j for j in jobs if j["result"] == "forged"]
    assert refused and all(j["state"] == "failed" for j in refused)  # recorded, never run
    report(request, f"review: {len(cases)}/{len(cases)} forged job specifications refused by a "
           f"member, each with a named reason ({len(refused)} recorded for the analyst)")


# -- 3: fetch takes the number of parties from the security setting ----------------------------
def test_fetch_takes_the_parties_from_the_security_setting(
        cluster: FaultCluster, request: pytest.FixtureRequest) -> None:
    dep = cluster.dep
    expected = plaintext([cluster.folder / "base.csv"], K)

    async def fetched(result: str) -> Any:
        cl = Client(dep, "analyst")
        try:
            return await cl.fetch(result)
        finally:
            cl.close()

    honest = run(fetched("base-r"))
    assert sorted(honest.shares) == [0, 1, 2, 3]  # all four servers of active4
    assert np.array_equal(reconstruct(honest), expected)
    assert sorted(run(fetched("p3-r")).shares) == [0, 1, 2]

    def lying(server: str, **over: Any) -> str:
        """What the client says when ``server`` lists base-r with ``over`` changed."""
        path = dep.server(server).data_dir / "results" / "analyst" / "base-r" / "manifest.json"
        original = path.read_bytes()
        path.write_text(json.dumps(json.loads(original) | over))
        try:
            with pytest.raises(InputError) as info:
                run(fetched("base-r"))
            return str(info.value)
        finally:
            path.write_bytes(original)

    three = ["alice", "bob", "carol"]
    assert "lists its parties" in lying("alice", parties=three)  # the coordinator drops dave
    assert "describe it differently (parties, security)" in lying(
        "alice", parties=three, security="passive3")  # ... and calls it passive3
    assert "describe it differently (k)" in lying("dave", k=K + 1)
    assert "describe it differently (parties)" in lying("carol", parties=three)
    assert np.array_equal(reconstruct(run(fetched("base-r"))), expected)
    report(request, "review: fetch took 4/4 (active4) and 3/3 (passive3) servers from the "
           "security setting; 4/4 forged listings refused")


# -- 4: private data folders -------------------------------------------------------------------
def test_data_folders_are_private(cluster: FaultCluster,
                                  request: pytest.FixtureRequest) -> None:
    loose: list[str] = []
    n = 0
    for s in cluster.dep.servers:
        for p in [s.data_dir, *s.data_dir.rglob("*")]:
            mode = stat.S_IMODE(p.lstat().st_mode)
            want = 0o700 if p.is_dir() else 0o600
            n += 1
            if mode != want:
                loose.append(f"{p.relative_to(cluster.folder)} {oct(mode)}")
    assert not loose, "not private:\n" + "\n".join(loose)
    kinds = {p.parent.name for s in cluster.dep.servers for p in s.data_dir.rglob("*.json")}
    assert {"jobs", "base", "base-r"} <= kinds  # job records, datasets and results checked
    report(request, f"review: {n} stored folders and files of 4 servers all 0700 / 0600 "
           "(umask 022 when the servers started)")


# -- 5: the analyst never sees the per-column exponents ----------------------------------------
def _keys(obj: Any) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in _keys(v)}
    return set()


def test_analyst_learns_no_column_exponents(cluster: FaultCluster,
                                            request: pytest.FixtureRequest) -> None:
    dep = cluster.dep

    async def owner_schema(who: str) -> dict[str, Any]:
        cl = Client(dep, who)
        try:
            return await (await cl.session(dep.leader)).request("schema", dataset="base")
        finally:
            cl.close()

    exps = run(owner_schema("hospital-a"))["manifest"]["schema"]["exponents"]
    assert len(exps) == 8  # the owner who contributes still gets the schema
    with pytest.raises(AccessDenied):
        run(owner_schema("outsider"))  # an owner who may not contribute to it does not

    async def analyst_views() -> dict[str, Any]:
        cl = Client(dep, "analyst")
        views: dict[str, Any] = {}
        try:
            for s in dep.servers:
                sess = await cl.session(s)
                for ds in ("base", "p3"):
                    with pytest.raises(AccessDenied, match="may not schema"):
                        await sess.request("schema", dataset=ds)
                for op in ("datasets", "results", "jobs"):
                    views[f"{s.name} {op}"] = await sess.request(op)
                views[f"{s.name} status"] = await sess.request("status", mesh=False)
                for j in views[f"{s.name} jobs"]["jobs"]:
                    views[f"{s.name} job {j['id']}"] = await sess.request("job", id=j["id"])
                head = await sess.request("fetch", result="base-r")
                for _ in head["arrays"]:
                    await sess.recv_array()
                views[f"{s.name} fetch"] = head
        finally:
            cl.close()
        return views

    views = run(analyst_views())
    pattern = json.dumps(exps)[1:-1]  # "e1, e2, ..., e8" as JSON writes a list
    for where, payload in views.items():
        assert not {"exponents", "schema"} & _keys(payload), where
        assert pattern not in json.dumps(payload), where
    report(request, f"review: analyst refused schema on 4/4 servers; {len(views)} analyst "
           "payloads (datasets, results, jobs, job, status, fetch) carry no column exponents")


# -- 6: names with a trailing newline ----------------------------------------------------------
def test_names_with_a_trailing_newline_are_refused(tmp_path: Path) -> None:
    for bad in ("name\n", "name\n\n", "\nname", "na\nme", "../name", ".name", "", "a" * 65):
        with pytest.raises(InputError, match="not allowed"):
            check_name("dataset", bad)
    assert check_name("dataset", "study-2.v1_x") == "study-2.v1_x"
    path = write_config(tmp_path, 3)
    path.write_text(path.read_text().replace('name = "bob"', 'name = "bob\\n"'))
    with pytest.raises(ConfigError, match="name must be"):
        config.load(path)


# -- 7: status answers while a job loads its dataset -------------------------------------------
def test_status_answers_while_a_dataset_loads(cluster: FaultCluster,
                                              request: pytest.FixtureRequest) -> None:
    delay = 2.5
    cluster.faults("alice", delay_load=delay)
    try:
        proc = start_cli(cluster, "analyst", "select", "--dataset", "p3", "--k", str(K),
                         "--result", "p3-during-load", "--security", "passive3")
        cluster.wait_hit("alice", "load")

        async def status() -> float:
            t = time.monotonic()
            try:
                sess = await ServerSession.open(cluster.dep, "analyst", cluster.dep.leader)
                try:
                    reply = await sess.request("status", mesh=False)
                finally:
                    sess.close()
            except MPCError:  # a blocked event loop lets the TLS handshake time out
                return time.monotonic() - t
            assert reply["running"], reply  # the job is in its load
            return time.monotonic() - t

        took = run(status())
        ok(finish(proc))
    finally:
        cluster.faults("alice")
    assert took < 1.0, f"status took {took:.2f} s while alice loaded a dataset for {delay} s"
    report(request, f"review: status answered in {took:.2f} s while the coordinator's dataset "
           f"load took {delay} s; the job then succeeded")


# -- 8: the range error names the value as a number --------------------------------------------
def test_range_error_prints_a_plain_number() -> None:
    from mpcnet.fixedpoint import encode

    with pytest.raises(RangeError) as info:
        encode(np.array([[1.0], [2186869.63]]), np.array([30]), ["dose"])
    msg = str(info.value)
    assert "value 2186869.63 encodes" in msg and "np." not in msg, msg

