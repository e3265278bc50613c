"""Reliability: bad input through ``mpc-client share / select / fetch``.

Every case runs the real command against real servers and must end with exit status 2, one
line on stderr that names what is wrong and where (file, row and CSV line, column; or the
dataset, k, result), nothing stored or left in staging on any server (SHA-256 of every stored
file compared), and every server still up.

Re-uploading to an existing dataset name: the servers refuse a second contribution by the same
owner (each owner contributes once per dataset; a new dataset name starts over), while another
owner's contribution is added to it (appended rows, or added columns); nothing is ever
overwritten. The last test shows the accepted case.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability_common import (
    alive,
    healthy,
    listing,
    lsvt_files,
    ok,
    refused,
    report,
    running_cluster,
    select_checked,
    snapshot,
)

from mpcnet.client.local import LocalCluster

Case = tuple[str, str, list[str], list[str]]  # name, identity, arguments, expected words


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("input")) as c:
        yield c


def _edit(src: Path, out: Path, fn: object) -> Path:
    """A copy of ``src`` with its rows (header first, as lists of cells) changed by ``fn``."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    fn(rows)  # type: ignore[operator]
    with open(out, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return out


def _set(row: int, col: int, value: str) -> object:
    def fn(rows: list[list[str]]) -> None:
        rows[row][col] = value
    return fn


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad")
    f = lsvt_files(d, {"base": (slice(0, 40), range(8)), "more": (slice(40, 80), range(8)),
                       "left": (slice(0, 40), range(4), False),
                       "short": (slice(0, 30), range(4, 8)),
                       "shifted": (slice(40, 80), range(1, 9))})
    base = f["base"]
    text = base.read_text()
    lines = text.splitlines()
    f["ragged"] = d / "ragged.csv"
    f["ragged"].write_text("\n".join(lines[:5] + [lines[5].rsplit(",", 1)[0]] + lines[6:]))
    f["quote"] = d / "quote.csv"
    f["quote"].write_text("\n".join(lines[:3] + ['"' + lines[3]] + lines[4:]) + "\n")
    f["quote2"] = d / "quote2.csv"
    f["quote2"].write_text("\n".join(lines[:3] + ['"1.5"x,' + lines[3].split(",", 1)[1]]
                                     + lines[4:]) + "\n")
    f["latin1"] = d / "latin1.csv"
    f["latin1"].write_bytes(("poids_\u00e9," + text.split(",", 1)[1]).encode("latin-1"))
    f["empty"] = d / "empty.csv"
    f["empty"].write_text("")
    f["header"] = d / "header.csv"
    f["header"].write_text(lines[0] + "\n")
    f["nonnum"] = _edit(base, d / "nonnum.csv", _set(3, 2, "abc"))
    f["missing"] = _edit(base, d / "missing.csv", _set(7, 1, ""))
    f["na"] = _edit(base, d / "na.csv", _set(9, 4, "NA"))
    f["inf"] = _edit(base, d / "inf.csv", _set(2, 0, "inf"))
    f["ninf"] = _edit(base, d / "ninf.csv", _set(5, 6, "-Infinity"))
    f["huge"] = _edit(base, d / "huge.csv", _set(6, 3, "1e999"))

    def one_class(rows: list[list[str]]) -> None:
        for r in rows[1:]:
            r[-1] = "1"
    f["oneclass"] = _edit(base, d / "oneclass.csv", one_class)
    f["nolabel"] = _edit(base, d / "nolabel.csv", _set(12, -1, ""))

    def dup(rows: list[list[str]]) -> None:
        rows[0][2] = rows[0][1]
    f["dup"] = _edit(base, d / "dup.csv", dup)

    def big(rows: list[list[str]]) -> None:  # 10^4 x the first owner's largest |value|
        col = [abs(float(r[5])) for r in rows[1:]]
        rows[8][5] = repr(max(col) * 1e4)
    f["range"] = _edit(f["more"], d / "range.csv", big)
    return f


def _cases(f: dict[str, Path], cols: list[str]) -> list[Case]:
    def share(who: str, key: str, *extra: str, dataset: str = "base") -> tuple[str, list[str]]:
        return who, ["share", str(f[key]), "--dataset", dataset, *extra]

    lab = ("--label", "label")
    cases: list[Case] = [
        ("ragged row", *share("hospital-b", "ragged", *lab, dataset="n1"),
         ["ragged.csv", "row 5 (line 6)", "8 cells, the header has 9"]),
        ("unterminated quote", *share("hospital-b", "quote", *lab, dataset="n1"),
         ["quote.csv", "bad CSV quoting"]),
        ("text after a quote", *share("hospital-b", "quote2", *lab, dataset="n1"),
         ["quote2.csv", "line 4: bad CSV quoting"]),
        ("wrong encoding (latin-1)", *share("hospital-b", "latin1", *lab, dataset="n1"),
         ["latin1.csv", "not valid UTF-8", "line 1"]),
        ("empty file", *share("hospital-b", "empty", *lab, dataset="n1"),
         ["empty.csv", "empty"]),
        ("header only", *share("hospital-b", "header", *lab, dataset="n1"),
         ["header.csv", "no data rows"]),
        ("duplicate column name", *share("hospital-b", "dup", *lab, dataset="n1"),
         ["dup.csv", "both named"]),
        ("non-numeric cell", *share("hospital-b", "nonnum", *lab, dataset="n1"),
         ["nonnum.csv", "row 3 (line 4)", f"column {cols[2]!r}", "'abc' is not a number",
          "--categorical ordinal"]),
        ("a typo in a numeric column, coded as categories",
         *share("hospital-b", "nonnum", *lab, "--categorical", "ordinal", dataset="n1"),
         ["nonnum.csv", "row 3 (line 4)", f"column {cols[2]!r}", f"--ordinal {cols[2]!r}"]),
        ("empty cell", *share("hospital-b", "missing", *lab, dataset="n1"),
         ["missing.csv", "row 7 (line 8)", f"column {cols[1]!r}", "missing value"]),
        ("NA cell", *share("hospital-b", "na", *lab, dataset="n1"),
         ["na.csv", "row 9 (line 10)", f"column {cols[4]!r}", "missing value"]),
        ("infinity", *share("hospital-b", "inf", *lab, dataset="n1"),
         ["inf.csv", "row 2 (line 3)", f"column {cols[0]!r}", "infinite"]),
        ("-Infinity", *share("hospital-b", "ninf", *lab, dataset="n1"),
         ["ninf.csv", "row 5 (line 6)", "infinite"]),
        ("1e999 (beyond float64)", *share("hospital-b", "huge", *lab, dataset="n1"),
         ["huge.csv", "row 6 (line 7)", "too large"]),
        ("beyond the fixed-point range", *share("hospital-b", "range", *lab),
         ["range.csv", "row 8", f"column {cols[5]!r}", "2**38", "first contribution fixed",
          "new --dataset"]),
        ("one class only", *share("hospital-b", "oneclass", *lab, dataset="n1"),
         ["oneclass.csv", "only the class"]),
        ("missing label", *share("hospital-b", "nolabel", *lab, dataset="n1"),
         ["nolabel.csv", "row 12 (line 13)", "label is missing"]),
        ("unknown label column", *share("hospital-b", "base", "--label", "nope", dataset="n1"),
         ["base.csv", "label column 'nope' is not in the header"]),
        ("file not found", "hospital-b", ["share", str(f["base"].with_name("none.csv")),
                                          "--dataset", "n1", *lab],
         ["none.csv", "cannot read the file"]),
        ("bad dataset name", *share("hospital-b", "base", *lab, dataset="../etc"),
         ["'../etc'", "not allowed"]),
        ("rows without a label", *share("hospital-b", "base", dataset="n1"),
         ["'n1'", "needs the label column"]),
        ("re-upload by the same owner", *share("hospital-a", "more", *lab),
         ["'base'", "hospital-a has already contributed"]),
        ("other columns than the dataset's", *share("hospital-b", "shifted", *lab),
         ["'base'", "columns differ"]),
        ("columns into a dataset split by rows", *share("hospital-b", "more", *lab,
                                                        "--columns"),
         ["'base'", "split by rows"]),
        ("vertical: different row count", *share("hospital-b", "short", *lab, "--columns",
                                                 dataset="vert"),
         ["'vert'", "40 rows", "contribution 30"]),
    ]
    select = ["select", "--dataset", "base", "--result", "x", "--k"]
    cases += [(f"k = {k}", "analyst", [*select, k], ["'base'", "between 1 and 8", f"got {k}"])
              for k in ("0", "-3", "9", "50")]
    cases += [
        ("select: unknown dataset", "analyst", ["select", "--dataset", "nosuch", "--k", "2",
                                                "--result", "x"], ["'nosuch'", "not stored"]),
        ("select: dataset without a label", "analyst", ["select", "--dataset", "vert", "--k",
                                                        "2", "--result", "x"],
         ["'vert'", "no contribution carries the label"]),
        ("select: existing result name", "analyst", ["select", "--dataset", "base", "--k", "2",
                                                     "--result", "base-r"],
         ["'base-r'", "already exists"]),
        ("fetch: unknown result", "analyst", ["fetch", "--result", "nosuch", "--out",
                                              str(f["base"].with_name("o.csv"))],
         ["'nosuch'", "no result"]),
    ]
    return cases


def test_bad_input_is_refused_and_nothing_is_stored(
        cluster: LocalCluster, files: dict[str, Path], request: pytest.FixtureRequest) -> None:
    ok(cluster.client("hospital-a", "share", str(files["base"]), "--dataset", "base",
                      "--label", "label"))
    ok(cluster.client("hospital-a", "share", str(files["left"]), "--dataset", "vert",
                      "--columns"))
    ok(cluster.client("analyst", "select", "--dataset", "base", "--k", "3", "--result",
                      "base-r"))
    cols = files["base"].read_text().splitlines()[0].split(",")
    before, datasets = snapshot(cluster), listing(cluster, "datasets")
    cases = _cases(files, cols)
    failures = []
    for name, who, args, words in cases:
        r = cluster.client(who, *args)
        try:
            err = refused(r, code=2)
            missing = [w for w in words if w not in err]
            assert not missing, f"{name}: {missing} not in {err!r}"
            assert snapshot(cluster) == before, f"{name}: something was stored"
            assert alive(cluster), f"{name}: a server stopped"
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, "\n".join(failures)
    assert listing(cluster, "datasets") == datasets
    assert not (files["base"].with_name("o.csv")).exists()
    assert healthy(cluster)
    for s in ("alice", "bob", "carol"):
        assert "Traceback" not in cluster.log(s) and "internal error" not in cluster.log(s)
    report(request, f"bad input: {len(cases)}/{len(cases)} refused with exit 2 and a one-line "
           "reason naming file/row/line/column or dataset/k/result; nothing stored "
           f"({sum(len(v) for v in before.values())} stored files unchanged, staging empty); "
           "3/3 servers up")


def test_another_owner_appends_to_an_existing_name(
        cluster: LocalCluster, files: dict[str, Path], request: pytest.FixtureRequest) -> None:
    """The accepted re-upload: a second owner adds its rows; every server stores them in the
    same order and the selection covers both contributions."""
    ok(cluster.client("hospital-b", "share", str(files["more"]), "--dataset", "base",
                      "--label", "label"))
    by_server = listing(cluster, "datasets")
    views = [next(d for d in v if d["name"] == "base") for v in by_server.values()]
    assert all(v == views[0] for v in views)
    assert views[0]["rows"] == 80 and views[0]["owners"] == ["hospital-a", "hospital-b"]
    select_checked(cluster, "base", 3, "base-both", [files["base"], files["more"]])
    report(request, "bad input: re-upload to an existing name by another owner appended "
           "40 rows (80 in all, same digest on 3/3 servers); D' equals the plaintext selection")
