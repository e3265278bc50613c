"""Benchmark: the unit costs behind the top-k planner, and whether it picks the faster method.

1. Unit costs per setting (``mpcnet.ops.planner.COSTS``), all parties in this process over
   loopback channels: seconds per sign test (``compare.msb`` on 200,000 values), per ring
   product (``mul`` on 10^6 values), both divided by the number of parties (one core runs
   them one after the other), and per round (200 rounds of a one-element product; this
   in-process figure leaves out the network's round trip, so it is a lower bound).
2. Selection phase of pi_GINI-FS by the ranking and by the network, forced, on synthetic
   data with m = 200 (scoring is cheap; the selection phase is what the planner chooses), for
   several p and k: the planner's estimates beside the measured times, its choice, and the
   faster method measured.

Writes ``bench/results/planner.md``.

    python -m bench.planner [--security passive3 active4 active3] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from mpcnet.encoded import EncodedDataset  # noqa: E402
from mpcnet.featsel.local import select_in_process  # noqa: E402
from mpcnet.net.local import run_local_sync  # noqa: E402
from mpcnet.ops.compare import msb  # noqa: E402
from mpcnet.ops.planner import COSTS  # noqa: E402
from mpcnet.schemes import registry  # noqa: E402

POINTS = [(50, 10), (200, 10), (400, 10), (800, 10), (400, 100), (1500, 50)]
QUICK_POINTS = [(50, 10), (400, 10)]


def unit_costs(security: str) -> dict[str, float]:
    """Seconds per sign test, per product and per round for one server (module docstring)."""
    info = registry.get(security)
    tests, products, rounds = 200_000, 1_000_000, 200

    async def party(engine: Any) -> dict[str, float]:
        s = await info.scheme.setup(engine)
        x = await s.random((tests,))
        y = await s.random((products,))
        t0 = time.perf_counter()
        await msb(s, x)
        t1 = time.perf_counter()
        await s.mul(y, y)
        t2 = time.perf_counter()
        one = await s.random((1,))
        for _ in range(rounds):
            one = await s.mul(one, one)
        t3 = time.perf_counter()
        n = info.n_parties
        return {"test_s": (t1 - t0) / tests / n, "product_s": (t2 - t1) / products / n,
                "round_s": (t3 - t2) / rounds}

    return run_local_sync(info.n_parties, party)[0]


def selection_seconds(security: str, p: int, k: int, method: str) -> tuple[float, dict]:
    rng = np.random.default_rng(p + k)
    m = 200
    codes = rng.integers(0, 2, m)
    values = rng.integers(-50, 50, (m, p)) + codes[:, None] * rng.integers(0, 3, p)
    ds = EncodedDataset([f"c{j}" for j in range(p)], values, np.zeros(p, dtype=np.int64),
                        ["0", "1"], codes)
    run = select_in_process(security, ds.values, ds.label_matrix, 2, k, ds.exponents,
                            round_timeout=None, method=method)
    return run.report["phases"]["selection"]["seconds"], run.plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--security", nargs="+", default=["passive3", "active4", "active3"])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    lines = ["# Top-k planner: unit costs and choices", "",
             "`python -m bench.planner` (all parties in one process, loopback channels).", "",
             "| setting | s per sign test | s per product | s per round (in-process) | "
             "planner's constants |", "|---|---|---|---|---|"]
    for security in args.security:
        c, model = unit_costs(security), COSTS[security]
        lines.append(f"| {security} | {c['test_s']:.2e} | {c['product_s']:.2e} | "
                     f"{c['round_s']:.2e} | {model.test_s:.1e} / {model.product_s:.1e} / "
                     f"{model.round_s:.1e} |")
        print(lines[-1], flush=True)
    lines += ["", "Selection phase (s), m = 200: estimate / measured.", "",
              "| setting | p | k | ranking | network | planner picks | faster measured |",
              "|---|---|---|---|---|---|---|"]
    for security in args.security:
        for p, k in QUICK_POINTS if args.quick else POINTS:
            measured, estimates = {}, {}
            for method in ("ranking", "network"):
                measured[method], plan = selection_seconds(security, p, k, method)
                estimates[method] = plan["seconds_estimate"]
            chosen = min(estimates, key=estimates.__getitem__)
            faster = min(measured, key=measured.__getitem__)
            lines.append(f"| {security} | {p} | {k} | {estimates['ranking']:.2f} / "
                         f"{measured['ranking']:.2f} | {estimates['network']:.2f} / "
                         f"{measured['network']:.2f} | {chosen} | {faster} |")
            print(lines[-1], flush=True)
    out = ROOT / "bench" / "results" / "planner.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
