"""``mpc-party``: run one MPC server of a deployment.

    mpc-party --config deploy/local.toml --name alice

The server listens on its configured port for its peers and for clients, keeps its shares in
its data_dir (folders mode 0700, files 0600), and runs jobs until it receives SIGINT or
SIGTERM. Exit status 2 on a configuration, certificate or storage problem (the one-line reason
is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from mpcnet import __version__, config
from mpcnet.errors import MPCError
from mpcnet.net.tls import run
from mpcnet.parties.heap import keep_freed_memory
from mpcnet.parties.logs import FORMATS, event, setup_logging
from mpcnet.parties.metrics import MetricsEndpoint, render
from mpcnet.parties.server import PartyServer


@dataclass(frozen=True)
class Metrics:
    """Where the metrics view is served (``--metrics-port``, ``--metrics-bind``)."""

    port: int
    bind: str = "127.0.0.1"


async def serve(dep: config.Deployment, name: str, ready_file: Path | None = None,
                server_class: type[PartyServer] = PartyServer,
                metrics: Metrics | None = None) -> None:
    server = server_class(dep, name)
    await server.start()
    endpoint = None
    if metrics is not None:
        endpoint = MetricsEndpoint(functools.partial(render, server), metrics.bind,
                                   metrics.port)
        try:
            await endpoint.start()
        except BaseException:
            await server.stop()
            raise
    if ready_file is not None:  # lets scripts and benchmarks wait for the listener
        ready_file.write_text(str(dep.server(name).port))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.stopped.set)
    await server.stopped.wait()
    logging.getLogger("mpcnet.party").info("stopping", extra=event("server.stopping"))
    if endpoint is not None:
        await endpoint.stop()
    await server.stop()


def parser() -> argparse.ArgumentParser:
    """The command line of ``mpc-party``."""
    p = argparse.ArgumentParser(prog="mpc-party", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--config", required=True, type=Path, help="deployment TOML file")
    p.add_argument("--name", required=True, help="this server's name in the file")
    p.add_argument("--ready-file", type=Path,
                   help="write the port here once listening (default: none)")
    p.add_argument("--log-level", help="override the deployment's log_level (default: the "
                   "file's, itself INFO by default)")
    p.add_argument("--log-format", choices=FORMATS, default="text",
                   help="text lines, or JSON lines with job and peer events (default: text)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve metrics in Prometheus' text format at "
                        "http://BIND:PORT/metrics (default: no metrics)")
    p.add_argument("--metrics-bind", default="127.0.0.1", metavar="HOST",
                   help="the address the metrics port listens on (default: 127.0.0.1, this "
                        "host only)")
    return p


def main(argv: list[str] | None = None, server_class: type[PartyServer] = PartyServer) -> int:
    """``mpc-party``; ``server_class`` is what runs (tests pass a cheating one)."""
    args = parser().parse_args(argv)
    try:
        dep = config.load(args.config)
        dep.server(args.name)
        setup_logging(args.name, args.log_level or dep.log_level, args.log_format)
        os.umask(0o077)  # whatever this process creates is for its own user only (shares)
        keep_freed_memory()  # a job's large arrays are reused, not faulted in afresh
        metrics = (None if args.metrics_port is None
                   else Metrics(args.metrics_port, args.metrics_bind))
        run(serve(dep, args.name, args.ready_file, server_class, metrics))
    except MPCError as exc:
        print(f"mpc-party {args.name}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
