"""In-process benchmark of pi_GINI-FS: all parties in one Python process over loopback channels.

Measures wall time (median of --repeat runs), rounds and bytes sent per party, per phase, for
the bundled datasets at the paper's shapes and k. All parties share one interpreter and one
core here, so wall time is the sum of every party's computation; the networked benchmark
(bench/network.py) runs each party in its own process over TLS.

    python -m bench.inprocess [--datasets lsvt cogload speeddating] [--security passive3]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from mpcnet.dataset import BUNDLED, read_bundled
from mpcnet.encoded import EncodedDataset, encode_table
from mpcnet.featsel.local import select_in_process
from mpcnet.plain.scores import msgini_fraction
from mpcnet.plain.select import topk_fraction
from mpcnet.schemes import registry


def run_once(security: str, ds: EncodedDataset, k: int) -> tuple[float, dict, bool]:
    """One private selection; returns (seconds, party 0's report, equals plaintext)."""
    run = select_in_process(security, ds.values, ds.label_matrix, ds.n_classes, k,
                            ds.exponents)
    q, d = msgini_fraction(ds.values, ds.codes, ds.n_classes)
    equal = np.array_equal(run.reduced, ds.values[:, topk_fraction(q, d, k)])
    return run.seconds, run.report, equal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(BUNDLED), choices=list(BUNDLED))
    parser.add_argument("--security", default="passive3", choices=sorted(registry.SCHEMES))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'dataset':12} {'m x p':>11} {'k':>4} {'median s':>9} {'rounds':>7} "
          f"{'MB/party':>9}  equal  phases (s)")
    for name in args.datasets:
        ds = encode_table(read_bundled(name))
        k = BUNDLED[name].k
        runs = [run_once(args.security, ds, k) for _ in range(args.repeat)]
        seconds = statistics.median(r[0] for r in runs)
        report = runs[0][1]
        phases = " ".join(f"{p}={v['seconds']:.2f}" for p, v in report["phases"].items()
                          if p != "setup")
        m, p = ds.values.shape
        print(f"{name:12} {f'{m}x{p}':>11} {k:>4} {seconds:9.3f} {report['rounds']:7d} "
              f"{report['bytes_sent'] / 1e6:9.2f}  {all(r[2] for r in runs)!s:5}  {phases}")


if __name__ == "__main__":
    main()
