"""End to end: owners of different columns, each holding its own records in its own order,
keyed by record IDs (``share --columns --id COL``); real mpc-party processes over TLS,
driven through mpc-client. D' must equal the plaintext join followed by the plaintext
selection (``mpc-client plaintext --columns ... --id COL``) as a set of rows: its order is
private. The matrix of issue 31 (10^4 records per owner, 60 % overlap, two and three owners,
every setting) is marked slow (``make test-join``); a small case runs by default.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest
from keyed_common import keyed_files
from reliability_common import ok, refused

from mpcnet.client.local import CLIENTS, LocalCluster, write_config

OWNERS = ("hospital-a", "hospital-b", "registry")


def _rows(path: Path) -> list[tuple[str, ...]]:
    with open(path) as f:
        body = list(csv.reader(f))[1:]
    return sorted(tuple(r) for r in body)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    folder = tmp_path_factory.mktemp("deploy")
    clients = CLIENTS + (("registry", "owner"),)
    c = LocalCluster(folder, n_servers=4, config_path=write_config(folder, 4, clients=clients))
    with c:
        c.start()
        yield c


def _join_and_select(cluster: LocalCluster, tmp_path: Path, files: list[Path], security: str,
                     k: int, name: str) -> None:
    key = tmp_path / "ids.key"
    if not key.exists():
        ok(cluster.client("hospital-a", "id-key", "--out", str(key)))
    for owner, path in zip(OWNERS, files, strict=False):
        ok(cluster.client(owner, "share", str(path), "--dataset", name, "--columns",
                          "--id", "pid", "--id-key", str(key), "--security", security,
                          *(["--label", "label"] if path == files[0] else [])))
    out = ok(cluster.client("analyst", "select", "--dataset", name, "--k", str(k),
                            "--security", security, "--result", name, timeout=600))
    assert "alignment" in out
    got, expected = tmp_path / f"{name}.csv", tmp_path / f"{name}-expected.csv"
    ok(cluster.client("analyst", "fetch", "--result", name, "--out", str(got)))
    ok(cluster.client("analyst", "plaintext", *map(str, files), "--columns", "--id", "pid",
                      "--label", "label", "--k", str(k), "--out", str(expected)))
    assert _rows(got) == _rows(expected) and len(_rows(got)) > 0


@pytest.mark.parametrize("security", ["passive3", "active4"])
def test_two_owners_with_different_records_in_any_order(
        cluster: LocalCluster, tmp_path: Path, security: str) -> None:
    files = keyed_files(tmp_path, 120, 2, 0.6)
    name = f"small-{security}"
    _join_and_select(cluster, tmp_path, files, security, 3, name)
    listing = ok(cluster.client("analyst", "datasets"))
    assert "keyed" in listing
    # the result holds the joined rows (72 records are common) and trains as any other
    assert " 72 " in ok(cluster.client("analyst", "results"))
    ok(cluster.client("analyst", "train", "--result", name, "--model", f"{name}-lr",
                      "--owner", "clinic", "--epochs", "5"))
    model = tmp_path / "model.json"
    ok(cluster.client("clinic", "model", "--model", f"{name}-lr", "--out", str(model),
                      "--from", "analyst"))
    assert model.exists()


def test_keyed_shares_refuse_duplicates_and_need_the_key(cluster: LocalCluster,
                                                          tmp_path: Path) -> None:
    key = tmp_path / "ids.key"
    ok(cluster.client("hospital-a", "id-key", "--out", str(key)))
    path = tmp_path / "dup.csv"
    path.write_text("pid,x,label\nA-1,1,0\nb-2,2,1\n a-1 ,3,0\n")
    out = refused(cluster.client("hospital-a", "share", str(path), "--dataset", "dup",
                                 "--columns", "--id", "pid", "--id-key", str(key),
                                 "--label", "label"))
    assert "rows 1 and 3 have the same record ID" in out
    out = refused(cluster.client("hospital-a", "share", str(path), "--dataset", "dup",
                                 "--columns", "--id", "pid", "--label", "label"))
    assert "--id-key" in out
    assert "dup" not in ok(cluster.client("analyst", "datasets"))


@pytest.mark.slow
@pytest.mark.parametrize("owners", [2, 3])
@pytest.mark.parametrize("security", ["passive3", "active3", "active4"])
def test_ten_thousand_records_per_owner_sixty_percent_overlap(
        cluster: LocalCluster, tmp_path: Path, owners: int, security: str) -> None:
    files = keyed_files(tmp_path, 10_000, owners, 0.6)
    _join_and_select(cluster, tmp_path, files, security, 4, f"big-{owners}-{security}")
