"""Benchmark: large datasets over real server processes, per server, with growth exponents.

The extension of ``bench.scaling`` to the sizes hospitals and registries have, every point a
fresh deployment of server processes over TLS on 127.0.0.1 (``bench.measure.run_case``: CLI
share of a synthetic CSV, the selection, D' fetched and compared with the plaintext selection
of the same encoded values, every server's peak resident memory over the job):

- rows: m = 10^4 .. 10^6 at p = 100, k = 10 (scoring in blocks of columns and D' in blocks
  of rows once the shares pass the memory budget; the exact limb ranking beyond 10,808 rows);
- features: p = 1,000 .. 20,000 at m = 1,000, k = 50 (the top-k planner's network).

A point whose time, extrapolated linearly in m x p from the setting's previous point of the
sweep, exceeds ``--max-seconds`` is skipped with the estimate. Writes ``bench/results/large.md``,
``large.json`` and ``large_m.png``, ``large_p.png`` (matplotlib, the "bench" extra).

    python -m bench.large [--security passive3 active4 active3] [--max-seconds 1500] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
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
from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET  # noqa: E402

SWEEPS = {"m": {"values": [10_000, 100_000, 300_000, 1_000_000], "p": 100, "k": 10},
          "p": {"values": [1_000, 5_000, 20_000], "m": 1_000, "k": 50}}
QUICK = {"m": [10_000, 30_000], "p": [1_000, 3_000]}


def _point(sweep: str, value: int) -> tuple[int, int, int]:
    fixed = SWEEPS[sweep]
    m = value if sweep == "m" else int(fixed["m"])  # type: ignore[call-overload]
    p = value if sweep == "p" else int(fixed["p"])  # type: ignore[call-overload]
    return m, p, int(fixed["k"])  # type: ignore[call-overload]


def run(securities: list[str], grid: dict[str, list[int]], max_seconds: float,
        workdir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for sweep, values in grid.items():
        for security in securities:
            last: dict[str, Any] | None = None
            for value in values:
                m, p, k = _point(sweep, value)
                row: dict[str, Any] = {"sweep": sweep, "security": security, "m": m, "p": p,
                                       "k": k}
                if last is not None:
                    estimate = last["job_s"] * (m * p) / (last["m"] * last["p"])
                    if estimate > max_seconds:
                        row["skipped"] = (f"skipped: about {estimate:.0f} s estimated (linear "
                                          f"in m x p) > --max-seconds {max_seconds:.0f}")
                        print(f"  {sweep} {security} m={m} p={p}: {row['skipped']}", flush=True)
                        out.append(row)
                        continue
                shape = measure.synthetic_shape(workdir / "csv", m, p, k)
                case = measure.run_case(shape, security, 1, workdir, check=True)
                s = report.summarize(case)
                lead = next(iter(case["runs"][0]["figures"].values()))
                row.update(job_s=s["job_s"]["median"], e2e_s=s["e2e_s"]["median"],
                           share_cli_s=s["share_cli_s"]["median"], rounds=s["rounds"],
                           sent_per_server=max(s["sent"].values()), peak=s["peak"],
                           peak_per_server=max(s["peak"].values()), equal=s["equal"],
                           plan=lead.get("plan"), other_cpu_s=s["other_cpu_s"]["median"])
                out.append(row)
                last = row
                print(f"  {sweep} {security} m={m:,} p={p:,}: job {row['job_s']:.1f} s, "
                      f"{row['rounds']} rounds, {row['sent_per_server'] / 1e6:.0f} MB sent, "
                      f"peak {row['peak_per_server'] / 1e9:.2f} GB per server, D' = plain: "
                      f"{row['equal']}", flush=True)
    return out


def growth(points: list[dict[str, Any]], key: str, sweep: str) -> str:
    """Exponent b of a least-squares fit key ~ x^b over the points run (1 = linear)."""
    pts = sorted((d[sweep], d[key]) for d in points if "skipped" not in d and d[key] > 0)
    if len(pts) < 2:
        return "–"
    b = np.polyfit(np.log([x for x, _ in pts]), np.log([y for _, y in pts]), 1)[0]
    return f"{b + 0.0:.2f}".replace("-0.00", "0.00")


def _plan_text(plan: dict[str, Any] | None) -> str:
    if not plan:
        return ""
    return (f"{plan['method']}, {plan['comparisons']:,} comparisons, {plan['levels']} level(s), "
            f"{plan['blocks']} column block(s), {plan.get('row_blocks', 1)} row block(s)")


def render(result: dict[str, Any]) -> str:
    pts = result["points"]
    lines = [*report.run_header(result, "Large datasets over TLS between server processes",
                                " (other jobs on this machine add noise)"), "",
             "One run per point (a fresh deployment each). *job s*: the slowest server's job "
             "time; *peak GB*: the largest server's resident memory over the job (VmHWM, "
             f"reset before it); memory budget {result['budget']}. D' = plain: the fetched D' "
             "equals the plaintext selection of the same encoded values (all rows, all k "
             "columns).", "",
             "| sweep | setting | m | p | k | share CSV s | job s | rounds | MB sent per server "
             "| peak GB per server | D' = plain | top-k plan | code |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for d in pts:
        head = f"| {d['sweep']} | {d['security']} | {d['m']:,} | {d['p']:,} | {d['k']} |"
        code = d.get("code", result.get("code", ""))
        if "skipped" in d:
            lines.append(head + f" {d['skipped']} |" + " |" * 6 + f" {code} |")
            continue
        lines.append(head + f" {d['share_cli_s']:.1f} | {d['job_s']:.1f} | {d['rounds']} | "
                     f"{d['sent_per_server'] / 1e6:.0f} | {d['peak_per_server'] / 1e9:.2f} | "
                     f"{'yes' if d['equal'] else 'NO'} | {_plan_text(d.get('plan'))} | {code} |")
    lines += ["", "Growth exponents b (y ~ x^b over the points run; 1 = linear):", "",
              "| sweep | setting | job time | bytes sent | peak memory per server |",
              "|---|---|---:|---:|---:|"]
    for sweep in SWEEPS:
        for sec in result["securities"]:
            sel = [d for d in pts if d["sweep"] == sweep and d["security"] == sec]
            if sel:
                lines.append(f"| {sweep} | {sec} | {growth(sel, 'job_s', sweep)} | "
                             f"{growth(sel, 'sent_per_server', sweep)} | "
                             f"{growth(sel, 'peak_per_server', sweep)} |")
    if result.get("plots"):
        lines += ["", *[f"![{Path(p).stem}]({Path(p).name})" for p in result["plots"]]]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], folder: Path) -> list[str]:
    """Per sweep: job time, rounds, MB sent and peak memory, each per server."""
    files = []
    for sweep in SWEEPS:
        pts, fig, axes = report.sweep_figure(result, sweep)
        if not pts:
            continue
        panels = [("job_s", "servers' job time (s)", 1.0), ("rounds", "rounds", 1.0),
                  ("sent_per_server", "MB sent per server", 1e-6),
                  ("peak_per_server", "peak memory per server (GB)", 1e-9)]
        for ax, (key, title, scale) in zip(axes.flat, panels, strict=True):
            report.plot_settings(ax, pts, result["securities"], sweep, key, scale)
            ax.set_xscale("log")
            if key != "peak_per_server":
                ax.set_yscale("log")
            else:
                ax.set_ylim(bottom=0)
            ax.set_title(title)
            ax.set_xlabel("rows m" if sweep == "m" else "features p")
            ax.grid(True, which="both", alpha=0.3)
        axes[0, 0].legend(fontsize=8)
        fixed = SWEEPS[sweep]
        fig.suptitle("Large datasets over TLS, per server ("
                     + (f"p = {fixed['p']}" if sweep == "m" else f"m = {fixed['m']:,}")
                     + f", k = {fixed['k']})")
        files.append(report.save_figure(fig, folder, f"large_{sweep}.png"))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.large", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--security", nargs="+", default=["passive3", "active4", "active3"])
    parser.add_argument("--max-seconds", type=float, default=1500.0)
    parser.add_argument("--quick", action="store_true", help="two small points per sweep")
    parser.add_argument("--sweep", nargs="*", choices=list(SWEEPS), default=list(SWEEPS),
                        help="the sweeps to run (none: only report the --keep files)")
    parser.add_argument("--keep", type=Path, action="append", default=[],
                        help="a large.json of an earlier run: its points are reported too, "
                             "unless a later file or this run has the same point")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "large.md")
    args = parser.parse_args(argv)
    grid = {k: v for k, v in (QUICK if args.quick else
                              {k: list(v["values"]) for k, v in SWEEPS.items()}).items()
            if k in args.sweep}
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mpc-large-") as tmp:
        points = run(args.security, grid, args.max_seconds, Path(tmp))
    def key(d: dict[str, Any]) -> tuple[Any, ...]:
        return d["sweep"], d["security"], d["m"], d["p"]

    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for earlier in args.keep:  # a later file's point replaces an earlier file's
        old = json.loads(earlier.read_text())
        merged.update({key(d): dict(d, code=d.get("code", old.get("code"))) for d in old["points"]})
    merged.update({key(d): d for d in points})
    points = list(merged.values())
    order = {s: i for i, s in enumerate(["passive3", "active4", "active3"])}
    points.sort(key=lambda d: (list(SWEEPS).index(d["sweep"]), order.get(d["security"], 9),
                               d[d["sweep"]]))
    securities = sorted({d["security"] for d in points}, key=lambda s: order.get(s, 9))
    argv_used = argv if argv is not None else sys.argv[1:]
    result: dict[str, Any] = {
        "command": "python -m bench.large" + (" " + shlex.join(argv_used) if argv_used else ""),
        "date": time.strftime("%Y-%m-%d %H:%M"), "machine": report.machine(),
        "code": report.code_version(), "securities": securities, "points": points,
        "load_start": load_start,
        "budget": f"{DEFAULT_MEMORY_BUDGET / 2**30:g} GiB (the default)"}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        result["plots"] = plot(result, args.out.parent)
    except ImportError:
        result["plots"] = []
    result["wall_s"] = time.perf_counter() - started
    result["load_end"] = os.getloadavg()[0]
    args.out.write_text(render(result), encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
    print(f"report: {args.out}; {result['wall_s']:.0f} s")
    return 1 if any(d.get("equal") is False for d in points) else 0


if __name__ == "__main__":
    sys.exit(main())
