"""Benchmark: private MS-GINI selection by real server processes over TLS (the paper's runtimes).

For the paper's three data shapes (the bundled CogLoad 632 x 120 k = 12, LSVT 126 x 310
k = 103 and SpeedDating 8378 x 122 k = 67) and each security setting, a fresh local deployment
(``client.local.LocalCluster``: one ``mpc-party`` process per server on 127.0.0.1, mutually
authenticated TLS 1.3) is started, and every repeat

1. shares the whole CSV file from one data owner with the real CLI
   (``mpc-client --as hospital-a share FILE --dataset ...``, as a subprocess; its wall time,
   interpreter start-up and CSV parsing included, and the time the client itself reports);
2. resets each server's peak-memory mark (``echo 5 > /proc/PID/clear_refs``), then starts the
   selection as the analyst with ``client.session.Client.select`` in this process and waits for
   it (*end to end*: TLS connect to the coordinator, submit, long-poll until done);
3. asks every server for the job's figures (``engine.report()``: wall time, rounds and bytes
   sent per phase) and reads each server's peak resident memory (VmHWM in
   ``/proc/PID/status``) over the job;
4. on the first repeat, fetches and reconstructs D' and checks it against the plaintext
   MS-GINI selection (``mpcnet.plain``) on the same encoded values.

Reported: medians over ``--repeat`` runs with min and max (the machine's noise), per phase
(scoring, selection, product, checks; also setup and the commit round) and in total, and the
ratios to the paper's Table II (active 3PC in MP-SPDZ on three Azure VMs; the paper's other
runtime figures did not survive in our copy) and to MP-SPDZ on this machine
(``docs/design.md``, section 5). A case that fails gets a FAILED row.

With ``--netem`` every case is run again over emulated links (``bench/netemu.py``: tc netem in
a network namespace, or a user-space delay proxy where the kernel has no netem).

    python -m bench.network [--shapes cogload lsvt speeddating]
                            [--security passive3 active3 active4] [--repeat 3]
                            [--out bench/results/network.md] [--netem [--netem-profiles lan wan]]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
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

# Table II of the paper (active 3PC, MP-SPDZ, three co-located Azure F32s v2 VMs), seconds:
# Protocol 1 (pi_FILTER-FS, all of it), its line 9 (D' = D x T) alone, and Protocol 2
# (pi_MS-GINI) per feature. The whole pi_GINI-FS is Prot 1 + p * Prot 2.
PAPER_TABLE_II = {"cogload": (27.0, 23.0, 1.13), "lsvt": (152.0, 53.0, 0.33),
                  "speeddating": (1837.0, 1812.0, 14.73)}
# MP-SPDZ (C++) on this same 2-core machine, all parties on loopback (docs/design.md, section 5):
# best settings with all features batched, and (SPEED only) the paper's own program.
MPSPDZ_BEST = {"speeddating": {"passive3": 3.7, "active3": 19.9, "active4": 12.0},
               "lsvt": {"passive3": 1.7, "active3": 4.2, "active4": 6.1},
               "cogload": {"passive3": 0.39, "active3": 1.4, "active4": 1.1}}
MPSPDZ_PAPER_PROGRAM = {"speeddating": {"passive3": 15.3, "active3": 176.0, "active4": 59.8}}
# Targets set for the product (end-to-end selection; sharing the SpeedDating CSV).
TARGETS = {("speeddating", "passive3"): 3.7, ("lsvt", "passive3"): 1.0,
           ("speeddating", "active3"): 20.0, ("lsvt", "active3"): 4.0,
           ("speeddating", "active4"): 12.0, ("lsvt", "active4"): 3.0}
SHARE_TARGETS = {"speeddating": 5.0}
TIMEOUTS = {"connect_timeout": 30.0, "round_timeout": 300.0, "request_timeout": 600.0,
            "handshake_timeout": 10.0}
OWNER, ANALYST = "hospital-a", "analyst"


def _log(msg: str) -> None:
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
    return Shape(f"synthetic-{m}x{p}", str(path), "y", k)


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


def _reference(shape: Shape, schema: dict[str, Any], k: int) -> np.ndarray:
    """D' in the clear from the same encoded values (mpcnet.plain)."""
    from mpcnet.dataset import class_codes
    from mpcnet.fixedpoint import decode, encode
    from mpcnet.plain import msgini_fraction, reduce, topk_fraction

    table = shape.read()
    exps = np.asarray(schema["exponents"], dtype=np.int64)
    x = encode(table.values, exps, table.columns)
    _, codes = class_codes(table.labels, schema["classes"])
    q, d = msgini_fraction(x, codes, len(schema["classes"]))
    idx = topk_fraction(q, d, k)
    return np.asarray(decode(reduce(x, idx), exps[idx]))


async def _select(dep: Any, dataset: str, k: int, security: str, n: int) -> dict[str, Any]:
    """Run the selection as the analyst; end-to-end time and every server's job figures."""
    from client.session import Client

    analyst = Client(dep, ANALYST)
    out: dict[str, Any] = {}
    try:
        t0 = time.perf_counter()
        job = await analyst.select(dataset, k, f"{dataset}-top{k}", security=security)
        out["e2e_s"] = time.perf_counter() - t0
        out["job_id"] = job["id"]
        figures = {}
        for s in dep.servers[:n]:
            sess = await analyst.session(s)
            figures[s.name] = (await sess.request("job", id=job["id"]))["job"]["figures"]
        out["figures"] = figures
    finally:
        analyst.close()
    return out


async def _check(dep: Any, dataset: str, k: int, shape: Shape) -> dict[str, Any]:
    """Fetch and reconstruct D' as the analyst; compare it with the plaintext selection."""
    from client.session import Client, reconstruct

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
    expected = await asyncio.to_thread(_reference, shape, schema, k)
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
             log: Callable[[str], None] = _log) -> dict[str, Any]:
    """All repeats of one (shape, setting) on a fresh deployment; raw figures per run."""
    from client.local import LocalCluster, write_config
    from mpcnet.net.tls import run

    table = shape.read()
    m, p = table.values.shape
    case: dict[str, Any] = {"shape": shape.name, "security": security, "m": m, "p": p,
                            "k": shape.k, "link": link.name if link else "loopback",
                            "method": method or "loopback"}
    n = registry.get(security).n_parties
    folder = workdir / f"{shape.name}-{security}-{case['link']}"
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
            rec.update(run(_select(cluster.dep, dataset, shape.k, security, n)))
            rec["peak_bytes"] = {name: _peak_bytes(pid) for name, pid in pids.items()}
            rec["cpu_s"] = {name: _cpu_seconds(pid) - cpu0[name] for name, pid in pids.items()}
            rec["proxy_cpu_s"] = (_cpu_seconds(proxy.pid) - proxy0) if proxy else 0.0
            # CPU the rest of the machine used meanwhile (other jobs: the noise)
            rec["other_cpu_s"] = max(0.0, _busy_seconds() - busy0 - sum(rec["cpu_s"].values())
                                     - (time.process_time() - self0) - rec["proxy_cpu_s"])
            if check and i == 0:
                rec.update(run(_check(cluster.dep, dataset, shape.k, shape)))
            rec["peak_is_job_only"] = peaks_reset
            runs.append(rec)
            job_s = max(f["seconds"] for f in rec["figures"].values())
            log(f"  {shape.name} {security} [{case['link']}] run {i + 1}/{repeat}: share "
                f"{rec['share_cli_s']:.2f} s, select {rec['e2e_s']:.2f} s end to end (job "
                f"{job_s:.2f} s)" + (f", D' = plain: {rec['equal']}" if "equal" in rec else ""))
    case.update(available=True, n_parties=n, runs=runs)
    return case


# -- summaries -----------------------------------------------------------------------------
def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(case: dict[str, Any]) -> dict[str, Any]:
    """Medians (with min and max) over the runs of one case; bytes and rounds from the runs
    (the protocol is deterministic in them; a difference between runs is flagged)."""
    if not case.get("available"):
        return dict(case)
    runs = case["runs"]
    names = list(runs[0]["figures"])
    lead = names[0]
    s: dict[str, Any] = {k: case[k] for k in ("shape", "security", "m", "p", "k", "link",
                                                "method", "n_parties", "available")}
    s["repeat"] = len(runs)
    for key in ("e2e_s", "share_cli_s", "share_client_s"):
        s[key] = _stats([r[key] for r in runs])
    s["job_s"] = _stats([max(f["seconds"] for f in r["figures"].values()) for r in runs])
    s["rounds"] = runs[0]["figures"][lead]["rounds"]
    s["sent"] = {nm: runs[0]["figures"][nm]["bytes_sent"] for nm in names}
    s["wire_sent"] = {nm: sum(w["sent"] for w in (runs[0]["figures"][nm].get("wire") or {})
                              .values()) for nm in names}
    s["bytes_vary"] = any(r["figures"][nm]["bytes_sent"] != s["sent"][nm]
                          for r in runs for nm in names)
    s["peak"] = {nm: statistics.median(r["peak_bytes"][nm] or 0 for r in runs) for nm in names}
    s["cpu_s"] = {nm: statistics.median(r["cpu_s"][nm] for r in runs) for nm in names}
    s["other_cpu_s"] = _stats([r["other_cpu_s"] for r in runs])
    s["proxy_cpu_s"] = statistics.median(r.get("proxy_cpu_s", 0.0) for r in runs)
    s["peak_is_job_only"] = all(r["peak_is_job_only"] for r in runs)
    s["share_bytes_per_server"] = runs[0]["share_bytes_per_server"]
    phases: dict[str, Any] = {}
    for ph in ALL_PHASES:
        if ph not in runs[0]["figures"][lead]["phases"]:
            continue
        secs = [max(f["phases"][ph]["seconds"] for f in r["figures"].values()) for r in runs]
        phases[ph] = {"seconds": _stats(secs),
                      "rounds": runs[0]["figures"][lead]["phases"][ph]["rounds"],
                      "sent": {nm: runs[0]["figures"][nm]["phases"][ph]["bytes_sent"]
                               for nm in names}}
    s["phases"] = phases
    s["equal"] = runs[0].get("equal")
    s["fetch_s"] = runs[0].get("fetch_s")
    s["loadavg"] = _stats([r["loadavg_1min"] for r in runs])
    return s


def paper_total(shape: str, p: int) -> float | None:
    t = PAPER_TABLE_II.get(shape)
    return None if t is None else t[0] + p * t[2]


# -- report --------------------------------------------------------------------------------
def _mb(n: float | None) -> str:
    if n is None:
        return "–"
    return f"{n / 1e6:.1f}" if n >= 10e6 else f"{n / 1e6:.2f}" if n >= 1e5 else f"{n / 1e6:.3f}"


def _sec(st: dict[str, float], digits: int = 2) -> str:
    return (f"{st['median']:.{digits}f} [{st['min']:.{digits}f}–{st['max']:.{digits}f}]")


def _ratio(ref: float | None, ours: float) -> str:
    if ref is None or ours <= 0:
        return "–"
    r = ref / ours
    return f"{r:,.0f}×" if r >= 100 else f"{r:.1f}×"


def _per_party(values: dict[str, Any], fmt: Callable[[Any], str] = _mb) -> str:
    texts = [fmt(v) for v in values.values()]
    return f"{texts[0]} each" if len(set(texts)) == 1 else " / ".join(texts)


def _target(s: dict[str, Any]) -> str:
    t = TARGETS.get((s["shape"], s["security"]))
    if t is None:
        return "–"
    e2e = s["e2e_s"]["median"]
    return f"< {t:g} s: {'met' if e2e < t else 'MISSED'} ({e2e:.2f} s)"


def main_tables(summaries: list[dict[str, Any]]) -> list[str]:
    out = ["| shape | m × p | k | setting | share CSV, CLI wall s | select end to end s | "
           "servers' job s | servers' CPU s (sum) | rounds | MB sent per party | "
           "peak MB per party | D' = plain | target (end to end) |",
           "|---|---|---:|---|---|---|---|---:|---:|---|---|---|---|"]
    for s in summaries:
        head = f"| {s['shape']} | {s['m']} × {s['p']} | {s['k']} | {s['security']} |"
        if not s.get("available"):
            out.append(head + f" {s['reason']} |" + " |" * 8)
            continue
        share = _sec(s["share_cli_s"])
        st = SHARE_TARGETS.get(s["shape"])
        if st is not None:
            share += f" (< {st:g} s: {'met' if s['share_cli_s']['median'] < st else 'MISSED'})"
        eq = "–" if s["equal"] is None else ("yes" if s["equal"] else "**NO**")
        out.append(head + f" {share} | {_sec(s['e2e_s'])} | {_sec(s['job_s'])} | "
                   f"{sum(s['cpu_s'].values()):.2f} | {s['rounds']} | {_per_party(s['sent'])} | "
                   f"{_per_party(s['peak'])} | {eq} | {_target(s)} |")
    return out


def phase_table(summaries: list[dict[str, Any]]) -> list[str]:
    out = ["| shape | setting | phase | wall s (slowest server) | rounds | MB sent per party |",
           "|---|---|---|---|---:|---|"]
    for s in summaries:
        if not s.get("available"):
            continue
        for ph, v in s["phases"].items():
            out.append(f"| {s['shape']} | {s['security']} | {ph} | {_sec(v['seconds'], 3)} | "
                       f"{v['rounds']} | {_per_party(v['sent'], lambda b: f'{b / 1e6:.2f}')} |")
    return out


def paper_table(summaries: list[dict[str, Any]]) -> list[str]:
    out = ["| shape | setting | ours: job s | paper active 3PC total s (Prot 1 + p·Prot 2) | "
           "paper ÷ ours | scoring: paper p·Prot 2 ÷ ours | selection: paper Prot 1 lines 1-8 "
           "÷ ours | product: paper Prot 1 line 9 ÷ ours | MP-SPDZ here, best s | "
           "MP-SPDZ best ÷ ours | MP-SPDZ here, paper's program s | ÷ ours |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in summaries:
        if not s.get("available"):
            continue
        ours = s["job_s"]["median"]
        paper = PAPER_TABLE_II.get(s["shape"])
        total = paper_total(s["shape"], s["p"])
        ph = {k: v["seconds"]["median"] for k, v in s["phases"].items()}
        cells = ["–"] * 3
        if paper is not None:
            cells = [_ratio(s["p"] * paper[2], ph.get("scoring", 0.0)),
                     _ratio(paper[0] - paper[1], ph.get("selection", 0.0)),
                     _ratio(paper[1], ph.get("product", 0.0))]
        best = MPSPDZ_BEST.get(s["shape"], {}).get(s["security"])
        prog = MPSPDZ_PAPER_PROGRAM.get(s["shape"], {}).get(s["security"])
        out.append(f"| {s['shape']} | {s['security']} | {ours:.2f} | "
                   f"{'–' if total is None else f'{total:,.0f}'} | {_ratio(total, ours)} | "
                   + " | ".join(cells)
                   + f" | {'–' if best is None else best} | {_ratio(best, ours)} | "
                   f"{'–' if prog is None else prog} | {_ratio(prog, ours)} |")
    return out


def party_table(summaries: list[dict[str, Any]]) -> list[str]:
    out = ["| shape | setting | server | MB sent (protocol payload) | MB sent on the wire "
           "(TLS frames) | peak resident MB over the job | CPU s over the job |",
           "|---|---|---|---:|---:|---:|---:|"]
    for s in summaries:
        if not s.get("available"):
            continue
        for nm in s["sent"]:
            out.append(f"| {s['shape']} | {s['security']} | {nm} | {_mb(s['sent'][nm])} | "
                       f"{_mb(s['wire_sent'][nm])} | {_mb(s['peak'][nm])} | "
                       f"{s['cpu_s'][nm]:.2f} |")
    return out


def noise_lines(summaries: list[dict[str, Any]]) -> list[str]:
    out = []
    for s in summaries:
        if not s.get("available"):
            continue
        e = s["e2e_s"]
        spread = (e["max"] - e["min"]) / e["median"] * 100 if e["median"] else 0.0
        o = s["other_cpu_s"]
        out.append(f"- {s['shape']} {s['security']} [{s['link']}]: end to end {e['min']:.2f}-"
                   f"{e['max']:.2f} s over {s['repeat']} runs (spread {spread:.0f} % of the "
                   f"median); CPU used by other work during the job {o['min']:.2f}-"
                   f"{o['max']:.2f} s (median {o['median']:.2f}); 1-minute load average at "
                   f"the runs' start {s['loadavg']['min']:.2f}-{s['loadavg']['max']:.2f}")
    return out


def emulated_table(em: dict[str, Any], base: dict[tuple[str, str], dict[str, Any]]
                   ) -> list[str]:
    out = ["| link | measured TCP round trip ms | shape | setting | select end to end s | "
           "servers' job s | rounds | job s minus loopback job s | rounds × one-way delay s | "
           "proxy CPU s |",
           "|---|---:|---|---|---|---|---:|---:|---:|---:|"]
    for prof in em["profiles"]:
        link = prof["link"]
        if prof.get("error"):
            out.append(f"| {netemu.Link(**link).describe()} | – | all | all | FAILED: "
                       f"{prof['error']} |" + " |" * 5)
        for s in prof["summaries"]:
            if not s.get("available"):
                if s.get("failed"):
                    out.append(f"| {netemu.Link(**link).describe()} | – | {s['shape']} | "
                               f"{s['security']} | {s['reason']} |" + " |" * 5)
                continue
            b = base.get((s["shape"], s["security"]))
            extra = ("–" if b is None else
                     f"{s['job_s']['median'] - b['job_s']['median']:+.2f}")
            model = s["rounds"] * link["delay_ms"] / 1e3
            out.append(f"| {netemu.Link(**link).describe()} | {prof['probe']['rtt_ms']:.2f} | "
                       f"{s['shape']} | {s['security']} | {_sec(s['e2e_s'])} | "
                       f"{_sec(s['job_s'])} | {s['rounds']} | {extra} | {model:.2f} | "
                       f"{s.get('proxy_cpu_s', 0.0):.2f} |")
    return out


def _machine() -> str:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.0f} GiB"
    try:
        import uvloop
        loop = f"uvloop {uvloop.__version__}"
    except ImportError:
        loop = "asyncio default loop (uvloop not installed)"
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs ({cpu}), {mem} "
            f"RAM; Python {platform.python_version()}, numpy {np.__version__}, {loop}")


def code_version() -> str:
    """The git commit the benchmark ran on, and whether tracked files differed from it."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (no git)"
    return f"commit {head}" + (" with local changes" if dirty else "") if head else "unknown"


def run_header(result: dict[str, Any], title: str, load_note: str = "") -> list[str]:
    """A report's title and how, when and where the benchmark ran (``load_note`` follows the
    load average, e.g. " (other jobs add noise)")."""
    return [
        f"# {title}",
        "",
        f"Command: `{result['command']}`  ",
        f"Wall time: {result['wall_s']:.0f} s; {result['date']}  ",
        f"Machine: {result['machine']}  ",
        f"Code: {result.get('code', 'unknown')}  ",
        f"1-minute load average: {result['load_start']:.2f} at the start, "
        f"{result['load_end']:.2f} at the end{load_note}.",
    ]


def render(result: dict[str, Any]) -> str:
    sums = result["summaries"]
    lines = [
        *run_header(result, "Private MS-GINI selection over TLS between server processes on "
                    "127.0.0.1", " (other jobs on this machine add noise)"),
        "",
        "Medians over the runs, [min–max] beside them. *End to end*: the analyst's "
        "`Client.select` from its TLS connect to the coordinator until the job is reported "
        "done. *Servers' job s*: the slowest server's own wall time for the job (load the "
        "dataset, protocol, store D'). *Share CSV*: `mpc-client share` of the whole file by "
        "one data owner, wall time of the process (interpreter start-up and CSV parsing "
        "included). *MB sent*: protocol payload per server (engine figures); *peak MB*: the "
        "server process's peak resident memory (VmHWM) during the job; *servers' CPU s*: "
        "user + system CPU time of all server processes over the job (with n servers on 2 "
        "cores, the job cannot be faster than about that sum / 2).",
        "",
        "## End to end",
        "",
        *main_tables(sums),
        "",
        "## Per phase",
        "",
        *phase_table(sums),
        "",
        "## Against the paper and MP-SPDZ",
        "",
        "The paper's runtime figures that survive are Table II, for **active 3PC** (MP-SPDZ, "
        "three co-located Azure F32s v2 VMs, 32 cores each); the ratio is given for every "
        "setting we ran, so read the passive3 and active4 rows as 'our setting against their "
        "active 3PC'. MP-SPDZ figures are from this machine (docs/design.md, section 5). A ratio "
        "above 1 means we are faster.",
        "",
        *paper_table(sums),
        "",
        "## Per server",
        "",
        *party_table(sums),
        "",
        "## Noise",
        "",
        *noise_lines(sums),
    ]
    em = result.get("emulated")
    if em is not None:
        lines += ["", "## Emulated network", ""]
        if em.get("skipped"):
            lines.append(f"Not run: {em['skipped']}")
        else:
            base = {(s["shape"], s["security"]): s for s in sums if s.get("available")}
            lines += [f"Method: {em['note']}.", "",
                      *emulated_table(em, base), "",
                      "*Rounds × one-way delay* is what latency alone should add to a job "
                      "whose parties send in every round at once; *job s minus loopback* is "
                      "what it added here.", "", *[ln for prof in em["profiles"]
                                                  for ln in noise_lines(prof["summaries"])]]
    return "\n".join(lines) + "\n"


# -- emulated network ----------------------------------------------------------------------
def _run_cases(cases: list[tuple[Shape, str]], repeat: int, workdir: Path, check: bool,
               link: netemu.Link | None = None, method: str | None = None,
               log: Callable[[str], None] = _log) -> list[dict[str, Any]]:
    """Every case; one that fails gets a FAILED row (and exit status 1), the rest still run."""
    out = []
    for shape, sec in cases:
        try:
            out.append(summarize(run_case(shape, sec, repeat, workdir, link=link,
                                          method=method, check=check, log=log)))
        except Exception as exc:  # noqa: BLE001 - report it in the table, keep going
            msg = " ".join(str(exc).split())[-400:]
            log(f"  {shape.name} {sec}: FAILED: {msg}")
            out.append({"shape": shape.name, "security": sec, "m": "?", "p": "?",
                        "k": shape.k, "link": link.name if link else "loopback",
                        "available": False, "failed": True, "reason": f"FAILED: {msg}"})
    return out


def _worker(spec_path: Path, out_path: Path) -> int:
    """Inside the namespace: probe the link, then run every case over it."""
    spec = json.loads(spec_path.read_text())
    link = netemu.Link(**spec["link"])
    workdir = Path(spec["workdir"])
    probe = netemu.probe_link(spec["method"], link, workdir)
    _log(f"  {link.describe()}: TCP round trip {probe['rtt_ms']:.2f} ms, echo "
         f"{probe['echo_mb_s']:.0f} MB/s ({spec['method']})")
    cases = [(Shape.from_dict(c["shape"]), c["security"]) for c in spec["cases"]]
    sums = _run_cases(cases, spec["repeat"], workdir, spec["check"], link, spec["method"])
    out_path.write_text(json.dumps({"probe": probe, "summaries": sums}, default=str))
    return 0


def run_emulated(cases: list[tuple[Shape, str]], repeat: int, workdir: Path, check: bool,
                 profiles: list[str], wanted: str = "auto",
                 log: Callable[[str], None] = _log) -> dict[str, Any]:
    sup = netemu.check_support()
    method, note = sup.method(wanted)
    if method is None:
        log(f"emulated network {note}")
        return {"skipped": note}
    log(f"emulated network: {note}")
    links = [netemu.PROFILES[p] for p in profiles]
    if method == "proxy":
        links = [netemu.PROXY_BASELINE, *links]
    done = []
    for link in links:
        folder = workdir / f"emulated-{link.name}"
        folder.mkdir(parents=True, exist_ok=True)
        spec = {"link": asdict(link), "method": method, "repeat": repeat, "check": check,
                "workdir": str(folder),
                "cases": [{"shape": asdict(sh), "security": sec} for sh, sec in cases]}
        spec_path, out_path = folder / "spec.json", folder / "result.json"
        spec_path.write_text(json.dumps(spec))
        if sup.netns:
            with netemu.namespace() as ns:
                qdisc = netemu.add_netem(ns, link) if method == "netem" else ""
                if qdisc:
                    log(f"  namespace {ns}: {qdisc}")
                env = dict(os.environ)
                env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
                r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m",
                                    "bench.network", "--worker", str(spec_path),
                                    "--worker-out", str(out_path)], env=env, cwd=ROOT)
        else:
            r = subprocess.CompletedProcess([], _worker(spec_path, out_path))
        if r.returncode != 0 or not out_path.exists():
            log(f"  {link.describe()}: the run failed (exit status {r.returncode}); see above")
            done.append({"link": asdict(link), "probe": {"rtt_ms": float("nan"),
                                                         "echo_mb_s": float("nan")},
                         "summaries": [], "error": f"exit status {r.returncode}"})
            continue
        got = json.loads(out_path.read_text())
        done.append({"link": asdict(link), "probe": got["probe"],
                     "summaries": got["summaries"]})
    return {"method": method, "note": note, "profiles": done}


# -- command line --------------------------------------------------------------------------
def _print_summary(sums: list[dict[str, Any]]) -> None:
    print()
    print("\n".join(main_tables(sums)))
    print()
    print("\n".join(phase_table(sums)))
    print()
    print("\n".join(paper_table(sums)))


def _synthetic(text: str) -> tuple[int, int, int]:
    try:
        m, p, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MxPxK, e.g. 40x8x3, not {text!r}") from None
    return m, p, k


def main(argv: list[str] | None = None) -> int:
    from mpcnet.dataset import BUNDLED

    parser = argparse.ArgumentParser(prog="python -m bench.network", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="*", choices=list(BUNDLED),
                        help="bundled datasets (default: all three, unless --synthetic)")
    parser.add_argument("--synthetic", nargs="*", type=_synthetic, default=[],
                        metavar="MxPxK", help="also synthetic datasets, e.g. 40x8x3")
    parser.add_argument("--security", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "network.md",
                        help="Markdown report; the raw figures go beside it as .json")
    parser.add_argument("--no-check", action="store_true",
                        help="skip fetching D' and comparing it with the plaintext selection")
    parser.add_argument("--netem", action="store_true",
                        help="also run over emulated links (slow; root and tc, see netemu.py)")
    parser.add_argument("--netem-profiles", nargs="+", default=["lan", "wan"],
                        choices=sorted(netemu.PROFILES))
    parser.add_argument("--netem-method", choices=("auto", "netem", "proxy"), default="auto",
                        help="auto: tc netem if the kernel has it, else the delay proxy")
    parser.add_argument("--workdir", type=Path, help="keep deployments and logs here")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args.worker, args.worker_out)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    started, load_start = time.perf_counter(), os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="mpc-bench-")))
        workdir.mkdir(parents=True, exist_ok=True)
        names = args.shapes if args.shapes is not None else (
            [] if args.synthetic else list(BUNDLED))
        shapes = [bundled_shape(nm) for nm in names]
        shapes += [synthetic_shape(workdir / "csv", m, p, k) for m, p, k in args.synthetic]
        cases = [(sh, sec) for sh in shapes for sec in args.security]
        _log(f"{len(cases)} cases x {args.repeat} runs over TLS on 127.0.0.1")
        sums = _run_cases(cases, args.repeat, workdir, not args.no_check)
        emulated = None
        if args.netem:
            emulated = run_emulated(cases, args.repeat, workdir, not args.no_check,
                                    args.netem_profiles, args.netem_method)
    result = {"command": "python -m bench.network" + (
                  " " + shlex.join(argv if argv is not None else sys.argv[1:])
                  if (argv if argv is not None else sys.argv[1:]) else ""),
              "date": time.strftime("%Y-%m-%d %H:%M"), "machine": _machine(),
              "code": code_version(),
              "wall_s": time.perf_counter() - started, "load_start": load_start,
              "load_end": os.getloadavg()[0], "summaries": sums, "emulated": emulated}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(result), encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
    _print_summary(sums)
    print(f"\nreport: {args.out} (raw figures: {args.out.with_suffix('.json')}); "
          f"{result['wall_s']:.0f} s")
    every = sums + [s for prof in (emulated or {}).get("profiles", []) for s in prof["summaries"]]
    bad = [s for s in every if s.get("failed") or (s.get("available") and s.get("equal") is False)]
    failed_links = [p for p in (emulated or {}).get("profiles", []) if p.get("error")]
    return 1 if bad or failed_links else 0


if __name__ == "__main__":
    sys.exit(main())
