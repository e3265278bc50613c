"""Layer: server and client. A declared dataset schema: what the owners of a dataset agree on.

Without a declaration the first owner's file fixes a dataset's columns, scales and lists
(``parties.catalog``). With one, the owners agree beforehand, in a TOML file, on

    label = "outcome"
    classes = ["0", "1", "2"]          # optional; if given, no other class is accepted
    missing = "refuse"                 # refuse | zero | mean, for every owner
    [columns]
    age = { type = "numeric", max_abs = 120 }        # or exponent = E (value * 2**E)
    site = { type = "categorical", categories = ["north", "south"] }
    ward = { type = "categorical", categories = ["(missing)", "a"], missing = "category" }

in column order (a column's ``missing`` overrides the schema's for it: refuse, zero or mean for
a numeric column, refuse, category or mode for a categorical one). The first contribution
carries it (``mpc-client share --schema FILE``) without its ranges (``max_abs``: the servers
need only the exponents), the servers keep it with the dataset and check every later
contribution's description against it
(columns, scale exponents, category lists, classes); each owner's client checks its values
(ranges, categories, classes) before anything is sent, naming the column. ``draft`` writes a
declaration from a sample file, ``to_toml`` prints one (``mpc-client schema``).

The value checks run on the owner's machine: a dishonest owner can always put wrong values in
its own rows, and no server sees a value.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mpcnet.dataset import (
    CATEGORY_POLICIES,
    MISSING_POLICIES,
    CsvTable,
    EncodingOptions,
    Table,
    class_codes,
)
from mpcnet.errors import InputError
from mpcnet.fixedpoint import EXPONENT_RANGE, VALUE_BITS, auto_exponents

KINDS = ("numeric", "categorical")


@dataclass(frozen=True)
class Column:
    """One declared column: numeric with a scale exponent (and the range it was made for), or
    categorical with its closed category list."""

    name: str
    kind: str
    exponent: int = 0
    max_abs: float | None = None
    categories: tuple[str, ...] = ()
    missing: str | None = None  # this column's own missing policy, if any

    def spec(self) -> dict[str, Any]:
        """The column's entry in [columns] (its name is the key)."""
        out: dict[str, Any]
        if self.kind == "categorical":
            out = {"type": "categorical", "categories": list(self.categories)}
        else:
            out = {"type": "numeric", "exponent": self.exponent}
            if self.max_abs is not None:
                out["max_abs"] = self.max_abs
        if self.missing is not None:
            out["missing"] = self.missing
        return out


@dataclass(frozen=True)
class Declared:
    """A dataset's declared schema (see the module docstring)."""

    label: str
    columns: tuple[Column, ...]
    classes: tuple[str, ...] | None = None
    missing: str = "refuse"

    # -- forms ------------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, d: Any, where: str = "schema") -> Declared:
        """Check and read the dict form the servers keep (``to_dict``: columns as a list, so
        that their order survives any JSON or msgpack round trip)."""
        def fail(msg: str) -> InputError:
            return InputError(f"{where}: {msg}")

        if not isinstance(d, dict):
            raise fail("a schema is a table of keys")
        unknown = sorted(set(d) - {"label", "classes", "missing", "columns"})
        if unknown:
            raise fail(f"unknown key(s) {unknown}; a schema has label, classes, missing and "
                       "[columns]")
        label, missing, classes = d.get("label"), d.get("missing", "refuse"), d.get("classes")
        if not isinstance(label, str) or not label:
            raise fail('label = "COLUMN" is required: the label column of every owner')
        if missing not in MISSING_POLICIES:
            raise fail(f"missing must be one of {', '.join(MISSING_POLICIES)}, not {missing!r}")
        if classes is not None and (not isinstance(classes, list) or len(classes) < 2 or not all(
                isinstance(c, str) for c in classes) or len(set(classes)) != len(classes)):
            raise fail("classes must be a list of at least two distinct strings")
        listed = d.get("columns")
        if not isinstance(listed, list) or not listed or not all(
                isinstance(c, dict) and isinstance(c.get("name"), str) for c in listed):
            raise fail("[columns] must name at least one feature column")
        names = [c["name"] for c in listed]
        if label in names:
            raise fail(f"the label {label!r} is not a feature column; leave it out of [columns]")
        if len(set(names)) != len(names):
            raise fail("a column is named twice in [columns]")
        columns = tuple(_column(c["name"], {k: v for k, v in c.items() if k != "name"}, fail)
                        for c in listed)
        return cls(label, columns, None if classes is None else tuple(classes), missing)

    @classmethod
    def from_toml(cls, text: str, where: str) -> Declared:
        """Read the TOML file (its [columns] table in file order)."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise InputError(f"{where}: not valid TOML ({exc})") from None
        table = data.get("columns")
        if isinstance(table, dict):
            data["columns"] = [dict(spec, name=name) if isinstance(spec, dict) else spec
                               for name, spec in table.items()]
        return cls.from_dict(data, where)

    def to_dict(self, public: bool = False) -> dict[str, Any]:
        """The dict form; ``public``: without the ranges (``max_abs``), which is what the
        servers keep: an owner's declared range would tell them roughly how large a column's
        values are, and they only need the exponents."""
        columns = [dict(c.spec(), name=c.name) for c in self.columns]
        if public:
            columns = [{k: v for k, v in c.items() if k != "max_abs"} for c in columns]
        out: dict[str, Any] = {"label": self.label, "missing": self.missing,
                               "columns": columns}
        if self.classes is not None:
            out["classes"] = list(self.classes)
        return out

    def to_toml(self, comment: str = "") -> str:
        """The TOML form, one line per column, that ``from_toml`` reads back."""
        def s(text: str) -> str:  # a TOML basic string (JSON's escapes are TOML's)
            return json.dumps(text, ensure_ascii=False)

        lines = [f"# {line}" for line in comment.splitlines()]
        lines.append(f"label = {s(self.label)}")
        if self.classes is not None:
            lines.append(f"classes = [{', '.join(s(c) for c in self.classes)}]")
        lines += [f"missing = {s(self.missing)}", "", "[columns]"]
        for c in self.columns:
            spec = ", ".join(f"{k} = {_toml_value(v)}" for k, v in c.spec().items())
            lines.append(f"{s(c.name)} = {{ {spec} }}")
        return "\n".join(lines) + "\n"

    # -- use ----------------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def exponents(self) -> list[int]:
        return [c.exponent if c.kind == "numeric" else _code_exponent(c) for c in self.columns]

    def options(self) -> EncodingOptions:
        """How an owner reads its file under this schema (its own options do not apply)."""
        return EncodingOptions(missing=self.missing,  # type: ignore[arg-type]
                               known_categories={c.name: list(c.categories)
                                                 for c in self.columns
                                                 if c.kind == "categorical"},
                               missing_columns={c.name: c.missing for c in self.columns
                                                if c.missing is not None})

    def check_table(self, table: Table | CsvTable, path: str) -> None:
        """An owner's file read with ``options``: the declared columns in order, every value
        within its column's range, no category or class beyond the declared ones."""
        if table.columns != self.names:
            missing = [c for c in self.names if c not in table.columns]
            extra = [c for c in table.columns if c not in self.names]
            order = "" if missing or extra else "; same names, other order"
            raise InputError(f"{path}: the columns differ from the declared schema's (missing "
                             f"{missing[:5]}, extra {extra[:5]}{order}); use --drop for "
                             "columns the schema leaves out")
        for j, c in enumerate(self.columns):
            if c.kind == "categorical":
                new = table.categories.get(c.name, [])[len(c.categories):]
                if new:
                    raise InputError(f"{path}: column {c.name!r} has the category {new[0]!r}, "
                                     f"which the declared schema does not list "
                                     f"({len(c.categories)} categories)")
                continue
            bound = c.max_abs if c.max_abs is not None else math.ldexp(2.0**VALUE_BITS,
                                                                       -c.exponent)
            if table.peaks[j] <= bound:
                continue
            for start, block in table.chunks():  # find the first row beyond it
                over = np.flatnonzero(np.abs(block[:, j]) > bound)
                if over.size:
                    row = int(over[0])
                    raise InputError(f"{path}: row {start + row + 1}, column {c.name!r}: "
                                     f"{float(block[row, j])!r} is outside the declared "
                                     f"range |x| <= {bound:g}")
        if self.classes is not None and table.labels is not None:
            got, _ = class_codes(table.labels, list(self.classes))
            if len(got) > len(self.classes):
                raise InputError(f"{path}: label {got[len(self.classes)]!r} is not one of the "
                                 f"declared classes {list(self.classes)}")

    def check_meta(self, meta: dict[str, Any], dataset: str) -> None:
        """Server side: a contribution's description fits the declaration."""
        def fail(msg: str) -> InputError:
            return InputError(f"dataset {dataset!r}: {msg} (see `mpc-client schema --dataset "
                              f"{dataset}`)")

        if meta.get("columns") != self.names:
            raise fail("the columns differ from the declared schema's")
        for c, e in zip(self.columns, meta.get("exponents", []), strict=False):
            want = c.exponent if c.kind == "numeric" else _code_exponent(c)
            if e != want:
                raise fail(f"column {c.name!r} is encoded with exponent {e}, the declared "
                           f"schema says {want}")
        coded = meta.get("categories", {})
        for c in self.columns:
            if c.kind == "categorical" and coded.get(c.name) != list(c.categories):
                raise fail(f"the categories of column {c.name!r} are not the declared ones")
            if c.kind == "numeric" and c.name in coded:
                raise fail(f"column {c.name!r} is declared numeric but was coded as categories")
        if meta.get("label") != self.label:
            raise fail(f"the label must be column {self.label!r}")
        if self.classes is not None and meta.get("classes") != list(self.classes):
            raise fail(f"the classes must be the declared {list(self.classes)}")


def _column(name: str, spec: Any, fail: Any) -> Column:
    if not isinstance(spec, dict) or spec.get("type") not in KINDS:
        raise fail(f"column {name!r}: give type = \"numeric\" or \"categorical\"")
    spec = dict(spec)
    missing = spec.pop("missing", None)
    allowed = ("refuse", *CATEGORY_POLICIES) if spec["type"] == "categorical" \
        else MISSING_POLICIES
    if missing is not None and missing not in allowed:
        raise fail(f"column {name!r}: missing must be one of {', '.join(allowed)} for a "
                   f"{spec['type']} column, not {missing!r}")
    return replace(_typed_column(name, spec, fail), missing=missing)


def _typed_column(name: str, spec: dict[str, Any], fail: Any) -> Column:
    if spec["type"] == "categorical":
        cats = spec.get("categories")
        if set(spec) - {"type", "categories"} or not isinstance(cats, list) or not cats or \
                not all(isinstance(c, str) for c in cats) or len(set(cats)) != len(cats):
            raise fail(f"column {name!r}: a categorical column has categories = [...], a list "
                       "of distinct strings (and nothing else)")
        return Column(name, "categorical", categories=tuple(cats))
    if set(spec) - {"type", "exponent", "max_abs"}:
        raise fail(f"column {name!r}: a numeric column has max_abs and/or exponent")
    exponent, max_abs = spec.get("exponent"), spec.get("max_abs")
    if max_abs is not None and (isinstance(max_abs, bool) or not isinstance(
            max_abs, int | float) or not 0 < max_abs < math.inf):
        raise fail(f"column {name!r}: max_abs must be a positive number")
    if exponent is None and max_abs is None:
        raise fail(f"column {name!r}: give max_abs (the largest |value| any owner may have) "
                   "or exponent")
    if exponent is None:
        assert max_abs is not None
        exponent = int(auto_exponents(np.array([[float(max_abs)]]))[0])
    low, high = EXPONENT_RANGE
    if isinstance(exponent, bool) or not isinstance(exponent, int) or not low <= exponent <= high:
        raise fail(f"column {name!r}: exponent must be an integer in {low}..{high}")
    if max_abs is not None and math.ldexp(float(max_abs), exponent) >= 2.0**VALUE_BITS:
        raise fail(f"column {name!r}: max_abs {max_abs:g} does not fit exponent {exponent} "
                   f"(max_abs * 2**exponent must stay below 2**{VALUE_BITS})")
    return Column(name, "numeric", exponent=exponent,
                  max_abs=None if max_abs is None else float(max_abs))


def _code_exponent(column: Column) -> int:
    """The scale of a categorical column: as auto-scaling its codes 0..c-1 would choose."""
    return int(auto_exponents(np.array([[float(max(len(column.categories) - 1, 1))]]))[0])


def _toml_value(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(json.dumps(x, ensure_ascii=False) for x in v) + "]"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else "inf"
    return json.dumps(v)


def _round_up(x: float) -> float:
    """x rounded up to two significant digits (a draft shows a range, not the sample's max)."""
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / step) * step


def draft(table: Table, label: str, missing: str) -> Declared:
    """A declaration from a sample file read with some options: each column as it was read
    (numeric with its largest |value| as the range, or categorical with its categories), the
    sample's classes. Owners then widen ranges and lists to what all of them hold."""
    columns = []
    for j, name in enumerate(table.columns):
        if name in table.categories:
            columns.append(Column(name, "categorical", categories=tuple(table.categories[name])))
            continue
        peak = _round_up(float(np.abs(table.values[:, j]).max()) or 1.0)
        columns.append(Column(name, "numeric", int(auto_exponents(np.array([[peak]]))[0]),
                              max_abs=peak))
    classes = None if table.labels is None else tuple(class_codes(table.labels)[0])
    return Declared(label, tuple(columns), classes, missing)
