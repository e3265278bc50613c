"""Benchmark: the alignment of records keyed by IDs (``share --columns --id``, issue 31).

Two owners of ``--rows`` records each (``--columns`` columns each, the first also the label),
half of them common (``--overlap``), each file in its own random order, shared through the CLI
with a fresh deployment of server processes over TLS on 127.0.0.1 per setting; the analyst
selects k = 5. Reported per setting (medians over ``--repeat`` runs): the alignment phase's
wall time, rounds and bytes sent per server (the job's ``alignment`` phase, from every
server's job record), the whole selection job, and every server's peak resident memory over
the job (VmHWM, reset before it; the alignment moves its value columns in blocks that fit the
memory budget, ``mpcnet.ops.join``). Writes
``bench/results/join.md`` and ``join.json``.

    python -m bench.join [--rows 100000] [--columns 20] [--security passive3 active4 active3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import measure, report  # noqa: E402
from mpcnet.schemes import registry  # noqa: E402

OWNERS = ("hospital-a", "hospital-b")
K = 5


def owner_files(folder: Path, rows: int, columns: int, overlap: float, seed: int = 0
                ) -> list[Path]:
    """Two CSV files of ``rows`` records each, ``overlap`` of them common, each in its own
    order: ``pid``, ``columns`` numbers, and the label in the first."""
    rng = np.random.default_rng(seed)
    common = int(rows * overlap)
    population = rng.permutation(2 * rows - common)
    held = [population[:rows], population[rows - common:]]
    paths = []
    for o, records in enumerate(held):
        records = rng.permutation(records)
        values = rng.normal(size=(rows, columns)) + (records[:, None] % 3)
        cells = [np.char.mod("R%09d", records)] + [np.char.mod("%.6g", values[:, j])
                                                   for j in range(columns)]
        header = ["pid"] + [f"o{o}_{j}" for j in range(columns)]
        if o == 0:
            cells.append(np.char.mod("%d", records % 2))
            header.append("label")
        path = folder / f"owner{o}-{rows}.csv"
        with open(path, "w") as f:
            f.write(",".join(header) + "\n")
            np.savetxt(f, np.stack(cells, axis=1), fmt="%s", delimiter=",")
        paths.append(path)
    return paths


def run_setting(files: list[Path], security: str, repeat: int, workdir: Path
                ) -> dict[str, Any]:
    """Every run of one setting on a fresh deployment: share both files, select, figures."""
    from mpcnet.client.local import LocalCluster, write_config
    from mpcnet.net.tls import run

    n = registry.get(security).n_parties
    folder = workdir / security
    cfg = write_config(folder, n, timeouts=measure.TIMEOUTS)
    runs = []
    with LocalCluster(folder, n, config_path=cfg) as cluster:
        cluster.start(wait=60)
        pids = {s.name: cluster.pid(s.name) for s in cluster.dep.servers[:n]}
        key = folder / "ids.key"
        measure_ok(cluster.client(OWNERS[0], "id-key", "--out", str(key)))
        for i in range(repeat):
            dataset = f"join-{i}"
            t0 = time.perf_counter()
            for owner, path in zip(OWNERS, files, strict=True):
                measure_ok(cluster.client(
                    owner, "share", str(path), "--dataset", dataset, "--columns", "--id",
                    "pid", "--id-key", str(key), "--security", security,
                    *(["--label", "label"] if owner == OWNERS[0] else []), timeout=3600))
            share_s = time.perf_counter() - t0
            for pid in pids.values():
                measure._reset_peak(pid)
            cpu0 = {name: measure._cpu_seconds(pid) for name, pid in pids.items()}
            got = run(measure._select(cluster.dep, dataset, K, security, n, "ms-gini"))
            align = {name: f["phases"]["alignment"] for name, f in got["figures"].items()}
            runs.append({
                "share_cli_s": share_s, "e2e_s": got["e2e_s"],
                "job_s": max(f["seconds"] for f in got["figures"].values()),
                "align_s": max(a["seconds"] for a in align.values()),
                "align_rounds": max(a["rounds"] for a in align.values()),
                "align_sent": {name: a["bytes_sent"] for name, a in align.items()},
                "peak_bytes": {name: measure._peak_bytes(pid) for name, pid in pids.items()},
                "cpu_s": {name: measure._cpu_seconds(pid) - cpu0[name]
                          for name, pid in pids.items()},
                "loadavg_1min": os.getloadavg()[0]})
            print(f"  {security} run {i + 1}/{repeat}: alignment {runs[-1]['align_s']:.2f} s, "
                  f"{runs[-1]['align_rounds']} rounds; job {runs[-1]['job_s']:.2f} s",
                  flush=True)
    return {"security": security, "n_parties": n, "runs": runs}


def measure_ok(result: Any) -> None:
    if result.returncode != 0:
        raise RuntimeError(f"mpc-client failed (exit {result.returncode}): "
                           f"{result.stderr.strip()[-800:]}")


def render(result: dict[str, Any]) -> str:
    rows = result["rows"]
    lines = [*report.run_header(result, "The alignment of records keyed by IDs, over TLS "
                                        "between server processes", ""), "",
             f"Two owners of {rows:,} records each, {result['columns']} columns each (the "
             f"first also the label), {result['overlap']:.0%} of the records common, each "
             f"file in its own order; the analyst selects k = {K}. Medians over "
             f"{result['repeat']} run(s) on a fresh deployment per setting. *alignment*: the "
             "slowest server's alignment phase (shuffle, opened quicksort, adjacent test, "
             "shuffle, flags), its rounds and the most bytes a server sent in it; *job*: the "
             "whole selection job; *peak*: the largest server's resident memory over the job "
             "(VmHWM, reset before it); *servers' CPU s*: user + system CPU time of all "
             "server processes over the job (on 2 cores a job cannot take less than about "
             "half of it; other jobs on the machine stretch the wall times, not this).", "",
             "| setting | alignment s | rounds | MB sent per server | job s | servers' CPU s "
             "| peak GB per server | share (both owners, CLI) s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for case in result["settings"]:
        r = case["runs"]

        def med(key: str, runs: list[dict[str, Any]] = r) -> float:
            return statistics.median(x[key] for x in runs)

        sent = statistics.median(max(x["align_sent"].values()) for x in r)
        peak = statistics.median(max(v or 0 for v in x["peak_bytes"].values()) for x in r)
        cpu = statistics.median(sum(x["cpu_s"].values()) for x in r)
        lines.append(f"| {case['security']} | {med('align_s'):.2f} | "
                     f"{int(med('align_rounds'))} | {sent / 1e6:.0f} | {med('job_s'):.2f} | "
                     f"{cpu:.1f} | {peak / 1e9:.2f} | {med('share_cli_s'):.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.join", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="records per owner")
    parser.add_argument("--columns", type=int, default=20, help="columns per owner")
    parser.add_argument("--overlap", type=float, default=0.5)
    parser.add_argument("--security", nargs="+", default=["passive3", "active4", "active3"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "join.md")
    args = parser.parse_args(argv)
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mpc-join-") as tmp:
        files = owner_files(Path(tmp), args.rows, args.columns, args.overlap)
        settings = [run_setting(files, sec, args.repeat, Path(tmp)) for sec in args.security]
    used = sys.argv[1:] if argv is None else argv
    result = {"rows": args.rows, "columns": args.columns, "overlap": args.overlap,
              "repeat": args.repeat, "settings": settings,
              "command": "python -m bench.join" + (" " + shlex.join(used) if used else ""),
              "date": time.strftime("%Y-%m-%d %H:%M"), "machine": report.machine(),
              "code": report.code_version(), "wall_s": time.perf_counter() - started,
              "load_start": load_start, "load_end": os.getloadavg()[0]}
    with contextlib.suppress(OSError):
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    args.out.write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
