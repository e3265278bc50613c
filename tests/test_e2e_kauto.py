"""End to end: ``select --k auto`` on real mpc-party processes over TLS, on the bundled LSVT and
CogLoad, under every setting: the servers choose the k that ``plaintext --k auto`` computes
from the same file, store D' for it (equal to the plaintext D'), and reveal nothing of the
candidates but the choice. Every process a test starts is stopped by PID (``LocalCluster``).
Slow (about 10 minutes: 200 epochs of four models with deterministic truncations, in every
setting): ``make kauto-check``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability_common import ok

from mpcnet.client.local import LocalCluster
from mpcnet.dataset import BUNDLED, bundled

CANDIDATES = "5,10,20,50"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("three")) as c:
        c.start()
        yield c


@pytest.fixture(scope="module")
def four(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("four"), n_servers=4) as c:
        c.start()
        yield c


def _options(name: str) -> list[str]:
    spec = BUNDLED[name]
    return ["--label", spec.label] + [a for col in spec.drop for a in ("--drop", col)]


@pytest.mark.parametrize("name", ["lsvt", "cogload"])
@pytest.mark.parametrize("security", ["passive3", "active3", "active4"])
def test_the_servers_choose_the_plaintext_k(three: LocalCluster, four: LocalCluster,
                                            tmp_path: Path, name: str, security: str) -> None:
    cluster = four if security == "active4" else three
    dataset = f"{name}-{security}"
    path = str(bundled(name))
    share = ["share", path, "--dataset", dataset, *_options(name)]
    ok(cluster.client("hospital-a", *share, *(["--security", security]
                                               if security == "active3" else [])))
    job = json.loads(ok(cluster.client("analyst", "--json", "select", "--dataset", dataset,
                                       "--k", "auto", "--candidates", CANDIDATES, "--result",
                                       dataset, "--security", security, timeout=900)))
    want = json.loads(ok(cluster.client("analyst", "--json", "plaintext", path, *_options(name),
                                        "--k", "auto", "--candidates", CANDIDATES, "--out",
                                        str(tmp_path / "want.csv"))))
    plan = job["figures"]["plan"]
    assert job["security"] == security and plan["k"] == want["k"]
    assert str(want["held_out_correct"]) not in json.dumps(job)  # only k is revealed
    ok(cluster.client("analyst", "fetch", "--result", dataset, "--out",
                      str(tmp_path / "got.csv")))
    assert (tmp_path / "got.csv").read_text() == (tmp_path / "want.csv").read_text()
    for stored in json.loads(ok(cluster.client("analyst", "--json", "results"))).values():
        assert any(r["name"] == dataset and r["k"] == want["k"] for r in stored)
