"""End to end: real mpc-party processes over TLS on 127.0.0.1, driven through mpc-client.

Small slices of LSVT keep it quick. Every process a test starts is stopped by PID
(``LocalCluster`` fixtures).
"""

from __future__ import annotations

import asyncio
import csv
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT
from reliability_common import lsvt_files, lsvt_slice, ok, refused

from mpcnet.certs.pki import keygen, self_signed, write_cert, write_key
from mpcnet.client.local import CLIENTS, LocalCluster, write_config
from mpcnet.client.session import Client
from mpcnet.dataset import read_csv
from mpcnet.net.tls import run
from mpcnet.pins import fingerprint


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return lsvt_files(tmp_path_factory.mktemp("csv"), {
        "whole": (slice(0, 60), range(12)), "top": (slice(0, 30), range(12)),
        "bottom": (slice(30, 60), range(12)), "left": (slice(0, 60), range(5), False),
        "right": (slice(0, 60), range(5, 12))})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    folder = tmp_path_factory.mktemp("deploy")
    clients = CLIENTS + (("analyst-2", "analyst"), ("analyst-3", "analyst"))
    c = LocalCluster(folder, config_path=write_config(
        folder, 3, clients=clients, extra_client_lines={"outsider": 'datasets = ["elsewhere"]'}))
    with c:
        c.start()
        yield c


def _reduced(path: Path) -> tuple[list[str], np.ndarray]:
    """Header and cells (as written: text) of a fetched CSV file."""
    with open(path) as f:
        rows = list(csv.reader(f))
    return rows[0], np.array(rows[1:], dtype=str)


def _plaintext(csv_path: Path, k: int, scale_from: Path | None = None) -> np.ndarray:
    """The cells of D' in the clear, with the exponents the first owner's file
    (``scale_from``) fixes, as ``fetch --out`` writes them (equal cells mean equal encoded
    values)."""
    from mpcnet.client.demo import plaintext_reference
    from mpcnet.dataset import class_codes
    from mpcnet.fixedpoint import auto_exponents

    table = read_csv(csv_path, label="label")
    first = read_csv(scale_from, label="label") if scale_from else table
    classes, _ = class_codes(first.labels)
    return np.array(plaintext_reference(table, auto_exponents(first.values), classes,
                                        k).texts(), dtype=str)


def test_status_reports_every_server_and_its_mesh(cluster: LocalCluster) -> None:
    out = ok(cluster.client("analyst", "status"))
    for name in ("alice", "bob", "carol"):
        assert f"{name} " in out
    assert "DOWN" not in out
    # the containers' healthcheck: a server checks itself with its own certificate
    ok(cluster.client("bob", "status", "--server", "bob", "--no-mesh"))


def test_whole_rows_and_columns_give_the_same_reduced_dataset(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path) -> None:
    ok(cluster.client("hospital-a", "share", str(files["whole"]), "--dataset", "whole",
                      "--label", "label"))
    ok(cluster.client("hospital-a", "share", str(files["top"]), "--dataset", "byrows",
                      "--label", "label", "--rows"))
    ok(cluster.client("hospital-b", "share", str(files["bottom"]), "--dataset", "byrows",
                      "--label", "label", "--rows"))
    ok(cluster.client("hospital-a", "share", str(files["left"]), "--dataset", "bycols",
                      "--columns"))
    ok(cluster.client("hospital-b", "share", str(files["right"]), "--dataset", "bycols",
                      "--label", "label", "--columns"))
    listing = ok(cluster.client("analyst", "datasets"))
    assert listing.count("3/3 servers") == 3 and "bycols" in listing
    got = {}
    for ds in ("whole", "byrows", "bycols"):
        out = ok(cluster.client("analyst", "select", "--dataset", ds, "--k", "4", "--result",
                                f"{ds}-r"))
        assert "done" in out and "rounds" in out
        target = tmp_path / f"{ds}.csv"
        ok(cluster.client("analyst", "fetch", "--result", f"{ds}-r", "--out", str(target)))
        got[ds] = _reduced(target)
    header, whole = got["whole"]
    assert header == ["f1", "f2", "f3", "f4"] and whole.shape == (60, 4)
    # by columns, each owner scales its own columns over all rows: the very same encoding
    assert np.array_equal(whole, got["bycols"][1])
    assert np.array_equal(whole, _plaintext(files["whole"], 4))
    # by rows, the first owner's rows fix the scales: the same features, and values equal to
    # the plaintext ones under those scales (they differ from "whole" only in rounding)
    assert np.array_equal(got["byrows"][1], _plaintext(files["whole"], 4, files["top"]))
    values, by_rows = whole.astype(np.float64), got["byrows"][1].astype(np.float64)
    step = np.abs(values).max(axis=0) * 2.0**-28  # fixed point: precision relative to column
    assert (np.abs(values - by_rows) <= step).all()


def _with_site(src: Path, out: Path, sites: str, relabel: dict[int, str]) -> Path:
    """``src`` with a text column ``site`` (row i gets sites[i % len]) and some labels changed."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    li = rows[0].index("label")
    for i, row in enumerate(rows[1:]):
        row.insert(0, sites[i % len(sites)])
        if i in relabel:
            row[li + 1] = relabel[i]
    rows[0].insert(0, "site")
    with open(out, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return out


def test_a_later_owner_adds_a_class_and_a_category_without_any_reupload(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path) -> None:
    """Owners split by rows where only the second has a third class and a new category: the
    first owner's stored shares stay as they are, and D' is the plaintext one exactly."""
    from mpcnet.dataset import EncodingOptions
    from mpcnet.fixedpoint import auto_exponents

    first = _with_site(files["top"], tmp_path / "first.csv", "xy", {})
    second = _with_site(files["bottom"], tmp_path / "second.csv", "yzxz",
                        {i: "3" for i in range(0, 30, 3)})
    for owner, path in (("hospital-a", first), ("hospital-b", second)):
        ok(cluster.client(owner, "share", str(path), "--dataset", "grown", "--label", "label",
                          "--categorical", "ordinal"))
    listing = json.loads(ok(cluster.client("analyst", "--json", "datasets")))
    grown = next(d for d in listing["alice"] if d["name"] == "grown")
    assert grown["classes"] == ["1", "2", "3"] and grown["rows"] == 60
    # the plaintext: both files with the grown lists, at the scales the first owner fixed
    union = tmp_path / "union.csv"
    union.write_text(first.read_text() + "".join(second.read_text().splitlines(True)[1:]))
    lists = EncodingOptions(known_categories={"site": ["x", "y", "z"]})
    table = read_csv(union, label="label", options=lists)
    exponents = auto_exponents(read_csv(first, label="label", options=lists).values)
    from mpcnet.client.demo import plaintext_reference
    expected = np.array(plaintext_reference(table, exponents, ["1", "2", "3"], 5).texts())
    for security in ("passive3", "active3"):
        ok(cluster.client("analyst", "select", "--dataset", "grown", "--k", "5", "--result",
                          f"grown-{security}", "--security", security))
        target = tmp_path / f"grown-{security}.csv"
        ok(cluster.client("analyst", "fetch", "--result", f"grown-{security}", "--out",
                          str(target)))
        assert np.array_equal(_reduced(target)[1], expected)


def test_a_declared_schema_is_kept_and_checked_on_every_upload(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path) -> None:
    """Owners agree on a schema first (drafted from a sample, then widened): the first share
    registers it, uploads that break it are refused naming the column, and D' equals the
    plaintext command's output cell for cell."""
    first = _with_site(files["top"], tmp_path / "first.csv", "xy", {})
    second = _with_site(files["bottom"], tmp_path / "second.csv", "yzx", {})
    sample = tmp_path / "sample.csv"  # what the owners agree to cover: both files' ranges
    sample.write_text(first.read_text() + "".join(second.read_text().splitlines(True)[1:]))
    draft = tmp_path / "draft.toml"
    ok(cluster.client("hospital-a", "draft-schema", str(sample), "--label", "label",
                      "--categorical", "ordinal", "--out", str(draft)))
    text = draft.read_text().replace('classes = ["1", "2"]', 'classes = ["1", "2", "3"]')
    schema = tmp_path / "study.toml"
    schema.write_text(text)
    bad = tmp_path / "bad.csv"  # a category nobody declared
    bad.write_text(second.read_text().replace("\nz,", "\nw,", 1))
    big = tmp_path / "big.csv"  # a value beyond the declared range
    rows = second.read_text().splitlines(True)
    cells = rows[3].split(",")
    cells[2] = str(float(cells[2]) * 1000)
    big.write_text("".join(rows[:3]) + ",".join(cells) + "".join(rows[4:]))
    ok(cluster.client("hospital-a", "share", str(first), "--dataset", "declared",
                      "--schema", str(schema)))
    r = cluster.client("hospital-b", "share", str(bad), "--dataset", "declared")
    assert r.returncode == 2 and "column 'site'" in r.stderr and "'w'" in r.stderr, r.stderr
    # the declared ranges stay with the owners' file (the servers keep the exponents only)
    r = cluster.client("hospital-b", "share", str(big), "--dataset", "declared", "--schema",
                       str(schema))
    assert r.returncode == 2 and "row 3" in r.stderr and "outside the declared range" in \
        r.stderr, r.stderr
    r = cluster.client("hospital-b", "share", str(second), "--dataset", "declared",
                       "--schema", str(draft))
    assert r.returncode == 2 and "already has another declared schema" in r.stderr, r.stderr
    ok(cluster.client("hospital-b", "share", str(second), "--dataset", "declared"))
    printed = ok(cluster.client("hospital-b", "schema", "--dataset", "declared"))
    assert "declared schema" in printed and 'classes = ["1", "2", "3"]' in printed
    ok(cluster.client("analyst", "select", "--dataset", "declared", "--k", "4", "--result",
                      "declared-r"))
    ok(cluster.client("analyst", "fetch", "--result", "declared-r", "--out",
                      str(tmp_path / "got.csv")))
    out = ok(cluster.client("analyst", "plaintext", str(first), str(second), "--k", "4",
                            "--schema", str(schema), "--out", str(tmp_path / "want.csv")))
    assert "selected" in out
    assert (tmp_path / "got.csv").read_text() == (tmp_path / "want.csv").read_text()


def test_the_plaintext_command_predicts_a_dataset_that_grew(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path) -> None:
    """Without a declaration: the first file fixes the scales, the second adds a class."""
    first = _with_site(files["top"], tmp_path / "a.csv", "xy", {})
    second = _with_site(files["bottom"], tmp_path / "b.csv", "zy", {1: "3", 4: "3"})
    for owner, path in (("hospital-a", first), ("hospital-b", second)):
        ok(cluster.client(owner, "share", str(path), "--dataset", "predicted", "--label",
                          "label", "--categorical", "ordinal"))
    ok(cluster.client("analyst", "select", "--dataset", "predicted", "--k", "3", "--result",
                      "predicted-r"))
    ok(cluster.client("analyst", "fetch", "--result", "predicted-r", "--out",
                      str(tmp_path / "got.csv")))
    ok(cluster.client("analyst", "plaintext", str(first), str(second), "--k", "3", "--label",
                      "label", "--categorical", "ordinal", "--out", str(tmp_path / "want.csv")))
    assert (tmp_path / "got.csv").read_text() == (tmp_path / "want.csv").read_text()


@pytest.mark.parametrize("release", [("shares",), ("values",), ("values", "label"),
                                     ("values", "names"), ("values", "label", "names")])
def test_fetch_writes_what_the_owners_release(cluster: LocalCluster, files: dict[str, Path],
                                              tmp_path: Path, release: tuple[str, ...]) -> None:
    """The label and the selected columns' names are in D' exactly when every owner allows
    them; with shares only, fetch --out is refused and --shares-dir works."""
    ds = "rel-" + "-".join(release)
    ok(cluster.client("hospital-a", "share", str(files["top"]), "--dataset", ds, "--label",
                      "label", "--release", *release))
    ok(cluster.client("hospital-b", "share", str(files["bottom"]), "--dataset", ds, "--label",
                      "label", "--release", "values", "label", "names"))  # the other allows all
    ok(cluster.client("analyst", "select", "--dataset", ds, "--k", "3", "--result", ds))
    got = tmp_path / "got.csv"
    r = cluster.client("analyst", "fetch", "--result", ds, "--out", str(got))
    if release == ("shares",):
        assert r.returncode == 2 and "--shares-dir" in r.stderr and not got.exists(), r.stderr
        ok(cluster.client("analyst", "fetch", "--result", ds, "--shares-dir",
                          str(tmp_path / "s")))
        assert sorted(p.name for p in (tmp_path / "s").iterdir())[:2] == [
            "alice.exponents.npy", "alice.reduced.npy"]
        return
    assert r.returncode == 0, r.stderr
    header = got.read_text().splitlines()[0].split(",")
    assert (header[-1] == "label") == ("label" in release)
    assert (header[0] == "f1") == ("names" not in release)
    assert ("label" in release) == ("with the label 'label'" in r.stdout), r.stdout
    want = tmp_path / "want.csv"
    ok(cluster.client("analyst", "plaintext", str(files["top"]), str(files["bottom"]), "--k",
                      "3", "--label", "label", "--release", *release, "--out", str(want)))
    assert got.read_text() == want.read_text()


def _trained_model(cluster: LocalCluster, tmp_path: Path, result: str, model: str,
                   security: str) -> dict[str, Any]:
    """Train ``model`` on ``result`` for the model owner clinic and read it as clinic."""
    out = ok(cluster.client("analyst", "train", "--result", result, "--model", model,
                            "--owner", "clinic", "--epochs", "40"))
    assert "stored for clinic" in out and security in out and "40 epochs" in out, out
    path = tmp_path / f"{model}.json"
    out = ok(cluster.client("clinic", "model", "--model", model, "--out", str(path),
                            "--from", "analyst"))
    assert "trained by analyst" in out, out
    assert "was trained by analyst, not by analyst-2" in refused(cluster.client(
        "clinic", "model", "--model", model, "--out", str(tmp_path / "x.json"), "--from",
        "analyst-2"), 2)
    return json.loads(path.read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("security", ["passive3", "active3"])
def test_a_model_trained_on_a_result_reaches_its_owner_only(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path, security: str) -> None:
    """Fig. 1 in full: select, train on D' without reconstructing it, and only the model
    owner reads the model; applied to D' it predicts what the float reference model does."""
    from mpcnet.plain import logreg

    ds, result, model = f"fit-{security}", f"fit-r-{security}", f"fit-m-{security}"
    ok(cluster.client("hospital-a", "share", str(files["whole"]), "--dataset", ds, "--label",
                      "label", "--release", "values", "label", "names"))
    ok(cluster.client("analyst", "select", "--dataset", ds, "--k", "4", "--result", result,
                      "--security", security))
    got = _trained_model(cluster, tmp_path, result, model, security)
    assert sorted(got) == ["classes", "coef", "columns", "intercept", "mean", "scale"]
    reduced = tmp_path / "reduced.csv"
    ok(cluster.client("analyst", "fetch", "--result", result, "--out", str(reduced)))
    header, cells = _reduced(reduced)
    assert got["columns"] == header[:4] and len(got["coef"]) == 1
    x, labels = cells[:, :4].astype(np.float64), cells[:, 4]
    private = logreg.Model(got["classes"], got["columns"], np.array(got["coef"]),
                           np.array(got["intercept"]), np.array(got["mean"]),
                           np.array(got["scale"]))
    # the reference: the same algorithm in float64 on the same values
    standardised, mean, scale = logreg.standardise(x)
    codes = np.array([got["classes"].index(v) for v in labels])
    coef, intercept = logreg.fit(standardised, codes, 2, logreg.Training(epochs=40))
    np.testing.assert_allclose(private.mean, mean, rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(private.scale, scale, rtol=1e-4)
    np.testing.assert_allclose(private.coef, coef, atol=0.02)
    reference = logreg.Model(got["classes"], got["columns"], coef, intercept, mean, scale)
    agree = np.mean(np.array(private.predict(x)) == np.array(reference.predict(x)))
    assert agree >= 0.95 and np.mean(np.array(private.predict(x)) == labels) > 0.6
    # the model is its owner's alone: not the analyst's who trained it, not another's
    assert "no model" in refused(cluster.client("analyst", "model", "--model", model,
                                                 "--out", str(tmp_path / "a.json")), 2)
    assert "no result" in refused(cluster.client("analyst", "fetch", "--result", model,
                                                 "--out", str(tmp_path / "a.csv")), 2)
    assert "model-owner" in refused(cluster.client("outsider", "model", "--model", model,
                                                   "--out", str(tmp_path / "o.json")), 2)
    assert "not a model owner" in refused(cluster.client(
        "analyst", "train", "--result", result, "--model", "m2", "--owner", "analyst-2"))
    assert "no selection result" in refused(cluster.client(
        "analyst-2", "train", "--result", result, "--model", "m3", "--owner", "clinic"), 2)
    assert "already exists" in refused(cluster.client(
        "analyst", "train", "--result", result, "--model", model, "--owner", "clinic"))
    # a model for the analyst itself: only where the owners release the label (it holds D')
    ok(cluster.client("analyst", "train", "--result", result, "--model", f"{model}-own",
                      "--owner", "analyst", "--epochs", "2"))
    ok(cluster.client("analyst", "model", "--model", f"{model}-own", "--out",
                      str(tmp_path / "own.json")))
    hidden = f"{ds}-nolabel"
    ok(cluster.client("hospital-a", "share", str(files["whole"]), "--dataset", hidden,
                      "--label", "label"))
    ok(cluster.client("analyst", "select", "--dataset", hidden, "--k", "4", "--result", hidden,
                      "--security", security))
    assert "give it away" in refused(cluster.client(
        "analyst", "train", "--result", hidden, "--model", "m4", "--owner", "analyst"), 2)


def test_active3_selects_from_the_same_shares(cluster: LocalCluster, files: dict[str, Path],
                                              tmp_path: Path) -> None:
    """Active 3PC on the three servers, from shares stored for passive3: D' is the plaintext one
    and the job's figures include the checks phase."""
    ok(cluster.client("hospital-a", "share", str(files["whole"]), "--dataset", "a3",
                      "--label", "label"))
    out = ok(cluster.client("analyst", "select", "--dataset", "a3", "--k", "4", "--result",
                            "a3-r", "--security", "active3"))
    assert "done" in out and "checks" in out
    by_server = json.loads(ok(cluster.client("analyst", "--json", "jobs")))
    assert len(by_server) == 3
    for jobs in by_server.values():  # every server ran it under active3
        assert any(j["result"] == "a3-r" and j["security"] == "active3" for j in jobs), jobs
    target = tmp_path / "a3.csv"
    ok(cluster.client("analyst", "fetch", "--result", "a3-r", "--out", str(target)))
    assert np.array_equal(_reduced(target)[1], _plaintext(files["whole"], 4))


@pytest.mark.parametrize("security", ["passive3", "active3"])
@pytest.mark.parametrize("score", ["chi2", "mi", "pcc", "gini"])
def test_every_score_selects_what_the_plaintext_command_predicts(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path, score: str,
        security: str) -> None:
    """``select --score`` on real servers: the job record names the score, and the fetched D'
    is the one ``plaintext --score`` computes from the same file."""
    dataset = f"sc-{score}-{security}"
    ok(cluster.client("hospital-a", "share", str(files["whole"]), "--dataset", dataset,
                      "--label", "label"))
    out = ok(cluster.client("analyst", "select", "--dataset", dataset, "--k", "4", "--result",
                            dataset, "--score", score, "--security", security))
    assert f"by {score}, {security}" in out
    jobs = json.loads(ok(cluster.client("analyst", "--json", "jobs")))
    assert all(any(j["result"] == dataset and j["score"] == score for j in server_jobs)
               for server_jobs in jobs.values())
    ok(cluster.client("analyst", "fetch", "--result", dataset, "--out",
                      str(tmp_path / "got.csv")))
    ok(cluster.client("analyst", "plaintext", str(files["whole"]), "--k", "4", "--label",
                      "label", "--score", score, "--out", str(tmp_path / "want.csv")))
    assert (tmp_path / "got.csv").read_text() == (tmp_path / "want.csv").read_text()


def test_an_owner_who_shares_for_active3_rules_out_passive_jobs(
        cluster: LocalCluster, files: dict[str, Path]) -> None:
    ok(cluster.client("hospital-a", "share", str(files["whole"]), "--dataset", "guard",
                      "--label", "label", "--security", "active3"))
    assert "active3" in ok(cluster.client("analyst", "datasets"))
    r = cluster.client("analyst", "select", "--dataset", "guard", "--k", "3", "--result", "g",
                       "--security", "passive3")
    assert r.returncode == 2 and "run the job with --security active3" in r.stderr, r.stderr
    # without --security the select takes the setting the owner shared for
    assert "active3" in ok(cluster.client("analyst", "select", "--dataset", "guard", "--k",
                                          "3", "--result", "g"))


def test_results_belong_to_their_analyst_and_those_it_shares_with(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path) -> None:
    """A result is fetched by the analyst who signed its request and the analysts it named;
    every server enforces it on its own shares, so no single server can widen it."""
    ok(cluster.client("hospital-a", "share", str(files["whole"]), "--dataset", "owned",
                      "--label", "label"))
    out = ok(cluster.client("analyst", "select", "--dataset", "owned", "--k", "3", "--result",
                            "owned-r", "--share-with", "analyst-2"))
    job = out.split()[1]
    expected = _plaintext(files["whole"], 3)
    for who in ("analyst", "analyst-2"):
        listed = json.loads(ok(cluster.client(who, "--json", "results")))
        assert all(any(r["name"] == "owned-r" and r["owner"] == "analyst"
                       and r["share_with"] == ["analyst-2"] for r in rs)
                   for rs in listed.values()), (who, listed)
        ok(cluster.client(who, "fetch", "--result", "owned-r", "--from", "analyst", "--out",
                          str(tmp_path / f"{who}.csv")))
        assert np.array_equal(_reduced(tmp_path / f"{who}.csv")[1], expected)
    # analyst-3 sees neither the result nor the job, on any server
    r = cluster.client("analyst-3", "fetch", "--result", "owned-r", "--out",
                       str(tmp_path / "no.csv"))
    assert r.returncode == 2 and "no result 'owned-r'" in r.stderr and \
        not (tmp_path / "no.csv").exists()
    listed = json.loads(ok(cluster.client("analyst-3", "--json", "results")))
    assert not any(r["name"] == "owned-r" for rs in listed.values() for r in rs)
    jobs = json.loads(ok(cluster.client("analyst-3", "--json", "jobs")))
    assert not any(j["id"] == job for js in jobs.values() for j in js)
    # names are per analyst: analyst-3 learns nothing from choosing the same one
    ok(cluster.client("analyst-3", "select", "--dataset", "owned", "--k", "2", "--result",
                      "owned-r"))
    ok(cluster.client("analyst-3", "fetch", "--result", "owned-r", "--out",
                      str(tmp_path / "mine.csv")))
    assert _reduced(tmp_path / "mine.csv")[1].shape == (60, 2)
    # a result can be shared with analysts only
    r = cluster.client("analyst", "select", "--dataset", "owned", "--k", "3", "--result",
                       "owned-x", "--share-with", "hospital-a")
    assert r.returncode == 2 and "hospital-a, who are not analysts" in r.stderr, r.stderr


def test_shares_dir_and_listings(cluster: LocalCluster, files: dict[str, Path],
                                 tmp_path: Path) -> None:
    ok(cluster.client("hospital-a", "share", str(files["whole"]), "--dataset", "listing",
                      "--label", "label"))
    ok(cluster.client("analyst", "select", "--dataset", "listing", "--k", "3", "--result",
                      "listing-r"))
    ok(cluster.client("analyst", "fetch", "--result", "listing-r", "--shares-dir",
                      str(tmp_path / "sh")))
    names = sorted(p.name for p in (tmp_path / "sh").iterdir())
    assert "alice.reduced.npy" in names and "carol.exponents.npy" in names
    assert np.load(tmp_path / "sh" / "bob.reduced.npy").shape == (2, 60, 3)
    assert "listing-r" in ok(cluster.client("analyst", "results"))
    jobs = ok(cluster.client("analyst", "jobs"))
    assert "done" in jobs and "listing-r" in jobs


def test_bad_uploads_store_nothing(cluster: LocalCluster, files: dict[str, Path],
                                   tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    lines = files["whole"].read_text().splitlines()
    cells = lines[3].split(",")
    cells[2] = "abc"
    lines[3] = ",".join(cells)
    bad.write_text("\n".join(lines) + "\n")
    r = cluster.client("hospital-a", "share", str(bad), "--dataset", "bad", "--label", "label")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "row" in r.stderr
    # a second owner with a different row count for a vertical dataset
    ok(cluster.client("hospital-a", "share", str(files["left"]), "--dataset", "vbad",
                      "--columns"))
    r = cluster.client("hospital-b", "share", str(files["top"]), "--dataset", "vbad",
                       "--columns", "--label", "label")
    assert r.returncode == 2 and "60 rows" in r.stderr
    listing = ok(cluster.client("analyst", "datasets"))
    rows = {line.split()[0]: line for line in listing.splitlines()}
    assert "bad" not in rows and "hospital-b" not in rows["vbad"]
    r = cluster.client("analyst", "select", "--dataset", "vbad", "--k", "2", "--result", "x")
    assert r.returncode == 2 and "label" in r.stderr
    r = cluster.client("analyst", "select", "--dataset", "nosuch", "--k", "2", "--result", "x")
    assert r.returncode == 2 and "nosuch" in r.stderr


def test_clients_without_role_or_valid_certificate_are_refused(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path) -> None:
    r = cluster.client("hospital-a", "select", "--dataset", "whole", "--k", "2", "--result", "n")
    assert r.returncode == 2 and "access denied" in r.stderr and "analyst" in r.stderr
    r = cluster.client("analyst", "share", str(files["whole"]), "--dataset", "z", "--label",
                       "label")
    assert r.returncode == 2 and "access denied" in r.stderr
    r = cluster.client("outsider", "share", str(files["whole"]), "--dataset", "z", "--label",
                       "label")
    assert r.returncode == 2 and "may not contribute" in r.stderr
    r = cluster.client("hospital-b", "fetch", "--result", "whole-r", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "access denied" in r.stderr
    # a key someone else made for the pinned name "analyst"
    key, cert = self_signed("analyst")
    write_key(key, tmp_path / "a.key")
    write_cert(cert, tmp_path / "a.pem")
    rogue = _config_copy(cluster, tmp_path, "rogue.toml",
                         '[[clients]]\nname = "analyst"', f'cert = "{tmp_path / "a.pem"}"\n'
                         f'key = "{tmp_path / "a.key"}"')
    r = cluster.client("analyst", "datasets", config_path=rogue)
    assert r.returncode == 2 and "not pinned" in r.stderr and fingerprint(cert) in r.stderr
    # no certificate at all
    missing = _config_copy(cluster, tmp_path, "none.toml", '[[clients]]\nname = "analyst"',
                           f'cert = "{tmp_path / "none.pem"}"\nkey = "{tmp_path / "none.key"}"')
    r = cluster.client("analyst", "datasets", config_path=missing)
    assert r.returncode == 2 and "not found" in r.stderr
    # a key of its own for a name the servers' files do not list
    stranger = _config_copy(cluster, tmp_path, "stranger.toml", '[[clients]]\nname = "analyst"',
                            "", rename=("analyst", "stranger"))
    keygen("stranger", tmp_path)
    r = cluster.client("stranger", "datasets", config_path=stranger)
    assert r.returncode == 2 and "not pinned" in r.stderr
    assert "DOWN" not in ok(cluster.client("analyst", "status"))


def _config_copy(cluster: LocalCluster, tmp_path: Path, name: str, anchor: str, lines: str,
                 rename: tuple[str, str] | None = None) -> Path:
    text = cluster.config_path.read_text()
    text = text.replace('dir = "certs"', f'dir = "{tmp_path}"')
    if rename:
        text = text.replace(f'name = "{rename[0]}"', f'name = "{rename[1]}"')
        anchor = anchor.replace(rename[0], rename[1])
    text = text.replace(anchor, anchor + "\n" + lines)
    out = tmp_path / name
    out.write_text(text)
    return out


def test_restart_between_sharing_and_selection_loses_nothing(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path) -> None:
    ok(cluster.client("hospital-a", "share", str(files["top"]), "--dataset", "durable",
                      "--label", "label"))
    ok(cluster.client("hospital-b", "share", str(files["bottom"]), "--dataset", "durable",
                      "--label", "label"))
    before = ok(cluster.client("analyst", "datasets"))
    cluster.kill("bob")  # SIGKILL: no chance to flush anything
    cluster.start(["bob"])
    assert ok(cluster.client("analyst", "datasets")) == before
    ok(cluster.client("analyst", "select", "--dataset", "durable", "--k", "4", "--result",
                      "durable-r"))
    ok(cluster.client("analyst", "fetch", "--result", "durable-r", "--out",
                      str(tmp_path / "d.csv")))
    assert np.array_equal(_reduced(tmp_path / "d.csv")[1],
                          _plaintext(files["whole"], 4, files["top"]))


def test_with_a_server_down_every_command_fails_fast_naming_it(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path) -> None:
    """No job is queued that cannot run, and listings still answer, marking the server.
    "Fast" means within the probe timeout, not the servers' connect timeout: the bound lies
    half way between the two, so a slow interpreter start does not fail it but a client
    waiting out ``connect_timeout`` does."""
    t = cluster.dep.timeouts
    limit = (t.probe + t.connect) / 2
    ok(cluster.client("hospital-a", "share", str(files["whole"]), "--dataset", "fast",
                      "--label", "label"))
    ok(cluster.client("analyst", "select", "--dataset", "fast", "--k", "3", "--result",
                      "fast-r"))
    jobs_before = len(json.loads(ok(cluster.client("analyst", "--json", "jobs")))["alice"])
    cluster.kill("carol")
    times: dict[str, float] = {}
    try:
        commands = {
            "select": ("analyst", "select", "--dataset", "fast", "--k", "3", "--result", "x"),
            "fetch": ("analyst", "fetch", "--result", "fast-r", "--out", str(tmp_path / "o")),
            "share": ("hospital-b", "share", str(files["top"]), "--dataset", "f2", "--label",
                      "label"),
            "datasets": ("analyst", "datasets"), "results": ("analyst", "results"),
            "jobs": ("analyst", "jobs")}
        for what, (who, *args) in commands.items():
            t0 = time.monotonic()
            r = cluster.client(who, *args)
            took = time.monotonic() - t0
            assert r.returncode == 3 and "carol" in r.stderr, (what, r.stderr)
            assert took <= limit, f"{what} took {took:.1f} s with carol down"
            times[what] = took
            if what in ("datasets", "results", "jobs"):
                assert "carol: DOWN" in r.stdout and "alice" not in r.stderr, r.stdout
        assert not (tmp_path / "o").exists()
        print("\n[e2e] carol down: " + ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))
    finally:
        cluster.start(["carol"])
    # nothing was queued while carol was down
    assert len(json.loads(ok(cluster.client("analyst", "--json", "jobs")))["alice"]) \
        == jobs_before


def test_a_closed_pipe_ends_the_client_quietly(cluster: LocalCluster) -> None:
    """`mpc-client jobs | head`: the reader leaves early; no traceback."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "mpcnet.client.main", "--config",
                             str(cluster.config_path), "--as", "analyst", "jobs"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=cluster._env())
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before it prints anything
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141 and "Traceback" not in err, err


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "deploy", timeouts={"round_timeout": 10.0,
                                                    "connect_timeout": 3.0})
    with c:
        c.start()
        yield c


def test_server_killed_mid_job_fails_the_job_naming_it(fresh: LocalCluster,
                                                       tmp_path: Path) -> None:
    big = lsvt_slice(tmp_path / "big.csv", slice(0, 126), list(range(310)))
    ok(fresh.client("hospital-a", "share", str(files_small := lsvt_slice(
        tmp_path / "small.csv", slice(0, 40), list(range(8)))), "--dataset", "early",
        "--label", "label"))
    ok(fresh.client("hospital-a", "share", str(big), "--dataset", "big", "--label", "label"))

    async def scenario() -> tuple[str, float, dict[str, dict[str, object]]]:
        cl = Client(fresh.dep, "analyst")
        try:
            task = asyncio.ensure_future(cl.select("big", 103, "big-r"))
            other = Client(fresh.dep, "analyst")
            lead = await other.session(fresh.dep.leader)
            deadline = time.monotonic() + 30
            while True:  # wait until the protocol is under way, then kill bob
                jobs = (await lead.request("jobs"))["jobs"]
                prog = jobs[-1].get("progress") if jobs else None
                if prog and prog.get("rounds", 0) >= 3:
                    break
                assert not jobs or jobs[-1]["state"] in ("queued", "running"), \
                    "the job ended before it could be interrupted"
                assert time.monotonic() < deadline
                await asyncio.sleep(0.005)
            fresh.kill("bob")
            t = time.monotonic()
            with pytest.raises(Exception) as err:
                await task
            waited = time.monotonic() - t
            job_id = jobs[-1]["id"]
            records = {}
            for srv in (fresh.dep.servers[0], fresh.dep.servers[2]):
                sess = await other.session(srv)
                records[srv.name] = (await sess.request("job", id=job_id))["job"]
            other.close()
            return str(err.value), waited, records
        finally:
            cl.close()

    message, waited, records = run(scenario())
    assert "bob" in message and "failed" in message
    assert waited < 10
    r = fresh.client("analyst", "status")
    assert r.returncode == 3 and "bob" in r.stderr
    for rec in records.values():
        assert rec["state"] == "failed" and "bob" in str(rec["error"])
    fresh.start(["bob"])
    listing = ok(fresh.client("analyst", "datasets"))
    assert "early" in listing and "big " in listing and listing.count("3/3 servers") == 2
    ok(fresh.client("analyst", "select", "--dataset", "early", "--k", "3", "--result", "again"))
    ok(fresh.client("analyst", "fetch", "--result", "again", "--out", str(tmp_path / "a.csv")))
    assert np.array_equal(_reduced(tmp_path / "a.csv")[1], _plaintext(files_small, 3))


def test_the_demo_command_checks_itself(tmp_path: Path) -> None:
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "mpcnet.client.demo", "--dataset", "lsvt",
                        "--workdir", str(tmp_path / "demo")], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "equals the plaintext selection: yes" in r.stdout
    assert "103 features selected" in r.stdout


def test_four_servers_active4(tmp_path: Path, files: dict[str, Path]) -> None:
    with LocalCluster(tmp_path / "four", n_servers=4) as four:
        four.start()
        ok(four.client("hospital-a", "share", str(files["whole"]), "--dataset", "w",
                       "--label", "label"))
        assert "active4" in ok(four.client("analyst", "datasets"))
        r = four.client("analyst", "select", "--dataset", "w", "--k", "4", "--result", "p",
                        "--security", "passive3")
        assert r.returncode == 2 and "shared for active4" in r.stderr
        out = ok(four.client("analyst", "select", "--dataset", "w", "--k", "4", "--result", "r"))
        assert "active4" in out
        ok(four.client("analyst", "fetch", "--result", "r", "--out", str(tmp_path / "r.csv")))
        assert np.array_equal(_reduced(tmp_path / "r.csv")[1], _plaintext(files["whole"], 4))
        for score in ("chi2", "mi", "pcc", "gini"):
            ok(four.client("analyst", "select", "--dataset", "w", "--k", "4", "--result",
                           score, "--score", score))
            ok(four.client("analyst", "fetch", "--result", score, "--out",
                           str(tmp_path / f"{score}.csv")))
            ok(four.client("analyst", "plaintext", str(files["whole"]), "--k", "4", "--label",
                           "label", "--score", score, "--out", str(tmp_path / f"{score}-p.csv")))
            assert (tmp_path / f"{score}.csv").read_text() == \
                (tmp_path / f"{score}-p.csv").read_text()
        model = _trained_model(four, tmp_path, "r", "m", "active4")
        assert model["columns"] == ["f1", "f2", "f3", "f4"] and len(model["scale"]) == 4


@pytest.mark.parametrize("security", ["passive3", "active4", "active3"])
def test_a_job_in_blocks_bundles_its_rounds_over_tls(tmp_path: Path, security: str) -> None:
    """A memory budget that cuts the job into blocks: the blocks' fractions share their rounds
    (``RoundEngine.together``, bundles of arrays over real TLS links), passive3's and
    active4's blocks are staggered (``RoundEngine.staggered``), and D' equals the plaintext
    selection."""
    from reliability_common import plaintext

    rng = np.random.default_rng(7)
    m, p, k = 3000, 40, 5
    labels = rng.integers(0, 3, m)
    values = rng.integers(-500, 500, (m, p)) + labels[:, None] * rng.integers(0, 40, p)
    source = tmp_path / "blocks.csv"
    with open(source, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow([f"f{j}" for j in range(p)] + ["label"])
        out.writerows([*row, f"c{c}"] for row, c in zip(values.tolist(), labels, strict=True))
    folder = tmp_path / "deploy"
    cfg = write_config(folder, 4 if security == "active4" else 3)
    cfg.write_text(cfg.read_text().replace("[deployment]\n",
                                           '[deployment]\nmemory_budget = "280 MiB"\n', 1))
    with LocalCluster(folder, config_path=cfg) as c:
        c.start()
        ok(c.client("hospital-a", "share", str(source), "--dataset", "big", "--label", "label",
                    "--security", security))
        job = json.loads(ok(c.client("analyst", "--json", "select", "--dataset", "big", "--k",
                                     str(k), "--result", "big-r", "--security", security)))
        target = tmp_path / "reduced.csv"
        ok(c.client("analyst", "fetch", "--result", "big-r", "--out", str(target)))
    plan = job["figures"]["plan"]
    assert plan["blocks"] > 1 and plan["blocks_finished_together"] == plan["blocks"]
    assert plan["blocks_staggered"] == (security != "active3")
    np.testing.assert_array_equal(_reduced(target)[1].astype(np.float64),
                                  plaintext([source], k))
