"""Reliability under load: several owners share at once, two analysts queue several jobs at once.

Real ``mpc-party`` processes over TLS on 127.0.0.1. Uploads run as concurrent ``mpc-client
share`` processes (two of them the first contributions of one dataset by columns, two more
appending rows to another); six selections are submitted at the same instant by two analysts
and queue at the coordinator. Every D' must equal the plaintext selection of its own dataset
(``mpcnet.plain`` on the encoded values, with rows or columns in the order the coordinator
committed the contributions), and results must stay apart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability_common import (
    fetch_values,
    finish,
    healthy,
    listing,
    lsvt_files,
    ok,
    plaintext,
    refused,
    report,
    running_cluster,
    select_checked,
    start_cli,
)

from mpcnet.client.local import LocalCluster
from mpcnet.client.session import Client
from mpcnet.net.tls import run

# (analyst, dataset, k, result)
JOBS = [("analyst", "load-rows", 3, "a-rows"), ("analyst", "load-cols", 4, "a-cols"),
        ("analyst", "load-wide", 5, "a-wide"), ("analyst-2", "load-rows", 5, "b-rows"),
        ("analyst-2", "load-cols", 2, "b-cols"), ("analyst-2", "load-wide", 12, "b-wide")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("load"),
                         extra_clients=(("hospital-c", "owner"), ("analyst-2", "analyst"))) as c:
        yield c


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return lsvt_files(tmp_path_factory.mktemp("csv"), {
        "rows-a": (slice(0, 40), range(8)), "rows-b": (slice(40, 80), range(8)),
        "rows-c": (slice(80, 120), range(8)), "cols-a": (slice(0, 60), range(20, 26), False),
        "cols-b": (slice(0, 60), range(26, 32)), "wide": (slice(0, 126), range(100, 160))})


def _plaintext_columns(parts: list[Path], k: int) -> np.ndarray:
    """D' in the clear for contributions by columns joined in ``parts`` order (each owner
    scales its own columns: the same exponents as scaling the joined table)."""
    from mpcnet.client.demo import plaintext_reference
    from mpcnet.dataset import Table, class_codes, read_csv
    from mpcnet.fixedpoint import auto_exponents

    tables = [read_csv(p, label="label" if "label" in p.read_text().split("\n", 1)[0]
                       else None) for p in parts]
    labels = next(t.labels for t in tables if t.labels is not None)
    whole = Table(columns=[c for t in tables for c in t.columns],
                  values=np.hstack([t.values for t in tables]), labels=labels, categories={})
    classes, _ = class_codes(labels)
    return plaintext_reference(whole, auto_exponents(whole.values), classes, k).values


def _queued_at_once(jobs: list[dict[str, Any]]) -> int:
    """Most jobs waiting in the queue at one instant (created, not yet started)."""
    return max(sum(j["created"] <= t < j["started"] for j in jobs)
               for t in (j["created"] for j in jobs))


def test_concurrent_owners_and_analysts(cluster: LocalCluster, files: dict[str, Path],
                                        request: pytest.FixtureRequest) -> None:
    t0 = time.monotonic()
    ok(cluster.client("hospital-a", "share", str(files["rows-a"]), "--dataset", "load-rows",
                      "--label", "label"))  # the first owner fixes the schema of load-rows
    uploads = [
        start_cli(cluster, "hospital-b", "share", str(files["rows-b"]), "--dataset",
                  "load-rows", "--label", "label"),
        start_cli(cluster, "hospital-c", "share", str(files["rows-c"]), "--dataset",
                  "load-rows", "--label", "label"),
        start_cli(cluster, "hospital-a", "share", str(files["cols-a"]), "--dataset",
                  "load-cols", "--columns"),
        start_cli(cluster, "hospital-b", "share", str(files["cols-b"]), "--dataset",
                  "load-cols", "--columns", "--label", "label"),
        start_cli(cluster, "hospital-c", "share", str(files["wide"]), "--dataset", "load-wide",
                  "--label", "label"),
    ]
    for proc in uploads:
        ok(finish(proc))
    share_seconds = time.monotonic() - t0
    by_server = listing(cluster, "datasets")
    views = {d["name"]: d for d in by_server["alice"]}
    for name, server_views in by_server.items():  # the same contributions in the same order
        assert server_views == by_server["alice"], name
    owner_file = {"hospital-a": "rows-a", "hospital-b": "rows-b", "hospital-c": "rows-c"}
    rows_order = [files[owner_file[o]] for o in views["load-rows"]["owners"]]
    cols_order = [files[{"hospital-a": "cols-a", "hospital-b": "cols-b"}[o]]
                  for o in views["load-cols"]["owners"]]
    assert views["load-rows"]["rows"] == 120 and views["load-cols"]["columns"] == 12

    async def submit_all() -> list[dict[str, Any]]:
        clients = {a: Client(cluster.dep, a) for a in ("analyst", "analyst-2")}
        try:
            return list(await asyncio.gather(*(clients[a].select(ds, k, res)
                                               for a, ds, k, res in JOBS)))
        finally:
            for cl in clients.values():
                cl.close()

    t1 = time.monotonic()
    done = run(submit_all())
    job_seconds = time.monotonic() - t1
    assert all(j["state"] == "done" for j in done)
    queued = _queued_at_once(done)
    assert queued >= 2, "the jobs did not queue"
    expect = {"load-rows": lambda k: plaintext(rows_order, k),
              "load-cols": lambda k: _plaintext_columns(cols_order, k),
              "load-wide": lambda k: plaintext([files["wide"]], k)}
    results = {a: listing(cluster, "results", a) for a in ("analyst", "analyst-2")}
    for analyst, ds, k, res in JOBS:
        other = "analyst-2" if analyst == "analyst" else "analyst"
        for name, rs in results[analyst].items():  # each result records its own dataset and k
            r = next(x for x in rs if x["name"] == res)
            assert (r["dataset"], r["k"], r["owner"]) == (ds, k, analyst), (name, r)
            assert all(x["name"] != res for x in results[other][name])  # not the other's
        got = fetch_values(cluster, res, analyst)
        assert got.shape == (views[ds]["rows"], k)
        assert np.array_equal(got, expect[ds](k)), f"{res} by {analyst} differs"
    submitter = {j["result"]: j["submitted_by"] for j in done}
    assert submitter == {res: a for a, _, _, res in JOBS}
    err = refused(cluster.client("analyst", "select", "--dataset", "load-wide", "--k", "3",
                                 "--result", "a-rows"), code=2)
    assert "'a-rows' already exists" in err
    # another analyst's names are its own: the same name is free for analyst-2
    ok(cluster.client("analyst-2", "select", "--dataset", "load-wide", "--k", "3",
                      "--result", "a-rows"))
    assert healthy(cluster)
    report(request, f"load: 3 datasets, 6 uploads by 3 owners ({len(uploads)} at once, "
           f"{share_seconds:.1f} s), {len(JOBS)} jobs by 2 analysts submitted at once (up to "
           f"{queued} queued; all done in {job_seconds:.1f} s): {len(JOBS)}/{len(JOBS)} D' "
           "equal their own plaintext selection; a clashing result name refused, the same name "
           "free for another analyst")


def test_two_owners_starting_one_dataset_at_once(cluster: LocalCluster, files: dict[str, Path],
                                                 request: pytest.FixtureRequest) -> None:
    """Both owners read "no such dataset" and encode with their own scales; the coordinator
    commits one first and the other's client encodes again with the schema that won (it used
    to be refused with a confusing "exponents differ" error). Both end up stored, in the same
    order on every server, and the selection covers both."""
    rounds = 3

    async def race(name: str) -> list[Any]:
        a, b = Client(cluster.dep, "hospital-a"), Client(cluster.dep, "hospital-b")
        try:
            return list(await asyncio.gather(
                a.share(files["rows-a"], name, label="label"),
                b.share(files["rows-b"], name, label="label"), return_exceptions=True))
        finally:
            a.close()
            b.close()

    for i in range(rounds):
        got = run(race(f"race-{i}"))
        assert not [g for g in got if isinstance(g, BaseException)], got
        by_server = listing(cluster, "datasets")
        view = next(d for d in by_server["alice"] if d["name"] == f"race-{i}")
        assert all(view in v for v in by_server.values()) and view["rows"] == 80
    order = [files[{"hospital-a": "rows-a", "hospital-b": "rows-b"}[o]] for o in view["owners"]]
    select_checked(cluster, f"race-{rounds - 1}", 3, "race-r", order)
    report(request, f"load: {rounds}/{rounds} races of two owners starting one dataset at once "
           "ended with both contributions stored, in one order on 3/3 servers; D' equals the "
           "plaintext selection")
