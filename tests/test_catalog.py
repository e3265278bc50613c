"""The dataset catalogue: which contributions fit a dataset, in one order on every server."""

from __future__ import annotations

from typing import Any

import pytest

from mpcnet.errors import InputError
from parties import catalog


def meta(i: str, layout: str = "rows", cols: tuple[str, ...] = ("a", "b"), rows: int = 5,
         label: str | None = "y", exps: list[int] | None = None) -> dict[str, Any]:
    return catalog.contribution_meta(
        dataset="d", upload_id=i, layout=layout, sharing="passive3", rows=rows,
        columns=list(cols), exponents=exps or [3] * len(cols), categories={},
        label=label, classes=["0", "1"] if label else None)


def build(*items: tuple[dict[str, Any], str, int]) -> dict[str, Any]:
    entries = [dict(catalog.entry(m, owner), seq=seq) for m, owner, seq in items]
    return catalog.assemble("d", entries[0]["layout"], "passive3", entries)


def test_rows_append_and_must_match_the_schema() -> None:
    man = build((meta("1"), "a", 1), (meta("2", rows=7), "b", 2))
    assert man["rows"] == 12 and man["schema"]["columns"] == ["a", "b"]
    for bad, words in [(meta("3", cols=("a", "c")), "columns differ"),
                       (meta("3", exps=[3, 4]), "exponents"),
                       (meta("3", label=None), "label"),
                       (meta("3", layout="columns"), "split by rows")]:
        with pytest.raises(InputError, match=words):
            catalog.check_against(man | {"owners": ["a", "b"]}, bad, "c")


def test_each_owner_contributes_once() -> None:
    man = build((meta("1"), "a", 1))
    with pytest.raises(InputError, match="already contributed"):
        catalog.check_against(man | {"owners": ["a"]}, meta("2"), "a")


def test_columns_need_equal_rows_distinct_names_and_one_label() -> None:
    man = build((meta("1", "columns", ("a",), label=None), "a", 1),
                (meta("2", "columns", ("b",)), "b", 2))
    assert man["schema"]["columns"] == ["a", "b"] and man["schema"]["label"] == "y"
    view = man | {"owners": ["a", "b"]}
    for bad, words in [(meta("3", "columns", ("c",), rows=6, label=None), "rows"),
                       (meta("3", "columns", ("a",), label=None), "already in it"),
                       (meta("3", "columns", ("c",)), "exactly one")]:
        with pytest.raises(InputError, match=words):
            catalog.check_against(view, bad, "c")


def test_order_follows_the_coordinators_numbers_not_arrival() -> None:
    one = build((meta("1", "columns", ("a",), label=None), "a", 1),
                (meta("2", "columns", ("b",)), "b", 2))
    other = build((meta("2", "columns", ("b",)), "b", 2),
                  (meta("1", "columns", ("a",), label=None), "a", 1))
    assert catalog.digest(one) == catalog.digest(other)
    assert other["schema"]["columns"] == ["a", "b"]


def test_selection_needs_a_label_and_k_in_range() -> None:
    man = build((meta("1", "columns", ("a", "b", "c"), label=None), "a", 1))
    with pytest.raises(InputError, match="label"):
        catalog.ready_for_selection(man, 1)
    man = build((meta("1", cols=("a", "b", "c")), "a", 1))
    catalog.ready_for_selection(man, 2)
    for k in (0, 3, -1):
        with pytest.raises(InputError, match="k must be"):
            catalog.ready_for_selection(man, k)
