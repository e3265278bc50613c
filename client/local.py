"""Layer: client tooling. A throw-away local deployment: config, keys, server processes.

It is the one-command local set-up of one operator on one machine: it makes every server's and
client's key in one folder and pins them all (``mpc-certs local``), which separate
organisations never do (docs/operations.md).

Used by the one-command demo, the end-to-end tests and the benchmarks::

    with LocalCluster(tmp_dir, n_servers=3) as cluster:
        cluster.start()                     # mpc-party processes on free 127.0.0.1 ports
        cluster.client("analyst", ...)      # mpc-client as a subprocess
        cluster.kill("bob"); cluster.restart("bob")

Every process it starts is stopped by PID when the context exits.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mpcnet import config

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
SERVER_NAMES = ("alice", "bob", "carol", "dave")
CLIENTS = (("hospital-a", "owner"), ("hospital-b", "owner"), ("analyst", "analyst"),
           ("outsider", "owner"), ("clinic", "model-owner"))


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 right now."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def write_config(folder: Path, n_servers: int = 3, ports: list[int] | None = None,
                 timeouts: dict[str, float] | None = None,
                 clients: tuple[tuple[str, str], ...] = CLIENTS,
                 extra_client_lines: dict[str, str] | None = None) -> Path:
    """A deployment file for ``n_servers`` local servers (and the clients) in ``folder``."""
    ports = ports or free_ports(n_servers)
    t = {"connect_timeout": 15.0, "round_timeout": 30.0, "request_timeout": 30.0,
         "handshake_timeout": 5.0, "probe_timeout": 2.0} | (timeouts or {})
    lines = ["[deployment]"] + [f"{k} = {float(v)}" for k, v in t.items()]
    lines += ['log_level = "INFO"', "", "[tls]", 'dir = "certs"', ""]
    for name, port in zip(SERVER_NAMES[:n_servers], ports, strict=False):
        lines += ["[[servers]]", f'name = "{name}"', 'host = "127.0.0.1"', f"port = {port}",
                  f'data_dir = "data/{name}"', ""]
    for name, role in clients:
        lines += ["[[clients]]", f'name = "{name}"', f'role = "{role}"']
        if extra_client_lines and name in extra_client_lines:
            lines.append(extra_client_lines[name])
        lines.append("")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "deploy.toml"
    path.write_text("\n".join(lines))
    return path


class LocalCluster:
    """Servers of one local deployment as child processes."""

    def __init__(self, folder: Path, n_servers: int = 3, config_path: Path | None = None,
                 timeouts: dict[str, float] | None = None, make_certs: bool = True,
                 extra_client_lines: dict[str, str] | None = None,
                 server_configs: dict[str, Path] | None = None) -> None:
        self.folder = Path(folder)
        self.server_configs = server_configs or {}  # a server's own copy of the file
        self.config_path = config_path or write_config(
            self.folder, n_servers, timeouts=timeouts, extra_client_lines=extra_client_lines)
        self.dep = config.load(self.config_path)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        if make_certs and not any(self.dep.pins(n) for n in self.dep.names):
            from mpcnet.certs.pki import local_deployment
            local_deployment(self.dep, force=True)  # every key in one folder: one operator
            self.dep = config.load(self.config_path)

    # -- processes ----------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        # every server shares this machine's cores: one BLAS thread each, or their spinning
        # worker threads compete for the cores (measured: 24 s -> 21 s for SpeedDating active3)
        for var in BLAS_THREAD_VARIABLES:
            env.setdefault(var, "1")
        return env

    def server_argv(self, name: str) -> list[str]:
        """The command that runs server ``name`` (before its options); tests override it to
        start servers with fault-injection hooks."""
        return [sys.executable, "-m", "mpcnet.parties.main"]

    def start(self, names: list[str] | None = None, wait: float = 20.0) -> None:
        """Start servers (all by default) and wait until each is listening."""
        names = names or [s.name for s in self.dep.servers]
        for name in names:
            ready = self.folder / f".{name}.ready"
            ready.unlink(missing_ok=True)
            log_path = self.folder / f"{name}.log"
            self.logs[name] = log_path
            with open(log_path, "ab") as log:
                self.procs[name] = subprocess.Popen(
                    [*self.server_argv(name), "--config",
                     str(self.server_configs.get(name, self.config_path)),
                     "--name", name, "--ready-file", str(ready)],
                    stdout=log, stderr=subprocess.STDOUT, env=self._env())
        deadline = time.monotonic() + wait
        for name in names:
            ready = self.folder / f".{name}.ready"
            while not ready.exists():
                proc = self.procs[name]
                if proc.poll() is not None:
                    raise RuntimeError(f"server {name} exited with {proc.returncode}:\n"
                                       + self.log(name)[-2000:])
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server {name} did not start within {wait} s:\n"
                                       + self.log(name)[-2000:])
                time.sleep(0.05)

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            proc.wait(timeout=10)

    def restart(self, name: str) -> None:
        self.kill(name, signal.SIGTERM)
        self.start([name])

    def stop(self) -> None:
        for name in list(self.procs):
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name in list(self.procs):
            proc = self.procs[name]
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self.procs.clear()

    def log(self, name: str) -> str:
        path = self.logs.get(name)
        return path.read_text(errors="replace") if path and path.exists() else ""

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- client -------------------------------------------------------------------------------
    def client(self, identity: str, *args: str, timeout: float = 120.0,
               config_path: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``mpc-client --config ... --as identity args...`` and return its result."""
        return subprocess.run(
            [sys.executable, "-m", "mpcnet.client.main", "--config",
             str(config_path or self.config_path), "--as", identity, *args],
            capture_output=True, text=True, timeout=timeout, env=self._env())
