"""Reliability: servers killed, absent or stalled during a job, and connections cut mid-frame.

Real ``mpc-party`` processes over TLS on 127.0.0.1 (started through the test-only fault
launcher, which can hold a server in a phase so a kill lands there), driven through
``mpc-client``. The deployment file bounds every wait (``reliability_common.TIMEOUTS``: connect
2 s, handshake 2 s, round 3 s); each case checks that the other servers fail the job within
that bound with an error naming the server, keep serving, lose no stored data, and that the
retried job succeeds once the server is back.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from reliability_common import (
    SERVERS,
    FaultCluster,
    call,
    fetch_values,
    finish,
    healthy,
    job_records,
    listing,
    listing_on,
    lsvt_files,
    ok,
    plaintext,
    refused,
    report,
    running_cluster,
    select_checked,
    snapshot,
    start_cli,
    wait_jobs_ended,
)
from signed_uploads import salts

from mpcnet.client.session import Client
from mpcnet.errors import MPCError
from mpcnet.net.tls import client_context, dial, run
from mpcnet.parties.storage import Storage
from mpcnet.schemes.registry import sharing_of

ROUND, CONNECT, HANDSHAKE = 3.0, 2.0, 2.0
BOUND = ROUND + HANDSHAKE + 3.0  # a job must fail this soon after the fault (3 s of slack)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return lsvt_files(tmp_path_factory.mktemp("csv"), {
        "small": (slice(0, 40), range(8)), "other": (slice(40, 80), range(8)),
        "wide": (slice(0, 126), range(310))})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            files: dict[str, Path]) -> Iterator[FaultCluster]:
    with running_cluster(tmp_path_factory.mktemp("faults"), FaultCluster) as c:
        ok(c.client("hospital-a", "share", str(files["small"]), "--dataset", "small",
                    "--label", "label"))
        ok(c.client("analyst", "select", "--dataset", "small", "--k", "3", "--result",
                    "base"))
        yield c
        for name in SERVERS:  # never leave a server stopped (SIGSTOP) behind
            proc = c.procs.get(name)
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)


def _back(cluster: FaultCluster, name: str) -> None:
    """Clear every hook and start ``name`` again (it was killed)."""
    for s in SERVERS:
        cluster.faults(s)
    cluster.start([name])
    assert healthy(cluster)


def _retry_select(cluster: FaultCluster, files: dict[str, Path], result: str) -> None:
    select_checked(cluster, "small", 3, result, [files["small"]])


# -- a server killed at each phase --------------------------------------------------------------
# phase -> (server killed, server whose hook holds the mesh in the phase)
JOB_PHASES = {"scoring": ("bob", "carol"), "selection": ("carol", "bob"),
              "product": ("alice", "bob")}


def _kill_in_job_phase(cluster: FaultCluster, files: dict[str, Path], phase: str) -> float:
    victim, holder = JOB_PHASES[phase]
    result = f"killed-in-{phase}"
    cluster.faults(holder, delay_phase={phase: 1.5})
    proc = start_cli(cluster, "analyst", "select", "--dataset", "small", "--k", "3",
                     "--result", result)
    cluster.wait_hit(holder, f"phase-{phase}")
    # the progress a survivor reports (``jobs``) confirms the phase
    watcher = "bob" if victim == "alice" else "alice"
    deadline = time.monotonic() + 1.0
    while True:
        rec = job_records(cluster, [watcher], result)[watcher]
        if rec and (rec.get("progress") or {}).get("phase") == phase:
            break
        assert time.monotonic() < deadline, f"{watcher} never reported phase {phase}: {rec}"
        time.sleep(0.02)
    cluster.kill(victim)
    t_kill = time.monotonic()
    r = finish(proc)
    waited = time.monotonic() - t_kill
    err = refused(r, code=3)
    assert victim in err, err
    assert waited < BOUND, f"the client waited {waited:.1f} s after {victim} died"
    survivors = [s for s in SERVERS if s != victim]
    recs = wait_jobs_ended(cluster, survivors, result, timeout=BOUND)
    for name, rec in recs.items():
        assert rec["state"] == "failed" and victim in rec["error"], (name, rec)
        assert phase in (rec.get("figures") or {}).get("phases", {}), (name, rec)
    for name, results in listing_on(cluster, survivors, "results").items():
        assert result not in [r["name"] for r in results], name  # no result, no half result
    _back(cluster, victim)
    assert call(cluster, "analyst", lambda cl: cl.status())  # every server answers
    _retry_select(cluster, files, f"retry-{phase}")
    return waited


def _kill_during_share(cluster: FaultCluster, files: dict[str, Path], hook: str) -> float:
    before = snapshot(cluster)
    cluster.faults("bob", **{f"delay_{hook}": 5})
    dataset = f"cut-in-{hook}"
    proc = start_cli(cluster, "hospital-b", "share", str(files["other"]), "--dataset", dataset,
                     "--label", "label")
    cluster.wait_hit("bob", hook)
    if hook == "commit":  # alice numbered the contribution; let carol commit too
        carol = cluster.dep.server("carol").data_dir / "datasets" / dataset / "manifest.json"
        deadline = time.monotonic() + 3
        while not carol.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert carol.exists(), "carol did not commit before bob was killed"
    cluster.kill("bob")
    t_kill = time.monotonic()
    r = finish(proc)
    waited = time.monotonic() - t_kill
    err = refused(r, code=3)
    assert "bob" in err, err
    assert waited < BOUND
    after = snapshot(cluster)
    for name in ("alice", "carol"):  # aborted (staged) or withdrawn (committed): nothing left
        assert after[name] == before[name], (name, set(after[name]) ^ set(before[name]))
    _back(cluster, "bob")
    assert snapshot(cluster) == before  # bob emptied its staging at start
    ok(cluster.client("hospital-b", "share", str(files["other"]), "--dataset", dataset,
                      "--label", "label"))
    assert all(any(d["name"] == dataset for d in v) for v in listing(cluster,
                                                                     "datasets").values())
    return waited


def _kill_during_fetch(cluster: FaultCluster, tmp_path: Path) -> float:
    out = tmp_path / "fetched.csv"
    cluster.faults("bob", delay_fetch=5)
    proc = start_cli(cluster, "analyst", "fetch", "--result", "base", "--out", str(out))
    cluster.wait_hit("bob", "fetch")
    cluster.kill("bob")
    t_kill = time.monotonic()
    r = finish(proc)
    waited = time.monotonic() - t_kill
    err = refused(r, code=3)
    assert "bob" in err and not out.exists(), err
    assert waited < BOUND
    _back(cluster, "bob")
    ok(cluster.client("analyst", "fetch", "--result", "base", "--out", str(out)))
    assert out.exists()
    return waited


def test_server_killed_in_each_phase(cluster: FaultCluster, files: dict[str, Path],
                                     tmp_path: Path, request: pytest.FixtureRequest) -> None:
    waits: dict[str, float] = {}
    waits["sharing (upload)"] = _kill_during_share(cluster, files, "upload")
    waits["sharing (commit)"] = _kill_during_share(cluster, files, "commit")
    for phase in JOB_PHASES:
        waits[phase] = _kill_in_job_phase(cluster, files, phase)
    waits["fetch"] = _kill_during_fetch(cluster, tmp_path)
    assert healthy(cluster)
    report(request, f"faults: {len(waits)}/{len(waits)} phases failed cleanly (server killed "
           f"in {', '.join(waits)}); client told within {max(waits.values()):.2f} s at most "
           f"(bound {BOUND:.0f} s); {len(waits)} retries succeeded")


# -- a peer that never connects -----------------------------------------------------------------
def _select_without_bob(cluster: FaultCluster, result: str, reason: str,
                        queued: bool = True) -> float:
    """A selection refused naming bob and ``reason``, whose job carol fails naming bob too
    (or, if not ``queued``, that no server ever recorded); returns how long the client
    waited."""
    t = time.monotonic()
    err = refused(cluster.client("analyst", "select", "--dataset", "small", "--k", "3",
                                 "--result", result), code=3)
    waited = time.monotonic() - t
    assert "bob" in err and reason in err, err
    if not queued:
        assert job_records(cluster, ["alice", "carol"], result) == {"alice": None,
                                                                    "carol": None}
        return waited
    carol = wait_jobs_ended(cluster, ["carol"], result, timeout=BOUND)["carol"]
    assert carol["state"] == "failed" and "bob" in carol["error"], carol
    return waited


def test_peer_that_never_connects(cluster: FaultCluster, files: dict[str, Path],
                                  request: pytest.FixtureRequest) -> None:
    # 1. bob is not running at all
    cluster.kill("bob")
    before = snapshot(cluster)
    t = time.monotonic()
    err = refused(cluster.client("hospital-b", "share", str(files["other"]), "--dataset",
                                 "never", "--label", "label"), code=3)
    share_wait = time.monotonic() - t
    assert "bob" in err and "cannot reach" in err, err
    assert snapshot(cluster) == before
    # the client sees bob is down and queues nothing
    select_wait = _select_without_bob(cluster, "no-bob", "cannot reach", queued=False)
    r = cluster.client("analyst", "status")
    assert r.returncode == 3 and "bob" in r.stderr
    _back(cluster, "bob")
    _retry_select(cluster, files, "no-bob-retry")

    # 2. bob runs and answers clients (and the coordinator's probe) but never joins the job's
    # mesh: the job is queued and fails naming it
    cluster.faults("bob", delay_follow=8)
    mesh_wait = _select_without_bob(cluster, "bob-absent", "no message within")
    cluster.faults("bob")
    assert healthy(cluster)
    _retry_select(cluster, files, "bob-absent-retry")
    assert share_wait < BOUND + 2 and select_wait < BOUND + 2 and mesh_wait < BOUND + 2
    report(request, f"faults: peer never connects: 3/3 refused naming it (share "
           f"{share_wait:.1f} s, select {select_wait:.1f} s, mesh never joined "
           f"{mesh_wait:.1f} s; connect_timeout {CONNECT:.0f} s, round_timeout {ROUND:.0f} s); "
           "2 retries succeeded")


# -- a peer that stalls mid-round ---------------------------------------------------------------
def test_peer_stalled_mid_round(cluster: FaultCluster, files: dict[str, Path],
                                request: pytest.FixtureRequest) -> None:
    cluster.faults("carol", delay_phase={"selection": 1.0})
    proc = start_cli(cluster, "analyst", "select", "--dataset", "small", "--k", "3",
                     "--result", "stalled")
    cluster.wait_hit("carol", "phase-selection")
    bob = cluster.pid("bob")
    os.kill(bob, signal.SIGSTOP)
    try:
        t = time.monotonic()
        r = finish(proc)
        waited = time.monotonic() - t
        recs = wait_jobs_ended(cluster, ["alice", "carol"], "stalled", timeout=BOUND)
    finally:
        os.kill(bob, signal.SIGCONT)
    err = refused(r, code=3)
    assert "bob" in err and "no message within 3.0 s" in err, err
    assert waited < BOUND
    for name, rec in recs.items():
        assert rec["state"] == "failed" and "bob" in rec["error"], (name, rec)
    cluster.faults("carol")
    # bob wakes up to closed connections: its part fails, it keeps serving, nothing restarts
    bob_rec = wait_jobs_ended(cluster, ["bob"], "stalled", timeout=BOUND)["bob"]
    assert bob_rec["state"] == "failed"
    assert healthy(cluster) and cluster.pid("bob") == bob
    _retry_select(cluster, files, "stalled-retry")
    report(request, f"faults: stalled peer (SIGSTOP in selection): job failed naming it after "
           f"{waited:.1f} s (round_timeout {ROUND:.0f} s); it kept serving after SIGCONT; "
           "retry succeeded")


# -- a connection dropped mid-frame --------------------------------------------------------------
def test_upload_dropped_mid_frame(cluster: FaultCluster, request: pytest.FixtureRequest
                                  ) -> None:
    """An owner's connection ends in the middle of a share array: the server drops the
    staged part, stores nothing and keeps serving."""
    from mpcnet.net.framing import encode

    before = snapshot(cluster)
    alice = cluster.dep.server("alice")
    dropped = 0

    async def cut(fraction: float) -> None:
        cert, key = cluster.dep.identity("hospital-a")
        conn = await dial("alice", alice.host, alice.port,
                          client_context(cert, key), pins=cluster.dep.pins("alice"),
                          max_frame=1 << 20,
                          deadline=time.monotonic() + 5)
        conn.send({"k": "hello", "as": "client", "name": "hospital-a"})
        assert (await conn.recv(timeout=5))[0]["k"] == "ok"
        meta = {"dataset": "cut", "id": f"cut{int(fraction * 100)}", "layout": "rows",
                "sharing": sharing_of("passive3")[0], "rows": 200,
                "columns": [f"c{i}" for i in range(50)],
                "exponents": [0] * 50, "categories": {}, "label": "y", "classes": ["0", "1"]}
        conn.send({"k": "req", "op": "upload", "meta": meta, "salts": salts(meta, 0)})
        reply, _ = await conn.recv(timeout=5)
        assert reply == {"k": "ok", "send": ["data", "labels"]}, reply
        head, body = encode({"k": "a", "name": "data"}, np.zeros((2, 200, 50), np.uint64))
        assert body is not None
        assert conn.transport is not None
        conn.transport.write(head + bytes(body[:int(len(body) * fraction)]))
        await asyncio.sleep(0.2)
        conn.abort()

    for fraction in (0.0, 0.5, 0.99):
        run(cut(fraction))
        deadline = time.monotonic() + 3
        while snapshot(cluster) != before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert snapshot(cluster) == before  # staging emptied, nothing stored
        dropped += 1
    assert healthy(cluster)
    assert "internal error" not in cluster.log("alice")
    report(request, f"faults: {dropped}/{dropped} uploads cut mid-frame left nothing staged or "
           "stored; server kept serving")


# -- memory across failed jobs ---------------------------------------------------------------------
def _load(cluster: FaultCluster) -> dict[str, dict[str, int]]:
    """Every server's load, as a server sees it (clients do not: it would tell them of other
    analysts' jobs)."""
    rows = call(cluster, "alice", lambda cl: cl.status(mesh=False))
    return {r["server"]: r["load"] for r in rows}


def _settled(cluster: FaultCluster, idle: dict[str, dict[str, int]],
             keys: tuple[str, ...] = ("connections", "parked")) -> dict[str, dict[str, int]]:
    """Wait until no server holds more connections or parked mesh connections (and ``tasks``
    if asked: a mesh connection's expiry timer lives connect + handshake timeouts) than when
    idle."""
    deadline = time.monotonic() + CONNECT + HANDSHAKE + 2.0
    while True:
        now = _load(cluster)
        if all(now[s][k] <= idle[s][k] for s in SERVERS for k in keys):
            return now
        assert time.monotonic() < deadline, f"leftovers of a failed job: {now} (idle {idle})"
        time.sleep(0.1)


class _Peak:
    """Highest RSS of each server while the jobs run (sampled every 5 ms)."""

    def __init__(self, cluster: FaultCluster) -> None:
        import psutil
        self.procs = {s: psutil.Process(cluster.pid(s)) for s in SERVERS}
        self.peak = {s: p.memory_info().rss for s, p in self.procs.items()}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.005):
            for s, p in self.procs.items():
                self.peak[s] = max(self.peak[s], p.memory_info().rss)

    def close(self) -> dict[str, int]:
        self.stop.set()
        self.thread.join()
        return self.peak


def test_a_contribution_committed_after_the_check_is_not_computed_on(
        cluster: FaultCluster, files: dict[str, Path], request: pytest.FixtureRequest) -> None:
    """Every server checks a job (dataset digest, required security) when it accepts it and
    loads the dataset later: an upload committed in between (the fourth review's race, which
    let a passive job read rows shared for active3) fails the job instead."""
    ok(cluster.client("hospital-a", "share", str(files["other"]), "--dataset", "racing",
                      "--label", "label"))
    for name in SERVERS:
        cluster.faults(name, delay_load=2.0)
    try:
        proc = start_cli(cluster, "analyst", "select", "--dataset", "racing", "--k", "3",
                         "--result", "raced")
        for name in SERVERS:
            cluster.wait_hit(name, "load")
        ok(cluster.client("hospital-b", "share", str(files["small"]), "--dataset", "racing",
                          "--label", "label", "--security", "active3"))
        err = refused(finish(proc), code=2)
    finally:
        for name in SERVERS:
            cluster.faults(name)
    assert "changed after the job was checked" in err, err
    r = cluster.client("analyst", "select", "--dataset", "racing", "--k", "3", "--result",
                       "raced-again", "--security", "passive3")
    assert r.returncode == 2 and "--security active3" in r.stderr, r.stderr
    # without --security, select takes the setting the dataset's owners shared for
    ok(cluster.client("analyst", "select", "--dataset", "racing", "--k", "3", "--result",
                      "raced-again"))
    assert np.array_equal(fetch_values(cluster, "raced-again"),
                          plaintext([files["other"], files["small"]], 3))
    report(request, "faults: a contribution committed between a job's check and its load "
           "failed the job on every server; the next job ran on the grown dataset")


def test_failed_jobs_free_their_memory(cluster: FaultCluster, files: dict[str, Path],
                                       request: pytest.FixtureRequest) -> None:
    ok(cluster.client("hospital-a", "share", str(files["wide"]), "--dataset", "wide",
                      "--label", "label"))
    idle = _load(cluster)
    cluster.faults("bob", fail_phase={"product": "test"})
    n, samples = 8, []

    async def attempt(cl: Client, i: int) -> str:
        try:
            await cl.select("wide", 20, f"mem-{i}")
        except MPCError as exc:
            return str(exc)
        raise AssertionError("the job should have failed")

    peak = _Peak(cluster)
    try:
        for i in range(n):
            err = call(cluster, "analyst", functools.partial(attempt, i=i))
            assert "bob" in err and "injected fault" in err, err
            wait_jobs_ended(cluster, list(SERVERS), f"mem-{i}")
            samples.append({s: v["rss"] for s, v in _settled(cluster, idle).items()})
    finally:
        top = peak.close()
    cluster.faults("bob")
    _settled(cluster, idle, ("connections", "parked", "tasks"))
    mb = 2**20
    # a job that kept its arrays would add about its working set (peak above idle) every time;
    # what is left after the warm-up must be far below that (allocator pages, job records)
    per_job = {s: (samples[-1][s] - samples[2][s]) / (n - 3) / mb for s in SERVERS}
    working = {s: (top[s] - idle[s]["rss"]) / mb for s in SERVERS}
    assert all(per_job[s] < max(2.0, working[s] / 4) for s in SERVERS), (per_job, working)
    assert healthy(cluster)
    select_checked(cluster, "wide", 20, "mem-retry", [files["wide"]])
    report(request, f"faults: {n}/{n} failed jobs (126 x 310, aborted in product) released "
           "their connections, parked mesh connections and tasks; RSS per job after warm-up "
           + ", ".join(f"{s} {per_job[s]:+.1f} MB (job working set {working[s]:.0f} MB)"
                       for s in SERVERS) + "; retry succeeded")


# -- a restarted server keeps everything --------------------------------------------------------
def test_restart_keeps_every_dataset_and_result(cluster: FaultCluster,
                                                request: pytest.FixtureRequest) -> None:
    before = snapshot(cluster)
    datasets, results = listing(cluster, "datasets"), listing(cluster, "results")
    names = [r["name"] for r in results["alice"]]
    values = {r: fetch_values(cluster, r) for r in names}
    for name in SERVERS:  # SIGKILL: no chance to flush anything
        cluster.kill(name)
    cluster.start(list(SERVERS))
    assert snapshot(cluster) == before
    assert listing(cluster, "datasets") == datasets and listing(cluster, "results") == results
    for r in names:
        assert np.array_equal(fetch_values(cluster, r), values[r])
    checked = sum(Storage(s.data_dir).verify_all() for s in cluster.dep.servers)
    n_files = sum(len(v) for v in before.values())
    report(request, f"faults: restart of all 3 servers (SIGKILL) kept {len(datasets['alice'])} "
           f"datasets and {len(names)} results: {n_files}/{n_files} files identical (SHA-256), "
           f"{checked} share files verified against their manifests, {len(names)} fetched D' "
           "identical")
