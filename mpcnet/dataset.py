"""Encoding layer: read a data owner's CSV file into a numeric table and a label vector.

Turns a CSV file (plain or gzip, UTF-8, header row, any delimiter and quote character) or a
Parquet file (with the optional pyarrow: ``pip install 'mpcnet[parquet]'``, read a row group
batch at a time) into the float64 m x p feature matrix and
the raw labels that the client then encodes in fixed point (mpcnet.fixedpoint) and
secret-shares, and builds the m x (n-1) one-hot label-class matrix L of pi_MS-GINI
(Li, Dowsley, De Cock 2021, Protocol 2 input; the n-th class is implicit). Every malformed input
is refused with an InputError naming the file, the data row (1-based) and CSV line, the
column and the remedy.

Speed: cells are parsed column by column with ``np.fromiter(map(float, cells))``, which keeps
the per-cell work in C (measured 2.5x faster than ``np.asarray(cells).astype(float)``); columns
with gaps or text classify each distinct cell once and map the column through a lookup table.
Memory: rows are parsed CHUNK_CELLS cells at a time; ``scan_csv`` keeps only the labels, the
codes of text columns and a few figures per column, and its ``CsvTable`` produces the values a
chunk at a time again, so a client shares a large file without holding it (``read_csv`` holds
the float64 matrix, for the offline tools).
SpeedDating (8378 x 123, 59 text columns, 18,372 missing cells) loads in about 0.6 s on the
2-core development machine, of which the csv module's parsing takes about 0.17 s.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import math
import zlib
from collections import Counter
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, Literal

import numpy as np

from mpcnet.errors import InputError
from mpcnet.fixedpoint import NO_EXPONENT, finest_exponents

MISSING_POLICIES = ("refuse", "zero", "mean")
"""What EncodingOptions.missing may say."""

CATEGORY_POLICIES = ("category", "mode")
"""How a categorical column's gaps are filled when gaps are not refused: a category of their
own (MISSING_CATEGORY) or the column's most frequent category in the owner's file."""

COLUMN_POLICIES = ("refuse", "zero", "mean", *CATEGORY_POLICIES)
"""What EncodingOptions.missing_columns may say for one column (zero and mean for numeric
columns, category and mode for categorical ones)."""

MISSING_CATEGORY = "(missing)"
"""The category that a categorical column's missing cells become (policy ``category``)."""

MISSING_TOKENS = frozenset({"", "NA", "NAN", "?"})
"""Cells that count as missing, compared after stripping blanks and upper-casing."""



@dataclass(frozen=True)
class EncodingOptions:
    """How non-numeric and missing cells become numbers.

    categorical: "refuse" (default) rejects a non-numeric cell; "ordinal" codes the distinct
        non-missing strings of a column that is mostly text, sorted lexicographically, as
        0..c-1 (a column whose filled cells are mostly numbers is refused at its first text
        cell: a typo must not turn a numeric column into categories).
    ordinal_columns: columns coded as categories whatever their cells look like.
    missing: "refuse" (default) rejects a missing cell (empty, NA, NaN, ?); "zero" puts 0;
        "mean" puts the mean of the column's non-missing cells in this file. It applies to
        numeric columns; a categorical column's gaps are never a number (a mean of codes
        names no category): unless refused they follow ``missing_categorical``.
    missing_categorical: "category" (default) makes a categorical column's gaps a category of
        their own, MISSING_CATEGORY; "mode" puts the column's most frequent category in this
        file (the first in list order among equals).
    missing_columns: per column, a policy of COLUMN_POLICIES that overrides the two above (a
        declared schema sets them).
    delimiter, quotechar: the CSV dialect (one character each; Parquet files ignore them).
    known_categories: per column, the category list of an earlier data owner; codes follow
        that list, categories not in it are appended after it (sorted), so earlier owners'
        codes stay valid, and the column is coded even if all its cells in this file look
        numeric. Columns not in this file are ignored.
    """

    categorical: Literal["refuse", "ordinal"] = "refuse"
    missing: Literal["refuse", "zero", "mean"] = "refuse"
    known_categories: dict[str, list[str]] = field(default_factory=dict)
    ordinal_columns: tuple[str, ...] = ()
    missing_categorical: Literal["category", "mode"] = "category"
    missing_columns: dict[str, str] = field(default_factory=dict)
    delimiter: str = ","
    quotechar: str = '"'

    def __post_init__(self) -> None:
        if self.categorical not in ("refuse", "ordinal"):
            raise InputError(f"categorical must be 'refuse' or 'ordinal', not {self.categorical!r}")
        if self.missing not in MISSING_POLICIES:
            raise InputError(f"missing must be 'refuse', 'zero' or 'mean', not {self.missing!r}")
        if self.missing_categorical not in CATEGORY_POLICIES:
            raise InputError("missing_categorical must be 'category' or 'mode', not "
                             f"{self.missing_categorical!r}")
        for name, how in self.missing_columns.items():
            if how not in COLUMN_POLICIES:
                raise InputError(f"column {name!r}: missing must be one of "
                                 f"{', '.join(COLUMN_POLICIES)}, not {how!r}")
        for what, char in (("delimiter", self.delimiter), ("quote character", self.quotechar)):
            if not isinstance(char, str) or len(char) != 1 or char in "\r\n":
                raise InputError(f"the CSV {what} must be one character (not a line break), "
                                 f"not {char!r}; a tab is written \\t or tab")
        if self.delimiter == self.quotechar:
            raise InputError(f"the CSV delimiter and quote character are both "
                             f"{self.delimiter!r}; choose two different characters")

    @property
    def dialect(self) -> Dialect:
        """How the file's cells are separated and quoted."""
        return Dialect(self.delimiter, self.quotechar)

    def missing_for(self, column: str, categorical: bool) -> str:
        """The policy for ``column``'s gaps (see the class docstring)."""
        how = self.missing_columns.get(column)
        if how is None:
            return self.missing if self.missing == "refuse" or not categorical \
                else self.missing_categorical
        if categorical and how in ("zero", "mean") or not categorical and how in \
                CATEGORY_POLICIES:
            kind = "categorical" if categorical else "numeric"
            raise InputError(f"column {column!r} is {kind}; its missing policy {how!r} is for "
                             f"{'numeric' if categorical else 'categorical'} columns")
        return how


@dataclass(frozen=True)
class Dialect:
    """A CSV file's delimiter and quote character."""

    delimiter: str = ","
    quotechar: str = '"'


@dataclass(frozen=True, eq=False)
class Table:
    """A data owner's file after reading: features in file order, labels as raw strings."""

    columns: list[str]
    values: np.ndarray
    labels: np.ndarray | None
    categories: dict[str, list[str]]

    @property
    def rows(self) -> int:
        return int(self.values.shape[0])

    @property
    def peaks(self) -> np.ndarray:
        """Each column's largest |value|."""
        x = np.asarray(self.values, dtype=np.float64)
        return np.abs(x).max(axis=0) if x.shape[0] else np.zeros(x.shape[1])

    @property
    def finest(self) -> np.ndarray:
        """Each column's smallest exponent at which all its values encode exactly
        (``fixedpoint.finest_exponents``)."""
        return finest_exponents(np.asarray(self.values, dtype=np.float64))

    @property
    def constant(self) -> np.ndarray:
        """Whether each column holds one value only."""
        x = np.asarray(self.values, dtype=np.float64)
        return (x == x[:1]).all(axis=0) if x.shape[0] else np.ones(x.shape[1], dtype=bool)

    def chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, values) of consecutive blocks of rows: here one block."""
        yield 0, self.values


@dataclass(frozen=True, eq=False)
class CsvTable:
    """A CSV file read and checked (``scan_csv``) whose values are produced a chunk of rows at
    a time, each time from the file: the same interface as ``Table`` without its matrix."""

    path: Path
    columns: list[str]
    labels: np.ndarray | None
    categories: dict[str, list[str]]
    rows: int
    peaks: np.ndarray
    finest: np.ndarray  # as Table.finest
    constant: np.ndarray  # as Table.constant
    positions: list[int]  # each column's position in the header
    fills: dict[int, float]  # what a numeric column's gaps become
    coded: dict[int, np.ndarray]  # the codes of the columns read as categories
    stamp: tuple[int, int, int]  # the file's inode, size and modification time when read
    dialect: Dialect = Dialect()

    def chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        if _stamp(self.path) != self.stamp:
            raise InputError(f"{self.path}: the file changed while it was being read; share "
                             "it again once it is complete")
        rows = _rows(self.path, self.dialect)
        width = len(next(rows)[1])
        start = 0
        for chunk in _batches(rows, width):
            if start + len(chunk) > self.rows or any(len(c) != width for _, c in chunk):
                raise InputError(f"{self.path}: the file changed while it was being read; "
                                 "share it again once it is complete")
            by_column = list(zip(*(cells for _, cells in chunk), strict=True))
            block = np.empty((len(chunk), len(self.columns)))
            for j, pos in enumerate(self.positions):
                if j in self.coded:
                    block[:, j] = self.coded[j][start:start + len(chunk)]
                    continue
                values, non_numeric = _numeric(by_column[pos])
                if non_numeric:
                    raise InputError(f"{self.path}: the file changed while it was being read; "
                                     "share it again once it is complete")
                block[:, j] = values
                gaps = np.isnan(block[:, j])
                if gaps.any():
                    block[gaps, j] = self.fills[j]
            yield start, block
            start += len(chunk)
        if start != self.rows or _stamp(self.path) != self.stamp:
            raise InputError(f"{self.path}: the file changed while it was being read; share "
                             "it again once it is complete")

    def load(self) -> Table:
        """The whole table in memory."""
        blocks = [block for _, block in self.chunks()]
        values = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
        return Table(self.columns, values, self.labels, self.categories)


@dataclass(frozen=True)
class Bundled:
    """A dataset shipped in data/ with the paper's k and the options it needs."""

    file: str
    label: str
    drop: tuple[str, ...]
    k: int
    options: EncodingOptions


BUNDLED: dict[str, Bundled] = {
    "lsvt": Bundled("lsvt_126x310.csv", "label", (), 103, EncodingOptions()),
    "cogload": Bundled("cogload_train_632x120.csv", "label", ("user_id",), 12, EncodingOptions()),
    # The paper does not say how it made SpeedDating numeric. The OpenML layout has 59 text
    # columns (gender, race, race_o, field and 55 "d_*" bins) and 18,372 empty cells, so some
    # encoding is required; ordinal codes and zero-filling are the simplest choice that keeps
    # p = 122 (see data/PROVENANCE.md and the shared data/speeddating/PROVENANCE.md).
    "speeddating": Bundled(
        "speeddating_openml40536.csv.gz",
        "match",
        (),
        67,
        EncodingOptions(categorical="ordinal", missing="zero"),
    ),
}


def bundled(name: str) -> Path:
    """Path of the bundled dataset `name` (a key of BUNDLED): the package data ``mpcnet.data``
    (the repository's data/ folder in a clone). pip unpacks wheels, so it is a file on disk."""
    if name not in BUNDLED:
        raise InputError(f"unknown dataset {name!r}; bundled datasets are: {', '.join(BUNDLED)}")
    resource = resources.files("mpcnet.data").joinpath(BUNDLED[name].file)
    if not (isinstance(resource, Path) and resource.is_file()):
        raise InputError(f"bundled dataset {name!r} is missing: {resource} is not a file on "
                         "disk; reinstall mpcnet")
    return resource


def read_bundled(name: str) -> Table:
    """Read a bundled dataset with its label, dropped columns and options."""
    path = bundled(name)
    spec = BUNDLED[name]
    return read_csv(path, label=spec.label, drop=spec.drop, options=spec.options)


def _read_text(path: Path) -> str:
    """The whole file's text (gunzipped if it starts with the gzip magic, decoded as UTF-8),
    or an ``InputError`` naming where it is not UTF-8: the reader's error path only."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror}); check the path") from exc
    where = "the file"
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{path}: corrupt gzip data ({exc}); re-compress the file") from exc
        where = "the decompressed data"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{path}: not valid UTF-8 at byte offset {exc.start} of {where} (line {line}); "
            "save the file as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


CHUNK_CELLS = 2_000_000
"""Cells parsed at a time (about 20,000 rows of 100 columns): only this many cells exist as
Python strings at once."""


def _batches(rows: Iterator[tuple[int, list[str]]], width: int
             ) -> Iterator[list[tuple[int, list[str]]]]:
    """Consecutive chunks of about CHUNK_CELLS cells of rows ``width`` cells wide."""
    size = max(1, CHUNK_CELLS // max(1, width))
    while chunk := list(itertools.islice(rows, size)):
        yield chunk


def _open_text(path: Path) -> IO[str]:
    """The file as text, read incrementally: gunzipped if it starts with the gzip magic,
    UTF-8 (a leading byte-order mark dropped). It must be a regular file: it is read twice."""
    try:
        if path.exists() and not path.is_file():
            raise InputError(f"{path}: not a regular file; save it as a file first (it is read "
                             "twice: to check it, then to share it)")
        with open(path, "rb") as f:
            magic = f.read(2)
        if magic == b"\x1f\x8b":
            return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
        return open(path, encoding="utf-8-sig", newline="")  # noqa: SIM115 - the caller closes
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file ({exc.strerror}); check the path") from exc


PARQUET_MAGIC = b"PAR1"
"""The first bytes of a Parquet file: such a file is read as Parquet whatever its name."""


def _is_parquet(path: Path) -> bool:
    """Whether a regular file starts with PARQUET_MAGIC (a pipe is never opened here: that
    would wait for a writer; ``_open_text`` refuses it)."""
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            return f.read(4) == PARQUET_MAGIC
    except OSError:
        return False  # _open_text says why


def _parquet_rows(path: Path) -> Generator[tuple[int, list[str]], None, None]:
    """(row number + 1, cells) of a Parquet file, the column names first, each cell as the
    text a CSV export would hold (a number's shortest repr, an empty cell for a null), so that
    one set of rules reads both formats. Read a batch of about CHUNK_CELLS cells at a time
    (bounded memory, like the CSV path)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{path}: a Parquet file needs pyarrow: pip install "
                         "'mpcnet[parquet]' (or export the file as CSV)") from None
    try:
        handle = pq.ParquetFile(path)
        names = list(handle.schema_arrow.names)
        yield 1, names
        size = max(1, CHUNK_CELLS // max(1, len(names)))
        line = 2
        for batch in handle.iter_batches(batch_size=size):
            columns = [[_cell_text(v) for v in column.to_pylist()] for column in batch.columns]
            for cells in zip(*columns, strict=True):
                yield line, list(cells)
                line += 1
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"{path}: not a readable Parquet file ({exc}); write it again or "
                         "export it as CSV") from None


def _cell_text(value: object) -> str:
    """A Parquet value as CSV text: nulls empty, floats by their shortest round-trip repr."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return str(value)


def _rows(path: Path, dialect: Dialect = Dialect()
          ) -> Generator[tuple[int, list[str]], None, None]:
    """(CSV line on which it starts, cells) of every nonblank row, the header first, read
    incrementally with strict quoting in ``dialect`` (or a Parquet file's rows)."""
    if _is_parquet(path):
        yield from _parquet_rows(path)
        return
    with _open_text(path) as text:
        reader = csv.reader(text, strict=True, delimiter=dialect.delimiter,
                            quotechar=dialect.quotechar)
        start = 1
        try:
            for row in reader:
                if row:
                    yield start, row
                start = reader.line_num + 1
        except csv.Error as exc:
            raise InputError(
                f"{path}: line {reader.line_num}: bad CSV quoting ({exc}); close every quoted "
                'field and double any quote inside it ("")'
            ) from None
        except UnicodeDecodeError:
            _read_text(path)  # names the byte offset and line
            raise
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{path}: corrupt gzip data ({exc}); re-compress the file") from exc


def _header(path: Path, rows: Iterator[tuple[int, list[str]]]) -> list[str]:
    first = next(rows, None)
    if first is None:
        raise InputError(f"{path}: the file is empty; it needs a header row and data rows")
    return [name.strip() for name in first[1]]


def read_header(path: str | Path, dialect: Dialect = Dialect()) -> list[str]:
    """The column names of a CSV file's header row (only that row is read)."""
    rows = _rows(Path(path), dialect)
    try:
        return _header(Path(path), rows)
    finally:
        rows.close()


class _Where:
    """Formats 'file: row r (line l), column c' for error messages."""

    def __init__(self, path: Path, lines: Sequence[int]) -> None:
        self.path, self.lines = path, lines

    def __call__(self, row: int, column: str | None = None) -> str:
        spot = f"{self.path}: row {row + 1} (line {self.lines[row]})"
        return spot if column is None else f"{spot}, column {column!r}"


def _check_header(path: Path, header: list[str], label: str | None, drop: Sequence[str]) -> None:
    """Refuse empty or duplicate names and unknown label/drop columns."""
    seen: dict[str, int] = {}
    for pos, name in enumerate(header, 1):
        if not name:
            raise InputError(f"{path}: header column {pos} has no name; name every column")
        if name in seen:
            raise InputError(
                f"{path}: header columns {seen[name]} and {pos} are both named {name!r}; "
                "column names must be unique"
            )
        seen[name] = pos
    roles = [("drop", name) for name in drop]
    if label is not None:
        roles.insert(0, ("label", label))
    for role, name in roles:
        if name not in seen:
            raise InputError(
                f"{path}: {role} column {name!r} is not in the header; columns are: "
                f"{', '.join(header[:12])}{', ...' if len(header) > 12 else ''}"
            )
    if label is not None and label in drop:
        raise InputError(f"{path}: column {label!r} is both the label and dropped; choose one")


def _is_missing(cell: str) -> bool:
    """True if the cell counts as missing (see MISSING_TOKENS)."""
    return cell.strip().upper() in MISSING_TOKENS


def _numeric(cells: Sequence[str]) -> tuple[np.ndarray, set[str]]:
    """Values (NaN where missing) and the distinct non-numeric cells (empty if all numeric).

    The fast path converts every cell in C; otherwise each distinct cell is classified once
    and the column is mapped through a lookup table.
    """
    try:
        return np.fromiter(map(float, cells), dtype=np.float64, count=len(cells)), set()
    except ValueError:
        pass
    lookup: dict[str, float] = {}
    text: set[str] = set()
    for cell in set(cells):
        if _is_missing(cell):
            lookup[cell] = math.nan
            continue
        try:
            lookup[cell] = float(cell)
        except ValueError:
            text.add(cell)
    if text:
        return np.empty(0), text
    return np.fromiter(map(lookup.__getitem__, cells), dtype=np.float64, count=len(cells)), text


def _first_in(cells: Sequence[str], wanted: set[str]) -> int:
    """Row index of the first cell that is in `wanted`."""
    return next(i for i, cell in enumerate(cells) if cell in wanted)


def _ordinal(where: _Where, name: str, cells: Sequence[str], known: list[str] | None,
             how: str) -> tuple[np.ndarray, list[str]]:
    """Codes and categories of a text column coded 0..c-1 in list order: the ``known`` list
    first, then this file's other categories, sorted. Its gaps, by the policy ``how``: refused,
    the category MISSING_CATEGORY, or the column's most frequent category here (``mode``)."""
    distinct = set(cells)
    gaps = {cell for cell in distinct if _is_missing(cell)}
    present = {cell.strip() for cell in distinct - gaps}
    if gaps and how == "refuse":
        raise InputError(f"{where(_first_in(cells, gaps), name)}: missing value; fill it in, "
                         "drop the column, or choose --missing zero|mean (a categorical "
                         "column's gaps then become a category of their own)")
    if gaps and how == "category":
        present.add(MISSING_CATEGORY)
    if gaps and not present:
        raise InputError(f"{where.path}: column {name!r} has no value at all, so it has no "
                         "most frequent category; drop the column or use "
                         "--missing-categorical category")
    categories = list(known or [])
    categories += sorted(present - set(categories))
    index = {cat: code for code, cat in enumerate(categories)}
    lookup = {cell: float(index[cell.strip()]) for cell in distinct - gaps}
    if gaps:
        counts = Counter(cell.strip() for cell in cells if cell not in gaps)
        fill = MISSING_CATEGORY if how == "category" else min(
            counts, key=lambda cat: (-counts[cat], index[cat]))
        lookup |= dict.fromkeys(gaps, float(index[fill]))
    codes = np.fromiter(map(lookup.__getitem__, cells), dtype=np.float64, count=len(cells))
    return codes, categories


def _fill_value(where: _Where, name: str, how: str, first_missing: int, total: float,
                count: int) -> float:
    """What the gaps of a column become (its first gap is row ``first_missing``; ``total``
    and ``count`` are the sum and number of its values), or the refusal."""
    if how == "refuse":
        raise InputError(
            f"{where(first_missing, name)}: missing value; fill it in, drop the column, or "
            "choose --missing zero|mean"
        )
    if how == "zero":
        return 0.0
    if count == 0:
        raise InputError(
            f"{where.path}: column {name!r} has no value at all, so --missing mean has no mean; "
            "drop the column or use --missing zero"
        )
    return total / count


def _read_labels(where: _Where, name: str, cells: Sequence[str]) -> np.ndarray:
    """The label cells as an object array of class names: text stripped, numbers in one
    spelling (``label_text``: 0, 0.0 and " 0 " are one class); refuses gaps, a column that
    mixes numbers and text (naming the first row of the rarer kind) and a single class."""
    counts = Counter(cells)
    gaps = {cell for cell in counts if _is_missing(cell)}
    if gaps:
        row = _first_in(cells, gaps)
        raise InputError(f"{where(row, name)}: the label is missing; every row needs one")
    names = {cell: label_text(cell) for cell in counts}
    numeric = {cell for cell in counts if _as_number(cell) is not None}
    if numeric and len(numeric) < len(counts):
        text = set(counts) - numeric
        rare = min((numeric, text), key=lambda kind: sum(counts[c] for c in kind))
        row = _first_in(cells, rare)
        raise InputError(f"{where(row, name)}: the label {cells[row].strip()!r} is "
                         f"{'a number' if rare is numeric else 'text'}, the column's other "
                         f"labels are {'text' if rare is numeric else 'numbers'}; a label "
                         "column holds class names of one kind: fix the cell")
    labels = np.array([names[cell] for cell in cells], dtype=object)
    if len(set(labels)) < 2:
        raise InputError(
            f"{where.path}: label column {name!r} has only the class {labels[0]!r}; feature "
            "selection needs at least 2 classes"
        )
    return labels


def _read_column(
    where: _Where, name: str, cells: Sequence[str], options: EncodingOptions
) -> tuple[np.ndarray, list[str]]:
    """A column read as categories: float64 codes (gaps filled) and its category list, once
    ``_check_codable`` allows a column with text cells to be coded."""
    known = options.known_categories.get(name)
    if known is None and name not in options.ordinal_columns:
        _, non_numeric = _numeric(cells)
        _check_codable(where, name, cells, non_numeric, options.categorical)
    return _ordinal(where, name, cells, known, options.missing_for(name, categorical=True))


def _check_codable(
    where: _Where, name: str, cells: Sequence[str], text: set[str], categorical: str
) -> None:
    """Refuse to code a column with text cells as categories unless asked to, and unless it is
    mostly text: a numeric column with a few bad cells must not become a category column."""
    row = _first_in(cells, text)
    if categorical == "refuse":
        raise InputError(
            f"{where(row, name)}: {cells[row]!r} is not a number; fix the cell, drop the "
            f"column (--drop {name!r}), or code text columns as categories with "
            "--categorical ordinal"
        )
    counts = Counter(cells)
    n_text = sum(counts[cell] for cell in text)
    n_filled = sum(n for cell, n in counts.items() if not _is_missing(cell))
    if 2 * n_text <= n_filled:
        raise InputError(
            f"{where(row, name)}: {cells[row]!r} is not a number, but {n_filled - n_text} of "
            f"the column's {n_filled} filled cells are; fix the cell, or code the column as "
            f"categories anyway with --ordinal {name!r}"
        )


def read_csv(
    path: str | Path,
    label: str | None = None,
    drop: Sequence[str] = (),
    options: EncodingOptions = EncodingOptions(),
) -> Table:
    """Read a CSV file with a header row into a Table; see EncodingOptions for text and gaps."""
    return scan_csv(path, label, drop, options).load()


@dataclass
class _Numbers:
    """What the pass over one numeric column tells: its peak, range, finest exponent, gaps,
    sum and first infinity."""

    peak: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    finest: int = NO_EXPONENT
    first_missing: int = -1
    total: float = 0.0
    count: int = 0
    infinite: tuple[int, str] | None = None

    def value(self, present: np.ndarray) -> None:
        """Finite values of the column (rows or the value that fills its gaps)."""
        if present.size:
            self.peak = max(self.peak, float(np.abs(present).max()))
            self.low = min(self.low, float(present.min()))
            self.high = max(self.high, float(present.max()))
            self.finest = max(self.finest, int(finest_exponents(present[:, None])[0]))

    def add(self, start: int, values: np.ndarray, cells: Sequence[str]) -> None:
        """Rows start.. of the column: their values (NaN for gaps) and cells."""
        missing = np.isnan(values)
        if missing.any() and self.first_missing < 0:
            self.first_missing = start + int(np.argmax(missing))
        infinite = np.isinf(values)
        if infinite.any() and self.infinite is None:
            row = int(np.argmax(infinite))
            self.infinite = (start + row, cells[row])
        present = values[~missing & ~infinite]
        self.value(present)
        self.total += float(present.sum())
        self.count += present.size


def scan_csv(
    path: str | Path,
    label: str | None = None,
    drop: Sequence[str] = (),
    options: EncodingOptions = EncodingOptions(),
) -> CsvTable:
    """Read and check a CSV file CHUNK_CELLS cells at a time, keeping only what its values
    need (the labels, the codes of text columns, per column its peak and gap filling):
    ``CsvTable.chunks`` then produces the values from the file. Columns with text need their
    whole column's cells (to decide and code their categories as one file); those alone are
    read again in a second pass."""
    path = Path(path)
    rows = _rows(path, options.dialect)
    header = _header(path, rows)
    stamp = _stamp(path)
    _check_header(path, header, label, drop)
    columns = [name for name in header if name != label and name not in drop]
    positions = [header.index(name) for name in columns]
    text = {j for j, name in enumerate(columns)
            if name in options.known_categories or name in options.ordinal_columns}
    numbers = [_Numbers() for _ in columns]
    lines: list[int] = []
    label_cells: list[str] = []
    where = _Where(path, lines)
    for chunk in _batches(rows, len(header)):
        start = len(lines)
        for line, cells in chunk:
            lines.append(line)
            if len(cells) != len(header):
                raise InputError(
                    f"{where(len(lines) - 1)}: the row has {len(cells)} cells, the header has "
                    f"{len(header)}; every row needs one cell per column (quote cells that "
                    "contain commas)"
                )
        by_column = list(zip(*(cells for _, cells in chunk), strict=True))
        for j, pos in enumerate(positions):
            if j not in text:
                values, non_numeric = _numeric(by_column[pos])
                if non_numeric:
                    text.add(j)
                else:
                    numbers[j].add(start, values, by_column[pos])
        if label is not None:
            label_cells.extend(by_column[header.index(label)])
    if not lines:
        raise InputError(f"{path}: the file has a header but no data rows; add data rows")
    labels = None if label is None else _read_labels(where, label, label_cells)
    del label_cells
    cells_of = _column_cells(path, [positions[j] for j in sorted(text)], options.dialect)
    peaks = np.zeros(len(columns))
    finest = np.full(len(columns), NO_EXPONENT, dtype=np.int64)
    constant = np.ones(len(columns), dtype=bool)
    fills: dict[int, float] = {}
    coded: dict[int, np.ndarray] = {}
    categories: dict[str, list[str]] = {}
    for j, name in enumerate(columns):
        if j in text:
            coded[j], categories[name] = _read_column(where, name, cells_of[positions[j]],
                                                      options)
            peaks[j] = float(np.abs(coded[j]).max())
            finest[j] = 0 if peaks[j] else NO_EXPONENT  # codes are integers
            constant[j] = bool((coded[j] == coded[j][0]).all())
            continue
        seen = numbers[j]
        if seen.infinite is not None:
            row, cell = seen.infinite
            raise InputError(f"{where(row, name)}: {cell!r} is infinite or too large for "
                             "float64; fix the cell")
        if seen.first_missing >= 0:
            fills[j] = _fill_value(where, name, options.missing_for(name, categorical=False),
                                   seen.first_missing, seen.total, seen.count)
            seen.value(np.array([fills[j]]))
        peaks[j], finest[j], constant[j] = seen.peak, seen.finest, seen.low == seen.high
    return CsvTable(path, columns, labels, categories, len(lines), peaks, finest, constant,
                    positions, fills, coded, stamp, options.dialect)


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _column_cells(path: Path, positions: list[int], dialect: Dialect
                  ) -> dict[int, list[str]]:
    """Every data row's cells at the given header positions (a pass over the file)."""
    out: dict[int, list[str]] = {pos: [] for pos in positions}
    if not positions:
        return out
    rows = _rows(path, dialect)
    next(rows)
    for _, cells in rows:
        for pos in positions:
            out[pos].append(cells[pos])
    return out


def read_cells(path: str | Path, column: str, dialect: Dialect = Dialect()) -> list[str]:
    """Every data row's cell of ``column``, as text (record IDs, ``mpcnet.recordids``)."""
    path = Path(path)
    header = read_header(path, dialect)
    if column not in header:
        raise InputError(f"{path}: no column {column!r} (the header has {header[:8]})")
    return _column_cells(path, [header.index(column)], dialect)[header.index(column)]


def _as_number(text: str) -> float | None:
    """The label as a finite number, or None if it does not look numeric."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def label_text(cell: str) -> str:
    """A label cell's class name: a number in one spelling (an integral value as an integer,
    ``0``, ``0.0``, `` 0 `` and ``0e0`` alike; any other by its shortest repr), text stripped."""
    value = _as_number(cell)
    if value is None:
        return cell.strip()
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def class_codes(
    labels: np.ndarray, classes: list[str] | None = None
) -> tuple[list[str], np.ndarray]:
    """Class list and int64 code per label: the labels' classes sorted (numerically if every
    one is a number), after ``classes`` (an earlier owner's list, kept as is so that its codes
    stay valid) if it is given. A numeric label takes the agreed class of equal value however
    either is spelled; numbers against an agreed list of text (or text against numbers) are
    refused."""
    texts = [str(x) for x in labels]
    agreed = list(classes or [])
    distinct = set(texts)
    numbers = {t: _as_number(t) for t in distinct | set(agreed)}
    if agreed and distinct:
        mine = all(numbers[t] is not None for t in distinct)
        theirs = all(numbers[c] is not None for c in agreed)
        if mine != theirs:
            raise InputError(f"the labels here are {'numbers' if mine else 'text'} (e.g. "
                             f"{sorted(distinct)[0]!r}), the dataset's classes are "
                             f"{'numbers' if theirs else 'text'} ({agreed[:5]}); every owner "
                             "names the classes alike")
        if mine:  # match by value: an earlier owner's 0.0 and this file's 0 are one class
            by_value = {numbers[c]: c for c in agreed}
            texts = [by_value.get(numbers[t], t) for t in texts]
            distinct = set(texts)
    new = distinct - set(agreed)
    if all(numbers.get(t) is not None for t in new):
        agreed += sorted(new, key=lambda t: (numbers[t], t))
    else:
        agreed += sorted(new)
    index = {c: code for code, c in enumerate(agreed)}
    return agreed, np.array([index[t] for t in texts], dtype=np.int64)


def indicators(codes: np.ndarray, n_classes: int) -> np.ndarray:
    """The m x n uint64 0/1 matrix of class membership (row i has its 1 in column codes[i])."""
    codes = np.asarray(codes)
    if codes.ndim != 1 or (codes.size and (codes.min() < 0 or codes.max() >= n_classes)):
        raise InputError(f"class codes must be a vector of integers in 0..{n_classes - 1}")
    return (codes[:, None] == np.arange(n_classes)[None, :]).astype(np.uint64)


def one_hot(codes: np.ndarray, n_classes: int) -> np.ndarray:
    """The paper's m x (n-1) uint64 0/1 label-class matrix L; the n-th class is implicit."""
    return indicators(codes, n_classes)[:, :-1]
