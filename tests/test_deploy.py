"""docker-compose.yml against the deployment files (no Docker engine needed).

Checks what can be checked without running containers: the file parses, every server of
deploy/docker.toml (and docker4.toml with MPC_DEPLOY=docker4) is a service on its port, mounts
its own party's folder (its copy of the deployment file, its key, the certificates it pinned)
where the configuration resolves its paths and no other party's folder, keeps its data on a
volume that holds its data_dir and that the image creates for its unprivileged user, runs as
that user, and has a healthcheck. Running all of it with Podman:
tests/test_deploy_containers.py (``make containers``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from mpcnet import config

yaml = pytest.importorskip("yaml")
CONTAINER_CONFIG = Path("/etc/mpcnet/deploy.toml")
DATA_ROOT = Path("/var/lib/mpcnet")  # the servers' volumes: created by the Dockerfile for its user


def _compose(deploy: str) -> dict[str, Any]:
    text = (ROOT / "docker-compose.yml").read_text()
    text = re.sub(r"\$\{MPC_DEPLOY:-[a-z0-9]+\}", deploy, text)
    text = re.sub(r"\$\{MPC_(UID|IMAGE|PUBLISH|NET):-([^}]+)\}", r"\2", text)
    assert "${" not in text
    return yaml.safe_load(text)  # type: ignore[no-any-return]


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """container path -> host source"""
    out = {}
    for v in service.get("volumes", []):
        parts = v.split(":")
        out[parts[1]] = parts[0]
    return out


def _mount_point(mounts: dict[str, str], source: str) -> str:
    return next(dst for dst, src in mounts.items() if src == source)


def _own_folder(deploy: str, name: str, service: dict[str, Any]) -> None:
    """``service`` mounts party ``name``'s folder on the configuration's folder, read-only,
    and no other party's folder."""
    mounts = _mounts(service)
    assert mounts[str(CONTAINER_CONFIG.parent)] == f"./deploy/{deploy}/{name}", mounts
    assert f"{CONTAINER_CONFIG.parent}:ro" in " ".join(service["volumes"])
    assert [src for src in mounts.values() if src.startswith("./deploy")] == \
        [f"./deploy/{deploy}/{name}"], f"{name} mounts another party's folder"


@pytest.mark.parametrize("deploy", ["docker", "docker4"])
def test_services_match_the_deployment_file(deploy: str) -> None:
    dep = config.load(ROOT / "deploy" / f"{deploy}.toml")
    compose = _compose(deploy)
    services = compose["services"]
    for s in dep.servers:
        svc = services[s.name]
        assert s.host == s.name and s.bind == "0.0.0.0"
        assert f"0.0.0.0:{s.port}:{s.port}" in svc["ports"]
        assert svc["command"][-2:] == ["--name", s.name]
        assert str(CONTAINER_CONFIG) in svc["command"]
        mounts = _mounts(svc)
        _own_folder(deploy, s.name, svc)
        # its certificate and key, as its copy of the file names them, are inside its folder
        assert all(p.is_relative_to(dep.path.parent) for p in (s.cert, s.key))
        data = [src for dst, src in mounts.items() if s.data_dir.is_relative_to(dst)
                and src in compose["volumes"]]
        assert data == [f"{s.name}-data"], f"{s.name} keeps its data on no volume of its own"
        assert Path(_mount_point(mounts, data[0])) == DATA_ROOT
        assert "user" not in svc, f"{s.name} must run as the image's user"
        test = svc["healthcheck"]["test"]
        assert "mpc-client" in test and "status" in test and test[test.index("--as") + 1] == s.name
    for c in dep.clients:
        svc = services[c.name]
        assert "client" in svc["profiles"] and svc["entrypoint"][-1] == c.name
        _own_folder(deploy, c.name, svc)
    if len(dep.servers) == 4:
        assert services["dave"]["profiles"] == ["four"]
    assert not any("profiles" in services[s.name] for s in dep.servers[:3])


def test_dockerfile_installs_the_entry_points() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "pip install" in text and "\nUSER mpc\n" in text
    # the volumes' mount point exists in the image, owned by the user the servers run as
    assert f"install -d -o mpc -g mpc -m 0700 {DATA_ROOT}" in text
    assert "COPY pyproject.toml setup.py " in text and "gcc" in text  # the compiled loops
    for folder in ("mpcnet", "parties", "client", "certs"):
        assert f"COPY {folder} " in text


def test_the_build_context_holds_only_what_the_image_copies() -> None:
    """.dockerignore excludes everything but the sources: never the clone's keys, data,
    virtual environment or build output."""
    rules = [line for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line and not line.startswith("#")]
    assert rules[0] == "*"
    included = {r[1:].rstrip("/") for r in rules if r.startswith("!")}
    copied = set(re.findall(r"^COPY (\S+) ", (ROOT / "Dockerfile").read_text(), re.MULTILINE))
    copied |= {w for line in re.findall(r"^COPY ((?:\S+ )+)\./$",
                                        (ROOT / "Dockerfile").read_text(), re.MULTILINE)
               for w in line.split()}
    assert included == copied, (included, copied)
