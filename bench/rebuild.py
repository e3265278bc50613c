"""Benchmark: rebuilding a server that lost its data folder, for a 10^6 x 20 dataset.

Per setting, a fresh deployment of server processes over TLS on 127.0.0.1 (``bench.measure``):
the owner shares a synthetic m x p CSV with the CLI, the analyst selects k features (so a
result of m x k is stored too), then, ``--repeat`` times, one server (bob) is stopped, its data
folder deleted and ``mpc-party --rebuild`` run to its end: its wall time, the component bytes
it received (its own output), its peak resident memory and CPU seconds. After the last
rebuild bob serves again, and D' fetched then must equal D' fetched before. Writes
``bench/results/rebuild.md`` and ``rebuild.json``.

    python -m bench.rebuild [--m 1000000] [--p 20] [--security passive3 active4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import measure  # noqa: E402
from mpcnet.schemes import registry  # noqa: E402

VICTIM = "bob"


def _fetch(dep: Any, result: str) -> np.ndarray:
    from mpcnet.client.results import reconstruct
    from mpcnet.client.session import Client
    from mpcnet.net.tls import run

    async def go() -> np.ndarray:
        analyst = Client(dep, measure.ANALYST)
        try:
            return reconstruct(await analyst.fetch(result))
        finally:
            analyst.close()
    return run(go())


def _rebuild(cluster: Any) -> dict[str, Any]:
    """One rebuild of the victim from an empty data folder, as a child process."""
    cluster.kill(VICTIM)
    shutil.rmtree(cluster.dep.server(VICTIM).data_dir)
    log = cluster.folder / "rebuild.out"
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mpcnet.parties.main", "--config",
                                 str(cluster.config_path), "--name", VICTIM, "--rebuild"],
                                stdout=out, stderr=subprocess.STDOUT, env=cluster._env())
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own CPU time and peak memory
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = log.read_text()
    got = re.search(r"\(([\d,.]+) MiB received\) in ([\d.]+) s", text)
    if proc.returncode != 0 or got is None:
        raise RuntimeError(f"rebuild failed ({proc.returncode}): {text[-2000:]}")
    return {"wall_s": wall, "rebuild_s": float(got[2]),
            "mib_received": float(got[1].replace(",", "")),
            "cpu_s": usage.ru_utime + usage.ru_stime, "peak_mib": usage.ru_maxrss / 1024,
            "loadavg_1min": load,
            "summary": next(line for line in text.splitlines() if "MiB received" in line)}


def run_setting(security: str, m: int, p: int, k: int, repeat: int, workdir: Path
                ) -> dict[str, Any]:
    from mpcnet.client.local import LocalCluster, write_config
    from mpcnet.net.tls import run

    n = registry.get(security).n_parties
    shape = measure.synthetic_shape(workdir / "csv", m, p, k)
    folder = workdir / f"rebuild-{security}"
    cfg = write_config(folder, n, timeouts=measure.TIMEOUTS)
    out: dict[str, Any] = {"security": security, "m": m, "p": p, "k": k, "servers": n}
    with LocalCluster(folder, n, config_path=cfg) as cluster:
        cluster.start(wait=60)
        out["share"] = measure._share(cluster, shape, "big", security)
        selected = run(measure._select(cluster.dep, "big", k, security, n, "ms-gini"))
        out["select_e2e_s"] = selected["e2e_s"]
        before = _fetch(cluster.dep, f"big-top{k}")
        runs = []
        for i in range(repeat):
            runs.append(_rebuild(cluster))
            measure.log(f"  {security} {m}x{p}: rebuild {i + 1}/{repeat}: "
                        f"{runs[-1]['summary']}; peak {runs[-1]['peak_mib']:.0f} MiB")
        cluster.start([VICTIM], wait=60)
        out["equal_after"] = bool(np.array_equal(_fetch(cluster.dep, f"big-top{k}"), before))
    out["runs"] = runs
    out["median"] = {key: statistics.median(r[key] for r in runs)
                     for key in ("wall_s", "rebuild_s", "mib_received", "cpu_s")}
    out["peak_mib"] = max(r["peak_mib"] for r in runs)
    stored = 8 * m * (p + 2) * len(registry.held(n, 1))  # bob's data and label shares
    out["dataset_mib_per_server"] = stored / 2**20
    return out


def render(results: list[dict[str, Any]], repeat: int) -> str:
    lines = ["# Rebuilding a server that lost its data folder", "",
             f"`python -m bench.rebuild` ({repeat} rebuilds per setting, medians), "
             f"{time.strftime('%Y-%m-%d')}: one owner shares a synthetic m x p dataset with "
             "the CLI, the analyst selects k features, then bob's server is stopped, its data "
             "folder deleted and `mpc-party --rebuild` run from its peers over TLS on "
             "127.0.0.1. *Received* is what the rebuild took back (its components of the "
             "dataset's values and labels and of the result); *wall* includes starting "
             "Python; *peak* is the rebuild process's resident memory.", "",
             "| setting | m x p, k | servers | dataset shares on bob | received | rebuild | "
             "wall | CPU | peak | D' after = before |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        med = r["median"]
        lines.append(
            f"| {r['security']} | {r['m']:,} x {r['p']}, {r['k']} | {r['servers']} | "
            f"{r['dataset_mib_per_server']:,.0f} MiB | {med['mib_received']:,.0f} MiB | "
            f"{med['rebuild_s']:.1f} s | {med['wall_s']:.1f} s | {med['cpu_s']:.1f} s | "
            f"{r['peak_mib']:,.0f} MiB | {r['equal_after']} |")
    loads = [r["loadavg_1min"] for res in results for r in res["runs"] if "loadavg_1min" in r]
    if loads:
        lines += ["", f"1-minute load average at the rebuilds' start: {min(loads):.1f} to "
                      f"{max(loads):.1f} (other jobs on this 2-core machine)."]
    lines += ["", "Sharing and selecting before (one run each): " + "; ".join(
        f"{r['security']} share {r['share']['share_cli_s']:.1f} s, select "
        f"{r['select_e2e_s']:.1f} s" for r in results) + ".", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.rebuild", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=1_000_000, help="rows (default: 10^6)")
    ap.add_argument("--p", type=int, default=20, help="features (default: 20)")
    ap.add_argument("--k", type=int, default=5, help="features selected (default: 5)")
    ap.add_argument("--security", nargs="+", default=["passive3", "active4"],
                    help="settings (default: passive3 active4; active3 stores passive3's "
                    "sharing and rebuilds alike)")
    ap.add_argument("--repeat", type=int, default=3, help="rebuilds per setting (default: 3)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results",
                    help="folder for rebuild.md and rebuild.json (default: bench/results)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mpcnet-rebuild-") as tmp:
        results = [run_setting(s, args.m, args.p, args.k, args.repeat, Path(tmp))
                   for s in args.security]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rebuild.json").write_text(json.dumps(results, indent=1))
    (args.out / "rebuild.md").write_text(render(results, args.repeat))
    print(render(results, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
