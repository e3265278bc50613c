"""Tests of mpcnet.dataset: CSV reading, refusals of malformed files, labels, bundled data."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mpcnet.dataset import (
    BUNDLED,
    MISSING_CATEGORY,
    EncodingOptions,
    bundled,
    class_codes,
    one_hot,
    read_bundled,
    read_csv,
)
from mpcnet.errors import InputError

ORDINAL = EncodingOptions(categorical="ordinal")


def write(tmp_path: Path, text: str | bytes, name: str = "data.csv") -> Path:
    """Write a test file and return its path."""
    path = tmp_path / name
    if isinstance(text, str):
        text = text.encode("utf-8")
    path.write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    return path


def refused(path: Path, *needles: str, **kwargs: object) -> str:
    """Read `path` expecting an InputError whose message names the file and every needle."""
    with pytest.raises(InputError) as err:
        read_csv(path, **kwargs)  # type: ignore[arg-type]
    msg = str(err.value)
    assert str(path) in msg
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    return msg


# ---- well-formed files ----------------------------------------------------------------------


def test_reads_features_labels_and_drops(tmp_path: Path) -> None:
    path = write(tmp_path, "id,a,label,b\n1,0.5,yes,-2\n2,1e3,no,3\n\n3,7,yes,4\n")
    table = read_csv(path, label="label", drop=["id"])
    assert table.columns == ["a", "b"]
    assert table.values.dtype == np.float64
    assert table.values.tolist() == [[0.5, -2.0], [1000.0, 3.0], [7.0, 4.0]]
    assert table.labels is not None and table.labels.dtype == object
    assert table.labels.tolist() == ["yes", "no", "yes"]
    assert table.categories == {}


def test_no_label_gives_none(tmp_path: Path) -> None:
    table = read_csv(write(tmp_path, "a,b\n1,2\n"))
    assert table.labels is None and table.columns == ["a", "b"]


def test_gzip_bom_crlf_and_quoted_fields(tmp_path: Path) -> None:
    text = '\ufeff"a","b,c",y\r\n"1","2",p\r\n3,4,q\r\n'
    table = read_csv(write(tmp_path, text, "data.csv.gz"), label="y")
    assert table.columns == ["a", "b,c"]
    assert table.values.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_missing_zero_and_mean(tmp_path: Path) -> None:
    path = write(tmp_path, "a,b,y\n1,,p\nNA,4,q\n?,NaN,p\n3, na ,q\n")
    zero = read_csv(path, label="y", options=EncodingOptions(missing="zero"))
    assert zero.values.tolist() == [[1, 0], [0, 4], [0, 0], [3, 0]]
    mean = read_csv(path, label="y", options=EncodingOptions(missing="mean"))
    assert mean.values.tolist() == [[1, 4], [2, 4], [2, 4], [3, 4]]


def test_ordinal_codes_sorted_categories(tmp_path: Path) -> None:
    path = write(tmp_path, "c,n,y\nred,1,p\nblue,2,q\ngreen ,4,q\nred,5,p\n")
    table = read_csv(path, label="y", options=EncodingOptions("ordinal"))
    assert table.categories == {"c": ["blue", "green", "red"]}
    assert table.values[:, 0].tolist() == [2, 0, 1, 2]
    assert table.values[:, 1].tolist() == [1, 2, 4, 5]


@pytest.mark.parametrize("missing", ["zero", "mean"])
def test_a_categorical_gap_is_a_category_of_its_own_never_a_number(tmp_path: Path,
                                                                  missing: str) -> None:
    path = write(tmp_path, "c,n,y\nred,1,p\nblue,2,q\n,3,p\ngreen ,4,q\nred,5,p\n")
    table = read_csv(path, label="y", options=EncodingOptions("ordinal", missing))  # type: ignore[arg-type]
    assert table.categories == {"c": [MISSING_CATEGORY, "blue", "green", "red"]}
    assert table.values[:, 0].tolist() == [3, 1, 0, 2, 3]  # the gap is "(missing)", code 0
    assert table.values[:, 1].tolist() == [1, 2, 3, 4, 5]


def test_a_categorical_gap_takes_the_mode_if_asked(tmp_path: Path) -> None:
    path = write(tmp_path, "c,n,y\nred,1,p\nblue,2,q\n,3,p\nblue ,4,q\nred,5,p\n?,6,q\n")
    options = EncodingOptions("ordinal", "mean", missing_categorical="mode")
    table = read_csv(path, label="y", options=options)
    assert table.categories == {"c": ["blue", "red"]}  # blue and red tie: the first listed
    assert table.values[:, 0].tolist() == [1, 0, 0, 0, 1, 0]
    refused = EncodingOptions("ordinal", "zero", missing_columns={"c": "refuse"})
    with pytest.raises(InputError, match=r"row 3 \(line 4\), column 'c': missing value"):
        read_csv(path, label="y", options=refused)
    with pytest.raises(InputError, match="column 'n' is numeric; its missing policy 'mode'"):
        read_csv(write(tmp_path, "n,y\n1,p\n,q\n", "n.csv"), label="y",
                 options=EncodingOptions(missing_columns={"n": "mode"}))


def test_known_categories_are_reused_and_extended(tmp_path: Path) -> None:
    first = EncodingOptions(known_categories={"c": ["b", "a", "z"], "n": ["2", "1"]})
    path = write(tmp_path, "c,n,y\na,1,p\nz,2,q\n")
    table = read_csv(path, label="y", options=first)
    assert table.values.tolist() == [[1, 1], [2, 0]]  # numeric-looking n is coded by the list
    assert table.categories == {"c": ["b", "a", "z"], "n": ["2", "1"]}
    more = write(tmp_path, "c,n,y\nq,1,p\na,2,q\nc,3,q\n", "more.csv")
    table = read_csv(more, label="y", options=first)
    # the agreed codes stay, new categories follow them in sorted order
    assert table.categories == {"c": ["b", "a", "z", "c", "q"], "n": ["2", "1", "3"]}
    assert table.values.tolist() == [[4, 1], [1, 0], [3, 2]]


def test_mostly_numeric_column_is_not_coded_unless_named(tmp_path: Path) -> None:
    path = write(tmp_path, "a,b,y\n1,x,p\n2,y,q\n3O,z,p\n4,,q\n")
    refused(path, "row 3 (line 4)", "column 'a'", "'3O'", "3 of the column's 4", "--ordinal 'a'",
            label="y", options=ORDINAL)
    coded = EncodingOptions("ordinal", "zero", ordinal_columns=("a",))
    table = read_csv(path, label="y", options=coded)
    assert table.categories == {"a": ["1", "2", "3O", "4"], "b": [MISSING_CATEGORY, "x", "y", "z"]}
    named = read_csv(path, label="y", drop=("b",),
                     options=EncodingOptions(ordinal_columns=("a",)))
    assert named.categories == {"a": ["1", "2", "3O", "4"]}


def test_encoding_options_are_validated() -> None:
    with pytest.raises(InputError, match="categorical"):
        EncodingOptions(categorical="onehot")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="missing"):
        EncodingOptions(missing="drop")  # type: ignore[arg-type]


# ---- malformed files ------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    refused(tmp_path / "nope.csv", "cannot read")


@pytest.mark.parametrize("text", ["", "\n\n", "  \n"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    refused(write(tmp_path, text), "empty")


def test_header_only(tmp_path: Path) -> None:
    refused(write(tmp_path, "a,b,label\n"), "no data rows", label="label")


def test_duplicate_column_names(tmp_path: Path) -> None:
    refused(write(tmp_path, "a,b,a\n1,2,3\n"), "columns 1 and 3", "'a'", "unique")


def test_empty_column_name(tmp_path: Path) -> None:
    refused(write(tmp_path, "a,,c\n1,2,3\n"), "header column 2 has no name")


def test_ragged_row(tmp_path: Path) -> None:
    path = write(tmp_path, 'a,b,c\n1,2,3\n\n"x\ny",5,6\n7,8\n')
    refused(path, "row 3 (line 6)", "2 cells", "header has 3")


def test_bad_quoting(tmp_path: Path) -> None:
    refused(write(tmp_path, 'a,b\n1,2\n3,"4"x\n'), "line 3", "quoting")


def test_unterminated_quote(tmp_path: Path) -> None:
    refused(write(tmp_path, 'a,b\n1,"2\n3,4\n'), "quoting")


def test_not_utf8(tmp_path: Path) -> None:
    data = b"a,b\n1,2\nx" + b"\xe9" + b",3\n"
    refused(write(tmp_path, data), "byte offset 9", "line 3", "UTF-8")
    gz = write(tmp_path, data, "data.csv.gz")
    refused(gz, "byte offset 9 of the decompressed data", "line 3")


def test_corrupt_gzip(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv.gz"
    path.write_bytes(gzip.compress(b"a,b\n1,2\n")[:-6])
    refused(path, "gzip")


def test_unknown_label_and_drop(tmp_path: Path) -> None:
    path = write(tmp_path, "a,b\n1,2\n2,3\n")
    refused(path, "label column 'y'", "not in the header", label="y")
    refused(path, "drop column 'z'", "not in the header", drop=["z"])
    refused(path, "both the label and dropped", label="a", drop=["a"])


def test_non_numeric_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "a,b,y\n1,2,p\n3,4,q\n5,high,p\n")
    refused(path, "row 3 (line 4)", "column 'b'", "'high'", "--categorical ordinal", label="y")


def test_missing_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "a,b,y\n1,2,p\n3,,q\n")
    refused(path, "row 2 (line 3)", "column 'b'", "missing", "--missing zero|mean", label="y")


def test_missing_in_text_column_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "c,y\nred,p\nNA,q\n")
    refused(path, "row 2 (line 3)", "column 'c'", "--missing", label="y", options=ORDINAL)


def test_mean_of_empty_column(tmp_path: Path) -> None:
    path = write(tmp_path, "a,y\n,p\n?,q\n")
    refused(path, "column 'a'", "no value", label="y", options=EncodingOptions(missing="mean"))


@pytest.mark.parametrize("cell", ["inf", "1e999", "-Infinity"])
def test_infinity_refused(tmp_path: Path, cell: str) -> None:
    path = write(tmp_path, f"a,y\n1,p\n2,q\n{cell},p\n")
    refused(path, "row 3 (line 4)", "column 'a'", repr(cell), "infinite", label="y")


def test_missing_label(tmp_path: Path) -> None:
    path = write(tmp_path, "a,y\n1,p\n2,\n3,q\n")
    refused(path, "row 2 (line 3)", "column 'y'", "label is missing", label="y")


def test_single_class_label(tmp_path: Path) -> None:
    path = write(tmp_path, "a,y\n1,p\n2,p\n")
    refused(path, "only the class 'p'", "at least 2 classes", label="y")


# ---- labels ---------------------------------------------------------------------------------


def test_class_codes_numeric_and_text() -> None:
    classes, codes = class_codes(np.array(["10", "2", "1", "2"], dtype=object))
    assert classes == ["1", "2", "10"] and codes.tolist() == [2, 1, 0, 1]
    assert codes.dtype == np.int64
    classes, codes = class_codes(np.array(["b", "a", "10"], dtype=object))
    assert classes == ["10", "a", "b"] and codes.tolist() == [2, 1, 0]


def test_class_codes_with_agreed_list() -> None:
    classes, codes = class_codes(np.array(["y", "x"], dtype=object), ["x", "y", "z"])
    assert classes == ["x", "y", "z"] and codes.tolist() == [1, 0]
    # a later owner's new classes are appended, so the agreed codes keep their meaning
    classes, codes = class_codes(np.array(["x", "w", "10", "2"], dtype=object), ["x", "y"])
    assert classes == ["x", "y", "10", "2", "w"] and codes.tolist() == [0, 4, 2, 3]


def test_one_hot_drops_last_class() -> None:
    L = one_hot(np.array([0, 2, 1, 2]), 3)
    assert L.dtype == np.uint64 and L.shape == (4, 2)
    assert L.tolist() == [[1, 0], [0, 0], [0, 1], [0, 0]]
    with pytest.raises(InputError):
        one_hot(np.array([0, 3]), 3)


# ---- bundled datasets -----------------------------------------------------------------------


def test_bundled_paths_and_specs() -> None:
    assert bundled("lsvt").name == "lsvt_126x310.csv"
    assert {name: spec.k for name, spec in BUNDLED.items()} == {
        "lsvt": 103,
        "cogload": 12,
        "speeddating": 67,
    }
    with pytest.raises(InputError, match="lsvt, cogload, speeddating"):
        bundled("iris")


@pytest.mark.parametrize(
    ("name", "shape", "classes"),
    [("lsvt", (126, 310), ["1", "2"]), ("cogload", (632, 120), ["0", "1"])],
)
def test_bundled_numeric_datasets(name: str, shape: tuple[int, int], classes: list[str]) -> None:
    table = read_bundled(name)
    assert table.values.shape == shape and len(table.columns) == shape[1]
    assert table.labels is not None and class_codes(table.labels)[0] == classes
    assert "user_id" not in table.columns and "label" not in table.columns


def test_speeddating_loads_with_bundled_options() -> None:
    table = read_bundled("speeddating")
    assert table.values.shape == (8378, 122)
    assert "match" not in table.columns and len(table.categories) == 59
    assert table.categories["d_d_age"] == ["[0-1]", "[2-3]", "[4-6]", "[7-37]"]
    assert np.isfinite(table.values).all()
    assert table.labels is not None
    classes, codes = class_codes(table.labels)
    assert classes == ["0", "1"] and np.bincount(codes).tolist() == [6998, 1380]


def test_chunks_read_exactly_like_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are parsed a chunk at a time; with chunks of 7 rows SpeedDating (text columns,
    gaps) and LSVT read exactly as in one chunk, categories and gap filling included."""
    from mpcnet import dataset

    whole = {name: read_bundled(name) for name in ("speeddating", "lsvt")}
    monkeypatch.setattr(dataset, "CHUNK_CELLS", 7 * 124)
    for name, expected in whole.items():
        got = read_bundled(name)
        assert got.columns == expected.columns and got.categories == expected.categories
        np.testing.assert_array_equal(got.values, expected.values)
        np.testing.assert_array_equal(got.labels, expected.labels)


def test_errors_past_the_first_chunk_name_their_row(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from mpcnet import dataset

    monkeypatch.setattr(dataset, "CHUNK_CELLS", 6)
    body = "a,b,y\n" + "".join(f"{i},{i % 3},c{i % 2}\n" for i in range(5))
    refused(write(tmp_path, (body + "1,2\n").encode()), "row 6 (line 7)", "has 2 cells")
    refused(write(tmp_path, (body + "1,inf,c1\n").encode()), "row 6 (line 7)", "'inf'",
            "infinite")
    refused(write(tmp_path, (body + "1,,c1\n").encode()), "row 6 (line 7)", "column 'b'",
            "missing value")
    table = read_csv(write(tmp_path, (body + "1,x,c1\n" * 9).encode()), "y",
                     options=EncodingOptions(categorical="ordinal"))
    assert table.categories == {"b": ["0", "1", "2", "x"]}  # numeric-looking chunks too


def test_a_file_that_changes_between_passes_is_refused(tmp_path: Path) -> None:
    """The client reads a large file twice (checks, then the values to share): a file
    changed in between is refused, not shared half old and half new."""
    from mpcnet.dataset import scan_csv

    path = write(tmp_path, "a,y\n1,p\n2,q\n3,p\n")
    table = scan_csv(path, "y")
    assert table.rows == 3 and table.peaks.tolist() == [3.0]
    for changed in ("a,y\n1,p\n2,q\n", "a,y\n1,p\n2,q\n3,p\n4,q\n"):
        path.write_text(changed)
        with pytest.raises(InputError, match="changed while it was being read"):
            list(table.chunks())


def test_a_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    refused(fifo, "not a regular file", "read twice")


def test_numeric_labels_are_one_class_however_spelled(tmp_path: Path) -> None:
    path = write(tmp_path, "x,y\n1,0\n2,0.0\n3, 0 \n4,1e0\n5,1.50\n")
    table = read_csv(path, label="y")
    assert table.labels is not None and table.labels.tolist() == ["0", "0", "0", "1", "1.5"]
    refused(write(tmp_path, "x,y\n1,0\n2,0.0\n", "one.csv"), "only the class '0'", label="y")
    # a later owner's spelling meets an earlier owner's (also an older client's "0.0")
    assert class_codes(np.array(["0", "1.0", "2"], dtype=object), ["0.0", "1"]) == (
        ["0.0", "1", "2"], pytest.approx([0, 1, 2]))


def test_a_label_column_of_numbers_and_text_is_refused_at_the_rarer_kind(tmp_path: Path
                                                                        ) -> None:
    refused(write(tmp_path, "x,y\n1,0\n2,1\n3,yes\n4,0\n"), "row 3 (line 4)", "'yes' is text",
            "other labels are numbers", label="y")
    refused(write(tmp_path, "x,y\n1,no\n2,1\n3,yes\n", "b.csv"), "row 2 (line 3)",
            "'1' is a number", label="y")
    with pytest.raises(InputError, match="labels here are numbers.*classes are text"):
        class_codes(np.array(["0", "1"], dtype=object), ["no", "yes"])


def test_a_delimiter_and_quote_character_of_the_owners_choice(tmp_path: Path) -> None:
    text = "a;site;y\n1,5;'north; upper';p\n2;'it''s';q\n"
    path = write(tmp_path, text.replace("1,5", "1.5"))
    table = read_csv(path, label="y", options=EncodingOptions(
        "ordinal", delimiter=";", quotechar="'"))
    assert table.categories == {"site": ["it's", "north; upper"]}
    assert table.values.tolist() == [[1.5, 1], [2, 0]]
    for bad in ({"delimiter": ";;"}, {"delimiter": "\n"}, {"delimiter": "'", "quotechar": "'"}):
        with pytest.raises(InputError, match="CSV"):
            EncodingOptions(**bad)  # type: ignore[arg-type]


def test_parquet_reads_as_the_same_data_as_csv_a_batch_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    import mpcnet.dataset as dataset

    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"a": rng.normal(size=50), "n": rng.integers(-5, 5, 50),
                          "site": rng.choice(["x", "y", None], 50), "y": rng.integers(0, 2, 50)})
    frame.loc[::9, "a"] = np.nan
    frame.to_parquet(tmp_path / "f.parquet", index=False)
    frame.to_csv(tmp_path / "f.csv", index=False)
    options = EncodingOptions("ordinal", "mean")
    import pyarrow.parquet as pq

    monkeypatch.setattr(dataset, "CHUNK_CELLS", 40)  # 10 rows of 4 columns a batch
    batches: list[int] = []
    real = pq.ParquetFile.iter_batches

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        for batch in real(self, *args, **kwargs):
            batches.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", counted)
    got = read_csv(tmp_path / "f.parquet", "y", options=options)
    want = read_csv(tmp_path / "f.csv", "y", options=options)
    assert got.columns == want.columns and got.categories == want.categories
    assert np.array_equal(got.values, want.values) and got.labels.tolist() == want.labels.tolist()
    assert got.categories["site"][0] == MISSING_CATEGORY
    assert max(batches) <= 10 and sum(batches) % 50 == 0 and len(batches) >= 10  # two passes
    refused(write(tmp_path, b"PAR1 not really", "bad.parquet"), "not a readable Parquet file",
            label="y")
