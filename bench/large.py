"""Benchmark: large datasets over real server processes, per server, with growth exponents.

The extension of ``bench.scaling`` to the sizes hospitals and registries have, every point a
fresh deployment of server processes over TLS on 127.0.0.1 (``bench.measure.run_case``: CLI
share of a synthetic CSV, the selection, D' fetched and compared with the plaintext selection
of the same encoded values, every server's peak resident memory over the job):

- rows: m = 10^4 .. 10^6 at p = 100, k = 10 (scoring in blocks of columns and D' in blocks
  of rows once the shares pass the memory budget; the exact limb ranking beyond 10,808 rows);
- features: p = 1,000 .. 20,000 at m = 1,000, k = 50 (the top-k planner's network).

A point whose time, extrapolated linearly in m x p from the setting's previous point of the
sweep in the same run, exceeds ``--max-seconds`` is skipped with the estimate (``--values``
runs chosen points only, without a previous one). With ``--netem-profiles``, every point run
is run again over those emulated links (``bench.network``'s namespaces and delay proxy, one
run each). With ``--one-block``, every point run in more than one block (of columns, of rows
of a column, of rows of D') is followed by its first block as a job of its own, the same rows
and columns (k no more than its columns) and the same way: that job's rounds are what one
block costs, against which the issue measures the point's rounds. Writes
``bench/results/large.md``, ``large.json`` and ``large_m.png``, ``large_p.png`` (matplotlib,
the "bench" extra).

    python -m bench.large [--security passive3 active4 active3] [--max-seconds 1500] [--quick]
                          [--sweep m --values 1000000] [--netem-profiles wan] [--one-block]
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

from bench import measure, netemu, network, report  # noqa: E402
from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET  # noqa: E402

SWEEPS = {"m": {"values": [10_000, 100_000, 300_000, 1_000_000], "p": 100, "k": 10},
          "p": {"values": [1_000, 5_000, 20_000], "m": 1_000, "k": 50}}
QUICK = {"m": [10_000, 30_000], "p": [1_000, 3_000]}


def _point(sweep: str, value: int) -> tuple[int, int, int]:
    fixed = SWEEPS[sweep]
    m = value if sweep == "m" else int(fixed["m"])  # type: ignore[call-overload]
    p = value if sweep == "p" else int(fixed["p"])  # type: ignore[call-overload]
    return m, p, int(fixed["k"])  # type: ignore[call-overload]


def _row(s: dict[str, Any]) -> dict[str, Any]:
    """A point's figures from its case summary (one run)."""
    return dict(job_s=s["job_s"]["median"], e2e_s=s["e2e_s"]["median"],
                share_cli_s=s["share_cli_s"]["median"], rounds=s["rounds"],
                sent_per_server=max(s["sent"].values()), peak=s["peak"],
                peak_per_server=max(s["peak"].values()), cpu_s=sum(s["cpu_s"].values()),
                equal=s["equal"], plan=s.get("plan"), other_cpu_s=s["other_cpu_s"]["median"],
                loadavg=s["loadavg"]["median"])


def first_block(m: int, p: int, k: int, plan: dict[str, Any] | None) -> tuple[int, int, int] | None:
    """The first block of a job cut as ``plan`` says, as a job of its own (rows, columns, k),
    or None when the job is one block already: a tile of one column where columns are scored
    in tiles of rows, else a block of whole columns."""
    if not plan or (plan.get("blocks", 1) == 1 and plan.get("tiles", 1) == 1
                    and plan.get("row_blocks", 1) == 1):
        return None
    tiled = plan.get("tiles", 1) > 1
    rows = int(plan["tile_rows"]) if tiled else m
    columns = 1 if tiled else min(p, int(plan["block_columns"]))
    return rows, columns, min(k, columns)


def _log_point(d: dict[str, Any], what: str) -> None:
    print(f"  {what}: job {d['job_s']:.1f} s, {d['rounds']} rounds, "
          f"{d['sent_per_server'] / 1e6:.0f} MB sent, peak {d['peak_per_server'] / 1e9:.2f} GB "
          f"per server, D' = plain: {d['equal']}", flush=True)


def run(securities: list[str], grid: dict[str, list[int]], max_seconds: float,
        workdir: Path, csv_dir: Path, profiles: list[str] | None = None,
        one_block: bool = False, loopback: bool = True) -> list[dict[str, Any]]:
    """Every point of ``grid`` under every setting: on loopback (unless not ``loopback``),
    then over each emulated link of ``profiles``."""
    out: list[dict[str, Any]] = []
    for sweep, values in grid.items():
        for security in securities:
            last: dict[str, Any] | None = None
            for value in values:
                m, p, k = _point(sweep, value)
                row: dict[str, Any] = {"sweep": sweep, "security": security, "m": m, "p": p,
                                       "k": k, "link": "loopback"}
                shape = measure.synthetic_shape(csv_dir, m, p, k)
                if loopback:
                    _loopback(row, last, shape, max_seconds, workdir, csv_dir, one_block)
                    out.append(row)
                    if "skipped" in row:
                        continue
                    last = row
                if profiles:
                    out += _emulated(row, shape, workdir, profiles)
    return out


def _loopback(row: dict[str, Any], last: dict[str, Any] | None, shape: measure.Shape,
              max_seconds: float, workdir: Path, csv_dir: Path, one_block: bool) -> None:
    """One point on loopback into ``row`` (skipped when the previous point's time, grown
    linearly in m x p, exceeds ``max_seconds``), then its first block as a job of its own."""
    what = f"{row['sweep']} {row['security']} m={row['m']:,} p={row['p']:,}"
    if last is not None:
        estimate = last["job_s"] * (row["m"] * row["p"]) / (last["m"] * last["p"])
        if estimate > max_seconds:
            row["skipped"] = (f"skipped: about {estimate:.0f} s estimated (linear in m x p) "
                              f"> --max-seconds {max_seconds:.0f}")
            print(f"  {what}: {row['skipped']}", flush=True)
            return
    try:
        row.update(_row(report.summarize(
            measure.run_case(shape, row["security"], 1, workdir, check=True))))
    except Exception as exc:  # noqa: BLE001 - report it in the table, keep going
        row["skipped"] = "FAILED: " + " ".join(str(exc).split())[-300:]
        print(f"  {what}: {row['skipped']}", flush=True)
        return
    _log_point(row, what)
    block = first_block(row["m"], row["p"], row["k"], row["plan"]) if one_block else None
    if block is not None:
        bm, bp, bk = block
        ref = _row(report.summarize(measure.run_case(
            measure.synthetic_shape(csv_dir, bm, bp, bk), row["security"], 1, workdir,
            check=True)))
        row["one_block"] = {"m": bm, "p": bp, "k": bk, "rounds": ref["rounds"],
                            "job_s": ref["job_s"], "equal": ref["equal"], "plan": ref["plan"]}
        _log_point(ref, f"  its first block alone, {bm:,} x {bp:,}, k = {bk}")


def _emulated(row: dict[str, Any], shape: measure.Shape, workdir: Path,
              profiles: list[str]) -> list[dict[str, Any]]:
    """The point again over each emulated link (one run each, no proxy baseline)."""
    em = network.run_emulated([(shape, row["security"])], 1, workdir, True, profiles,
                              baseline=False)
    base = {k: row[k] for k in ("sweep", "security", "m", "p", "k")}
    if em.get("skipped"):
        return [dict(base, link=name, skipped=em["skipped"]) for name in profiles]
    out = []
    for prof in em["profiles"]:
        link = netemu.Link(**prof["link"])
        sums = prof["summaries"]
        if prof.get("error") or not sums or not sums[0].get("available"):
            why = prof.get("error") or (sums[0].get("reason") if sums else "no result")
            out.append(dict(base, link=link.name, skipped=f"FAILED: {why}"))
            continue
        d = dict(base, link=link.name, rtt_ms=prof["probe"]["rtt_ms"], **_row(sums[0]))
        d["proxy_cpu_s"] = sums[0].get("proxy_cpu_s", 0.0)
        if row.get("one_block"):  # rounds do not depend on the link
            d["one_block"] = row["one_block"]
        _log_point(d, f"{row['sweep']} {row['security']} m={row['m']:,} p={row['p']:,} "
                   f"over {link.describe()}")
        out.append(d)
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
            f"{plan['blocks']} column block(s)"
            + (f" in {plan['tiles']} tiles of rows each" if plan.get("tiles", 1) > 1 else "")
            + (" staggered" if plan.get("blocks_staggered") else "")
            + f", {plan.get('row_blocks', 1)} row block(s)")


def _peaks(d: dict[str, Any]) -> str:
    peaks = [v / 1e9 for v in (d.get("peak") or {}).values() if v]
    return " / ".join(f"{v:.2f}" for v in peaks) if peaks else f"{d['peak_per_server'] / 1e9:.2f}"


def _one_block(d: dict[str, Any]) -> tuple[str, str]:
    """(the first block's rounds as a job of its own, the point's rounds over them)."""
    ob = d.get("one_block")
    if ob is None:
        plan = d.get("plan") or {}
        one = plan and first_block(d["m"], d["p"], d["k"], plan) is None
        return ("the job is one block", "1.0") if one else ("–", "–")
    return (f"{ob['rounds']} ({ob['m']:,} x {ob['p']:,}, k = {ob['k']})",
            f"{d['rounds'] / ob['rounds']:.1f}")


def loopback(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in points if d.get("link", "loopback") == "loopback"]


def render(result: dict[str, Any]) -> str:
    pts = result["points"]
    budget = result.get("budget_bytes", DEFAULT_MEMORY_BUDGET)
    lines = [*report.run_header(result, "Large datasets over TLS between server processes",
                                " (other jobs on this machine add noise)"), "",
             "One run per point (a fresh deployment each). *job s*: the slowest server's job "
             "time; *servers' CPU s*: all servers' user + system CPU over the job; *peak GB*: "
             "each server's resident memory over the job (VmHWM, reset before it), against "
             f"the memory budget of {result['budget']} per server. *One block's rounds*: "
             "the rounds of the point's first block (a block of whole columns, or a tile of "
             "rows of one column) run as a job of its own, the same way (`--one-block`); the "
             "issue asks a job's rounds to be at most twice those. *Latency share*: rounds x "
             "the link's one-way delay (half its measured TCP round trip) / job s. D' = "
             "plain: the fetched D' equals the plaintext selection of the same encoded "
             "values (all rows, all k columns). "
             "*Load*: the 1-minute load average when the point started.", "",
             "| sweep | setting | link | m | p | k | share CSV s | job s | servers' CPU s | "
             "rounds | one block's rounds | rounds ÷ one block's | latency share | MB sent "
             "per server | peak GB per server | peak within budget | D' = plain | top-k plan "
             "| load | code |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---|---|"
             "---|---:|---|"]
    for d in pts:
        head = (f"| {d['sweep']} | {d['security']} | {d.get('link', 'loopback')} | "
                f"{d['m']:,} | {d['p']:,} | {d['k']} |")
        code = d.get("code", result.get("code", ""))
        if "skipped" in d:
            lines.append(head + f" {d['skipped']} |" + " |" * 12 + f" {code} |")
            continue
        block, ratio = _one_block(d)
        lat = (report.latency_share(d["rounds"], d["rtt_ms"], d["job_s"]) if d.get("rtt_ms")
               else None)
        share = "–" if lat is None else f"{100 * lat:.0f} %"
        cpu = f"{d['cpu_s']:.0f}" if d.get("cpu_s") is not None else "–"
        load = f"{d['loadavg']:.1f}" if d.get("loadavg") is not None else "–"
        within = "yes" if d["peak_per_server"] <= budget else "**NO**"
        lines.append(head + f" {d['share_cli_s']:.1f} | {d['job_s']:.1f} | {cpu} | "
                     f"{d['rounds']} | {block} | {ratio} | {share} | "
                     f"{d['sent_per_server'] / 1e6:.0f} | {_peaks(d)} | {within} | "
                     f"{'yes' if d['equal'] else 'NO'} | {_plan_text(d.get('plan'))} | "
                     f"{load} | {code} |")
    lines += ["", "Growth exponents b over the loopback points (y ~ x^b over the points run; "
              "1 = linear):", "",
              "| sweep | setting | job time | bytes sent | peak memory per server |",
              "|---|---|---:|---:|---:|"]
    for sweep in SWEEPS:
        for sec in result["securities"]:
            sel = [d for d in loopback(pts) if d["sweep"] == sweep and d["security"] == sec]
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
        pts, fig, axes = report.sweep_figure(dict(result, points=loopback(result["points"])),
                                             sweep)
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
    parser.add_argument("--values", nargs="+", type=int,
                        help="run only these values of the sweeps (rows for m, features for p)")
    parser.add_argument("--netem-profiles", nargs="+", default=[],
                        choices=sorted(netemu.PROFILES),
                        help="also run every point over these emulated links (root and "
                             "network namespaces, see bench/netemu.py)")
    parser.add_argument("--netem-only", action="store_true",
                        help="run the points over the emulated links only, not on loopback "
                             "(add the loopback points of an earlier run with --keep)")
    parser.add_argument("--one-block", action="store_true",
                        help="also run each point's first block as a job of its own")
    parser.add_argument("--csv-dir", type=Path,
                        help="keep the synthetic CSV files here between runs (default: a "
                             "temporary folder)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "large.md")
    args = parser.parse_args(argv)
    if args.netem_only and not args.netem_profiles:
        parser.error("--netem-only needs --netem-profiles")
    grid = {k: v for k, v in (QUICK if args.quick else
                              {k: list(v["values"]) for k, v in SWEEPS.items()}).items()
            if k in args.sweep}
    if args.values:
        grid = {k: list(args.values) for k in grid}
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="mpc-large-") as tmp:
        points = run(args.security, grid, args.max_seconds, Path(tmp),
                     args.csv_dir or Path(tmp) / "csv", args.netem_profiles, args.one_block,
                     loopback=not args.netem_only)

    def key(d: dict[str, Any]) -> tuple[Any, ...]:
        return d["sweep"], d["security"], d.get("link", "loopback"), d["m"], d["p"]

    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for earlier in args.keep:  # a later file's point replaces an earlier file's
        old = json.loads(earlier.read_text())
        merged.update({key(d): dict(d, code=d.get("code", old.get("code"))) for d in old["points"]})
    merged.update({key(d): d for d in points})
    points = list(merged.values())
    order = {s: i for i, s in enumerate(["passive3", "active4", "active3"])}
    links = ["loopback", *netemu.PROFILES]
    points.sort(key=lambda d: (list(SWEEPS).index(d["sweep"]), order.get(d["security"], 9),
                               d[d["sweep"]], links.index(d.get("link", "loopback"))))
    securities = sorted({d["security"] for d in points}, key=lambda s: order.get(s, 9))
    argv_used = argv if argv is not None else sys.argv[1:]
    result: dict[str, Any] = {
        "command": "python -m bench.large" + (" " + shlex.join(argv_used) if argv_used else ""),
        "date": time.strftime("%Y-%m-%d %H:%M"), "machine": report.machine(),
        "code": report.code_version(), "securities": securities, "points": points,
        "load_start": load_start,
        "budget": f"{DEFAULT_MEMORY_BUDGET / 2**30:g} GiB (the default)",
        "budget_bytes": DEFAULT_MEMORY_BUDGET}
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
    failed = [d for d in points if d.get("equal") is False
              or str(d.get("skipped", "")).startswith("FAILED")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
