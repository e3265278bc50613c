"""``mpc-certs``: create a deployment's CA and certificates.

``mpc-certs init --config deploy/local.toml [--out DIR] [--force]``, and
``mpc-certs show --config deploy/local.toml``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cryptography import x509

from mpcnet import __version__, config
from mpcnet.certs.pki import fingerprint, init_deployment
from mpcnet.errors import MPCError


def parser() -> argparse.ArgumentParser:
    """The command line of ``mpc-certs``."""
    p = argparse.ArgumentParser(prog="mpc-certs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    p_init = sub.add_parser("init", help="make the CA and a key+certificate per server/client")
    p_init.add_argument("--config", required=True, type=Path, help="deployment TOML file")
    p_init.add_argument("--out", type=Path, help="write every file here (default: the paths "
                        "the configuration names)")
    p_init.add_argument("--force", action="store_true",
                        help="replace existing files (default: refuse to)")
    p_show = sub.add_parser("show", help="print the fingerprints of the configured certificates")
    p_show.add_argument("--config", required=True, type=Path, help="deployment TOML file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        dep = config.load(args.config)
        if args.cmd == "init":
            for item in init_deployment(dep, args.out, args.force):
                key = f"  key {item.key} (0600)" if item.key else ""
                print(f"{item.name:<16} {item.fingerprint}\n{'':<16} {item.cert}{key}")
            print("keep ca.key offline; give each server and client only its own .key",
                  file=sys.stderr)
        else:
            for name in ["CA"] + dep.names:
                path = dep.ca if name == "CA" else dep.identity(name)[0]
                try:
                    cert = x509.load_pem_x509_certificate(path.read_bytes())
                    print(f"{name:<16} {fingerprint(cert)}  {path}")
                except (OSError, ValueError) as exc:
                    print(f"{name:<16} missing or unreadable: {path} ({exc})")
    except MPCError as exc:
        print(f"mpc-certs: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
