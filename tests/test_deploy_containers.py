"""docker-compose.yml and the Dockerfile for real, with Podman (``make containers``; slow).

Builds the image, then for three servers (deploy/docker.toml, passive3) and for four
(deploy/docker4.toml, --profile four, active4): brings the servers up as the image's
unprivileged user with their data on named volumes, waits until every healthcheck passes,
runs the owners, the analyst and the model owner as one-off client containers through the
demo's pipeline (tests/deploy_common.py), takes the project down and up again and finds the
dataset and D' still there. Every container, volume, network and image it creates is removed
(by the names it gave them).

Needs root, ``podman`` (``apt-get install podman runc``) and ``podman-compose`` (``make
containers`` installs it into the virtual environment). The Dockerfile's base image
(python:3.11-slim) is used if present; where no registry can be reached, a stand-in with
Debian's Python 3.11 is made by ``mmdebstrap`` (``apt-get install mmdebstrap``) and removed
afterwards. Times are printed per phase (``pytest -s``); docs/operations.md has them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import deploy_common as pipeline
import pytest
from conftest import ROOT
from reliability_common import ok

pytestmark = pytest.mark.slow

BASE = "docker.io/library/python:3.11-slim"  # the Dockerfile's FROM line
SERVER_UID = 10001  # the Dockerfile's user
HEALTHY_WITHIN = 90.0
# what Podman itself writes to a container's standard error here (no syslog, no systemd)
PODMAN_NOISE = re.compile(r'failed to connect to syslog|time="[^"]*" level=')


def _compose_command() -> str | None:
    here = Path(sys.executable).parent / "podman-compose"
    return str(here) if here.exists() else shutil.which("podman-compose")


def _podman_env(folder: Path) -> dict[str, str]:
    """Podman's settings for this run: cgroupfs and explicit limits (a VM whose cgroups are
    fixed refuses the defaults), runc where it is installed."""
    conf = folder / "containers.conf"
    lines = ["[containers]", 'default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]',
             "[engine]", 'cgroup_manager = "cgroupfs"']
    if shutil.which("runc"):
        lines.append('runtime = "runc"')
    conf.write_text("\n".join(lines) + "\n")
    return dict(os.environ) | {"CONTAINERS_CONF": str(conf)}


def _podman(env: dict[str, str], *args: str, timeout: float = 600,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout,
                          env=env, input=stdin)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """The image built from the Dockerfile (tag mpcnet-test-PID), and podman's environment."""
    if os.geteuid() != 0 or not shutil.which("podman") or not _compose_command():
        pytest.skip("needs root, podman and podman-compose (make containers installs it)")
    env = _podman_env(tmp_path_factory.mktemp("podman"))
    tag = f"localhost/mpcnet-test-{os.getpid()}:latest"
    made_base = False
    try:
        if _podman(env, "image", "exists", BASE).returncode != 0:
            if not shutil.which("mmdebstrap"):
                pytest.skip(f"no {BASE} and no mmdebstrap to make a stand-in for it")
            t0 = time.perf_counter()
            base = subprocess.run(
                "mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,"
                f"python3-dev,gcc,libc6-dev,ca-certificates bookworm - | podman import - {BASE}",
                shell=True, capture_output=True, text=True, timeout=900, env=env)
            assert base.returncode == 0, base.stderr[-2000:]
            made_base = True
            print(f"\nstand-in base image made in {time.perf_counter() - t0:.0f} s")
        t0 = time.perf_counter()
        # the host's trust store and pip settings, for a host that reaches PyPI through them
        mounts = [f"--volume={p}:{p}:ro" for p in ("/etc/ssl/certs/ca-certificates.crt",
                                                    "/etc/pip.conf") if Path(p).exists()]
        built = _podman(env, "build", "--pull=never", "--network=host", *mounts, "-t", tag,
                        str(ROOT), timeout=900)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-2000:]
        print(f"\nimage built in {time.perf_counter() - t0:.0f} s")
        yield tag, env
    finally:
        _podman(env, "rmi", "--force", tag)
        if made_base:
            _podman(env, "rmi", "--force", BASE)


class Project:
    """One compose project in its own folder: the compose file and the agreed deployment file
    copied from the repository, each party's folder in deploy/<deploy>/, client files in
    work/."""

    def __init__(self, folder: Path, deploy: str, image: str, env: dict[str, str]) -> None:
        self.folder, self.deploy = folder, deploy
        self.name = f"mpct{os.getpid()}{deploy}"
        (folder / "deploy").mkdir(parents=True)
        shutil.copyfile(ROOT / "docker-compose.yml", folder / "docker-compose.yml")
        shutil.copyfile(ROOT / "deploy" / f"{deploy}.toml", folder / "deploy" / f"{deploy}.toml")
        self.profiles = ["--profile", "four"] if deploy == "docker4" else []
        self.env = env | {"MPC_DEPLOY": deploy, "MPC_IMAGE": image, "MPC_PUBLISH": "127.0.0.1",
                          "MPC_UID": str(SERVER_UID)}
        self.work = folder / "work"
        self.work.mkdir()

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(_compose_command()), "-p", self.name, *args],
                              capture_output=True, text=True, timeout=timeout, env=self.env,
                              cwd=self.folder)

    def party(self, name: str) -> Path:
        """The folder of party ``name``, which its container mounts on /etc/mpcnet."""
        return self.folder / "deploy" / self.deploy / name

    def container(self, service: str) -> str:
        return f"{self.name}_{service}_1"

    def up(self, servers: list[str]) -> None:
        """Start the servers, wait until every healthcheck passes (run by hand: without
        systemd, Podman does not schedule them itself), then until ``status`` finds every
        server reaching every other, as an operator checks after ``up``."""
        ok(self.compose(*self.profiles, "up", "-d", "--no-build"))
        deadline = time.monotonic() + HEALTHY_WITHIN
        waiting = set(servers)
        while waiting:
            for s in sorted(waiting):
                if _podman(self.env, "healthcheck", "run", self.container(s)).returncode == 0:
                    waiting.discard(s)
            assert time.monotonic() < deadline, f"not healthy within {HEALTHY_WITHIN} s: " \
                f"{sorted(waiting)}\n" + "\n".join(self.logs(s) for s in waiting)
            time.sleep(0.5)
        for s in servers:
            state = _podman(self.env, "inspect", self.container(s), "--format",
                            "{{.State.Health.Status}} {{.RestartCount}} {{.Config.User}}")
            assert state.stdout.split() == ["healthy", "0", "mpc"], (s, state.stdout)
            uid = _podman(self.env, "exec", self.container(s), "id", "-u").stdout.strip()
            assert uid == str(SERVER_UID), f"{s} runs as uid {uid}"
        while (status := self.run("analyst", "status")).returncode != 0:
            assert time.monotonic() < deadline, f"no full mesh within {HEALTHY_WITHIN} s:\n" \
                + status.stdout + status.stderr
            time.sleep(1.0)

    def down(self, volumes: bool = False) -> None:
        ok(self.compose(*self.profiles, "down", *(["--volumes"] if volumes else [])))

    def logs(self, service: str) -> str:
        r = _podman(self.env, "logs", "--tail", "30", self.container(service))
        return r.stdout + r.stderr

    # -- the Clients protocol of deploy_common --------------------------------------------------
    def run(self, identity: str, *args: str) -> subprocess.CompletedProcess[str]:
        r = self.compose("--profile", "client", "run", "--rm", "-T", identity, *args)
        r.stderr = "".join(line for line in r.stderr.splitlines(keepends=True)
                           if not PODMAN_NOISE.match(line))
        return r

    def path(self, identity: str, name: str) -> tuple[Path, str]:
        return self.work / name, f"/work/{name}"


def _own_folders(project: Project, names: list[str]) -> None:
    """Every party's folder to the uid its container runs as: the servers' uid, and MPC_UID
    for the clients (here the same uid: a host user whose own files they are); work/ too."""
    for name in names:
        for path in [project.party(name), *project.party(name).rglob("*")]:
            os.chown(path, SERVER_UID, SERVER_UID)
    os.chown(project.work, SERVER_UID, SERVER_UID)


@pytest.mark.parametrize(("deploy", "servers", "security"), [
    ("docker", ["alice", "bob", "carol"], "passive3"),
    ("docker4", ["alice", "bob", "carol", "dave"], "active4")])
def test_compose_runs_the_demo_and_keeps_its_data(
        image: tuple[str, dict[str, str]], tmp_path: Path, deploy: str, servers: list[str],
        security: str) -> None:
    tag, env = image
    project = Project(tmp_path / "project", deploy, tag, env)
    timings: dict[str, float] = {}
    deploy_file = project.folder / "deploy" / f"{deploy}.toml"
    names = _names(deploy_file)
    pipeline.make_keys(deploy_file, {name: project.party(name) for name in names})
    _own_folders(project, names)
    try:
        with pipeline.timed(timings, "up"):
            project.up(servers)
        for s in servers:  # each server container holds its own key and no other
            mounted = _podman(env, "exec", project.container(s), "ls",
                              "/etc/mpcnet/certs").stdout.split()
            assert sorted(m for m in mounted if m.endswith(".key")) == [f"{s}.key"], mounted
        status = ok(project.run("analyst", "status"))
        assert all(f"{s} " in status for s in servers) and "DOWN" not in status, status
        with pipeline.timed(timings, "share"):
            pipeline.share(project, "lsvt", security)
        with pipeline.timed(timings, "select"):
            pipeline.select(project, "lsvt", "lsvt-top103", security)
        with pipeline.timed(timings, "fetch"):
            pipeline.fetch_equals_plaintext(project, "lsvt-top103")
        with pipeline.timed(timings, "train"):
            pipeline.train_and_read(project, "lsvt-top103", "lsvt-lr")
        with pipeline.timed(timings, "down-up"):
            project.down()
            project.up(servers)
        # what the servers stored survived: the stored D', and the shares of the dataset
        pipeline.fetch_equals_plaintext(project, "lsvt-top103", out="lsvt-top103-after-up.csv")
        assert "lsvt" in ok(project.run("analyst", "datasets"))
        with pipeline.timed(timings, "select-again"):
            pipeline.select(project, "lsvt", "lsvt-top10", security, k=10)
        pipeline.fetch_equals_plaintext(project, "lsvt-top10", k=10)
    except Exception:
        print(f"\n-- status --\n{project.run('analyst', 'status')}")
        for s in servers:
            print(f"\n-- {s}'s log --\n{project.logs(s)}")
        raise
    finally:
        project.down(volumes=True)
    left = _podman(env, "ps", "-a", "--filter", f"name={project.name}", "--format", "{{.Names}}")
    assert not left.stdout.strip(), left.stdout
    print(f"\n{deploy} ({len(servers)} servers, {security}): " + ", ".join(
        f"{k} {v:.1f} s" for k, v in timings.items()))


def _names(deploy_file: Path) -> list[str]:
    from mpcnet import config

    return config.load(deploy_file).names
