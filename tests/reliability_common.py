"""Helpers of the reliability suite (tests/test_reliability_*.py): clusters with short timeouts
and fault hooks, small LSVT slices, plaintext references, storage snapshots, summary lines.

Every server is a real ``mpc-party`` process on 127.0.0.1 started and stopped by PID
(``LocalCluster``); ``FaultCluster`` starts them through ``tests/reliability_launcher.py``,
whose hooks a test switches on by writing a control file.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from mpcnet.client.local import CLIENTS, LocalCluster, write_config
from mpcnet.client.results import reconstruct
from mpcnet.client.session import Client
from mpcnet.net.tls import run

ROOT = Path(__file__).resolve().parents[1]
LSVT = ROOT / "data" / "lsvt_126x310.csv"
LAUNCHER = Path(__file__).resolve().parent / "reliability_launcher.py"
SERVERS = ("alice", "bob", "carol")

# short, configured bounds: every wait in the suite is one of these (deployment file)
TIMEOUTS = {"connect_timeout": 2.0, "handshake_timeout": 2.0, "round_timeout": 3.0,
            "request_timeout": 6.0, "probe_timeout": 1.0}


# -- data ------------------------------------------------------------------------------------
def lsvt_slice(out: Path, rows: slice, cols: list[int], label: bool = True) -> Path:
    """Rows and feature columns of the bundled LSVT file (and its label) as a CSV file."""
    with open(LSVT, newline="") as f:
        data = list(csv.reader(f))
    head, body = data[0], data[1:]
    li = head.index("label")
    keep = cols + ([li] if label else [])
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([head[c] for c in keep])
        w.writerows([r[c] for c in keep] for r in body[rows])
    return out


def lsvt_files(folder: Path, specs: dict[str, tuple[Any, ...]]) -> dict[str, Path]:
    """``lsvt_slice`` per name: ``folder/<name>.csv`` from (rows, columns[, label])."""
    return {name: lsvt_slice(folder / f"{name}.csv", rows, list(cols), *label)
            for name, (rows, cols, *label) in specs.items()}


def plaintext(parts: list[Path], k: int) -> np.ndarray:
    """D' in the clear for the rows of ``parts`` stacked in order, encoded with the exponents
    and classes of the first part (what the first owner fixes), by ``mpcnet.plain``."""
    from mpcnet.client.demo import plaintext_reference
    from mpcnet.dataset import Table, class_codes, read_csv
    from mpcnet.fixedpoint import auto_exponents

    tables = [read_csv(p, label="label") for p in parts]
    first = tables[0]
    labels = [t.labels for t in tables if t.labels is not None]
    classes, _ = class_codes(labels[0])
    whole = Table(columns=first.columns, values=np.vstack([t.values for t in tables]),
                  labels=np.concatenate(labels), categories={})
    return plaintext_reference(whole, auto_exponents(first.values), classes, k).values


# -- clusters --------------------------------------------------------------------------------
class FaultCluster(LocalCluster):
    """A local deployment whose servers run with the test-only fault hooks."""

    def server_argv(self, name: str) -> list[str]:
        return [sys.executable, str(LAUNCHER), str(self.control(name))]

    def control(self, name: str) -> Path:
        return self.folder / f"faults-{name}.json"

    def faults(self, name: str, **hooks: Any) -> None:
        """Switch hooks of server ``name`` on (see the launcher); none: switch all off."""
        for old in self.folder.glob(f"faults-{name}.json.hit-*"):
            old.unlink()
        path = self.control(name)
        if hooks:
            path.write_text(json.dumps(hooks))
        else:
            path.unlink(missing_ok=True)

    def wait_hit(self, name: str, hook: str, timeout: float = 15.0) -> None:
        marker = self.folder / f"faults-{name}.json.hit-{hook}"
        deadline = time.monotonic() + timeout
        while not marker.exists():
            assert time.monotonic() < deadline, f"{name} never reached hook {hook}"
            time.sleep(0.01)


def make_config(folder: Path, extra_clients: tuple[tuple[str, str], ...] = (),
                timeouts: dict[str, float] | None = None) -> Path:
    return write_config(folder, 3, timeouts=TIMEOUTS | (timeouts or {}),
                        clients=CLIENTS + extra_clients)


C = TypeVar("C", bound=LocalCluster)


@contextlib.contextmanager
def running_cluster(folder: Path, cls: type[C] = LocalCluster,  # type: ignore[assignment]
                    extra_clients: tuple[tuple[str, str], ...] = ()) -> Iterator[C]:
    """A deployment in ``folder`` (``make_config``) whose servers run during the block."""
    c = cls(folder, config_path=make_config(folder, extra_clients=extra_clients))
    with c:
        c.start()
        yield c


def alive(cluster: LocalCluster) -> bool:
    return all(p.poll() is None for p in cluster.procs.values())


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}\n{result.stdout}"
    return result.stdout


def refused(result: subprocess.CompletedProcess[str], code: int | None = None) -> str:
    """The one-line reason of a failed command (asserts non-zero exit and a single line)."""
    assert result.returncode != 0, f"expected a failure, got: {result.stdout}"
    if code is not None:
        assert result.returncode == code, f"exit {result.returncode}: {result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr, result.stderr
    # before the reason, ``select`` may print its progress lines ("job ID: phase...")
    assert lines and lines[-1].startswith("mpc-client: "), result.stderr
    assert all(line.startswith("job ") for line in lines[:-1]), result.stderr
    return lines[-1]


# -- in-process client (fast checks) ----------------------------------------------------------
def call(cluster: LocalCluster, identity: str, fn: Callable[[Client], Any]) -> Any:
    async def main() -> Any:
        cl = Client(cluster.dep, identity)
        try:
            return await fn(cl)
        finally:
            cl.close()
    return run(main())


def listing(cluster: LocalCluster, op: str, identity: str = "analyst") -> dict[str, Any]:
    return call(cluster, identity, lambda cl: cl.listing(op))[0]  # type: ignore[no-any-return]


def listing_on(cluster: LocalCluster, names: list[str], op: str) -> dict[str, Any]:
    """``op`` (datasets, results, jobs) as answered by the servers in ``names`` only."""
    async def go(cl: Client) -> dict[str, Any]:
        return {s.name: (await (await cl.session(s)).request(op))[op]
                for s in cluster.dep.servers if s.name in names}
    return call(cluster, "analyst", go)  # type: ignore[no-any-return]


def healthy(cluster: LocalCluster) -> bool:
    rows = call(cluster, "analyst", lambda cl: cl.status())
    return all(r["reachable"] and r["mesh_ok"] for r in rows)


def fetch_values(cluster: LocalCluster, result: str, identity: str = "analyst") -> np.ndarray:
    async def go(cl: Client) -> np.ndarray:
        return reconstruct(await cl.fetch(result))
    return call(cluster, identity, go)  # type: ignore[no-any-return]


def select_checked(cluster: LocalCluster, dataset: str, k: int, result: str,
                   parts: list[Path]) -> None:
    """``mpc-client select`` as the analyst; D' must equal ``plaintext(parts, k)``."""
    ok(cluster.client("analyst", "select", "--dataset", dataset, "--k", str(k), "--result",
                      result))
    assert np.array_equal(fetch_values(cluster, result), plaintext(parts, k))


# -- storage ---------------------------------------------------------------------------------
def snapshot(cluster: LocalCluster) -> dict[str, dict[str, str]]:
    """Every stored file of every server (datasets/, results/) with its SHA-256, and what is
    in staging/ (which must be empty whenever no upload or job is in flight)."""
    out: dict[str, dict[str, str]] = {}
    for s in cluster.dep.servers:
        files: dict[str, str] = {}
        for kind in ("datasets", "results"):
            root = s.data_dir / kind
            for f in sorted(root.rglob("*")) if root.exists() else []:
                if f.is_file():
                    files[str(f.relative_to(s.data_dir))] = hashlib.sha256(
                        f.read_bytes()).hexdigest()
        staging = s.data_dir / "staging"
        for f in sorted(staging.iterdir()) if staging.exists() else []:
            files[f"staging/{f.name}"] = "in staging"
        out[s.name] = files
    return out


def rss(cluster: LocalCluster, name: str) -> int:
    import psutil
    return int(psutil.Process(cluster.pid(name)).memory_info().rss)


# -- summary lines ----------------------------------------------------------------------------
def report(request: pytest.FixtureRequest, line: str) -> None:
    """Print a summary line even when output is captured, e.g. ``faults: 5/5 phases ...``."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            print(f"\n[reliability] {line}", flush=True)
    else:
        print(f"[reliability] {line}")


# -- processes ---------------------------------------------------------------------------------
def start_cli(cluster: LocalCluster, identity: str, *args: str) -> subprocess.Popen[str]:
    """``mpc-client`` in the background (the test acts while it runs)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mpcnet.client.main", "--config", str(cluster.config_path), "--as",
         identity, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=cluster._env())


def finish(proc: subprocess.Popen[str], timeout: float = 60.0
           ) -> subprocess.CompletedProcess[str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"mpc-client did not finish within {timeout} s: {err}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def job_records(cluster: LocalCluster, names: list[str], result: str) -> dict[str, Any]:
    """The latest record of the job computing ``result`` on each server in ``names``."""
    async def go(cl: Client) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for s in cluster.dep.servers:
            if s.name in names:
                jobs = (await (await cl.session(s)).request("jobs"))["jobs"]
                mine = [j for j in jobs if j["result"] == result]
                out[s.name] = mine[-1] if mine else None
        return out
    return call(cluster, "analyst", go)  # type: ignore[no-any-return]


def wait_jobs_ended(cluster: LocalCluster, names: list[str], result: str,
                    timeout: float = 15.0) -> dict[str, Any]:
    """Poll until the job computing ``result`` has ended on every server in ``names``."""
    deadline = time.monotonic() + timeout
    while True:
        recs = job_records(cluster, names, result)
        if all(r is not None and r["state"] in ("done", "failed") for r in recs.values()):
            return recs
        assert time.monotonic() < deadline, f"job for {result} still not ended: {recs}"
        time.sleep(0.05)


@contextlib.contextmanager
def four_servers_with_results(folder: Path, k: int) -> Iterator[FaultCluster]:
    """Four servers (the reliability launcher, so a test can slow a dataset load), started
    under a common umask (022), holding a 40 x 8 slice of LSVT shared for active4 (``base``)
    and for passive3 (``p3``), and the analyst's result of each (``base-r``, ``p3-r``)."""
    path = write_config(folder, 4, timeouts=TIMEOUTS | {"round_timeout": 10.0},
                        clients=CLIENTS,
                        extra_client_lines={"outsider": 'datasets = ["elsewhere"]'})
    c = FaultCluster(folder, config_path=path)
    with c:
        old = os.umask(0o022)
        try:
            c.start()
        finally:
            os.umask(old)
        csv_path = lsvt_slice(folder / "base.csv", slice(0, 40), list(range(8)))
        ok(c.client("hospital-a", "share", str(csv_path), "--dataset", "base",
                    "--label", "label"))  # active4, the default with four servers
        ok(c.client("hospital-a", "share", str(csv_path), "--dataset", "p3",
                    "--label", "label", "--security", "passive3"))
        ok(c.client("analyst", "select", "--dataset", "base", "--k", str(k),
                    "--result", "base-r"))
        ok(c.client("analyst", "select", "--dataset", "p3", "--k", str(k),
                    "--result", "p3-r", "--security", "passive3"))
        yield c
