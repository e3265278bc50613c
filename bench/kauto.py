"""Benchmark: ``select --k auto`` (a private choice of k) by real server processes over TLS.

For the bundled LSVT and CogLoad and each setting, a fresh local deployment
(``client.local.LocalCluster``) shares the whole file from one owner (the real CLI), then the
analyst runs ``select --k auto --candidates ...`` (``client.session.Client.select``) and waits
for it. Reported per case: the end-to-end time, every phase of the job on the coordinator
(``k-choice`` is the choice: standardising D'_(k_max), 200 epochs of the candidates' models,
the held-out counts and the oblivious argmax), rounds and bytes sent per server, each
server's peak resident memory (VmHWM, reset before the job), and whether the chosen k and the
fetched D' equal ``mpc-client plaintext --k auto`` on the same file. Medians over
``--repeat`` runs.

    python -m bench.kauto [--shapes lsvt cogload] [--security passive3 active3 active4]
                          [--candidates 5,10,20,50] [--repeat 1]
                          [--out bench/results/network_kauto.md]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.measure import (  # noqa: E402
    ANALYST,
    SETTINGS,
    TIMEOUTS,
    _figures,
    _peak_bytes,
    _reset_peak,
    _share,
    bundled_shape,
    log,
)
from bench.report import code_version, machine  # noqa: E402


async def _select(dep: Any, dataset: str, security: str, candidates: tuple[int, ...], n: int
                  ) -> dict[str, Any]:
    from mpcnet.client.results import reconstruct_encoded
    from mpcnet.client.session import Client

    analyst = Client(dep, ANALYST)
    try:
        t0 = time.perf_counter()
        job = await analyst.select(dataset, "auto", dataset, security=security,
                                   candidates=candidates)
        out: dict[str, Any] = {"e2e_s": time.perf_counter() - t0, "k": job["figures"]["plan"]["k"]}
        out["figures"] = await _figures(analyst, dep, job["id"], n)
        out["reduced"] = reconstruct_encoded(await analyst.fetch(dataset)).encoded.tolist()
    finally:
        analyst.close()
    return out


def run_case(name: str, security: str, candidates: tuple[int, ...], repeat: int,
             workdir: Path) -> dict[str, Any]:
    """All repeats of one (dataset, setting) on a fresh deployment."""
    from mpcnet.client.local import LocalCluster, write_config
    from mpcnet.client.plain import expected_choice
    from mpcnet.dataset import BUNDLED, bundled
    from mpcnet.net.tls import run
    from mpcnet.schemes import registry

    shape, spec = bundled_shape(name), BUNDLED[name]
    want, _ = expected_choice([bundled(name)], candidates, label=spec.label, drop=spec.drop,
                              options=spec.options)
    n = registry.get(security).n_parties
    folder = workdir / f"{name}-{security}"
    runs = []
    with LocalCluster(folder, n, config_path=write_config(folder, n, timeouts=TIMEOUTS)) as c:
        c.start(wait=60)
        pids = {s.name: c.pid(s.name) for s in c.dep.servers[:n]}
        for i in range(repeat):
            dataset = f"{name}-{i}"
            rec: dict[str, Any] = {"loadavg_1min": os.getloadavg()[0]}
            rec.update(_share(c, shape, dataset, security))
            for pid in pids.values():
                _reset_peak(pid)
            rec.update(run(_select(c.dep, dataset, security, candidates, n)))
            rec["peak_bytes"] = {s: _peak_bytes(pid) for s, pid in pids.items()}
            rec["equal"] = rec["k"] == len(want.columns) and \
                rec.pop("reduced") == want.reduced.encoded.tolist()
            log(f"  {name} {security} run {i + 1}/{repeat}: k = {rec['k']} in "
                f"{rec['e2e_s']:.1f} s end to end, plaintext equal: {rec['equal']}")
            runs.append(rec)
    return {"shape": name, "security": security, "candidates": list(candidates), "runs": runs}


def _row(case: dict[str, Any]) -> str:
    runs = case["runs"]

    def med(f: Any) -> float:
        return statistics.median(f(r) for r in runs)

    def lead(r: dict[str, Any]) -> dict[str, Any]:
        return next(iter(r["figures"].values()))

    def phase(r: dict[str, Any], name: str, key: str) -> float:
        return float(lead(r)["phases"].get(name, {}).get(key, 0))

    choice_s = med(lambda r: phase(r, "k-choice", "seconds"))
    select_s = med(lambda r: lead(r)["seconds"] - phase(r, "k-choice", "seconds"))
    rounds = med(lambda r: phase(r, "k-choice", "rounds"))
    sent = med(lambda r: max(f["phases"]["k-choice"]["bytes_sent"]
                             for f in r["figures"].values()))
    peak = med(lambda r: max(b or 0 for b in r["peak_bytes"].values()))
    ks = sorted({r["k"] for r in runs})
    return (f"| {case['shape']} | {case['security']} | {','.join(map(str, ks))} | "
            f"{med(lambda r: r['e2e_s']):.1f} | {select_s:.2f} | {choice_s:.1f} | "
            f"{rounds:,.0f} | {sent / 2**20:,.1f} | {peak / 2**20:,.0f} | "
            f"{'yes' if all(r['equal'] for r in runs) else 'NO'} | "
            f"{med(lambda r: r['loadavg_1min']):.1f} |")


def render(cases: list[dict[str, Any]], candidates: tuple[int, ...]) -> str:
    head = ("| dataset | setting | chosen k | end to end s | selection s (k_max) | k-choice s | "
            "k-choice rounds | k-choice MB sent per server (max) | peak MB per server | "
            "k and D' = plaintext | load avg |\n|---|---|---:|---:|---:|---:|---:|---:|---:|"
            "---|---:|")
    return (f"# `select --k auto --candidates {','.join(map(str, candidates))}` over TLS\n\n"
            f"{code_version()}; {machine()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
            f"; medians of {len(cases[0]['runs']) if cases else 0} run(s)\n\n{head}\n"
            + "\n".join(_row(c) for c in cases) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["lsvt", "cogload"],
                        choices=["lsvt", "cogload", "speeddating"])
    parser.add_argument("--security", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--candidates", default="5,10,20,50")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "bench" / "results" / "network_kauto.md")
    args = parser.parse_args(argv)
    candidates = tuple(int(c) for c in args.candidates.split(","))
    with tempfile.TemporaryDirectory(prefix="mpcnet-kauto-") as tmp:
        cases = [run_case(name, sec, candidates, args.repeat, Path(tmp))
                 for name in args.shapes for sec in args.security]
    args.out.write_text(render(cases, candidates))
    args.out.with_suffix(".json").write_text(json.dumps(cases, indent=1))
    log(f"wrote {args.out}")
    return 0 if all(r["equal"] for c in cases for r in c["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
