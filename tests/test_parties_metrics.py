"""The metrics view (``parties.metrics``): Prometheus' text format scraped over HTTP from real
``mpc-party`` processes (``--metrics-port``) while they run jobs over TLS on 127.0.0.1.

Carol runs the test-only cheating launcher (``tests/cheating_party.py``), honest until the
test writes a fault into its fault file, so that one cluster shows a job done, a job ended by
a failed check, and a stopped peer. Every figure scraped is compared with what the servers'
own job records say (``mpc-client jobs --json``), not with constants.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import ROOT
from reliability_common import lsvt_files, ok

from mpcnet import __version__
from mpcnet.client.local import LocalCluster, free_ports
from mpcnet.parties.jobs import Job
from mpcnet.parties.metrics import Exposition, job_families

LAUNCHER = ROOT / "tests" / "cheating_party.py"
SAMPLE = re.compile(r'([a-z_]+)(?:\{((?:[a-z_]+="(?:[^"\\]|\\.)*",?)*)\})? (\S+)')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """The samples of an exposition, checking its syntax: every family has one HELP and one
    TYPE line before its samples, and every sample belongs to the family declared last."""
    out: Samples = {}
    family, types = "", {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            family = line.split(" ")[2]
            assert family not in types, f"family {family} twice"
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name == family and kind in ("gauge", "counter", "histogram"), line
            types[name] = kind
        else:
            m = SAMPLE.fullmatch(line)
            assert m, f"not a sample: {line!r}"
            name, labels, value = m.groups()
            assert name == family or (types.get(family) == "histogram" and name in (
                f"{family}_bucket", f"{family}_sum", f"{family}_count")), line
            key = (name, frozenset(LABEL.findall(labels or "")))
            assert key not in out, f"sample twice: {line}"
            out[key] = float(value)
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[name, frozenset(labels.items())]


def test_the_exposition_of_job_records() -> None:
    """In memory: jobs by state, the histogram's cumulative buckets, the failed check read
    from a relayed error, bytes per peer summed over jobs."""
    wire = {"bob": {"sent": 10, "recv": 20}, "carol": {"sent": 1, "recv": 2}}
    jobs = [Job("a" * 12, "d", "", 2, "ms-gini", "active3", "r1", "an", 3, state="done",
                started=0.0, finished=3.0, figures={"seconds": 3.0, "rounds": 7, "wire": wire}),
            Job("b" * 12, "d", "", 2, "ms-gini", "active3", "r2", "an", 3, state="failed",
                error="CheatingDetected: bob refused: cheating detected: job request check "
                      "failed (the coordinator says k 3)", figures={"seconds": 0.2,
                                                                   "wire": wire}),
            Job("c" * 12, "d", "", 2, "ms-gini", "passive3", "r3", "an", 3)]
    out = Exposition()
    job_families(out, jobs, ["bob", "carol"])
    s = parse(out.text())
    assert value(s, "mpc_jobs", state="done", kind="select", security="active3") == 1
    assert value(s, "mpc_jobs", state="queued", kind="select", security="passive3") == 1
    assert value(s, "mpc_jobs", state="running", kind="train", security="active4") == 0
    done = {"kind": "select", "security": "active3", "state": "done"}
    assert value(s, "mpc_job_duration_seconds_bucket", **done, le="2.5") == 0
    assert value(s, "mpc_job_duration_seconds_bucket", **done, le="5.0") == 1
    assert value(s, "mpc_job_duration_seconds_bucket", **done, le="+Inf") == 1
    assert value(s, "mpc_job_duration_seconds_sum", **done) == 3.0
    assert value(s, "mpc_checks_failed_total", check="job request") == 1
    assert value(s, "mpc_jobs_cheating_detected_total") == 1
    assert value(s, "mpc_job_wire_bytes_total", peer="bob", direction="received") == 40
    assert value(s, "mpc_job_rounds_total", kind="select", security="active3") == 7


# -- real servers ------------------------------------------------------------------------------
class MetricsCluster(LocalCluster):
    """Alice and bob serve metrics (bob logs JSON lines); carol is the cheating launcher,
    honest by default."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, timeouts={"round_timeout": 3.0, "handshake_timeout": 3.0,
                                           "connect_timeout": 5.0, "probe_timeout": 1.0})
        self.ports = dict(zip(("alice", "bob"), free_ports(2), strict=True))
        self.fault_file = self.folder / "fault.txt"
        self.fault_file.write_text("")

    def server_argv(self, name: str) -> list[str]:
        if name == "carol":
            return [sys.executable, str(LAUNCHER), "--fault-file", str(self.fault_file)]
        fmt = ["--log-format", "json"] if name == "bob" else []
        return [*super().server_argv(name), "--metrics-port", str(self.ports[name]), *fmt]

    def scrape(self, name: str, path: str = "/metrics") -> Samples:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[name]}{path}",
                                    timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            return parse(r.read().decode())

    def records(self) -> dict[str, list[dict[str, Any]]]:
        return json.loads(ok(self.client("analyst", "--json", "jobs")))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsCluster]:
    c = MetricsCluster(tmp_path_factory.mktemp("metrics"))
    with c:
        c.start()
        yield c
        os.kill(c.pid("carol"), signal.SIGCONT)  # never leave it stopped


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return lsvt_files(tmp_path_factory.mktemp("csv"), {"small": (slice(0, 30), range(6))})


def _select(cluster: MetricsCluster, result: str) -> Any:
    return cluster.client("analyst", "select", "--dataset", "d", "--k", "2", "--security",
                          "active3", "--result", result)


def test_jobs_bytes_durations_and_failed_checks_match_the_records(
        cluster: MetricsCluster, files: dict[str, Path]) -> None:
    before = cluster.scrape("alice")
    assert value(before, "mpc_server_info", server="alice", party="0", role="coordinator",
                 version=__version__) == 1
    assert all(v == 0 for (n, _), v in before.items() if n == "mpc_jobs")
    assert value(before, "mpc_peer_up", peer="bob") == value(before, "mpc_peer_up",
                                                              peer="carol") == 1
    ok(cluster.client("hospital-a", "share", str(files["small"]), "--dataset", "d",
                      "--label", "label", "--security", "active3"))
    ok(_select(cluster, "honest"))
    cluster.fault_file.write_text("product:add")  # carol cheats in the next job
    assert _select(cluster, "cheated").returncode == 4
    cluster.fault_file.write_text("")
    records = cluster.records()
    for name in ("alice", "bob"):
        s = cluster.scrape(name)
        mine = records[name]
        assert [j["state"] for j in mine] == ["done", "failed"], mine
        for state in ("done", "failed"):
            assert value(s, "mpc_jobs", state=state, kind="select", security="active3") == 1
            ended = {"kind": "select", "security": "active3", "state": state}
            assert value(s, "mpc_job_duration_seconds_count", **ended) == 1
            seconds = next(j["figures"]["seconds"] for j in mine if j["state"] == state)
            assert value(s, "mpc_job_duration_seconds_sum", **ended) == pytest.approx(seconds)
        assert value(s, "mpc_job_rounds_total", kind="select", security="active3") == sum(
            j["figures"]["rounds"] for j in mine)
        for peer in {"alice", "bob", "carol"} - {name}:
            for direction, key in (("sent", "sent"), ("received", "recv")):
                total = sum(j["figures"]["wire"][peer][key] for j in mine)
                assert total > 0
                assert value(s, "mpc_job_wire_bytes_total", peer=peer,
                             direction=direction) == total
        error = mine[1]["error"]
        checks = {dict(k)["check"]: v for (n, k), v in s.items()
                  if n == "mpc_checks_failed_total"}
        assert len(checks) == 1 and list(checks.values()) == [1], checks
        assert f"cheating detected: {next(iter(checks))} check failed" in error, error
        assert value(s, "mpc_jobs_cheating_detected_total") == 1
    # bob's log holds the same failure as an event
    failed = [e for e in map(json.loads, cluster.log("bob").splitlines())
              if e.get("event") == "job.failed"]
    assert [(e["job"], e["check"], e["error"]) for e in failed] == [
        (records["bob"][1]["id"], next(iter(checks)), records["bob"][1]["error"])]


def test_a_stopped_peer_is_down_within_the_probe_timeout(cluster: MetricsCluster) -> None:
    carol = cluster.pid("carol")
    os.kill(carol, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        s = cluster.scrape("alice")
        took = time.monotonic() - t0
    finally:
        os.kill(carol, signal.SIGCONT)
    probe = cluster.dep.timeouts.probe
    assert value(s, "mpc_peer_up", peer="carol") == 0 and value(s, "mpc_peer_up",
                                                                  peer="bob") == 1
    assert took < probe + 1.5, f"the scrape took {took:.2f} s with a {probe} s probe"
    assert value(cluster.scrape("alice"), "mpc_peer_up", peer="carol") == 1
    # the change was logged once each way, as peer events
    events = [json.loads(line) for line in cluster.log("alice").splitlines()
              if line.startswith("{")]
    assert not events  # alice logs text by default: the JSON format is opt-in
    assert "peer carol is down" in cluster.log("alice")
    assert "peer carol is up" in cluster.log("alice")


def test_the_port_is_local_and_answers_metrics_only(cluster: MetricsCluster) -> None:
    port = cluster.ports["alice"]
    listening = [c.laddr for c in psutil.Process(cluster.pid("alice")).net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    assert [a.ip for a in listening] == ["127.0.0.1"], listening
    for path, code in (("/", 404), ("/metrics/../jobs", 404)):
        with pytest.raises(urllib.error.HTTPError) as err:
            cluster.scrape("alice", path)
        assert err.value.code == code
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", data=b"x",
                                     method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=10)
    assert err.value.code == 405
    # a client that connects and says nothing holds no one else up
    idle = socket.create_connection(("127.0.0.1", port))
    try:
        t0 = time.monotonic()
        cluster.scrape("alice")
        assert time.monotonic() - t0 < 5.0
    finally:
        idle.close()
