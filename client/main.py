"""``mpc-client``: the data owners' and analysts' command line.

    mpc-client --config deploy/local.toml --as hospital-a share a.csv --dataset d --label y
    mpc-client --config deploy/local.toml --as analyst select --dataset d --k 10 --result r
    mpc-client --config deploy/local.toml --as analyst fetch --result r --out reduced.csv
    mpc-client --config deploy/local.toml --as analyst train --result r --model m --owner clinic
    mpc-client --config deploy/local.toml --as clinic model --model m --out model.json
    mpc-client --config deploy/local.toml --as analyst datasets     # also: status, results, jobs
    mpc-client plaintext a.csv b.csv --label y --k 10 --out expected.csv   # local, no servers

Exit status 0 on success; otherwise non-zero with a one-line reason on stderr (2: refused or
bad input, 3: a server unreachable or failed, 4: cheating detected).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from mpcnet import __version__, config
from mpcnet.client import offline
from mpcnet.client.offline import print_result, release
from mpcnet.errors import (
    AccessDenied,
    CheatingDetected,
    InputError,
    MPCError,
    NotPinned,
    PeerError,
)
from mpcnet.featsel.scores import DEFAULT_SCORE, SCORES
from mpcnet.net.tls import run


def parser() -> argparse.ArgumentParser:
    """The command line of ``mpc-client``."""
    p = argparse.ArgumentParser(prog="mpc-client", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--config", type=Path, help="deployment TOML file (needed by every command "
                   "that talks to the servers; default: none)")
    p.add_argument("--as", dest="identity",
                   help="who you are: a client (or server, for status) name in the file "
                        "(needed with --config; default: none)")
    p.add_argument("--json", action="store_true",
                   help="print machine-readable JSON (default: text)")
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("share", help="secret-share a CSV file as a contribution to a dataset")
    s.add_argument("file", type=Path, help="the CSV file (plain or gzip, UTF-8, header row) "
                   "or Parquet file (with pip install 'mpcnet[parquet]')")
    s.add_argument("--dataset", required=True, help="the dataset it contributes to (created "
                   "by its first contribution)")
    _encoding_options(s)
    s.add_argument("--schema", type=Path, metavar="TOML",
                   help="declare the dataset's schema with its first contribution (see "
                        "draft-schema; default: the first file fixes it)")
    _release_option(s, "what an analyst may receive of results on the dataset: shares only "
                       "(to pass on), the values of D', the label column, the selected "
                       "columns' names; the dataset releases what all its owners allow")
    s.add_argument("--security", help="the setting you share for: passive3, active3 (then no "
                   "job on the dataset runs under passive3) or active4 (default: passive3 "
                   "with 3 servers, active4 with 4)")
    _id_option(s)
    s.add_argument("--id-key", type=Path, metavar="FILE",
                   help="with --id: the owners' record-ID key (made once by id-key, copied to "
                        "every owner, never to a server; default: none)")

    s = sub.add_parser("id-key", help="make the key with which owners hash record IDs (local)")
    s.add_argument("--out", type=Path, required=True,
                   help="the new key file (readable by you only); give every owner a copy")

    s = sub.add_parser("withdraw", help="withdraw your contribution to a dataset from every "
                       "server (the dataset goes when no contribution is left)")
    s.add_argument("--dataset", required=True, help="the dataset you contributed to")

    s = sub.add_parser("schema", help="print a dataset's schema as a TOML file (owners)")
    s.add_argument("--dataset", required=True, help="the dataset")
    s.add_argument("--out", type=Path, help="write it here (default: print it)")

    s = sub.add_parser("draft-schema", help="write a draft schema from a sample CSV (local)")
    s.add_argument("file", type=Path, help="a sample CSV file")
    _encoding_options(s)
    s.add_argument("--out", type=Path, help="write it here (default: print it)")

    s = sub.add_parser("plaintext", help="the selection the servers should produce, computed "
                       "here in the clear from the same files and options (local)")
    s.add_argument("files", type=Path, nargs="+", help="the owners' CSV files, in the order "
                   "they were shared")
    _k_options(s)
    _score_option(s)
    _encoding_options(s)
    s.add_argument("--schema", type=Path, metavar="TOML",
                   help="the dataset's declared schema (default: none)")
    _id_option(s)
    s.add_argument("--out", type=Path, help="write D' here, as fetch --out does (default: "
                   "print the selected columns only)")
    _release_option(s, "what to write, as fetch --out would under this release")
    s.add_argument("--force", action="store_true",
                   help="replace an existing --out file (default: refuse)")

    s = sub.add_parser("select", help="select the k best features of a dataset")
    s.add_argument("--dataset", required=True, help="the dataset to select from")
    _k_options(s)
    _score_option(s)
    s.add_argument("--security", help="passive3 | active3 | active4 (default: the setting "
                   "the dataset's owners shared for if active, else passive3 with 3 servers, "
                   "active4 with 4)")
    s.add_argument("--result", required=True, help="name under which D' is stored")
    s.add_argument("--share-with", nargs="*", default=[], metavar="ANALYST",
                   help="other analysts who may see the job and fetch its result (default: "
                        "only you); part of the request you sign")
    s.add_argument("--valid-for", type=float, default=3600.0, metavar="SECONDS",
                   help="the job must start within this time, or no server starts it "
                        "(default: 3600)")

    s = sub.add_parser("train", help="train a logistic regression on a selection's result, "
                       "privately, and reveal the model to its owner only")
    s.add_argument("--result", required=True, help="your selection result to train on")
    s.add_argument("--model", required=True, help="name under which the model is stored")
    s.add_argument("--owner", required=True, metavar="NAME",
                   help="the model owner (a model-owner of the deployment, or you) who alone "
                        "may read the model")
    s.add_argument("--epochs", type=int, default=200,
                   help="gradient-descent epochs (default: 200)")
    s.add_argument("--learning-rate", type=float, default=1.0,
                   help="step size, over the mean gradient (default: 1.0)")
    s.add_argument("--l2", type=float, default=1.0,
                   help="L2 penalty: the loss is the sum of log losses + l2/2 |w|^2, "
                        "scikit-learn's C = 1/l2 (default: 1.0)")
    s.add_argument("--valid-for", type=float, default=3600.0, metavar="SECONDS",
                   help="the job must start within this time (default: 3600)")

    s = sub.add_parser("model", help="receive a model trained for you (model owners)")
    s.add_argument("--model", required=True, help="the model's name")
    s.add_argument("--out", required=True, type=Path, help="write the model here as JSON")
    s.add_argument("--from", dest="analyst", metavar="ANALYST",
                   help="refuse it unless this analyst trained it (default: say who did)")
    s.add_argument("--force", action="store_true",
                   help="replace an existing --out file (default: refuse)")

    s = sub.add_parser("status", help="is every server reachable and its mesh connected?")
    s.add_argument("--server", nargs="*", help="only these servers (default: all)")
    s.add_argument("--no-mesh", action="store_true",
                   help="skip the server-to-server probe (default: probe it)")
    s.add_argument("--expiry-days", type=float, default=30.0, metavar="DAYS",
                   help="warn about certificates (yours, the servers') that expire within "
                   "DAYS (default: 30)")
    sub.add_parser("datasets", help="datasets stored on the servers")
    sub.add_parser("results", help="results stored on the servers")
    sub.add_parser("jobs", help="jobs with their state and figures")

    s = sub.add_parser("fetch", help="retrieve the shares of a result")
    s.add_argument("--result", required=True, help="the result's name")
    s.add_argument("--from", dest="owner", metavar="ANALYST",
                   help="the analyst whose result it is, if it shared it with you (default: "
                        "you)")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--out", type=Path, help="reconstruct D' into this CSV file")
    g.add_argument("--shares-dir", type=Path, help="store each server's shares here (files "
                   "readable by you only)")
    s.add_argument("--force", action="store_true",
                   help="replace an existing --out file or shares (default: refuse)")
    for command in sub.choices.values():  # --json after the command too
        command.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                             help="print machine-readable JSON (default: text)")
    return p


def _score_option(s: argparse.ArgumentParser) -> None:
    s.add_argument("--score", default=DEFAULT_SCORE, choices=tuple(SCORES),
                   help="how features are scored: ms-gini (the paper's mean-split Gini), chi2 "
                        "or mi (chi-square or mutual information of the same mean split), pcc "
                        "(squared correlation; correlation ratio for 3+ classes), gini (the "
                        "best-split Gini impurity, each column sorted: slower); default: "
                        "ms-gini")


def _id_option(s: argparse.ArgumentParser) -> None:
    s.add_argument("--id", dest="id_column", metavar="COL",
                   help="with --columns: the record-ID column; owners may then hold different "
                        "records in any order, and the servers join them privately (default: "
                        "none, every owner holds the same records in the same order)")


def _release_option(s: argparse.ArgumentParser, what: str) -> None:
    s.add_argument("--release", nargs="+", choices=("shares", "values", "label", "names"),
                   default=["values"], metavar="WHAT",
                   help=f"{what}: shares, or values [label] [names] (default: values)")


def _encoding_options(s: argparse.ArgumentParser) -> None:
    """How a CSV file is read: the options of share, draft-schema and plaintext."""
    s.add_argument("--label", help="the label column (required by rows; one owner by columns; "
                   "default: none)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--rows", dest="layout", action="store_const", const="rows",
                   help="contribute records (horizontal split; default)")
    g.add_argument("--columns", dest="layout", action="store_const", const="columns",
                   help="contribute attributes of the same records (vertical split; "
                        "default: --rows)")
    s.add_argument("--categorical", choices=("refuse", "ordinal"), default="refuse",
                   help="text cells: refuse them, or code each mostly-text column's "
                        "categories as 0..c-1 in sorted order (default: refuse)")
    s.add_argument("--ordinal", nargs="*", default=[], metavar="COL",
                   help="columns coded as categories whatever their cells look like "
                        "(default: none)")
    s.add_argument("--missing", choices=("refuse", "zero", "mean"), default="refuse",
                   help="empty, NA, NaN or ? cells: refuse them, or fill them: a numeric "
                        "column's with 0 or the column's mean in this file, a categorical "
                        "column's as --missing-categorical says (default: refuse)")
    s.add_argument("--missing-categorical", choices=("category", "mode"), default="category",
                   help="a categorical column's gaps, unless refused: a category of their own, "
                        "'(missing)', or the column's most frequent category in this file "
                        "(default: category)")
    s.add_argument("--delimiter", default=",", type=_char, metavar="CHAR",
                   help="the CSV delimiter: one character, tab as \\t or tab (default: ,)")
    s.add_argument("--quote", default='"', type=_char, metavar="CHAR",
                   help='the CSV quote character (default: ")')
    s.add_argument("--drop", nargs="*", default=[], metavar="COL",
                   help="columns to leave out (default: none)")



def _char(text: str) -> str:
    """A delimiter or quote character as typed (tab as \\t or tab)."""
    return "\t" if text in ("\\t", "tab", "TAB") else text


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _k_options(s: argparse.ArgumentParser) -> None:
    s.add_argument("--k", required=True, type=_k_value,
                   help="how many features to keep, or auto: the servers choose among "
                        "--candidates privately (logistic regressions on a public split of "
                        "the rows; only the chosen k is revealed)")
    s.add_argument("--candidates", type=_candidates, default=(), metavar="K1,K2,...",
                   help="with --k auto: the values of k to choose from, increasing (default: "
                        "none)")


def _k_value(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"k is a number or auto, not {text!r}") from None


def _candidates(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"candidates are numbers separated by commas, not "
                                         f"{text!r}") from None


def figures_text(fig: dict[str, Any] | None) -> str:
    if not fig:
        return "  (no figures)"
    lines = [f"  {'phase':<14}{'seconds':>9}{'rounds':>8}{'sent':>11}"]
    for name, ph in fig.get("phases", {}).items():
        lines.append(f"  {name:<14}{ph['seconds']:>9.3f}{ph['rounds']:>8}"
                     f"{_fmt_bytes(ph['bytes_sent']):>11}")
    lines.append(f"  {'total':<14}{fig.get('seconds', 0):>9.3f}{fig.get('rounds', 0):>8}"
                 f"{_fmt_bytes(fig.get('bytes_sent', 0)):>11}  (this server)")
    if fig.get("plan"):
        plan = fig["plan"]
        lines.append("  " + (plan["model"] if "model" in plan else plan_text(plan)))
        if "k_choice" in plan:
            lines.append("  " + plan["k_choice"])
    return "\n".join(lines)


def plan_text(plan: dict[str, Any]) -> str:
    """The top-k planner's choice as one line (public: it depends on m, p and k only)."""
    text = (f"top-k by {plan['method']}: {plan['comparisons']:,} comparisons in "
            f"{plan['stages']} stage(s), {plan['levels']} level(s) per comparison; scored in "
            f"{plan['blocks']} block(s) of {plan['block_columns']} column(s)")
    if plan.get("tiles", 1) > 1:
        text += f", each in {plan['tiles']} tiles of {plan['tile_rows']:,} rows"
    return text + (f" (other: {plan['alternative']})" if plan.get("alternative") else "")


class _Progress:
    """One status line on a terminal, a line per phase change otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = ""

    def __call__(self, job: dict[str, Any]) -> None:
        p = job.get("progress") or {}
        if job["state"] == "running" and p:
            line = (f"job {job['id']}: {p.get('phase', '')}, {p.get('rounds', 0)} rounds, "
                    f"{p.get('elapsed', 0):.1f} s")
            key = p.get("phase", "")
        else:
            line, key = f"job {job['id']}: {job['state']}", job["state"]
        if self.tty:
            print("\r" + line.ljust(70), end="", file=sys.stderr, flush=True)
            if job["state"] in ("done", "failed"):
                print(file=sys.stderr)
        elif key != self.last:
            print(line, file=sys.stderr, flush=True)
        self.last = key


async def _run(args: argparse.Namespace) -> int:
    from mpcnet.client.jobs import chosen_k
    from mpcnet.client.results import (
        check_writable,
        reconstruct_encoded,
        reconstruct_model,
        write_csv,
        write_model,
        write_shares,
    )
    from mpcnet.client.session import Client

    if args.config is None or args.identity is None:
        raise InputError(f"`mpc-client {args.cmd}` talks to the servers: give --config FILE "
                         "and --as NAME before it")
    dep = config.load(args.config)
    cl = Client(dep, args.identity)
    try:
        if args.cmd == "status":
            rows = await cl.status(args.server, mesh=not args.no_mesh)
            lines = [f"{'(you)':<8} {args.identity:<22} mpc-client v{__version__}"]
            for r in rows:
                if r["reachable"]:
                    mesh = ", ".join(f"{k} {'ok' if v == 'ok' else 'DOWN'}"
                                     for k, v in r["mesh"].items()) or "not probed"
                    lines.append(f"{r['server']:<8} {r['address']:<22} up  v{r['version']}  "
                                 f"mesh: {mesh}  jobs running: {len(r['running'])}, queued: "
                                 f"{r['queued']}")
                    for k, v in r["mesh"].items():
                        if v != "ok":
                            lines.append(f"         {k}: {v}")
                else:
                    lines.append(f"{r['server']:<8} {r['address']:<22} DOWN  {r['error']}")
            print_result(args, rows, "\n".join(lines))
            for warning in expiry_warnings(dep, args.identity, rows, args.expiry_days):
                print(f"mpc-client: warning: {warning}", file=sys.stderr)
            down = [r["server"] for r in rows if not r["reachable"]]
            cut = [r["server"] for r in rows if r["reachable"] and not args.no_mesh
                   and not r["mesh_ok"]]
            if down or cut:
                why = ([f"unreachable: {', '.join(down)}"] if down else []) + \
                      ([f"mesh incomplete at: {', '.join(cut)}"] if cut else [])
                print(f"mpc-client: not healthy ({'; '.join(why)})", file=sys.stderr)
                return 3
            return 0
        if args.cmd == "share":
            s = await cl.share(args.file, args.dataset, label=args.label,
                               layout=args.layout or "rows", categorical=args.categorical,
                               missing=args.missing, drop=tuple(args.drop),
                               ordinal=tuple(args.ordinal), security=args.security,
                               schema=args.schema, release=release(args),
                               id_column=args.id_column, id_key=args.id_key,
                               missing_categorical=args.missing_categorical,
                               delimiter=args.delimiter, quotechar=args.quote)
            added = ([f"new classes {s.new_classes}"] if s.new_classes else []) + [
                f"new categories of {c!r}: {cats}" for c, cats in s.new_categories.items()]
            print_result(args, s.__dict__,
                   f"shared {s.rows} rows x {s.columns} columns"
                   f"{' with label ' + repr(s.label) if s.label else ''} to dataset "
                   f"{s.dataset!r} ({s.total_rows} rows now); {_fmt_bytes(s.bytes_per_server)} "
                   f"to each server in {s.seconds:.2f} s"
                   + (f"; {s.schema}" if s.schema else "")
                   + "".join(f"\n  {line}" for line in added))
            return 0
        if args.cmd == "withdraw":
            w = await cl.withdraw(args.dataset)
            print_result(args, w, f"withdrew your contribution to {w['dataset']!r} from "
                         f"{', '.join(w['servers']) or 'no server'}"
                         + ("; no contribution is left, the dataset is gone"
                            if w["dataset_removed"] else "; the other owners' contributions "
                            "stay"))
            if w["still_held"]:
                for server, why in w["still_held"].items():
                    print(f"mpc-client: {server} may still hold it: {why}", file=sys.stderr)
                print(f"mpc-client: not withdrawn from {', '.join(w['still_held'])}; run "
                      "withdraw again to finish there", file=sys.stderr)
                return 3
            return 0
        if args.cmd == "select":
            job = await cl.select(args.dataset, args.k, args.result, security=args.security,
                                  score=args.score, share_with=tuple(args.share_with),
                                  candidates=args.candidates, valid_for=args.valid_for,
                                  progress=None if args.json else _Progress())
            k = chosen_k(job) if args.candidates else args.k
            print_result(args, job, f"job {job['id']} done: result {job['result']!r} stored "
                   f"({k} features of {job['dataset']!r} by {job['score']}, "
                   f"{job['security']})\n"
                   + figures_text(job.get("figures")))
            return 0
        if args.cmd == "train":
            job = await cl.train(args.result, args.model, args.owner, epochs=args.epochs,
                                 learning_rate=args.learning_rate, l2=args.l2,
                                 valid_for=args.valid_for,
                                 progress=None if args.json else _Progress())
            print_result(args, job, f"job {job['id']} done: model {job['result']!r} stored "
                   f"for {args.owner} (trained on {args.result!r}, {job['security']})\n"
                   + figures_text(job.get("figures")))
            return 0
        if args.cmd == "model":
            check_writable(args.out, args.force)
            fetched = await cl.fetch(args.model, what="model")
            model = reconstruct_model(fetched, args.analyst)
            write_model(args.out, model, overwrite=args.force)
            by = fetched.manifest.get("analyst")
            print_result(args, dict(model.as_json(), out=str(args.out), analyst=by),
                   f"wrote model {args.model!r} ({len(model.classes)} classes, "
                   f"{len(model.columns)} columns; trained by {by} on its result "
                   f"{fetched.manifest.get('source')!r}) to {args.out}; servers' shares "
                   "consistent")
            return 0
        if args.cmd == "schema":
            text = await cl.schema_toml(args.dataset)
            offline.write_or_print(args.out, text)
            return 0
        if args.cmd in ("datasets", "results", "jobs"):
            by_server, missing = await cl.listing(args.cmd)
            print_result(args, by_server if not missing else dict(by_server, unreachable=missing),
                   _listing_text(args.cmd, by_server, dep, missing))
            if missing:
                print(f"mpc-client: not every server answered ({', '.join(missing)} "
                      "unreachable)", file=sys.stderr)
                return 3
            return 0
        if args.cmd == "fetch":
            check_writable(args.out or args.shares_dir, args.force)  # before fetching
            fetched = await cl.fetch(args.result, args.owner)
            m = fetched.manifest
            if args.shares_dir:
                write_shares(args.shares_dir, fetched,
                             [s.name for s in dep.servers], overwrite=args.force)
                print_result(args, m, f"shares of {args.result!r} ({m['rows']} x {m['k']}, "
                       f"{m['security']}) from {len(fetched.shares)} servers in "
                       f"{args.shares_dir}")
            else:
                reduced = reconstruct_encoded(fetched)
                write_csv(args.out, reduced, overwrite=args.force)
                rows, k = reduced.encoded.shape
                extra = [f"the label {reduced.label!r}" if reduced.classes is not None else "",
                         "the selected columns' names" if reduced.names else ""]
                extra = [e for e in extra if e]
                print_result(args, dict(m, out=str(args.out)),
                       f"wrote {rows} x {k} reduced dataset to {args.out}"
                       f"{' with ' + ' and '.join(extra) if extra else ' (header f1..fk)'}; "
                       "servers' shares consistent")
            return 0
    finally:
        cl.close()
    return 1


def expiry_warnings(dep: config.Deployment, identity: str, rows: list[dict[str, Any]],
                    days: float) -> list[str]:
    """The certificates, this identity's own and those the servers presented, that expire
    within ``days`` (their holders make a new key: ``mpc-certs renew``)."""
    from cryptography import x509

    from mpcnet.pins import days_left

    cert_path = dep.identity(identity)[0]
    left = {f"your certificate {cert_path}": days_left(x509.load_pem_x509_certificate(
        cert_path.read_bytes()))} | {f"the certificate of {r['server']}": r["certificate_days"]
                                     for r in rows if r["reachable"]}
    return [f"{what} expires in {d:.0f} days; its holder makes a new key (mpc-certs renew) "
            "for the others to pin" if d >= 0 else f"{what} has expired"
            for what, d in left.items() if d < days]


def _stored_on(by_server: dict[str, list[dict[str, Any]]], item: dict[str, Any],
               key: str) -> int:
    """On how many servers the listing holds ``item``: its name with the same ``key``."""
    return sum(any(x["name"] == item["name"] and x[key] == item[key] for x in v)
               for v in by_server.values())


def _listing_text(cmd: str, by_server: dict[str, list[dict[str, Any]]], dep: Any,
                  missing: dict[str, str]) -> str:
    """The listing as the first server that answered gives it, with on how many servers each
    item is stored and a line per server that did not answer."""
    items = next(iter(by_server.values()), [])
    lines = []
    if cmd == "datasets":
        lines = [f"{d['name']:<20} {d['rows']:>7} rows x {d['columns']:>4} columns  "
                 f"by {d['layout']:<7} {d.get('requires') or d['sharing']:<9} "
                 f"label={d['label']} "
                 f"owners={','.join(d['owners'])}  "
                 f"on {_stored_on(by_server, d, 'digest')}/{len(dep.servers)} servers"
                 for d in items]
    elif cmd == "results":
        lines = [(f"{r['name']:<20} model trained on {r['dataset']!r} ({r['security']}, job "
                  f"{r['job']}, by {r.get('analyst') or 'an analyst'} for {r['owner']})"
                  if r.get("kind") == "model" else
                  f"{r['name']:<20} {r['rows']:>7} x {r['k']:<4} from {r['dataset']!r} "
                  f"({r['score']}, {r['security']}, job {r['job']}, by {r['owner']}"
                  f"{' for ' + ','.join(r['share_with']) if r['share_with'] else ''})")
                 + f"  on {_stored_on(by_server, r, 'job')}/{len(r['parties'])} servers"
                 for r in items]
    else:
        for j in items:
            when = time.strftime("%H:%M:%S", time.localtime(j["created"]))
            fig = j.get("figures") or {}
            extra = (f"{fig.get('seconds', 0):.2f} s, {fig.get('rounds', 0)} rounds"
                     if j["state"] == "done" else (j.get("error") or ""))
            prog = j.get("progress")
            if prog:
                extra = f"{prog.get('phase')}, {prog.get('rounds')} rounds, " \
                        f"{prog.get('elapsed')} s"
            what = (f"train {j['dataset']}/{j['security']} -> model {j['result']} for "
                    f"{j.get('model_owner')}" if j.get("kind") == "train" else
                    f"{j['dataset']}/k={j['k']}/{j['security']} -> {j['result']}")
            lines.append(f"{j['id']} {when} {j['state']:<8} {what}  {extra}")
    lines += [f"{name}: DOWN ({why})" for name, why in missing.items()]
    return "\n".join(lines) or f"(no {cmd})"


# (error class, exit status, what precedes the message), the first that matches applies
_FAILURES: tuple[tuple[type[MPCError], int, str], ...] = (
    (AccessDenied, 2, "access denied: "), (NotPinned, 2, "not pinned: "),
    (CheatingDetected, 4, ""), (PeerError, 3, ""),
    (MPCError, 2, ""))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.cmd in ("draft-schema", "plaintext", "id-key"):
            return offline.run(args)
        return run(_run(args))
    except MPCError as exc:
        status, prefix = next((code, pre) for cls, code, pre in _FAILURES
                              if isinstance(exc, cls))
        print(f"mpc-client: {prefix}{exc}", file=sys.stderr)
        return status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `mpc-client jobs | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as if ended by SIGPIPE, what a shell expects of a pipeline's writer


if __name__ == "__main__":
    sys.exit(main())
