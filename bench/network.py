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
   selection (``mpcnet.plain``: MS-GINI, or the score of ``--scores``) on the same encoded
   values.

Reported: medians over ``--repeat`` runs with min and max (the machine's noise), per phase
(scoring, selection, product, checks; also setup and the commit round) and in total, and the
ratios to the paper's Table II (active 3PC in MP-SPDZ on three Azure VMs; the paper's other
runtime figures did not survive in our copy) and to MP-SPDZ on this machine
(``docs/design.md``, section 5). A case that fails gets a FAILED row.

With ``--netem`` every case is run again over emulated links (``bench/netemu.py``: tc netem in
a network namespace, or a user-space delay proxy where the kernel has no netem): by default the
LAN (1 ms one way, 10 Gbit/s), the WAN (20 ms, 1 Gbit/s) and the WAN at 100 Mbit/s (20 ms),
reported side by side with each job's rounds, bytes and latency share (rounds x round trip /
job time).

    python -m bench.network [--shapes cogload lsvt speeddating]
                            [--security passive3 active3 active4] [--repeat 3]
                            [--scores ms-gini chi2 mi pcc gini]
                            [--out bench/results/network.md]
                            [--netem [--netem-profiles lan wan wan100m]]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import netemu  # noqa: E402
from bench.measure import (  # noqa: E402
    SETTINGS,
    Shape,
    bundled_shape,
    log,
    run_case,
    synthetic_shape,
)
from bench.report import (  # noqa: E402
    code_version,
    machine,
    main_tables,
    paper_table,
    phase_table,
    render,
    summarize,
)


# -- emulated network ----------------------------------------------------------------------
def _run_cases(cases: list[tuple[Shape, str]], repeat: int, workdir: Path, check: bool,
               link: netemu.Link | None = None, method: str | None = None,
               log: Callable[[str], None] = log, train_epochs: int = 0,
               scores: tuple[str, ...] = ("ms-gini",)) -> list[dict[str, Any]]:
    """Every case under every score; one that fails gets a FAILED row (and exit status 1),
    the rest still run."""
    out = []
    for (shape, sec), score in ((case, score) for case in cases for score in scores):
        try:
            out.append(summarize(run_case(shape, sec, repeat, workdir, link=link,
                                          method=method, check=check, log=log,
                                          train_epochs=train_epochs, score=score)))
        except Exception as exc:  # noqa: BLE001 - report it in the table, keep going
            msg = " ".join(str(exc).split())[-400:]
            log(f"  {shape.name} {sec}: FAILED: {msg}")
            out.append({"shape": shape.name, "security": sec, "score": score, "m": "?",
                        "p": "?",
                        "k": shape.k, "link": link.name if link else "loopback",
                        "available": False, "failed": True, "reason": f"FAILED: {msg}"})
    return out


def _worker(spec_path: Path, out_path: Path) -> int:
    """Inside the namespace: probe the link, then run every case over it."""
    spec = json.loads(spec_path.read_text())
    link = netemu.Link(**spec["link"])
    workdir = Path(spec["workdir"])
    probe = netemu.probe_link(spec["method"], link, workdir)
    log(f"  {link.describe()}: TCP round trip {probe['rtt_ms']:.2f} ms, echo "
         f"{probe['echo_mb_s']:.0f} MB/s ({spec['method']})")
    cases = [(Shape.from_dict(c["shape"]), c["security"]) for c in spec["cases"]]
    sums = _run_cases(cases, spec["repeat"], workdir, spec["check"], link, spec["method"])
    out_path.write_text(json.dumps({"probe": probe, "summaries": sums}, default=str))
    return 0


def run_emulated(cases: list[tuple[Shape, str]], repeat: int, workdir: Path, check: bool,
                 profiles: list[str], wanted: str = "auto",
                 log: Callable[[str], None] = log, baseline: bool = True) -> dict[str, Any]:
    """Every case over each link of ``profiles``, each link in a namespace of its own; with
    the proxy, first over the proxy at 0 ms (``baseline``: what the proxy alone costs)."""
    sup = netemu.check_support()
    method, note = sup.method(wanted)
    if method is None:
        log(f"emulated network {note}")
        return {"skipped": note}
    log(f"emulated network: {note}")
    links = [netemu.PROFILES[p] for p in profiles]
    if method == "proxy" and baseline:
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
    from mpcnet.featsel.scores import SCORES

    parser = argparse.ArgumentParser(prog="python -m bench.network", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="*", choices=list(BUNDLED),
                        help="bundled datasets (default: all three, unless --synthetic)")
    parser.add_argument("--synthetic", nargs="*", type=_synthetic, default=[],
                        metavar="MxPxK", help="also synthetic datasets, e.g. 40x8x3")
    parser.add_argument("--security", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--scores", nargs="+", default=["ms-gini"], choices=list(SCORES),
                        help="select by each of these scores (default: ms-gini, the paper's)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "network.md",
                        help="Markdown report; the raw figures go beside it as .json")
    parser.add_argument("--no-check", action="store_true",
                        help="skip fetching D' and comparing it with the plaintext selection")
    parser.add_argument("--netem", action="store_true",
                        help="also run over emulated links (slow; root and tc, see netemu.py)")
    parser.add_argument("--netem-profiles", nargs="+", default=list(netemu.DEFAULT_PROFILES),
                        choices=sorted(netemu.PROFILES),
                        help="the emulated links (default: %(default)s)")
    parser.add_argument("--netem-method", choices=("auto", "netem", "proxy"), default="auto",
                        help="auto: tc netem if the kernel has it, else the delay proxy")
    parser.add_argument("--workdir", type=Path, help="keep deployments and logs here")
    parser.add_argument("--train-epochs", type=int, default=0, metavar="N",
                        help="also train a model on every case's result for N epochs "
                             "(mpc-client train; default: 0, no training)")
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
        log(f"{len(cases)} cases x {args.repeat} runs over TLS on 127.0.0.1")
        sums = _run_cases(cases, args.repeat, workdir, not args.no_check,
                          train_epochs=args.train_epochs, scores=tuple(args.scores))
        emulated = None
        if args.netem:
            emulated = run_emulated(cases, args.repeat, workdir, not args.no_check,
                                    args.netem_profiles, args.netem_method)
    result = {"command": "python -m bench.network" + (
                  " " + shlex.join(argv if argv is not None else sys.argv[1:])
                  if (argv if argv is not None else sys.argv[1:]) else ""),
              "date": time.strftime("%Y-%m-%d %H:%M"), "machine": machine(),
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
