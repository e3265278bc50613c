"""parties.session against real servers: what an analyst's session answers, and that it
answers while a job is busy.

Four ``mpc-party`` processes over TLS on 127.0.0.1 (the reliability launcher, so that a test
can slow a dataset load) hold an active4 and a passive3 dataset and a result of each.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability_common import (
    FaultCluster,
    finish,
    four_servers_with_results,
    ok,
    report,
    start_cli,
)
from signed_uploads import salts

from mpcnet import config
from mpcnet.certs.pki import local_deployment
from mpcnet.client.connection import ServerSession
from mpcnet.client.local import write_config
from mpcnet.client.session import Client
from mpcnet.errors import AccessDenied, InputError, MPCError
from mpcnet.net.tls import run
from mpcnet.parties import catalog
from mpcnet.parties.server import PartyServer
from mpcnet.schemes import registry

K = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    with four_servers_with_results(tmp_path_factory.mktemp("session"), K) as c:
        yield c


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
                    with pytest.raises(AccessDenied, match="may not use `mpc-client share`; "
                                                           "it needs the role owner"):
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
    report(request, f"session: analyst refused schema on 4/4 servers; {len(views)} analyst "
           "payloads (datasets, results, jobs, job, status, fetch) carry no column exponents")


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
    # a blocked event loop would make the status wait out the load (or time out)
    assert took < delay / 2, f"status took {took:.2f} s while alice loaded a dataset for {delay} s"
    report(request, f"session: status answered in {took:.2f} s while the coordinator's dataset "
           f"load took {delay} s; the job then succeeded")


def test_a_reload_drops_uploads_the_new_file_no_longer_allows(tmp_path: Path) -> None:
    """An owner whose dataset is removed from its entry (key and role unchanged) keeps its
    session, but a reload aborts the upload it staged there: nothing is left to commit. One
    real server (the coordinator) on 127.0.0.1, the owner's real client session over TLS."""
    path = write_config(tmp_path, 3, extra_client_lines={"hospital-a": 'datasets = ["study"]'})
    local_deployment(config.load(path), force=True)
    dep = config.load(path)
    info = registry.for_sharing("passive3")
    meta = catalog.contribution_meta(
        dataset="study", upload_id="u1", layout="rows", sharing="passive3", rows=4,
        columns=["a", "b"], exponents=[0, 0], categories={}, label="y", classes=["0", "1"])

    async def scenario() -> dict[str, Any]:
        server = PartyServer(dep, dep.leader.name)
        await server.start()
        owner = await ServerSession.open(dep, "hospital-a", dep.leader)
        try:
            await owner.request("upload", meta=meta, salts=salts(meta, 0))
            await owner.send_block("data", info.share(np.zeros((4, 2), np.uint64))[0])
            await owner.send_block("labels", info.share(np.zeros((4, 2), np.uint64))[0])
            assert (await owner._reply())["staged"] == "u1"
            path.write_text(path.read_text().replace('datasets = ["study"]',
                                                     'datasets = ["other"]'))
            summary = server.reload()
            with pytest.raises(InputError, match="no staged upload 'u1'"):
                await owner.request("commit", id="u1")
            assert server.storage.dataset("study") is None
            return summary
        finally:
            owner.close()
            await server.stop()

    summary = run(scenario())
    assert summary["uploads_dropped"] == ["u1"] and summary["sessions_closed"] == []
