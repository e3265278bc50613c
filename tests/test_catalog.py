"""The dataset catalogue: which contributions fit a dataset, in one order on every server."""

from __future__ import annotations

from typing import Any

import pytest

from mpcnet.errors import InputError
from mpcnet.parties import catalog


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


def test_later_owners_may_add_classes_and_categories_but_not_reorder_them() -> None:
    def owner(i: str, classes: list[str], cats: list[str]) -> dict[str, Any]:
        return dict(meta(i), classes=classes, categories={"a": cats})

    man = build((owner("1", ["0", "1"], ["x", "y"]), "a", 1),
                (owner("2", ["0", "1", "2"], ["x", "y", "z"]), "b", 2),
                (owner("3", ["0", "1"], ["x", "y"]), "c", 3))  # encoded before 2 committed
    assert man["schema"]["classes"] == ["0", "1", "2"]
    assert man["schema"]["categories"] == {"a": ["x", "y", "z"]}
    view = man | {"owners": ["a", "b", "c"]}
    for bad, words in [(owner("4", ["1", "0"], ["x", "y"]), "class list"),
                       (owner("4", ["0", "1", "3"], ["x", "y"]), "does not extend"),
                       (owner("4", ["0", "1"], ["y", "x"]), "column 'a'"),
                       (dict(meta("4"), categories={"a": ["x"], "b": ["q"]}),
                        "column 'b' is coded as categories in this file"),
                       (dict(meta("4"), categories={}), "--ordinal 'a'")]:
        with pytest.raises(InputError, match=words):
            catalog.check_against(view, bad, "d")


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


def test_keyed_columns_may_hold_other_records_in_other_numbers() -> None:
    """Keyed by record IDs (``share --columns --id``): row counts differ, the dataset's rows
    are the smallest (a bound on the join), names must not repeat, one label, 2..8 owners."""
    man = build((meta("1", "keyed", ("a",), rows=9, label=None), "a", 1),
                (meta("2", "keyed", ("b",), rows=4), "b", 2))
    assert man["rows"] == 4 and man["schema"]["columns"] == ["a", "b"]
    view = man | {"owners": ["a", "b"]}
    for bad, words in [(meta("3", "keyed", ("a",), label=None), "already in it"),
                       (meta("3", "keyed", ("c",)), "exactly one"),
                       (meta("3", "columns", ("c",), rows=4, label=None),
                        "use --columns --id COLUMN")]:
        with pytest.raises(InputError, match=words):
            catalog.check_against(view, bad, "c")
    owners = [(meta(str(i), "keyed", (f"c{i}",), label="y" if i == 0 else None), f"o{i}", i)
              for i in range(catalog.MAX_KEYED + 1)]
    with pytest.raises(InputError, match="at most 8"):
        build(*owners)
    alone = build((meta("1", "keyed", ("a", "b"), rows=9), "a", 1))
    with pytest.raises(InputError, match="one contribution"):
        catalog.ready_for_selection(alone, 1, "passive3")
    catalog.ready_for_selection(man, 1, "passive3")


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
        catalog.ready_for_selection(man, 1, "passive3")
    man = build((meta("1", cols=("a", "b", "c")), "a", 1))
    catalog.ready_for_selection(man, 2, "passive3")
    catalog.ready_for_selection(man, 3, "passive3")  # k = p: every feature, ranked
    for k in (0, 4, -1):
        with pytest.raises(InputError, match="k must be"):
            catalog.ready_for_selection(man, k, "passive3")


def test_one_owner_asking_for_active_security_rules_out_passive_jobs() -> None:
    man = build((meta("1"), "a", 1), (dict(meta("2"), security="active3"), "b", 2))
    assert catalog.required_security(man) == "active3"
    assert catalog.summary(man)["requires"] == "active3"
    catalog.ready_for_selection(man, 1, "active3")
    with pytest.raises(InputError, match="b shared it for active3"):
        catalog.ready_for_selection(man, 1, "passive3")
    plain = build((meta("1"), "a", 1))
    assert catalog.required_security(plain) is None
    assert catalog.digest(plain) != catalog.digest(build((dict(meta("1"), security="active3"),
                                                          "a", 1)))
    for bad, words in [("active4", "stores its inputs in the active4 sharing"),
                       ("active9", "unknown security setting")]:
        with pytest.raises(InputError, match=words):
            catalog.check_meta(dict(meta("3"), security=bad))


def test_rows_are_bounded_by_the_values_contributions_were_encoded_for() -> None:
    """The mean-split test needs 2 m 2^bits < 2^63: contributions recording 38-bit values
    allow up to 2^24 - 1 rows; ones from clients before the record count as 40-bit ones and
    allow less than 2^22, so the job is refused rather than computed with an overflow."""
    big = (1 << 24) - 1
    catalog.ready_for_selection(build((meta("1", rows=big), "a", 1)), 1, "passive3")
    old = dict(meta("2", rows=1 << 22))
    del old["value_bits"]
    man = build((old, "b", 1))
    assert man["contributions"][0]["value_bits"] == 40
    with pytest.raises(InputError, match=r"below 2\^40 \(shared by b\) overflow"):
        catalog.ready_for_selection(man, 1, "passive3")
    catalog.ready_for_selection(build((dict(old, rows=(1 << 22) - 1), "b", 1)), 1, "passive3")
    with pytest.raises(InputError, match="value_bits must be"):
        catalog.entry(dict(meta("3"), value_bits=41), "c")


def test_pcc_is_refused_on_values_wider_than_it_splits() -> None:
    """The correlation splits every value of x + 2^38 into 19 and 20 bits: a dataset with files
    from a client before the 38-bit record (40-bit values) is refused for pcc, with the fix
    named, and accepted for the mean-split scores."""
    old = dict(meta("2", rows=1000))
    del old["value_bits"]
    man = build((old, "b", 1))
    for name in ("ms-gini", "chi2", "mi"):
        catalog.ready_for_selection(man, 1, "passive3", name)
    with pytest.raises(InputError, match=r"pcc needs values encoded below 2\^38.*share them "
                                         "again with this client"):
        catalog.ready_for_selection(man, 1, "passive3", "pcc")
    catalog.ready_for_selection(build((meta("1", rows=1000), "a", 1)), 1, "passive3", "pcc")


def test_contributions_and_datasets_are_bounded_in_size() -> None:
    """Uploads are written in place block by block: a description claiming more rows than
    any job can use (or absurdly many cells) is refused before any block is sent."""
    for rows, cols in [(1 << 24, 2), (10**12, 2), (1 << 20, 5000)]:
        with pytest.raises(InputError, match="a contribution may have fewer than"):
            catalog.entry(meta("1", rows=rows, cols=tuple(f"c{j}" for j in range(cols))), "a")
    with pytest.raises(InputError, match="a dataset may have fewer than"):
        build((meta("1", rows=(1 << 23)), "a", 1), (meta("2", rows=(1 << 23)), "b", 2))


def test_servers_agree_on_a_dataset_only_with_one_owner_statement() -> None:
    """An owner who signed a different statement for each server (to have a rebuild blame
    an honest server) makes the servers' digests differ: the next job refuses it."""
    man = build((meta("1"), "a", 1))
    signed = [dict(man, contributions=[dict(man["contributions"][0],
                                            signed={"signature": sig})])
              for sig in ("00", "01")]
    assert catalog.digest(signed[0]) != catalog.digest(signed[1])


def test_a_column_all_zero_so_far_takes_the_scale_of_the_first_owner_with_values() -> None:
    zero = meta("1", exps=[0, 3]) | {"zero_columns": ["a"]}
    man = build((zero, "o1", 1))
    assert man["schema"]["free"] == ["a"]
    still = meta("2", exps=[0, 3]) | {"zero_columns": ["a"]}
    assert build((zero, "o1", 1), (still, "o2", 2))["schema"]["free"] == ["a"]
    fixed = build((zero, "o1", 1), (still, "o2", 2), (meta("3", exps=[7, 3]), "o3", 3))
    assert fixed["schema"]["exponents"] == [7, 3] and "free" not in fixed["schema"]
    with pytest.raises(InputError, match="column 'a' is encoded with the scale exponent 9"):
        build((zero, "o1", 1), (meta("3", exps=[7, 3]), "o3", 2), (meta("4", exps=[9, 3]),
                                                                   "o4", 3))
    with pytest.raises(InputError, match="column 'b' is encoded with the scale exponent 5"):
        build((zero, "o1", 1), (meta("3", exps=[7, 5]), "o3", 2))  # b was never free
    with pytest.raises(InputError, match="zero_columns must list"):
        build((meta("1") | {"zero_columns": ["nope"]}, "o1", 1))


def test_an_all_zero_column_fits_a_free_column_at_any_scale() -> None:
    """A's column a is all zero (free), B's fixes its scale at 7, C's is all zero again and
    encoded at 7. When B withdraws, the servers rebuild the dataset from A and C: C's 7 for
    the still free a must fit A's 0 (zeros are exact at every scale), or B can never
    withdraw."""
    a = meta("1", exps=[0, 3]) | {"zero_columns": ["a"]}
    c = meta("3", exps=[7, 3]) | {"zero_columns": ["a"]}
    assert build((a, "o1", 1), (meta("2", exps=[7, 3]), "o2", 2),
                 (c, "o3", 3))["schema"]["exponents"] == [7, 3]
    rebuilt = build((a, "o1", 1), (c, "o3", 3))
    assert rebuilt["schema"]["free"] == ["a"] and rebuilt["rows"] == 10
    with pytest.raises(InputError, match="scale exponent 5"):  # b was never free
        build((a, "o1", 1), (meta("3", exps=[7, 5]) | {"zero_columns": ["a"]}, "o3", 3))
