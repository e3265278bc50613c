"""Layer: client. How an owner's file becomes one contribution: read, checked against the
dataset's schema, encoded in fixed point. No sockets: ``client.uploads`` shares the result,
``client.plain`` computes the selection the servers should produce from the same encoding.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
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
"""Significant bits a later owner's largest value of a column must keep at the dataset's scale."""


def _check_precision(table: Table | CsvTable, exps: np.ndarray, path: str | Path) -> None:
    """Refuse to encode a later owner's column at a scale the first owner chose that would keep
    fewer than MIN_BITS significant bits of it (a first owner with huge values, or a dishonest
    one, must not silently round everyone else's values away)."""
    from mpcnet.fixedpoint import AUTO_BITS

    peak = table.peaks
    own = auto_exponents(peak.reshape(1, -1), table.columns)
    kept = AUTO_BITS - (own - exps)
    for j in np.flatnonzero((kept < MIN_BITS) & (peak > 0)):
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
        label, options = declared.label, declared.options()
    elif fixed and schema is not None:
        options = EncodingOptions(options.categorical, options.missing,
                                  dict(schema["categories"]), options.ordinal_columns)
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
    else:
        exps = auto_exponents(table.peaks.reshape(1, -1), columns)
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
        else None, value_bits=VALUE_BITS)
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
