"""Declared dataset schemas: the TOML form, the owner's checks and the servers' checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mpcnet.dataset import read_csv
from mpcnet.errors import InputError
from mpcnet.parties import catalog
from mpcnet.parties.declared import Declared, draft

TEXT = '''label = "y"
classes = ["p", "q"]
missing = "zero"

[columns]
"b" = { type = "categorical", categories = ["x", "y"] }
"a" = { type = "numeric", max_abs = 100 }
'''


def test_the_toml_form_reads_back_and_keeps_the_column_order() -> None:
    d = Declared.from_toml(TEXT, "s.toml")
    assert d.names == ["b", "a"] and d.classes == ("p", "q") and d.missing == "zero"
    assert d.exponents[1] == 24  # 100 * 2**24 < 2**31 <= 100 * 2**25
    again = Declared.from_toml(d.to_toml("a comment"), "again")
    assert again == d and Declared.from_dict(d.to_dict()) == d


@pytest.mark.parametrize("text, words", [
    ("label = 1\n[columns]\na = { type = \"numeric\", exponent = 3 }", "label"),
    ('label = "y"\n', "[columns]"),
    ('label = "y"\n[columns]\na = { type = "text" }', "column 'a'"),
    ('label = "y"\n[columns]\na = { type = "numeric" }', "max_abs"),
    ('label = "y"\n[columns]\na = { type = "numeric", max_abs = -1 }', "positive"),
    ('label = "y"\n[columns]\na = { type = "numeric", max_abs = 1e12, exponent = 30 }',
     "does not fit"),
    ('label = "y"\n[columns]\na = { type = "categorical", categories = ["u", "u"] }',
     "distinct"),
    ('label = "y"\nmissing = "drop"\n[columns]\na = { type = "numeric", exponent = 1 }',
     "missing"),
    ('label = "y"\nclasses = ["p"]\n[columns]\na = { type = "numeric", exponent = 1 }',
     "two distinct"),
    ('label = "y"\ncolour = 1\n[columns]\na = { type = "numeric", exponent = 1 }',
     "unknown key"),
    ('label = "y"\n[columns]\ny = { type = "numeric", exponent = 1 }', "not a feature"),
    ("label = ", "not valid TOML"),
])
def test_a_bad_declaration_is_refused_naming_what(text: str, words: str) -> None:
    with pytest.raises(InputError, match=words.replace("[", r"\[")):
        Declared.from_toml(text, "s.toml")


def _file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "o.csv"
    path.write_text("b,a,y\n" + body)
    return path


def test_an_owner_file_is_checked_before_anything_is_sent(tmp_path: Path) -> None:
    d = Declared.from_toml(TEXT, "s.toml")
    good = read_csv(_file(tmp_path, "x,1,p\ny,,q\n"), "y", options=d.options())
    d.check_table(good, "o.csv")
    assert good.values.tolist() == [[0, 1], [1, 0]]  # the declared missing policy: zero
    for body, words in [("z,1,p\nx,1,q\n", "category 'z'"),
                        ("x,101,p\nx,1,q\n", "row 1, column 'a'"),
                        ("x,1,r\nx,1,p\n", "label 'r'")]:
        table = read_csv(_file(tmp_path, body), "y", options=d.options())
        with pytest.raises(InputError, match=words):
            d.check_table(table, "o.csv")


def _meta(i: str, **over: Any) -> dict[str, Any]:
    d = Declared.from_toml(TEXT, "s.toml")
    base = catalog.contribution_meta(
        dataset="d", upload_id=i, layout="rows", sharing="passive3", rows=2,
        columns=d.names, exponents=d.exponents, categories={"b": ["x", "y"]}, label="y",
        classes=["p", "q"], declared=d.to_dict() if i == "1" else None)
    return base | over


def test_the_servers_check_every_contribution_against_the_declaration() -> None:
    man = catalog.assemble("d", "rows", "passive3", [dict(catalog.entry(_meta("1"), "o1"),
                                                          seq=1)])
    view = man | {"owners": ["o1"]}
    catalog.check_against(view, _meta("2"), "o2")
    exps = Declared.from_toml(TEXT, "s").exponents
    for over, words in [({"exponents": [exps[0], 3]}, "column 'a' is encoded with exponent 3"),
                        ({"categories": {"b": ["x", "y", "z"]}}, "categories of column 'b'"),
                        ({"classes": ["p", "q", "r"]}, "declared"),
                        ({"declared": {"label": "y", "columns": [
                            {"name": "b", "type": "categorical", "categories": ["x"]}]}},
                         "cannot declare another")]:
        with pytest.raises(InputError, match=words):
            catalog.check_against(view, _meta("2", **over), "o2")
    with pytest.raises(InputError, match="split by rows"):
        catalog.check_meta(_meta("1", layout="columns"))


def test_a_draft_covers_its_sample(tmp_path: Path) -> None:
    table = read_csv(_file(tmp_path, "x,-3.5,p\ny,2,q\n"), "y",
                     options=Declared.from_toml(TEXT, "s").options())
    d = draft(table, "y", "refuse")
    assert [c.kind for c in d.columns] == ["categorical", "numeric"]
    assert d.columns[1].max_abs == 3.5 and d.classes == ("p", "q")
    d.check_table(table, "o.csv")
    assert np.ldexp(3.5, d.exponents[1]) < 2**31


def test_the_servers_keep_no_ranges_and_a_draft_rounds_them_up(tmp_path: Path) -> None:
    """A declared range would tell the servers roughly how large a column's values are; the
    servers need only the exponents, and a draft shows a range, not the sample's maximum."""
    d = Declared.from_toml(TEXT, "s.toml")
    public = d.to_dict(public=True)
    assert all("max_abs" not in c for c in public["columns"])
    assert Declared.from_dict(public).exponents == d.exponents
    table = read_csv(_file(tmp_path, "x,237018.47,p\ny,-2,q\n"), "y", options=d.options())
    assert draft(table, "y", "refuse").columns[1].max_abs == 240000


@pytest.mark.parametrize("over, words", [
    ({"release": [["values"]]}, "release"),
    ({"categories": {"b": ["x", "y"], "zz": ["q"]}}, "this contribution's columns"),
    ({"categories": {"b": ["x", "x"]}}, "distinct"),
    ({"exponents": [True, 3]}, "integers"),
    ({"exponents": [0, 5000]}, "integers in"),
    ({"rows": True}, "at least one row"),
    ({"classes": ["p", "p"]}, "distinct classes"),
])
def test_a_malformed_description_is_refused_before_anything_is_stored(
        over: dict[str, Any], words: str) -> None:
    with pytest.raises(InputError, match=words):
        catalog.check_meta(_meta("2", **over))


def test_a_declared_schema_sets_the_missing_policy_per_column(tmp_path: Path) -> None:
    schema = Declared.from_toml(
        'label = "y"\nmissing = "zero"\n[columns]\n'
        'x = { type = "numeric", max_abs = 10, missing = "mean" }\n'
        'site = { type = "categorical", categories = ["(missing)", "a", "b"] }\n'
        'ward = { type = "categorical", categories = ["c", "d"], missing = "mode" }\n',
        "s.toml")
    assert Declared.from_toml(schema.to_toml(), "again") == schema
    path = tmp_path / "f.csv"
    path.write_text("x,site,ward,y\n2,a,d,p\n,,,q\n4,b,d,p\n")
    table = read_csv(path, "y", options=schema.options())
    schema.check_table(table, str(path))
    assert table.values.tolist() == [[2, 1, 1], [3, 0, 1], [4, 2, 1]]
    for bad, words in (('{ type = "numeric", max_abs = 1, missing = "mode" }', "numeric column"),
                       ('{ type = "categorical", categories = ["a"], missing = "mean" }',
                        "categorical column")):
        with pytest.raises(InputError, match=words):
            Declared.from_toml(f'label = "y"\n[columns]\nx = {bad}\n', "bad.toml")
