"""``mpc-demo``: the whole product on one machine, with no configuration.

Makes every key in one work folder (one operator on one machine, as ``mpc-certs local``),
starts three (or four, for active4) ``mpc-party`` processes on free 127.0.0.1 ports, shares a
bundled dataset from two data owners split by rows, runs the selection, fetches and
reconstructs D', checks it against the plaintext selection (``mpcnet.plain``) exactly, stops
the servers and prints a summary. Exit status 0 only if D' equals the plaintext result.

    mpc-demo [--dataset lsvt|cogload|speeddating] [--k K] [--security passive3|active3|active4]
             [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet import __version__
from mpcnet.client.results import Reduced
from mpcnet.errors import MPCError


def _split_rows(table: Any, cut: int) -> tuple[Any, Any]:
    from mpcnet.dataset import Table

    def part(rows: slice) -> Any:
        return Table(columns=table.columns, values=table.values[rows],
                     labels=None if table.labels is None else table.labels[rows],
                     categories=table.categories)
    return part(slice(0, cut)), part(slice(cut, None))


def plaintext_reference(table: Any, exponents: np.ndarray, classes: list[str], k: int,
                        score: str = "ms-gini") -> Reduced:
    """D' computed in the clear from the same encoded values (mpcnet.plain)."""
    from mpcnet.dataset import class_codes
    from mpcnet.fixedpoint import encode
    from mpcnet.plain import reduce, score_fraction, topk_fraction

    x = encode(table.values, exponents, table.columns)
    _, codes = class_codes(table.labels, classes)
    q, d = score_fraction(score, x, codes, len(classes))
    idx = topk_fraction(q, d, k)
    return Reduced(reduce(x, idx), np.asarray(exponents)[idx])


async def _drive(cluster: Any, name: str, table: Any, k: int, security: str, score: str,
                 out: Any                 ) -> dict[str, Any]:
    from mpcnet.client.results import reconstruct_encoded
    from mpcnet.client.session import Client
    from mpcnet.dataset import BUNDLED

    spec = BUNDLED[name]
    m = table.values.shape[0]
    first, second = _split_rows(table, m // 2)
    times: dict[str, float] = {}
    owners = (("hospital-a", first), ("hospital-b", second))
    t0 = time.perf_counter()
    for owner, part in owners:
        cl = Client(cluster.dep, owner)
        try:
            s = await cl.share("", name, label=spec.label, layout="rows", security=security,
                               table=part)
        finally:
            cl.close()
        out(f"  {owner} shared {s.rows} rows x {s.columns} columns")
    times["share"] = time.perf_counter() - t0
    analyst = Client(cluster.dep, "analyst")
    try:
        t0 = time.perf_counter()
        job = await analyst.select(name, k, f"{name}-top{k}", security=security, score=score)
        times["select"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        fetched = await analyst.fetch(f"{name}-top{k}")
        reduced = reconstruct_encoded(fetched)
        times["fetch"] = time.perf_counter() - t0
        per_server = {}
        for srv in cluster.dep.servers[:job["n_parties"]]:
            sess = await analyst.session(srv)
            rec = (await sess.request("job", id=job["id"]))["job"]
            per_server[srv.name] = rec.get("figures") or {}
    finally:
        analyst.close()
    first_owner = Client(cluster.dep, "hospital-a")
    try:
        sess = await first_owner.session(cluster.dep.leader)
        schema = (await sess.request("schema", dataset=name))["manifest"]["schema"]
    finally:
        first_owner.close()
    expected = plaintext_reference(table, np.asarray(schema["exponents"], dtype=np.int64),
                                   schema["classes"], k, score)
    equal = (np.array_equal(reduced.encoded, expected.encoded)
             and np.array_equal(reduced.exponents, expected.exponents))
    return {"job": job, "per_server": per_server, "equal": equal,
            "shape": reduced.encoded.shape,
            "times": times}


def parser() -> argparse.ArgumentParser:
    """The command line of ``mpc-demo``."""
    from mpcnet.dataset import BUNDLED
    from mpcnet.featsel.scores import SCORES

    p = argparse.ArgumentParser(prog="mpc-demo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--dataset", choices=sorted(BUNDLED), default="lsvt",
                   help="the bundled dataset (default: lsvt)")
    p.add_argument("--k", type=int, help="features to keep (default: the paper's k)")
    p.add_argument("--security", default="passive3",
                   help="passive3 | active3 | active4 (default: passive3)")
    p.add_argument("--score", default="ms-gini", choices=sorted(SCORES),
                   help="how features are scored (default: ms-gini)")
    p.add_argument("--workdir", type=Path,
                   help="keep keys, data and logs here (default: a temporary folder, "
                        "deleted at the end)")
    p.add_argument("--keep", action="store_true",
                   help="do not delete the work folder (default: delete it)")
    return p


def main(argv: list[str] | None = None) -> int:
    from mpcnet.client.local import LocalCluster
    from mpcnet.client.main import _fmt_bytes, plan_text
    from mpcnet.dataset import BUNDLED, read_bundled
    from mpcnet.net.tls import run
    from mpcnet.schemes import registry

    args = parser().parse_args(argv)
    k = args.k or BUNDLED[args.dataset].k

    def out(msg: str) -> None:
        print(msg, flush=True)

    try:  # every argument is checked before a server starts
        n = registry.get(args.security).n_parties
        table = read_bundled(args.dataset)
    except MPCError as exc:
        print(f"mpc-demo: {exc}", file=sys.stderr)
        return 2
    p = table.values.shape[1]
    if not 0 < k <= p:
        print(f"mpc-demo: --k must be between 1 and {p} ({args.dataset} has {p} features), "
              f"got {k}", file=sys.stderr)
        return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="mpc-demo-"))
    code = 1
    try:
        with LocalCluster(work, n_servers=n) as cluster:
            names = [s.name for s in cluster.dep.servers]
            out(f"mpc-demo: every key in {cluster.dep.tls_dir} (one operator on one machine; "
                f"separate organisations each make their own); starting {', '.join(names)} "
                f"on 127.0.0.1:{','.join(str(s.port) for s in cluster.dep.servers)}")
            t0 = time.perf_counter()
            cluster.start()
            out(f"  servers up in {time.perf_counter() - t0:.1f} s")
            try:
                r = run(_drive(cluster, args.dataset, table, k, args.security, args.score, out))
            except MPCError as exc:
                print(f"mpc-demo: {exc}", file=sys.stderr)
                for name in names:
                    tail = cluster.log(name).strip().splitlines()[-3:]
                    print(f"  {name} log: " + " | ".join(tail), file=sys.stderr)
                return 3
        job, figs = r["job"], r["per_server"]
        lead = figs.get(names[0], {})
        out(f"\n{args.dataset}: {r['shape'][0]} rows, {r['shape'][1]} features selected "
            f"(k = {k}, {args.score}) under {args.security}")
        out(f"D' equals the plaintext selection: {'yes' if r['equal'] else 'NO'}")
        out(f"share {r['times']['share']:.2f} s, select {r['times']['select']:.2f} s (protocol "
            f"{lead.get('seconds', 0):.2f} s, {lead.get('rounds', 0)} rounds), fetch "
            f"{r['times']['fetch']:.2f} s")
        out("time per phase (alice): " + ", ".join(
            f"{ph} {v['seconds']:.3f} s/{v['rounds']} rounds"
            for ph, v in lead.get("phases", {}).items()))
        if lead.get("plan"):
            out(plan_text(lead["plan"]))
        out("bytes sent per party: " + ", ".join(
            f"{name} {_fmt_bytes(f.get('bytes_sent', 0))}" for name, f in figs.items()))
        code = 0 if r["equal"] else 1
        del job
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep:
            out(f"work folder kept: {work}")
    return code


if __name__ == "__main__":
    sys.exit(main())
