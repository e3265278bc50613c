"""Benchmark: how private MS-GINI selection grows with the rows m, the features p and k.

Three sweeps on synthetic data (``bench.measure.synthetic_shape``'s generator: a few
informative columns, integer and real columns mixed, binary label), each point under every
setting in ``--security``:

- m from 1,000 to 100,000 rows at the SPEED shape's p = 122, k = 67, with the two sides of the
  ranking threshold: up to ``LIMIT`` rows the cross-multiplied scores fit the ring and are
  compared directly; beyond it they are compared as limbs (``mpcnet.ops.fraction``), which
  costs more rounds;
- p from 50 to 1,000 at m = 2,000, k = 40 (top-k compares all p^2 pairs of scores);
- k from 1 to 121 (k < p is required) at m = 2,000, p = 122.

**In-process points** (the bulk): every point runs in a fresh Python process with all parties
over loopback channels (``mpcnet.net.local.run_local_sync``, as ``bench/inprocess.py``), so the
time is every party's computation on one core and the memory is the process's peak (VmHWM,
reset after the client-side sharing) for all parties together. D' is checked against the
plaintext selection at every point. A point whose memory, extrapolated linearly in m x p from
the largest finished point of its setting, would exceed 80 % of the available memory is
skipped with the estimate.

**Networked points** (not with ``--quick``): m = 1,000, 10,000 and 100,000 at p = 122,
k = 67 with real server processes over TLS on 127.0.0.1 (``bench.measure.run_case``: CLI share
of a CSV file, selection, per-server peak memory), the same memory guard applied.

Writes ``bench/results/scaling.md`` (tables), ``scaling.json`` (raw figures) and
``scaling_m.png``, ``scaling_p.png``, ``scaling_k.png`` (needs matplotlib, the "bench" extra).

    python -m bench.scaling [--quick] [--security passive3 active3 active4] [--no-network]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
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

from bench import measure, report  # noqa: E402
from mpcnet.featsel.msgini import limb_plan  # noqa: E402


def direct_ranking_limit() -> int:
    """Largest m whose scores the ranking compares by direct cross-multiplication."""
    lo, hi = 2, 1 << 20
    while lo < hi:  # the cross products grow with m
        mid = (lo + hi + 1) // 2
        plan = limb_plan(mid, 1)
        if plan is not None and plan.levels == 1:
            lo = mid
        else:
            hi = mid - 1
    return lo


LIMIT = direct_ranking_limit()
SPEED_P, SPEED_K = 122, 67
FULL = {"m": [1000, 2000, 5000, LIMIT, LIMIT + 1, 20000, 50000, 100000],
        "p": [50, 100, 200, 500, 1000], "k": [1, 10, 30, 67, 100, 121]}
QUICK = {"m": [500, 2000, LIMIT + 1], "p": [50, 200], "k": [5, 67]}
FIXED = {"m": {"p": SPEED_P, "k": SPEED_K}, "p": {"m": 2000, "k": 40},
         "k": {"m": 2000, "p": SPEED_P}}
NETWORK_M = [1000, 10000, 100000]
NETWORK_REPEAT = 3  # medians of 3 runs up to m = 10,000; one run beyond
MEMORY_SHARE = 0.8


# -- one in-process point (runs in its own process) ----------------------------------------
def _synthetic(m: int, p: int, seed: int = 0) -> Any:
    """The table ``measure.synthetic_shape`` writes as CSV, built in memory."""
    from mpcnet.dataset import Table

    x, y = measure.synthetic_values(m, p, seed)
    return Table([f"x{j + 1}" for j in range(p)], x, y.astype(str), {})


def _vm(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def run_point(m: int, p: int, k: int, security: str) -> dict[str, Any]:
    """One private selection with all parties in this process; figures of party 0."""
    from mpcnet.encoded import encode_table
    from mpcnet.featsel.local import select_in_process
    from mpcnet.plain import msgini_fraction, topk_fraction
    from mpcnet.schemes import registry

    info = registry.get(security)
    ds = encode_table(_synthetic(m, p))
    reset = True
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        reset = False
    rss_before = _vm("VmRSS")

    t0, c0 = time.perf_counter(), time.process_time()
    run = select_in_process(security, ds.values, ds.label_matrix, ds.n_classes, k,
                            ds.exponents, round_timeout=None)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    peak = _vm("VmHWM")
    reduced = run.reduced
    q, d = msgini_fraction(ds.values, ds.codes, ds.n_classes)
    equal = bool(np.array_equal(reduced, ds.values[:, topk_fraction(q, d, k)]))
    rep = run.report
    return {"m": m, "p": p, "k": k, "security": security, "n_parties": info.n_parties,
            "seconds": seconds, "cpu_share": cpu / seconds, "rounds": rep["rounds"],
            "bytes_sent": rep["bytes_sent"],
            "phases": {ph: {"seconds": v["seconds"], "rounds": v["rounds"],
                            "bytes_sent": v["bytes_sent"]} for ph, v in rep["phases"].items()},
            "peak_bytes": peak, "rss_before_bytes": rss_before, "peak_reset": reset,
            "equal": equal}


def _point_subprocess(m: int, p: int, k: int, security: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "bench.scaling", "--point", str(m), str(p),
                        str(k), security], capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"point m={m} p={p} k={k} {security} failed:\n{r.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t0
    return out


def _available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def _estimate(done: list[dict[str, Any]], security: str, m: int, p: int) -> float | None:
    """Peak bytes of (m, p) scaled from the largest finished point of this setting."""
    mine = [d for d in done if d["security"] == security and "peak_bytes" in d]
    if not mine:
        return None
    ref = max(mine, key=lambda d: d["m"] * d["p"])
    if ref["m"] * ref["p"] >= m * p:
        return None
    return float(ref["peak_bytes"]) * (m * p) / (ref["m"] * ref["p"])


def _guard(done: list[dict[str, Any]], security: str, m: int, p: int) -> str | None:
    est = _estimate(done, security, m, p)
    avail = _available_bytes()
    if est is not None and avail and est > MEMORY_SHARE * avail:
        return (f"skipped: about {est / 1e9:.1f} GB estimated (linear in m x p from the largest "
                f"finished point) > {MEMORY_SHARE:.0%} of the {avail / 1e9:.1f} GB available")
    return None


def run_sweeps(grid: dict[str, list[int]], securities: list[str]) -> list[dict[str, Any]]:
    """Every in-process point; the m sweep first, so the memory guard has references."""
    done: list[dict[str, Any]] = []
    for sweep in ("m", "p", "k"):
        for security in securities:
            for v in grid[sweep]:
                pt = {**FIXED[sweep], sweep: v}
                m, p, k = pt["m"], pt["p"], min(pt["k"], pt["p"])
                reason = _guard(done, security, m, p)
                head = f"  {sweep} sweep {security} m={m} p={p} k={k}:"
                if reason:
                    print(f"{head} {reason}", flush=True)
                    done.append({"sweep": sweep, "m": m, "p": p, "k": k,
                                 "security": security, "skipped": reason})
                    continue
                try:
                    res = _point_subprocess(m, p, k, security)
                except RuntimeError as exc:
                    print(f"{head} FAILED: {exc}", flush=True)
                    done.append({"sweep": sweep, "m": m, "p": p, "k": k,
                                 "security": security, "skipped": f"failed: {exc}"[:300]})
                    continue
                res["sweep"] = sweep
                done.append(res)
                print(f"{head} {res['seconds']:.2f} s (CPU/wall {res['cpu_share']:.2f}), "
                      f"{res['rounds']} rounds, "
                      f"{res['bytes_sent'] / 1e6:.1f} MB sent per party, peak "
                      f"{res['peak_bytes'] / 1e9:.2f} GB (all parties), D' = plain: "
                      f"{res['equal']}", flush=True)
    return done


def run_network_points(securities: list[str], workdir: Path,
                       inproc: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for security in securities:
        for m in NETWORK_M:
            reason = _guard(inproc + [o for o in out if "peak_bytes" in o], security, m,
                            SPEED_P)
            if reason:
                print(f"  network m={m} {security}: {reason}", flush=True)
                out.append({"m": m, "p": SPEED_P, "k": SPEED_K, "security": security,
                            "skipped": reason})
                continue
            shape = measure.synthetic_shape(workdir / "csv", m, SPEED_P, SPEED_K)
            case = measure.run_case(shape, security, NETWORK_REPEAT if m <= 10000 else 1,
                                    workdir, check=True)
            s = report.summarize(case)
            out.append({"m": m, "p": SPEED_P, "k": SPEED_K, "security": security,
                        "job_s": s["job_s"]["median"], "e2e_s": s["e2e_s"]["median"],
                        "share_cli_s": s["share_cli_s"]["median"], "rounds": s["rounds"],
                        "bytes_sent": max(s["sent"].values()),
                        "peak_per_party": max(s["peak"].values()),
                        # comparable with the in-process process peak (all parties)
                        "peak_bytes": sum(s["peak"].values()), "equal": s["equal"],
                        "runs": s["repeat"], "job_range": [s["job_s"]["min"], s["job_s"]["max"]],
                        "other_cpu_s": s["other_cpu_s"]["median"]})
    return out


# -- report --------------------------------------------------------------------------------
def _row(d: dict[str, Any]) -> str:
    head = f"| {d['sweep']} | {d['security']} | {d['m']:,} | {d['p']} | {d['k']} |"
    if "skipped" in d:
        return head + f" {d['skipped']} | | | | | | | |"
    ph = d["phases"]
    return (head + f" {d['seconds']:.2f} | {ph.get('scoring', {}).get('seconds', 0):.2f} / "
            f"{ph.get('selection', {}).get('seconds', 0):.2f} / "
            f"{ph.get('product', {}).get('seconds', 0):.2f} | {d['rounds']} | "
            f"{d['bytes_sent'] / 1e6:.1f} | {d['peak_bytes'] / 1e9:.2f} | "
            f"{d['peak_bytes'] / d['n_parties'] / 1e9:.2f} | {'yes' if d['equal'] else 'NO'} | "
            f"{d['cpu_share']:.2f} |")


def _growth(points: list[dict[str, Any]], key: str, sweep: str) -> str:
    """m and p: least-squares exponent b of key ~ x^b over the points with x >= max(x) / 20;
    k: relative change from the smallest to the largest k."""
    pts = sorted((d[sweep], d[key]) for d in points if "skipped" not in d and d[key] > 0)
    if len(pts) < 2:
        return "–"
    if sweep == "k":
        return f"{(pts[-1][1] / pts[0][1] - 1) * 100:+.0f} %"
    top = [(x, y) for x, y in pts if x >= pts[-1][0] / 20]
    if len(top) < 2:
        return "–"
    b = np.polyfit(np.log([x for x, _ in top]), np.log([y for _, y in top]), 1)[0]
    return f"{b:.2f}"


def render(result: dict[str, Any]) -> str:
    pts, net = result["points"], result["network"]
    lines = [
        *report.run_header(result, "Scaling of private MS-GINI selection with m, p and k"),
        "",
        "In-process points: all parties in one Python process over loopback channels (one "
        "core does every party's work, no TLS), one run per point; *peak GB* is that "
        "process's VmHWM over the protocol (after the client-side sharing), i.e. all parties "
        "together, and *÷ n* divides it by the number of parties as a rough per-server "
        f"figure. Ranking: direct cross-multiplication up to m = {LIMIT:,}, the wider "
        "split path beyond (more rounds). D' = plain: D' equals the plaintext selection. "
        "*CPU / wall*: the process's CPU time over its wall time during the protocol; the "
        "in-process run is single-threaded, so a value well below 1 means other work on this "
        "2-core machine took the CPU and the time is inflated by about 1 / that value.",
        "",
        "| sweep | setting | m | p | k | s | scoring / selection / product s | rounds | "
        "MB sent per party | peak GB (all parties) | ÷ n | D' = plain | CPU / wall |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|",
        *[_row(d) for d in pts],
        "",
        "Growth: for m and p the exponent b of a least-squares fit y ~ x^b over the points "
        "with x at least a twentieth of the largest (1 = linear, 2 = quadratic); for k the "
        "change from k = 1 to the largest k:",
        "",
        "| sweep | setting | time | MB sent | peak memory |",
        "|---|---|---:|---:|---:|",
    ]
    for sweep in ("m", "p", "k"):
        for sec in result["securities"]:
            sel = [d for d in pts if d["sweep"] == sweep and d["security"] == sec]
            if sel:
                lines.append(f"| {sweep} | {sec} | {_growth(sel, 'seconds', sweep)} | "
                             f"{_growth(sel, 'bytes_sent', sweep)} | "
                             f"{_growth(sel, 'peak_bytes', sweep)} |")
    if net:
        lines += ["", "## Networked points (server processes over TLS on 127.0.0.1)", "",
                  f"p = {SPEED_P}, k = {SPEED_K}; medians of {NETWORK_REPEAT} runs up to "
                  "m = 10,000 (job time range in brackets), one run beyond; share = "
                  "`mpc-client share` of the synthetic CSV (process wall time); peak = the "
                  "largest server's VmHWM over the job; *other CPU s*: CPU time the rest of "
                  "the machine used during the job (noise).", "",
                  "| setting | m | runs | share CSV s | select end to end s | servers' job s | "
                  "rounds | MB sent per party | peak GB per server | other CPU s | D' = plain |",
                  "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
        for d in net:
            if "skipped" in d:
                lines.append(f"| {d['security']} | {d['m']:,} | – | {d['skipped']} |"
                             + " |" * 7)
                continue
            lo, hi = d["job_range"]
            lines.append(f"| {d['security']} | {d['m']:,} | {d['runs']} | "
                         f"{d['share_cli_s']:.2f} | {d['e2e_s']:.2f} | {d['job_s']:.2f} "
                         f"[{lo:.2f}–{hi:.2f}] | {d['rounds']} | {d['bytes_sent'] / 1e6:.1f} | "
                         f"{d['peak_per_party'] / 1e9:.2f} | {d['other_cpu_s']:.2f} | "
                         f"{'yes' if d['equal'] else 'NO'} |")
    if result.get("plots"):
        lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in result["plots"]), ""]
        lines += [f"![{Path(p).stem}]({Path(p).name})" for p in result["plots"]]
    elif result.get("plot_note"):
        lines += ["", result["plot_note"]]
    return "\n".join(lines) + "\n"


def _log_axis(axis: Any, set_scale: Any) -> None:
    """Log scale with plain-number labels at 1, 2 and 5 times each power of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    set_scale("log")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.10g}"))
    axis.set_minor_formatter(NullFormatter())


def plot(result: dict[str, Any], folder: Path) -> list[str]:
    """One PNG per sweep: time, rounds, MB sent per party, peak memory."""
    colors = report.SETTING_COLORS
    fixed_text = {"m": f"p = {SPEED_P}, k = {SPEED_K}", "p": "m = 2,000, k = 40",
                  "k": f"m = 2,000, p = {SPEED_P}"}
    files = []
    for sweep in ("m", "p", "k"):
        pts, fig, axes = report.sweep_figure(result, sweep)
        if not pts:
            continue
        panels = [("seconds", "wall time (s)", 1.0), ("rounds", "rounds", 1.0),
                  ("bytes_sent", "MB sent per party", 1e-6),
                  ("peak_bytes", "peak memory, all parties (GB)", 1e-9)]
        for ax, (key, title, scale) in zip(axes.flat, panels, strict=True):
            report.plot_settings(ax, pts, result["securities"], sweep, key, scale,
                                 ", in-process")
            for sec in result["securities"]:
                if sweep == "m":
                    net = [d for d in result["network"] if d["security"] == sec
                           and "skipped" not in d]
                    nkey = {"seconds": "job_s"}.get(key, key)
                    if net:
                        ax.plot([d["m"] for d in net], [d[nkey] * scale for d in net], "s",
                                mfc="none", ms=10, mew=2, color=colors.get(sec),
                                label=f"{sec}, servers over TLS")
            if sweep == "m":
                ax.axvline(LIMIT, color="grey", ls=":", lw=1)
            if sweep in ("m", "p"):
                _log_axis(ax.xaxis, ax.set_xscale)
                if key != "rounds":
                    _log_axis(ax.yaxis, ax.set_yscale)
            if key == "rounds":
                ax.yaxis.get_major_locator().set_params(integer=True)
            if key == "rounds" or sweep == "k":
                ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.05)
            ax.set_title(title)
            ax.set_xlabel({"m": "rows m", "p": "features p", "k": "selected k"}[sweep])
            ax.grid(True, which="both", alpha=0.3)
        axes[0, 1].legend(fontsize=8)
        if sweep == "m":
            axes[0, 1].annotate(f"m = {LIMIT:,}: wider\nexact ranking beyond",
                                xy=(LIMIT, 0.5), xycoords=("data", "axes fraction"),
                                xytext=(-6, 0), textcoords="offset points", fontsize=8,
                                color="grey", ha="right")
        fig.suptitle(f"Private MS-GINI selection against {sweep} ({fixed_text[sweep]})")
        files.append(report.save_figure(fig, folder, f"scaling_{sweep}.png"))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a few small points, in-process only (about a minute)")
    parser.add_argument("--security", nargs="+", default=["passive3", "active3", "active4"])
    parser.add_argument("--no-network", action="store_true", help="skip the networked points")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "scaling.md")
    parser.add_argument("--point", nargs=4, metavar=("M", "P", "K", "SECURITY"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.point:
        m, p, k, sec = args.point
        print(json.dumps(run_point(int(m), int(p), int(k), sec)))
        return 0
    from mpcnet.schemes import registry

    securities = [s for s in args.security if s in registry.SCHEMES]
    for s in set(args.security) - set(securities):
        print(f"{s}: not available (no such scheme registered); left out", flush=True)
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    points = run_sweeps(QUICK if args.quick else FULL, securities)
    net: list[dict[str, Any]] = []
    if not (args.quick or args.no_network):
        with tempfile.TemporaryDirectory(prefix="mpc-scaling-") as tmp:
            net = run_network_points(securities, Path(tmp), points)
    argv_used = argv if argv is not None else sys.argv[1:]
    result: dict[str, Any] = {
        "command": "python -m bench.scaling" + (" " + shlex.join(argv_used) if argv_used
                                                else ""),
        "date": time.strftime("%Y-%m-%d %H:%M"), "machine": report.machine(),
        "code": report.code_version(),
        "securities": securities, "points": points, "network": net,
        "load_start": load_start}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        result["plots"] = plot(result, args.out.parent)
    except ImportError:
        result["plot_note"] = ("No plots: matplotlib is missing (pip install -e '.[bench]').")
    result["wall_s"] = time.perf_counter() - started
    result["load_end"] = os.getloadavg()[0]
    args.out.write_text(render(result), encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
    print(f"report: {args.out}; {result['wall_s']:.0f} s")
    bad = [d for d in points + net if d.get("equal") is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
