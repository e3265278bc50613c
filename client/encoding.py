"""Layer: client. How an owner's file becomes one contribution: read, checked against the
dataset's schema, encoded in fixed point. No sockets: ``client.uploads`` shares the result,
``client.plain`` computes the selection the servers should produce from the same encoding.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.dataset import CsvTable, EncodingOptions, Table, class_codes, scan_csv
from mpcnet.errors import InputError, RangeError
from mpcnet.fixedpoint import VALUE_BITS, auto_exponents, encode
from mpcnet.parties import catalog
from mpcnet.parties.declared import Declared


@dataclass(frozen=True)
class Encoded:
    """One contribution: its description (``catalog.contribution_meta``), its table and
    scale exponents (its m x p fixed-point values come a block of rows at a time:
    ``blocks``), each row's class code if it carries the label, and the declared schema it
    was read by, if any."""

    meta: dict[str, Any]
    table: Table | CsvTable
    exponents: np.ndarray
    codes: np.ndarray | None
    declared: Declared | None = None

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, int64 fixed-point values) of consecutive blocks of rows."""
        for start, block in self.table.chunks():
            yield start, encode(block, self.exponents, self.table.columns, start)

    @property
    def values(self) -> np.ndarray:
        """All of its fixed-point values (the offline tools)."""
        blocks = [block for _, block in self.blocks()]
        return np.concatenate(blocks) if len(blocks) > 1 else blocks[0]


def declaration(view: dict[str, Any] | None, given: Declared | None, dataset: str
                ) -> Declared | None:
    """The declared schema that applies: the dataset's, or ``given`` for its first
    contribution; a second, different declaration is refused."""
    kept = view["schema"].get("declared") if view else None
    if view is not None and given is not None and given.to_dict(public=True) != kept:
        raise InputError(f"dataset {dataset!r} already has "
                         + ("another declared schema" if kept else "contributions made without "
                            "a declared schema")
                         + f"; leave out --schema (see `mpc-client schema --dataset {dataset}`)")
    return given if given is not None else None if kept is None else Declared.from_dict(kept)


MIN_BITS = 16
"""Significant bits a later owner's largest value of a column must keep at the dataset's scale
(unless every value of it is exact there)."""

CONSTANT_DROP = 4
"""A column constant in the file that fixes its scale is put this many bits below the auto
scale (2^26 <= |c| 2^e < 2^27): centred between VALUE_BITS and MIN_BITS (see ``scales``)."""


def scales(table: Table | CsvTable) -> np.ndarray:
    """The scale exponents that a file fixes for a dataset's columns: the headroom rule.

    A column's exponent e is fixed by the first file in which it is not all zero:
    ``auto_exponents`` (2^30 - 1/4 <= P1 2^e < 2^31 - 1/2 for its largest |value| P1: the
    exact binary exponent, one lower if P1 2^e would round to 2^31), or CONSTANT_DROP bits
    lower if that file's column is constant, value c. An all-zero column
    fixes nothing (it is listed in the contribution's ``zero_columns``; its exponent stays
    free in the dataset, ``parties.catalog``): zeros encode to 0 at every scale, so the shares
    already stored keep their meaning whatever exponent a later owner fixes.

    A later file's column, largest |value| P > 0, is accepted at e (``_check_precision``,
    ``_check_range``) iff (i) every value encodes below 2^VALUE_BITS and (ii) every value is
    exact at e (x 2^e an integer: nothing is rounded) or P 2^e >= 2^(MIN_BITS - 1) (its
    largest value keeps MIN_BITS significant bits).

    Claim: with VALUE_BITS = 38, AUTO_BITS = 31, MIN_BITS = 16, every P in
    [2^-14 P1, 2^7 P1) is accepted after a non-constant first column, every P in
    [2^-10 |c|, 2^11 |c|) after a constant one, any P after all-zero ones, and any value that
    is an integer multiple of 2^-e below 2^(VALUE_BITS - e) whatever P is.
    Proof. Non-constant: P 2^e < 2^7 (2^31 - 1/2) = 2^38 - 64, so every value rounds below
    2^38, (i); and P 2^e >= 2^-14 (2^30 - 1/4) > 2^15 = 2^(MIN_BITS - 1), (ii). Constant: the
    same 4 bits lower, 2^26 - 2^-6 <= |c| 2^e < 2^27 - 2^-5: P 2^e < 2^11 (2^27 - 2^-5) =
    2^38 - 64 and P 2^e >= 2^-10 (2^26 - 2^-6) > 2^15. (The code's test of (ii) counts bits:
    floor(log2 P) + e >= MIN_BITS - 1, the same condition.) All zero: the later file fixes
    e itself (the first case for the files after it). Exact values: (ii) by exactness, (i) by
    the bound. QED.
    So a file whose column is all zero is accepted anywhere in the owners' order and changes
    no scale (the trial's digits split by class: integers 0..16, exact at every e >= 0, and
    e >= 26 > 0 always); and no owner's file is ever rounded to fewer than MIN_BITS bits.
    """
    peaks = table.peaks
    exps = auto_exponents(peaks.reshape(1, -1), table.columns)
    exps[(peaks > 0) & table.constant] -= CONSTANT_DROP
    return exps


def _check_precision(table: Table | CsvTable, exps: np.ndarray, path: str | Path) -> None:
    """Refuse to encode a later owner's column at a scale the first owner chose that would keep
    fewer than MIN_BITS significant bits of it (a first owner with huge values, or a dishonest
    one, must not silently round everyone else's values away); a column whose every value is
    exact at that scale loses nothing and passes (``scales``)."""
    from mpcnet.fixedpoint import AUTO_BITS

    peak = table.peaks
    own = auto_exponents(peak.reshape(1, -1), table.columns)
    kept = AUTO_BITS - (own - exps)
    lossy = table.finest > exps
    for j in np.flatnonzero((kept < MIN_BITS) & (peak > 0) & lossy):
        raise InputError(
            f"{path}: column {table.columns[j]!r}: at the dataset's scale (exponent "
            f"{int(exps[j])}, fixed by its first contribution or its declared schema) its "
            "largest value "
            f"{float(peak[j])!r} keeps only {max(int(kept[j]), 0)} significant bits; share "
            "every owner's file to a new --dataset with a declared schema (mpc-client "
            "draft-schema, then share --schema) that covers every owner's range")


def encode_contribution(path: str | Path, view: dict[str, Any] | None, *, dataset: str,
                        owner: str, layout: str, sharing: str, security: str,
                        label: str | None, drop: tuple[str, ...], options: EncodingOptions,
                        declared: Declared | None = None,
                        table: Table | CsvTable | None = None,
                        release: tuple[str, ...] = ("values",)) -> Encoded:
    """Read ``path`` (unless ``table`` is given), check it against the dataset the servers
    describe as ``view`` (None for a new dataset) and encode it: with the schema's scales and
    lists for a dataset split by rows (later owners extend the lists), with its own scales
    otherwise, or by the declared schema if there is one."""
    declared = declaration(view, declared, dataset)
    schema = view["schema"] if view else None
    fixed = view is not None and view["layout"] == "rows"
    if declared is not None:
        if label is not None and label != declared.label:
            raise InputError(f"the declared schema's label is {declared.label!r}, not "
                             f"{label!r}; leave out --label or pass --label {declared.label}")
        if options.categorical != "refuse" or options.ordinal_columns or options.missing not in (
                "refuse", declared.missing):
            raise InputError(f"dataset {dataset!r} has a declared schema, which decides how "
                             f"cells are read (missing = {declared.missing!r}, categorical "
                             "columns as declared); leave out --categorical, --ordinal and "
                             "--missing")
        label, options = declared.label, replace(declared.options(),
                                                 delimiter=options.delimiter,
                                                 quotechar=options.quotechar)
    elif fixed and schema is not None:
        options = replace(options, known_categories=dict(schema["categories"]))
    if table is None:
        table = scan_csv(path, label, drop, options)
    if declared is not None:
        declared.check_table(table, str(path))
    columns = list(table.columns)
    if declared is not None:
        exps = np.asarray(declared.exponents, dtype=np.int64)
    elif fixed and schema is not None:
        exps = np.asarray(schema["exponents"] if columns == schema["columns"]
                          else [0] * len(columns), dtype=np.int64)  # check_against says why
        free = np.isin(columns, schema.get("free", [])) & (table.peaks > 0)
        exps[free] = scales(table)[free]  # no owner fixed them yet: this file does
    else:
        exps = scales(table)
    classes = codes = None
    if table.labels is not None:
        agreed = (list(declared.classes) if declared is not None and declared.classes
                  else schema["classes"] if fixed and schema else None)
        classes, codes = class_codes(table.labels, agreed)
    meta = catalog.contribution_meta(
        dataset=dataset, upload_id=uuid.uuid4().hex[:12], layout=layout, sharing=sharing,
        rows=table.rows, columns=columns, exponents=exps.tolist(),
        categories={k: v for k, v in table.categories.items() if k in columns},
        label=label if table.labels is not None else None, classes=classes,
        security=security, release=list(release),
        declared=declared.to_dict(public=True) if declared is not None and view is None
        else None, value_bits=VALUE_BITS,
        zero_columns=[name for name, peak in zip(columns, table.peaks, strict=True)
                      if peak == 0])
    catalog.check_against(view, meta, owner)
    if fixed or declared is not None:  # scales someone else chose
        _check_precision(table, exps, path)
    try:
        _check_range(table, exps)
    except RangeError as exc:  # it names the row and column; say which file and why
        why = ("the dataset's declared schema fixes the column's scale; widen max_abs for a "
               "new dataset" if declared is not None else
               "the dataset's first contribution fixed the column's scale; rescale the column "
               "(other units) in every owner's file and share them to a new --dataset"
               if fixed else "rescale the column (other units)")
        raise RangeError(f"{path}: {exc}; {why}") from None
    return Encoded(meta, table, exps, codes, declared)


def _check_range(table: Table | CsvTable, exps: np.ndarray) -> None:
    """Refuse, before anything is sent, a value that does not encode below 2^VALUE_BITS (the
    columns' peaks tell whether one does; encoding the block that holds it names its row)."""
    if (np.rint(np.ldexp(table.peaks, exps)) < 2.0**VALUE_BITS).all():
        return
    for start, block in table.chunks():
        encode(block, exps, table.columns, start)
