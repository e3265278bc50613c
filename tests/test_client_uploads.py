"""client.uploads over real servers: owners' files as they really come (issue 30's trial).

Real mpc-party processes over TLS on 127.0.0.1, driven through mpc-client: labels spelled
0 and 0.0 by two owners, digits split by class across three owners without a declared schema,
wine with a text column with gaps, each input format (delimiter and quoting, gzip, Parquet)
against the same data as CSV, and withdrawing a contribution. D' is compared with the file
``mpc-client plaintext --out`` writes from the same files (equal cells, equal encodings).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mpcnet.client.local import LocalCluster
from mpcnet.dataset import MISSING_CATEGORY

pd = pytest.importorskip("pandas")
datasets = pytest.importorskip("sklearn.datasets")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("deploy")) as c:
        c.start()
        yield c


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, r.stderr
    return r.stdout


def plaintext(*args: str) -> subprocess.CompletedProcess[str]:
    """``mpc-client plaintext ...`` (local, no server)."""
    return subprocess.run([sys.executable, "-m", "mpcnet.client.main", "plaintext", *args],
                          capture_output=True, text=True, timeout=120)


def share(cluster: LocalCluster, owner: str, path: Path, dataset: str, *options: str) -> str:
    return ok(cluster.client(owner, "share", str(path), "--dataset", dataset, *options))


def selected(cluster: LocalCluster, tmp: Path, dataset: str, k: int) -> str:
    """D' of a selection on ``dataset`` as ``fetch --out`` writes it."""
    result = f"{dataset}-top{k}"
    ok(cluster.client("analyst", "select", "--dataset", dataset, "--k", str(k), "--result",
                      result))
    out = tmp / f"{result}.csv"
    ok(cluster.client("analyst", "fetch", "--result", result, "--out", str(out)))
    return out.read_text()


def expected(tmp: Path, files: list[Path], k: int, *options: str) -> str:
    """D' as ``mpc-client plaintext --out`` writes it from the same files."""
    out = tmp / f"expected-{len(list(tmp.iterdir()))}.csv"
    ok(plaintext(*map(str, files), "--k", str(k), "--out", str(out), *options))
    return out.read_text()


def listed(cluster: LocalCluster, dataset: str) -> list[dict[str, Any] | None]:
    """Every server's listing of ``dataset`` (None where it is not stored)."""
    by_server = json.loads(ok(cluster.client("analyst", "datasets", "--json")))
    return [next((d for d in by_server[s] if d["name"] == dataset), None)
            for s in ("alice", "bob", "carol")]


def test_labels_0_and_0_0_are_one_class_and_new_classes_are_named(
        cluster: LocalCluster, tmp_path: Path) -> None:
    rng = np.random.default_rng(30)
    files = []
    for i, spelling in enumerate(({0: "0", 1: "1"}, {0: "0.0", 1: " 1.0 "},
                                  {0: "0e0", 1: "1", 2: "2"})):
        y = rng.integers(0, len(spelling), 40)
        frame = pd.DataFrame(rng.normal(size=(40, 5)).round(3), columns=list("abcde"))
        frame["y"] = [spelling[int(v)] for v in y]
        files.append(tmp_path / f"owner{i}.csv")
        frame.to_csv(files[-1], index=False)
    first = share(cluster, "hospital-a", files[0], "labels", "--label", "y")
    second = share(cluster, "hospital-b", files[1], "labels", "--label", "y")
    assert "new classes" not in first + second
    assert all(d is not None and d["classes"] == ["0", "1"] for d in listed(cluster, "labels"))
    third = share(cluster, "outsider", files[2], "labels", "--label", "y")
    assert "new classes ['2']" in third, third
    assert all(d is not None and d["classes"] == ["0", "1", "2"]
               for d in listed(cluster, "labels"))
    assert selected(cluster, tmp_path, "labels", 2) == expected(tmp_path, files, 2, "--label",
                                                                "y")


def test_digits_split_by_class_across_three_owners_without_a_schema(
        cluster: LocalCluster, tmp_path: Path) -> None:
    digits = datasets.load_digits()
    frame = pd.DataFrame(digits.data, columns=[f"pixel_{j // 8}_{j % 8}" for j in range(64)])
    frame["digit"] = digits.target
    files = []
    for owner, classes in (("hospital-a", (0, 1, 2, 3)), ("hospital-b", (4, 5, 6)),
                           ("outsider", (7, 8, 9))):
        files.append(tmp_path / f"{owner}.csv")
        frame[frame["digit"].isin(classes)].to_csv(files[-1], index=False)
        share(cluster, owner, files[-1], "digits", "--label", "digit")
    assert (frame[frame["digit"] < 4].iloc[:, :64].max() == 0).any()  # the trial's case
    want = expected(tmp_path, files, 10, "--label", "digit")
    assert selected(cluster, tmp_path, "digits", 10) == want


def test_wine_text_column_with_gaps_is_a_category_of_its_own(
        cluster: LocalCluster, tmp_path: Path) -> None:
    wine = datasets.load_wine()
    frame = pd.DataFrame(wine.data, columns=wine.feature_names)
    band = np.array(["low", "mid", "high"])[np.digitize(frame["hue"], [0.8, 1.1])]
    band[::7] = ""  # missing cells
    frame["hue_band"] = band
    frame["class"] = wine.target
    files = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.iloc[:89].to_csv(files[0], index=False)  # classes 0 and 1
    frame.iloc[89:].to_csv(files[1], index=False)  # classes 1 and 2
    options = ("--label", "class", "--categorical", "ordinal", "--missing", "mean")
    release = ("--release", "values", "label", "names")
    share(cluster, "hospital-a", files[0], "wine", *options, *release)
    second = share(cluster, "hospital-b", files[1], "wine", *options, *release)
    assert "new classes ['2']" in second, second
    first = sorted({MISSING_CATEGORY} | set(map(str, band[:89])) - {""})
    later = sorted(set(map(str, band[89:])) - set(first) - {""})
    assert later and f"new categories of 'hue_band': {later}" in second, second
    schema = tomllib.loads(ok(cluster.client("hospital-a", "schema", "--dataset", "wine")))
    categories = first + later  # the first owner's codes keep their meaning
    assert schema["columns"]["hue_band"] == {"type": "categorical", "categories": categories}
    p = frame.shape[1] - 1
    got = selected(cluster, tmp_path, "wine", p)  # k = p: every column, hue_band among them
    assert got == expected(tmp_path, files, p, *options, *release)
    fetched = pd.read_csv(tmp_path / f"wine-top{p}.csv", keep_default_na=False)
    codes = fetched["hue_band"].astype(float)
    assert (codes[band == ""] == categories.index(MISSING_CATEGORY)).all()
    assert codes[band != ""].tolist() == [categories.index(b) for b in band[band != ""]]
    assert fetched["class"].astype(str).tolist() == [str(c) for c in wine.target]


@pytest.mark.parametrize("kind", ["semicolon", "gzip", "parquet"])
def test_each_input_format_gives_the_selection_of_the_same_data_as_csv(
        cluster: LocalCluster, tmp_path: Path, kind: str) -> None:
    rng = np.random.default_rng(len(kind))
    frame = pd.DataFrame(rng.normal(size=(60, 6)).round(4), columns=[f"x{j}" for j in range(6)])
    frame["site"] = rng.choice(["north; upper", "south, 'low'", 'east "x"'], 60)
    frame["y"] = rng.integers(0, 2, 60)
    csvs, files = [tmp_path / "a.csv", tmp_path / "b.csv"], []
    options = ["--label", "y", "--categorical", "ordinal"]
    for part, path in zip((frame.iloc[:30], frame.iloc[30:]), csvs, strict=True):
        part.to_csv(path, index=False)
        if kind == "semicolon":
            files.append(path.with_suffix(".semi.csv"))
            part.to_csv(files[-1], index=False, sep=";", quotechar="'")
        elif kind == "gzip":
            files.append(path.with_suffix(".csv.gz"))
            part.to_csv(files[-1], index=False, compression="gzip")
        else:
            pytest.importorskip("pyarrow")
            files.append(path.with_suffix(".parquet"))
            part.to_parquet(files[-1], index=False)
    dialect = ["--delimiter", ";", "--quote", "'"] if kind == "semicolon" else []
    for owner, path in zip(("hospital-a", "hospital-b"), files, strict=True):
        share(cluster, owner, path, f"format-{kind}", *options, *dialect)
    want = expected(tmp_path, csvs, 4, *options)
    assert selected(cluster, tmp_path, f"format-{kind}", 4) == want
    assert expected(tmp_path, files, 4, *options, *dialect) == want


def test_an_owner_withdraws_its_own_contribution_and_the_last_one_removes_the_dataset(
        cluster: LocalCluster, tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    files = []
    for i in range(2):
        frame = pd.DataFrame(rng.normal(size=(20, 3)).round(3), columns=list("abc"))
        frame["y"] = rng.integers(0, 2, 20)
        files.append(tmp_path / f"w{i}.csv")
        frame.to_csv(files[-1], index=False)
    share(cluster, "hospital-a", files[0], "withdrawn", "--label", "y")
    share(cluster, "hospital-b", files[1], "withdrawn", "--label", "y")
    denied = cluster.client("analyst", "withdraw", "--dataset", "withdrawn")
    assert denied.returncode == 2 and "may not use `mpc-client withdraw`" in denied.stderr
    none = cluster.client("outsider", "withdraw", "--dataset", "withdrawn")
    assert none.returncode == 2 and "no server holds a contribution of outsider" in none.stderr
    assert "the other owners' contributions stay" in ok(
        cluster.client("hospital-b", "withdraw", "--dataset", "withdrawn"))
    assert all(d is not None and d["owners"] == ["hospital-a"] and d["rows"] == 20
               for d in listed(cluster, "withdrawn"))
    again = cluster.client("hospital-b", "withdraw", "--dataset", "withdrawn")
    assert again.returncode == 2 and "no server holds" in again.stderr
    gone = json.loads(ok(cluster.client("hospital-a", "withdraw", "--dataset", "withdrawn",
                                        "--json")))
    assert gone["dataset_removed"] and gone["servers"] == ["alice", "bob", "carol"]
    assert listed(cluster, "withdrawn") == [None, None, None]
    share(cluster, "hospital-b", files[1], "withdrawn", "--label", "y")  # the name is free
    assert all(d is not None and d["owners"] == ["hospital-b"]
               for d in listed(cluster, "withdrawn"))


def _withdraw_csv(tmp: Path, name: str, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(size=(20, 3)).round(3), columns=list("abc"))
    frame["y"] = rng.integers(0, 2, 20)
    frame.to_csv(tmp / name, index=False)
    return tmp / name


def test_withdrawing_where_a_co_owner_already_withdrew_asks_each_server_at_its_digest(
        cluster: LocalCluster, tmp_path: Path) -> None:
    """hospital-b withdraws from carol only (its own op at carol's digest): the servers then
    differ, which only stops jobs; hospital-a's withdraw must still succeed everywhere."""
    import asyncio

    from mpcnet.client.connection import Connections

    share(cluster, "hospital-a", _withdraw_csv(tmp_path, "a.csv", 4), "partial", "--label", "y")
    share(cluster, "hospital-b", _withdraw_csv(tmp_path, "b.csv", 5), "partial", "--label", "y")

    async def on_carol_only() -> Any:
        conns = Connections(cluster.dep, "hospital-b")
        try:
            carol = await conns.session(next(s for s in cluster.dep.servers
                                             if s.name == "carol"))
            view = (await carol.request("schema", dataset="partial"))["manifest"]
            return await carol.request("withdraw", dataset="partial", digest=view["digest"])
        finally:
            conns.close()

    assert asyncio.run(on_carol_only())["withdrawn"]
    assert [d["owners"] for d in listed(cluster, "partial")] == [
        ["hospital-a", "hospital-b"], ["hospital-a", "hospital-b"], ["hospital-a"]]
    w = json.loads(ok(cluster.client("hospital-a", "withdraw", "--dataset", "partial",
                                     "--json")))
    assert w["servers"] == ["alice", "bob", "carol"] and w["still_held"] == {}
    assert [d and d["owners"] for d in listed(cluster, "partial")] == [
        ["hospital-b"], ["hospital-b"], None]


def test_withdrawing_with_a_server_down_withdraws_elsewhere_and_names_it(
        cluster: LocalCluster, tmp_path: Path) -> None:
    share(cluster, "hospital-a", _withdraw_csv(tmp_path, "d.csv", 6), "down", "--label", "y")
    share(cluster, "hospital-b", _withdraw_csv(tmp_path, "e.csv", 7), "down", "--label", "y")
    cluster.kill("carol")
    try:
        r = cluster.client("hospital-a", "withdraw", "--dataset", "down", timeout=60)
        assert r.returncode == 3, r.stderr
        assert "not withdrawn from carol" in r.stderr and "alice, bob" in r.stdout
    finally:
        cluster.restart("carol")
    assert [d and d["owners"] for d in listed(cluster, "down")] == [
        ["hospital-b"], ["hospital-b"], ["hospital-a", "hospital-b"]]
    w = json.loads(ok(cluster.client("hospital-a", "withdraw", "--dataset", "down", "--json")))
    assert w["servers"] == ["carol"] and w["still_held"] == {}  # the rerun finishes it
    assert all(d is not None and d["owners"] == ["hospital-b"] for d in listed(cluster, "down"))


def test_an_owner_no_longer_allowed_to_upload_still_withdraws(cluster: LocalCluster,
                                                              tmp_path: Path) -> None:
    """carol's operator narrows hospital-a's datasets after it shared: hospital-a reads
    carol's digest (no schema) and withdraws there as everywhere."""
    share(cluster, "hospital-a", _withdraw_csv(tmp_path, "r.csv", 8), "revoked", "--label", "y")
    text = cluster.config_path.read_text()
    owner = 'name = "hospital-a"\nrole = "owner"\n'
    assert owner in text
    narrowed = cluster.config_path.with_name("carol-narrowed.toml")
    narrowed.write_text(text.replace(owner, owner + 'datasets = ["other"]\n'))
    cluster.server_configs["carol"] = narrowed
    cluster.restart("carol")
    try:
        w = json.loads(ok(cluster.client("hospital-a", "withdraw", "--dataset", "revoked",
                                         "--json")))
        assert w["servers"] == ["alice", "bob", "carol"] and w["dataset_removed"]
    finally:
        del cluster.server_configs["carol"]
        cluster.restart("carol")
    assert listed(cluster, "revoked") == [None, None, None]


def test_select_takes_the_active_setting_the_owners_shared_for(cluster: LocalCluster,
                                                                tmp_path: Path) -> None:
    rng = np.random.default_rng(8)
    frame = pd.DataFrame(rng.normal(size=(24, 3)).round(3), columns=list("abc"))
    frame["y"] = rng.integers(0, 2, 24)
    frame.to_csv(tmp_path / "s.csv", index=False)
    share(cluster, "hospital-a", tmp_path / "s.csv", "secure", "--label", "y", "--security",
          "active3")
    job = json.loads(ok(cluster.client("analyst", "select", "--dataset", "secure", "--k", "3",
                                       "--result", "secure-all", "--json")))
    assert job["security"] == "active3" and job["k"] == 3  # k = p: every feature
