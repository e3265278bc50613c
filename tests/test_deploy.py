"""docker-compose.yml against the deployment files (no Docker engine needed).

Checks what can be checked without running containers: the file parses, every server of
deploy/docker.toml (and docker4.toml with MPC_DEPLOY=docker4) is a service on its port, mounts
the configuration, its own certificate and only its own key at the paths the
configuration resolves to, keeps its data on a volume at its data_dir, and has a healthcheck.
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


def _compose(deploy: str) -> dict[str, Any]:
    text = (ROOT / "docker-compose.yml").read_text()
    text = re.sub(r"\$\{MPC_DEPLOY:-[a-z0-9]+\}", deploy, text)
    text = re.sub(r"\$\{MPC_UID:-(\d+)\}", r"\1", text)
    assert "${" not in text
    return yaml.safe_load(text)  # type: ignore[no-any-return]


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """container path -> host source"""
    out = {}
    for v in service.get("volumes", []):
        parts = v.split(":")
        out[parts[1]] = parts[0]
    return out


def _in_container(dep: config.Deployment, host_path: Path) -> Path:
    return CONTAINER_CONFIG.parent / host_path.relative_to(dep.path.parent)


@pytest.mark.parametrize("deploy", ["docker", "docker4"])
def test_services_match_the_deployment_file(deploy: str) -> None:
    dep = config.load(ROOT / "deploy" / f"{deploy}.toml")
    compose = _compose(deploy)
    services = compose["services"]
    all_keys = {str(_in_container(dep, dep.identity(n)[1])) for n in dep.names}
    for s in dep.servers:
        svc = services[s.name]
        assert s.host == s.name and s.bind == "0.0.0.0"
        assert f"{s.port}:{s.port}" in svc["ports"]
        assert svc["command"][-2:] == ["--name", s.name]
        assert str(CONTAINER_CONFIG) in svc["command"]
        mounts = _mounts(svc)
        assert mounts[str(CONTAINER_CONFIG)] == f"./deploy/{deploy}.toml"
        for path in (s.cert, s.key):
            inside = str(_in_container(dep, path))
            assert inside in mounts, f"{s.name} does not mount {inside}"
            assert (ROOT / mounts[inside]).resolve() == path
        assert all_keys & set(mounts) == {str(_in_container(dep, s.key))}, \
            f"{s.name} must mount only its own key"
        data = [src for dst, src in mounts.items() if dst == str(s.data_dir)]
        assert data and data[0] in compose["volumes"]
        test = svc["healthcheck"]["test"]
        assert "mpc-client" in test and "status" in test and test[test.index("--as") + 1] == s.name
    for c in dep.clients:
        svc = services[c.name]
        assert "client" in svc["profiles"] and svc["entrypoint"][-1] == c.name
        mounts = _mounts(svc)
        assert all_keys & set(mounts) == {str(_in_container(dep, c.key))}
    if len(dep.servers) == 4:
        assert services["dave"]["profiles"] == ["four"]
    assert not any("profiles" in services[s.name] for s in dep.servers[:3])


def test_dockerfile_installs_the_entry_points() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "pip install" in text and "USER" in text
    assert "COPY pyproject.toml setup.py " in text and "gcc" in text  # the compiled loops
    for folder in ("mpcnet", "parties", "client", "certs"):
        assert f"COPY {folder} " in text
