"""Benchmarks: summaries of the measured cases and the Markdown report.

``summarize`` turns one case's raw runs into medians with min and max (bytes and rounds from
the first run: the protocol is deterministic in them); the table functions render summaries
against the reference figures of ``bench.anchors``.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import netemu
from bench.anchors import (
    MPSPDZ_BEST,
    MPSPDZ_PAPER_PROGRAM,
    PAPER_TABLE_II,
    SHARE_TARGETS,
    TARGETS,
    paper_total,
)
from bench.measure import ALL_PHASES, ROOT


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
    s["score"] = case.get("score", "ms-gini")
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
    s["plan"] = runs[0]["figures"][lead].get("plan")
    s["fetch_s"] = runs[0].get("fetch_s")
    s["loadavg"] = _stats([r["loadavg_1min"] for r in runs])
    if runs[0].get("training"):
        s["training"] = _training_summary(runs[0]["training"])
    return s


def _training_summary(t: dict[str, Any]) -> dict[str, Any]:
    """One training run: the slowest server per phase, the most any server sent, per epoch."""
    figs = list(t["figures"].values())

    def phase(name: str) -> dict[str, float]:
        return {"seconds": max(f["phases"][name]["seconds"] for f in figs),
                "rounds": figs[0]["phases"][name]["rounds"],
                "sent": max(f["phases"][name]["bytes_sent"] for f in figs)}

    return {"epochs": t["epochs"], "e2e_s": t["e2e_s"],
            "job_s": max(f["seconds"] for f in figs), "standardise": phase("standardise"),
            "training": phase("training"), "peak": max(t["peak_bytes"].values()),
            "cpu_s": sum(t.get("cpu_s", {}).values()), "loadavg": t.get("loadavg_1min")}


def training_table(sums: list[dict[str, Any]]) -> list[str]:
    """Fig. 1, step 2B: the private logistic regression on each selection's result."""
    rows = [s for s in sums if s.get("training")]
    if not rows:
        return ["Not run (`--train-epochs N` trains a model on every case's result)."]
    out = ["| shape | m × k | setting | epochs | train end to end s | standardise s | "
           "standardise rounds | standardise MB sent | per epoch s | per epoch MB sent | "
           "rounds per epoch | servers' CPU s (sum) | peak MB per server | load at start |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in rows:
        t, n = s["training"], s["training"]["epochs"]
        st, tr = t["standardise"], t["training"]
        load = "–" if t.get("loadavg") is None else f"{t['loadavg']:.1f}"
        out.append(f"| {s['shape']} | {s['m']} × {s['k']} | {s['security']} | {n} | "
                   f"{t['e2e_s']:.2f} | {st['seconds']:.2f} | {st['rounds']} | "
                   f"{st['sent'] / 1e6:.1f} | {tr['seconds'] / n:.3f} | "
                   f"{tr['sent'] / n / 1e6:.2f} | {tr['rounds'] / n:.0f} | "
                   f"{t.get('cpu_s', 0):.1f} | {t['peak'] / 1e6:.0f} | {load} |")
    return out


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


def _label(s: dict[str, Any]) -> str:
    """The shape, and the score where it is not the default MS-GINI."""
    score = s.get("score", "ms-gini")
    return s["shape"] if score == "ms-gini" else f"{s['shape']} ({score})"


def _target(s: dict[str, Any]) -> str:
    t = TARGETS.get((s["shape"], s["security"])) if _label(s) == s["shape"] else None
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
        head = f"| {_label(s)} | {s['m']} × {s['p']} | {s['k']} | {s['security']} |"
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
            out.append(f"| {_label(s)} | {s['security']} | {ph} | {_sec(v['seconds'], 3)} | "
                       f"{v['rounds']} | {_per_party(v['sent'], lambda b: f'{b / 1e6:.2f}')} |")
    return out


def paper_table(summaries: list[dict[str, Any]]) -> list[str]:
    out = ["| shape | setting | ours: job s | paper active 3PC total s (Prot 1 + p·Prot 2) | "
           "paper ÷ ours | scoring: paper p·Prot 2 ÷ ours | selection: paper Prot 1 lines 1-8 "
           "÷ ours | product: paper Prot 1 line 9 ÷ ours | MP-SPDZ here, best s | "
           "MP-SPDZ best ÷ ours | MP-SPDZ here, paper's program s | ÷ ours |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in summaries:
        if not s.get("available") or _label(s) != s["shape"]:  # the paper scores MS-GINI
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
            out.append(f"| {_label(s)} | {s['security']} | {nm} | {_mb(s['sent'][nm])} | "
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
        out.append(f"- {_label(s)} {s['security']} [{s['link']}]: end to end {e['min']:.2f}-"
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


def latency_share(rounds: int, rtt_ms: float, job_s: float) -> float | None:
    """The part of a job's wall time that its rounds' latency alone accounts for: in a round
    every party sends at once and waits for its peers' messages, so a round costs one one-way
    delay (half the measured round trip), not a round trip (measured: over the WAN a job's
    rounds x round trip exceed the whole job, its rounds x one-way delay match what the link
    adds to it; bench/README, section 2)."""
    if job_s <= 0 or not rtt_ms == rtt_ms:  # NaN: the link was not probed
        return None
    return rounds * rtt_ms / 2e3 / job_s


def transfer_share(sent: float, rate_bit: float | None, job_s: float) -> float | None:
    """The part of a job's wall time that serialising one server's bytes at the link's rate
    accounts for (the proxy gives each direction of each connection that rate)."""
    if not rate_bit or job_s <= 0:
        return None
    return sent * 8 / rate_bit / job_s


def _share_text(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def profiles_table(sums: list[dict[str, Any]], em: dict[str, Any]) -> list[str]:
    """One row per shape, score and setting: rounds and bytes (the same on every link), the
    servers' job time on loopback and on each emulated link, and per link the latency share
    (rounds x measured TCP round trip / job time) and, where the link has a rate, the
    transfer share (bytes sent by the busiest server x 8 / rate / job time)."""
    profiles = [p for p in em.get("profiles", []) if not p.get("error")]
    head = "| shape | setting | rounds | MB sent per server | loopback job s |"
    rule = "|---|---|---:|---:|---:|"
    for prof in profiles:
        link = netemu.Link(**prof["link"])
        head += f" {link.name} job s | {link.name} latency share |"
        rule += "---:|---:|"
        if link.rate_bit:
            head += f" {link.name} transfer share |"
            rule += "---:|"
    out = [head, rule]
    keys = [(s["shape"], s.get("score", "ms-gini"), s["security"]) for s in sums]
    for prof in profiles:  # cases that ran only over the emulated links
        keys += [k for k in ((s["shape"], s.get("score", "ms-gini"), s["security"])
                             for s in prof["summaries"]) if k not in keys]
    def find(rows: list[dict[str, Any]], key: tuple[str, str, str]) -> dict[str, Any] | None:
        for s in rows:
            if (s["shape"], s.get("score", "ms-gini"), s["security"]) == key:
                return s
        return None

    for key in dict.fromkeys(keys):
        base = find(sums, key)
        runs = [(prof, find(prof["summaries"], key)) for prof in profiles]
        known = [s for s in (base, *(r for _, r in runs)) if s and s.get("available")]
        if not known:
            continue
        rounds = {s["rounds"] for s in known}
        sent = [max(s["sent"].values()) for s in known]
        label = _label(known[0])
        cells = [f"{label}", key[2],
                 " / ".join(str(r) for r in sorted(rounds)) + (" (differ)" if len(rounds) > 1
                                                              else ""),
                 _mb(sent[0]) + (" (varies)" if max(sent) > 1.005 * min(sent) else ""),
                 f"{base['job_s']['median']:.2f}" if base and base.get("available") else "–"]
        for prof, s in runs:
            link = netemu.Link(**prof["link"])
            if s is None or not s.get("available"):
                cells += ["FAILED" if s is not None else "–", "–"] + (["–"] if link.rate_bit
                                                                     else [])
                continue
            job = s["job_s"]["median"]
            cells += [f"{job:.2f}",
                      _share_text(latency_share(s["rounds"], prof["probe"]["rtt_ms"], job))]
            if link.rate_bit:
                cells.append(_share_text(transfer_share(max(s["sent"].values()),
                                                        link.rate_bit, job)))
        out.append("| " + " | ".join(cells) + " |")
    return out


def machine() -> str:
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


SETTING_COLORS = {"passive3": "tab:blue", "active3": "tab:green", "active4": "tab:red"}


def plot_settings(ax: Any, points: list[dict[str, Any]], securities: list[str], x: str, y: str,
                  scale: float, label: str = "") -> None:
    """One line per setting through ``points`` (dicts with "security"): x against y * scale."""
    for sec in securities:
        sel = sorted((d for d in points if d["security"] == sec), key=lambda d: d[x])
        if sel:
            ax.plot([d[x] for d in sel], [d[y] * scale for d in sel], "o-",
                    color=SETTING_COLORS.get(sec), label=sec + label)


def sweep_figure(result: dict[str, Any], sweep: str) -> tuple[list[dict[str, Any]], Any, Any]:
    """The points of one sweep that ran, and a 2 x 2 figure for them (matplotlib, Agg)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [d for d in result["points"] if d["sweep"] == sweep and "skipped" not in d]
    if not points:
        return points, None, None
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    return points, fig, axes


def save_figure(fig: Any, folder: Path, name: str) -> str:
    """Write a matplotlib figure as ``folder/name`` (PNG) and close it; its path, relative to
    the repository when inside it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = folder / name
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


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
        "## Training on the result (Fig. 1, step 2B)",
        "",
        "`mpc-client train` on the first run's result, for the model owner (one run): "
        "private standardisation once, then the epochs of gradient descent; seconds are the "
        "slowest server's, bytes the most any server sent, peak the largest server's "
        "resident memory during the training job.",
        "",
        *training_table(sums),
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
                      "Links (measured: a 64-byte TCP ping-pong's median round trip and a "
                      "32 MB echo's throughput through the link):", "",
                      *[f"- {netemu.Link(**prof['link']).describe()}: round trip "
                        f"{prof['probe']['rtt_ms']:.2f} ms, echo "
                        f"{prof['probe']['echo_mb_s']:.0f} MB/s"
                        for prof in em["profiles"] if not prof.get("error")], "",
                      "Servers' job seconds (the slowest server's, median of the runs) per "
                      "link side by side. *Latency share*: rounds x the link's one-way delay "
                      "(half its measured round trip) / job time, the part of the job its "
                      "rounds alone account for (in a round every server sends at once, so a "
                      "round costs one one-way delay; rounds x round trip would exceed the "
                      "whole job on the small shapes). "
                      "*Transfer share*: the busiest server's bytes x 8 / the link's rate / "
                      "job time (the proxy gives each direction of each connection that rate, "
                      "as if every pair of organisations had its own line).", "",
                      *profiles_table(sums, em), "",
                      *emulated_table(em, base), "",
                      "*Rounds × one-way delay* is what latency alone should add to a job "
                      "whose parties send in every round at once; *job s minus loopback* is "
                      "what it added here.", "", *[ln for prof in em["profiles"]
                                                  for ln in noise_lines(prof["summaries"])]]
    return "\n".join(lines) + "\n"
