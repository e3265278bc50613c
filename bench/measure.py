"""Benchmarks: one (dataset shape, security setting) case on a fresh local deployment.

``run_case`` starts the servers (``client.local.LocalCluster``), and per repeat shares the CSV
with the real CLI, resets each server's peak-memory mark, runs the selection as the analyst,
collects every server's job figures, its peak resident memory and CPU time from ``/proc``, and
on the first repeat checks D' against the plaintext selection. ``bench.network`` (the paper's
shapes) and ``bench.scaling`` (growth with m, p, k) run cases; ``bench.report`` renders them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import netemu  # noqa: E402
from mpcnet.schemes import registry  # noqa: E402

SETTINGS = ("passive3", "active3", "active4")
PHASES = ("scoring", "selection", "product", "checks")
ALL_PHASES = ("setup", *PHASES, "commit")
TIMEOUTS = {"connect_timeout": 30.0, "round_timeout": 300.0, "request_timeout": 600.0,
            "handshake_timeout": 10.0}
OWNER, ANALYST, MODEL_OWNER = "hospital-a", "analyst", "clinic"


def log(msg: str) -> None:
    print(msg, flush=True)


# -- shapes --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """A CSV file to share and select from, with the options its CLI share needs."""

    name: str
    csv: str
    label: str
    k: int
    drop: tuple[str, ...] = ()
    categorical: str = "refuse"
    missing: str = "refuse"
    rows: int | None = None  # m and p where known without reading the file (synthetic)
    features: int | None = None

    def share_args(self) -> list[str]:
        args = [self.csv, "--label", self.label, "--categorical", self.categorical,
                "--missing", self.missing]
        return args + (["--drop", *self.drop] if self.drop else [])

    def read(self) -> Any:
        from mpcnet.dataset import EncodingOptions, read_csv
        return read_csv(Path(self.csv), self.label, self.drop,
                        EncodingOptions(categorical=self.categorical,  # type: ignore[arg-type]
                                        missing=self.missing))  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Shape:
        return cls(**{**d, "drop": tuple(d.get("drop", ()))})


def bundled_shape(name: str) -> Shape:
    from mpcnet.dataset import BUNDLED, bundled
    spec = BUNDLED[name]
    return Shape(name, str(bundled(name)), spec.label, spec.k, tuple(spec.drop),
                 spec.options.categorical, spec.options.missing)


def synthetic_values(m: int, p: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """An m x p float matrix and a 0/1 label: a tenth of the columns carry the signal; every
    third column holds small integers (many ties), every third non-negative reals."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(m, p))
    x[:, 1::3] = np.round(x[:, 1::3] * 3)
    x[:, 2::3] = np.round(np.abs(x[:, 2::3]) * 1e3, 1)
    signal = x[:, : max(1, p // 10)].sum(1) + rng.normal(size=m) * 2
    return x, (signal > np.median(signal)).astype(np.int64)


def synthetic_shape(folder: Path, m: int, p: int, k: int, seed: int = 0) -> Shape:
    """``synthetic_values`` as a labelled CSV file in ``folder`` (label column ``y``)."""
    x, y = synthetic_values(m, p, seed)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"synthetic_{m}x{p}_s{seed}.csv"
    if not path.exists():
        cols = [f"x{j + 1}" for j in range(p)]
        tmp = path.with_suffix(".tmp")
        np.savetxt(tmp, np.column_stack([x, y]), delimiter=",", header=",".join([*cols, "y"]),
                   comments="", fmt=["%.6g"] * p + ["%d"])
        tmp.replace(path)
    return Shape(f"synthetic-{m}x{p}", str(path), "y", k, rows=m, features=p)


# -- measuring one case --------------------------------------------------------------------
def _reset_peak(pid: int) -> bool:
    """Reset the process's VmHWM to its current RSS (Linux >= 4.0); False if not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (0 if it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return 0.0


def _busy_seconds() -> float:
    """CPU time the whole machine has spent busy (all cores), from /proc/stat."""
    try:
        f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return (sum(f[:8]) - f[3] - f[4]) / _TICK  # everything but idle and iowait
    except (OSError, IndexError, ValueError):
        return 0.0


def _share(cluster: Any, shape: Shape, dataset: str, security: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = cluster.client(OWNER, "--json", "share", "--dataset", dataset, "--security", security,
                       *shape.share_args(), timeout=1800)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"mpc-client share {shape.csv} failed (exit {r.returncode}): "
                           f"{r.stderr.strip()[-800:]}")
    out = json.loads(r.stdout)
    return {"share_cli_s": wall, "share_client_s": float(out["seconds"]),
            "share_bytes_per_server": int(out["bytes_per_server"])}


def _reference(shape: Shape, schema: dict[str, Any], k: int, score: str) -> np.ndarray:
    """D' in the clear from the same encoded values (mpcnet.plain)."""
    from mpcnet.dataset import class_codes
    from mpcnet.fixedpoint import decode, encode
    from mpcnet.plain import reduce, score_fraction, topk_fraction

    table = shape.read()
    exps = np.asarray(schema["exponents"], dtype=np.int64)
    x = encode(table.values, exps, table.columns)
    _, codes = class_codes(table.labels, schema["classes"])
    q, d = score_fraction(score, x, codes, len(schema["classes"]))
    idx = topk_fraction(q, d, k)
    return np.asarray(decode(reduce(x, idx), exps[idx]))


async def _select(dep: Any, dataset: str, k: int, security: str, n: int, score: str
                  ) -> dict[str, Any]:
    """Run the selection as the analyst; end-to-end time and every server's job figures."""
    from mpcnet.client.session import Client

    analyst = Client(dep, ANALYST)
    out: dict[str, Any] = {}
    try:
        t0 = time.perf_counter()
        job = await analyst.select(dataset, k, f"{dataset}-top{k}", security=security,
                                   score=score)
        out["e2e_s"] = time.perf_counter() - t0
        out["job_id"] = job["id"]
        out["figures"] = await _figures(analyst, dep, job["id"], n)
    finally:
        analyst.close()
    return out


async def _figures(analyst: Any, dep: Any, job_id: str, n: int) -> dict[str, Any]:
    """Every server's own figures of the job."""
    figures = {}
    for s in dep.servers[:n]:
        sess = await analyst.session(s)
        figures[s.name] = (await sess.request("job", id=job_id))["job"]["figures"]
    return figures


async def _train(dep: Any, dataset: str, k: int, epochs: int, n: int) -> dict[str, Any]:
    """Train a model on the selection's result as the analyst, for the model owner; end-to-end
    time and every server's job figures (the standardise and training phases)."""
    from mpcnet.client.session import Client

    analyst = Client(dep, ANALYST)
    try:
        t0 = time.perf_counter()
        job = await analyst.train(f"{dataset}-top{k}", f"{dataset}-model", MODEL_OWNER,
                                  epochs=epochs)
        out: dict[str, Any] = {"e2e_s": time.perf_counter() - t0, "epochs": epochs,
                               "figures": await _figures(analyst, dep, job["id"], n)}
    finally:
        analyst.close()
    return out


async def _check(dep: Any, dataset: str, k: int, shape: Shape, score: str) -> dict[str, Any]:
    """Fetch and reconstruct D' as the analyst; compare it with the plaintext selection."""
    from mpcnet.client.results import reconstruct
    from mpcnet.client.session import Client

    analyst, owner = Client(dep, ANALYST), Client(dep, OWNER)
    try:
        t0 = time.perf_counter()
        reduced = reconstruct(await analyst.fetch(f"{dataset}-top{k}"))
        fetch_s = time.perf_counter() - t0
        sess = await owner.session(dep.leader)
        schema = (await sess.request("schema", dataset=dataset))["manifest"]["schema"]
    finally:
        analyst.close()
        owner.close()
    expected = await asyncio.to_thread(_reference, shape, schema, k, score)
    return {"fetch_s": fetch_s,
            "equal": bool(reduced.shape == expected.shape and np.array_equal(reduced, expected))}


def _proxied_config(path: Path) -> list[tuple[str, int, str, int]]:
    """Make every server listen on 127.0.0.2 while peers and clients dial 127.0.0.1 (where
    the delay proxy listens); returns the proxy's routes."""
    import re
    text = path.read_text()
    ports = [int(p) for p in re.findall(r"^port = (\d+)$", text, flags=re.M)]
    text = text.replace('host = "127.0.0.1"', 'host = "127.0.0.1"\nlisten = "127.0.0.2"')
    path.write_text(text)
    return [("127.0.0.1", p, "127.0.0.2", p) for p in ports]


def run_case(shape: Shape, security: str, repeat: int, workdir: Path, *,
             link: netemu.Link | None = None, method: str | None = None, check: bool = True,
             train_epochs: int = 0, log: Callable[[str], None] = log,
             score: str = "ms-gini") -> dict[str, Any]:
    """All repeats of one (shape, setting) on a fresh deployment, selecting by ``score``; raw
    figures per run. With ``train_epochs``, the first run also trains a model on its result
    (``training``)."""
    from mpcnet.client.local import LocalCluster, write_config
    from mpcnet.net.tls import run

    if shape.rows is not None and shape.features is not None:
        m, p = shape.rows, shape.features  # a 10^6-row file takes minutes to read
    else:
        m, p = shape.read().values.shape
    case: dict[str, Any] = {"shape": shape.name, "security": security, "m": m, "p": p,
                            "k": shape.k, "link": link.name if link else "loopback",
                            "method": method or "loopback", "score": score}
    n = registry.get(security).n_parties
    folder = workdir / f"{shape.name}-{security}-{score}-{case['link']}"
    cfg = write_config(folder, n, timeouts=TIMEOUTS)
    routes = _proxied_config(cfg) if method == "proxy" else []
    runs: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(LocalCluster(folder, n, config_path=cfg))
        cluster.start(wait=60)
        proxy = (stack.enter_context(netemu.Proxy(routes, link, folder))
                 if routes and link is not None else None)
        names = [s.name for s in cluster.dep.servers[:n]]
        pids = {name: cluster.pid(name) for name in names}
        for i in range(repeat):
            dataset = f"{shape.name}-{i}"
            load = os.getloadavg()[0]
            rec: dict[str, Any] = {"loadavg_1min": load}
            rec.update(_share(cluster, shape, dataset, security))
            peaks_reset = all(_reset_peak(pid) for pid in pids.values())
            cpu0 = {name: _cpu_seconds(pid) for name, pid in pids.items()}
            busy0, self0 = _busy_seconds(), time.process_time()
            proxy0 = _cpu_seconds(proxy.pid) if proxy else 0.0
            rec.update(run(_select(cluster.dep, dataset, shape.k, security, n, score)))
            rec["peak_bytes"] = {name: _peak_bytes(pid) for name, pid in pids.items()}
            rec["cpu_s"] = {name: _cpu_seconds(pid) - cpu0[name] for name, pid in pids.items()}
            rec["proxy_cpu_s"] = (_cpu_seconds(proxy.pid) - proxy0) if proxy else 0.0
            # CPU the rest of the machine used meanwhile (other jobs: the noise)
            rec["other_cpu_s"] = max(0.0, _busy_seconds() - busy0 - sum(rec["cpu_s"].values())
                                     - (time.process_time() - self0) - rec["proxy_cpu_s"])
            if check and i == 0:
                rec.update(run(_check(cluster.dep, dataset, shape.k, shape, score)))
            if train_epochs and i == 0:
                for pid in pids.values():
                    _reset_peak(pid)
                cpu0 = {name: _cpu_seconds(pid) for name, pid in pids.items()}
                load = os.getloadavg()[0]
                rec["training"] = run(_train(cluster.dep, dataset, shape.k, train_epochs, n))
                rec["training"]["peak_bytes"] = {name: _peak_bytes(pid)
                                                 for name, pid in pids.items()}
                rec["training"]["cpu_s"] = {name: _cpu_seconds(pid) - cpu0[name]
                                            for name, pid in pids.items()}
                rec["training"]["loadavg_1min"] = load
                log(f"  {shape.name} {security}: trained {train_epochs} epochs in "
                    f"{rec['training']['e2e_s']:.2f} s end to end")
            rec["peak_is_job_only"] = peaks_reset
            runs.append(rec)
            job_s = max(f["seconds"] for f in rec["figures"].values())
            log(f"  {shape.name} {security} {score} [{case['link']}] run {i + 1}/{repeat}: share "
                f"{rec['share_cli_s']:.2f} s, select {rec['e2e_s']:.2f} s end to end (job "
                f"{job_s:.2f} s)" + (f", D' = plain: {rec['equal']}" if "equal" in rec else ""))
    case.update(available=True, n_parties=n, runs=runs)
    return case
