"""``mpc-certs``: each party's own key, and the pins of a deployment file.

On each party's own machine (only public material leaves it):

    mpc-certs keygen NAME [--dir certs]        # NAME.key (0600) + NAME.pem; prints the pin
    mpc-certs renew NAME [--dir certs]         # a new key for NAME (a key change)

On each copy of the deployment file (every server's operator keeps its own):

    mpc-certs pin --config deploy.toml CERT.pem ...    # pin the key of a certificate received
    mpc-certs unpin --config deploy.toml NAME [PIN]    # remove one pin, or all of NAME's
    mpc-certs check --config deploy.toml [--name NAME] # the folder against the file

For one operator on one machine (a demonstration):

    mpc-certs local --config deploy/local.toml         # EVERY key, in one folder
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mpcnet import __version__, config
from mpcnet.certs import pinfile
from mpcnet.certs.check import check
from mpcnet.certs.pki import LEAF_DAYS, keygen, local_deployment, renew
from mpcnet.errors import MPCError


def parser() -> argparse.ArgumentParser:
    """The command line of ``mpc-certs``."""
    p = argparse.ArgumentParser(prog="mpc-certs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    for cmd, text in (("keygen", "make NAME's own key and self-signed certificate"),
                      ("renew", "replace NAME's own key (the old certificate is kept)")):
        s = sub.add_parser(cmd, help=text)
        s.add_argument("name", help="the name in the deployment file (a server or a client)")
        s.add_argument("--dir", type=Path, default=Path("certs"),
                       help="folder of NAME.key and NAME.pem (default: certs)")
        s.add_argument("--days", type=int, default=LEAF_DAYS,
                       help=f"days the certificate is valid (default: {LEAF_DAYS})")
        if cmd == "keygen":
            s.add_argument("--force", action="store_true",
                           help="replace an existing key (default: refuse to)")
    s = sub.add_parser("pin", help="pin the keys of certificates in a deployment file")
    s.add_argument("--config", required=True, type=Path, help="deployment TOML file")
    s.add_argument("certs", nargs="+", type=Path, help="certificates (NAME.pem) to pin")
    s.add_argument("--replace", action="store_true",
                   help="make it the name's only pin (default: add it, as during a key change)")
    s = sub.add_parser("unpin", help="remove a pin (the end of a key change, or a removal)")
    s.add_argument("--config", required=True, type=Path, help="deployment TOML file")
    s.add_argument("name", help="whose pin")
    s.add_argument("pin", nargs="?", help="the fingerprint to remove (default: every pin)")
    s = sub.add_parser("check", help="check the folder of a deployment file against its pins")
    s.add_argument("--config", required=True, type=Path, help="deployment TOML file")
    s.add_argument("--name", help="the one name whose key this folder may hold (default: "
                   "any)")
    s.add_argument("--days", type=float, default=30.0,
                   help="warn about certificates that expire within this many days (default: "
                   "30)")
    s = sub.add_parser("local", help="one operator's local set-up: every key in one folder")
    s.add_argument("--config", required=True, type=Path, help="deployment TOML file")
    s.add_argument("--force", action="store_true",
                   help="replace the keys already there (default: refuse to)")
    return p


def run(args: argparse.Namespace) -> int:
    if args.cmd in ("keygen", "renew"):
        if args.cmd == "keygen":
            made = keygen(args.name, args.dir, args.days, args.force)
        else:
            made, old = renew(args.name, args.dir, args.days)
            print(f"replaced the key {old}")
        print(f"{made.name:<16} {made.fingerprint}\n{'':<16} {made.cert} (send it)  "
              f"{made.key} (0600, keep it here)")
        return 0
    if args.cmd == "pin":
        for cert in args.certs:
            name, fp = pinfile.pin(args.config, cert, args.replace)
            print(f"{name:<16} {fp} pinned in {args.config}")
        print("compare each fingerprint with its owner's, by another channel than the file's",
              file=sys.stderr)
        return 0
    if args.cmd == "unpin":
        left = pinfile.unpin(args.config, args.name, args.pin)
        print(f"{args.name}: {', '.join(left) if left else 'no pin left: nobody is admitted'}")
        return 0
    dep = config.load(args.config)
    if args.cmd == "local":
        for m in local_deployment(dep, args.force):
            print(f"{m.name:<16} {m.fingerprint}  {m.key}")
        print(f"every private key of this deployment is now in {dep.tls_dir}: one operator "
              "holds them all, which is right for trying it on one machine only; separate "
              "organisations each run `mpc-certs keygen` (docs/operations.md)", file=sys.stderr)
        return 0
    report = check(dep, args.name, args.days)
    print("\n".join(report.lines))
    for text in report.warnings:
        print(f"warning: {text}", file=sys.stderr)
    for text in report.problems:
        print(f"problem: {text}", file=sys.stderr)
    return 2 if report.problems else 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except MPCError as exc:
        print(f"mpc-certs: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
