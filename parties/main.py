"""``mpc-party``: run one MPC server of a deployment.

    mpc-party --config deploy/local.toml --name alice
    mpc-party --config deploy/local.toml --name alice --reload   # apply the edited file

The server listens on its configured port for its peers and for clients, keeps its shares in
its data_dir (folders mode 0700, files 0600), and runs jobs until it receives SIGINT or
SIGTERM. On SIGHUP it re-reads its deployment file and applies it without a restart
(``PartyServer.reload``). ``--reload``, run by its operator on its host, sends that signal to
the server that holds NAME's data folder and prints what changed, or why the file was refused
(exit 2; the server then runs on as before). Exit status 2 on a configuration, key or storage
problem (the one-line reason is printed).
``--rebuild`` instead fills the server's empty data folder from its peers after its disk was
lost, and exits (``parties.rebuild``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpcnet import __version__, config
from mpcnet.errors import ConfigError, MPCError, PeerError
from mpcnet.net.tls import run
from mpcnet.parties.heap import keep_freed_memory
from mpcnet.parties.logs import FORMATS, event, setup_logging
from mpcnet.parties.metrics import MetricsEndpoint, render
from mpcnet.parties.server import PartyServer
from mpcnet.parties.storage import running_pid


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
    loop.add_signal_handler(signal.SIGHUP, server.reload_logged)
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
    p.add_argument("--reload", action="store_true",
                   help="make the running server NAME re-read and apply its deployment file, "
                   "and print what changed (default: run the server)")
    p.add_argument("--rebuild", action="store_true",
                   help="fill this server's empty data folder from its peers (after its disk "
                   "was lost), then exit: 0 if everything was rebuilt, 3 if something was "
                   "not (a peer down, or without it), 4 if a peer sent a wrong component or "
                   "manifest (default: serve)")
    return p


def ask_reload(dep: config.Deployment, name: str, wait: float = 30.0) -> dict[str, Any]:
    """Signal the server running on ``name``'s data folder to reload its file and return what
    changed (``ConfigError`` with its reason if it refused the file). A local signal, not a
    network request: only the server's own user on its host can ask."""
    data = dep.server(name).data_dir
    pid = running_pid(data)
    if pid is None:
        raise ConfigError(f"no server of {name} runs on {data}; start it with mpc-party")
    outcome_file = data / "RELOAD.json"
    asked = time.time()
    os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            outcome = json.loads(outcome_file.read_text())
        except (OSError, ValueError):
            outcome = {}
        if outcome.get("at", 0) >= asked:
            if "error" in outcome:
                raise ConfigError(f"the server refused the file and runs on as before: "
                                  f"{outcome['error']}")
            if Path(outcome.get("file", dep.path)).resolve() != dep.path.resolve():
                # the server re-read its own file, not the one this command was given
                print(f"warning: server {name} runs on {outcome['file']}, not on {dep.path}: "
                      f"it reloaded that file; edit that one (or restart the server with "
                      f"--config {dep.path})", file=sys.stderr)
            return outcome["changes"]  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise ConfigError(f"server {name} (pid {pid}) did not report a reload within {wait:.0f} s; "
                      "see its log")


async def rebuild(dep: config.Deployment, name: str) -> int:
    """``--rebuild``: take back from the peers what this server held; the exit status."""
    from mpcnet.parties.rebuild import Rebuild
    from mpcnet.parties.storage import Storage

    storage = Storage(dep.server(name).data_dir)
    storage.open()
    try:
        summary = await Rebuild(dep, name, storage).run()
    except PeerError as exc:
        print(f"mpc-party {name}: {exc}", file=sys.stderr)
        return 3
    finally:
        storage.close()
    for line in summary.lines():
        print(f"mpc-party {name}: {line}")
    if summary.cheated:
        return 4
    return 3 if summary.refused else 0


def main(argv: list[str] | None = None, server_class: type[PartyServer] = PartyServer) -> int:
    """``mpc-party``; ``server_class`` is what runs (tests pass a cheating one)."""
    args = parser().parse_args(argv)
    try:
        dep = config.load(args.config)
        dep.server(args.name)
        if args.reload:
            changes = ask_reload(dep, args.name)
            print(json.dumps(changes, indent=1))
            return 0
        setup_logging(args.name, args.log_level or dep.log_level, args.log_format)
        os.umask(0o077)  # whatever this process creates is for its own user only (shares)
        if args.rebuild:
            return run(rebuild(dep, args.name))
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
