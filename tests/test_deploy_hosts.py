"""Separate hosts: each server in a network namespace of its own (``make hosts``; slow).

Every server runs in its own namespace with one veth interface and its own address, reads the
deployment file from a folder of its own holding only its own key, and keeps its data there;
the clients run in another namespace, each client with its own folder and key. The
namespaces are joined by a bridge in a further namespace (a switch), so none of it touches
the host's network. The demo's whole pipeline runs across them (share, select, fetch, train,
model; tests/deploy_common.py): once over the plain links (a LAN), once with bench.netemu's
WAN profile (20 ms one way, 1 Gbit/s) on every link. The kernel here has no netem qdisc, so
the WAN is bench.netemu's delay proxy in each server's namespace: it holds every chunk of a
connection to that server, both ways, for the profile's delay (a round trip of 40 ms).

The namespaces separate the network only: every process sees one filesystem, so "its own key"
is what the test puts in each folder and checks, and the folder each server is pointed at.
Needs root and iproute2. Every namespace is deleted at the end, after the processes still in
it (only this test starts any there) are killed by PID.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import deploy_common as pipeline
import pytest
from reliability_common import ok

from bench import netemu
from mpcnet.client.local import CLIENTS, SERVER_NAMES, LocalCluster

pytestmark = pytest.mark.slow

# RFC 2544's range for benchmarking network devices: routed nowhere, here only on the switch
SUBNET = "198.18.0"
PORT = 7101
CLIENT_NAMES = [name for name, _ in CLIENTS]


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, f"ip {' '.join(args)}: {r.stderr.strip()}"


class Network:
    """Namespaces ``<prefix>-<host>`` for the given hosts, each with ``eth0`` at its own
    address on one bridge in the namespace ``<prefix>-switch``."""

    def __init__(self, prefix: str, hosts: list[str]) -> None:
        self.prefix, self.hosts = prefix, hosts
        self.address = {h: f"{SUBNET}.{i + 1}" for i, h in enumerate(hosts)}
        self.made: list[str] = []

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def __enter__(self) -> Network:
        switch = self.ns("switch")
        try:
            self._add(switch)
            _ip("-n", switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", switch, "link", "set", "br0", "up")
            for i, host in enumerate(self.hosts):
                ns = self.ns(host)
                self._add(ns)
                _ip("-n", switch, "link", "add", f"port{i}", "type", "veth", "peer", "name",
                    "eth0", "netns", ns)
                _ip("-n", switch, "link", "set", f"port{i}", "master", "br0", "up")
                _ip("-n", ns, "addr", "add", f"{self.address[host]}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _add(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self.made.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def pids(self, host: str) -> list[int]:
        r = subprocess.run(["ip", "netns", "pids", self.ns(host)], capture_output=True,
                           text=True, timeout=30)
        return [int(p) for p in r.stdout.split()]

    def __exit__(self, *exc: object) -> None:
        for ns in reversed(self.made):
            r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                               timeout=30)
            for pid in r.stdout.split():  # only this test starts processes in its namespaces
                try:
                    os.kill(int(pid), 9)
                except ProcessLookupError:
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.made.clear()


def _deployment(folder: Path, net: Network, servers: list[str], wan: bool) -> Path:
    """The deployment file all parties agree on: each server at its own address; under the
    WAN, it listens on its loopback and its namespace's delay proxy on the address."""
    lines = ["[deployment]", "connect_timeout = 30.0", "handshake_timeout = 10.0",
             "round_timeout = 60.0", "request_timeout = 60.0", "probe_timeout = 5.0",
             'log_level = "INFO"', "", "[tls]", 'dir = "certs"', ""]
    for i, name in enumerate(servers):
        lines += ["[[servers]]", f'name = "{name}"', f'host = "{net.address[name]}"',
                  f"port = {PORT + i}", f'data_dir = "data/{name}"',
                  f'listen = "{"127.0.0.1" if wan else net.address[name]}"', ""]
    for name, role in CLIENTS:
        lines += ["[[clients]]", f'name = "{name}"', f'role = "{role}"', ""]
    path = folder / "deploy.toml"
    path.write_text("\n".join(lines))
    return path


class HostCluster(LocalCluster):
    """The servers of ``LocalCluster``, each started inside its namespace with the
    deployment file of its own folder."""

    def __init__(self, folder: Path, deploy_file: Path, net: Network,
                 homes: dict[str, Path]) -> None:
        super().__init__(folder, config_path=deploy_file, make_certs=False,
                         server_configs={name: homes[name] / "deploy.toml" for name in homes})
        self.net = net

    def server_argv(self, name: str) -> list[str]:
        return ["ip", "netns", "exec", self.net.ns(name), *super().server_argv(name)]


class NamespaceClients:
    """The clients, in the clients' namespace, each with its own folder (deploy_common)."""

    def __init__(self, net: Network, homes: dict[str, Path], env: dict[str, str]) -> None:
        self.net, self.homes, self.env = net, homes, env

    def run(self, identity: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.net.ns("clients"), sys.executable, "-m",
             "mpcnet.client.main", "--config", str(self.homes[identity] / "deploy.toml"),
             "--as", identity, *args],
            capture_output=True, text=True, timeout=300, env=self.env)

    def path(self, identity: str, name: str) -> tuple[Path, str]:
        path = self.homes[identity] / name
        return path, str(path)


@pytest.fixture
def root_and_ip() -> Iterator[None]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 (network namespaces)")
    yield


@pytest.mark.parametrize(("profile", "n_servers", "security"), [
    ("lan", 3, "passive3"), ("wan", 3, "passive3"), ("lan", 4, "active4")])
def test_the_pipeline_across_namespaces(root_and_ip: None, tmp_path: Path, profile: str,
                                        n_servers: int, security: str) -> None:
    servers = list(SERVER_NAMES[:n_servers])
    timings: dict[str, float] = {}
    with Network(f"mpch{os.getpid()}", [*servers, "clients"]) as net:
        homes = {name: tmp_path / "hosts" / name for name in servers + CLIENT_NAMES}
        deploy_file = _deployment(tmp_path, net, servers, wan=profile == "wan")
        pipeline.make_keys(deploy_file, homes)
        for name, home in homes.items():  # its own key and no other
            assert pipeline.key_files(home) == {name}, (name, pipeline.key_files(home))
        # the host's own network has no address on the switch: it cannot reach the servers
        host_addresses = subprocess.run(["ip", "-o", "addr"], capture_output=True,
                                        text=True).stdout
        assert f" {SUBNET}." not in host_addresses
        cluster = HostCluster(tmp_path, deploy_file, net, homes)
        proxies = []
        try:
            if profile == "wan":
                for i, name in enumerate(servers):
                    address = net.address[name]
                    proxies.append(netemu.Proxy([(address, PORT + i, "127.0.0.1", PORT + i)],
                                                netemu.PROFILES["wan"], tmp_path,
                                                netns=net.ns(name)))
            with pipeline.timed(timings, "start"):
                cluster.start(wait=60.0)
            for name in servers:  # each server is a process of its own namespace
                assert cluster.pid(name) in net.pids(name)
            clients = NamespaceClients(net, homes, cluster._env())
            status = ok(clients.run("analyst", "status"))
            assert "DOWN" not in status and all(f"{s} " in status for s in servers), status
            with pipeline.timed(timings, "share"):
                pipeline.share(clients, "lsvt", security)
            with pipeline.timed(timings, "select"):
                seconds, rounds = pipeline.select(clients, "lsvt", "lsvt-top103", security)
            if profile == "wan":  # every round waits for a message across a delayed link
                assert seconds >= rounds * netemu.PROFILES["wan"].delay_ms / 1e3, \
                    (seconds, rounds)
            timings["select protocol"] = seconds
            with pipeline.timed(timings, "fetch"):
                pipeline.fetch_equals_plaintext(clients, "lsvt-top103")
            with pipeline.timed(timings, "train"):
                pipeline.train_and_read(clients, "lsvt-top103", "lsvt-lr")
        except Exception:
            for name in servers:
                print(f"\n-- {name}'s log --\n{cluster.log(name)[-3000:]}")
            raise
        finally:
            cluster.stop()
            for proxy in proxies:
                proxy.stop()
        for name in servers:  # each server's data is in its own folder, and only there
            assert (homes[name] / "data" / name / "datasets" / "lsvt").is_dir()
            assert not [h for h in homes if h != name and (homes[h] / "data" / name).exists()]
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert net.prefix not in left, left
    print(f"\n{profile}, {n_servers} servers, {security}: " + ", ".join(
        f"{k} {v:.1f} s" for k, v in timings.items()))
