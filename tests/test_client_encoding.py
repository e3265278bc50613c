"""How an owner's file becomes a contribution: the dataset's scales and lists, its checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpcnet.client.encoding import encode_contribution
from mpcnet.dataset import EncodingOptions
from mpcnet.errors import InputError
from mpcnet.parties import catalog


def _share(path: Path, view: dict | None, owner: str) -> dict:
    return encode_contribution(path, view, dataset="d", owner=owner, layout="rows",
                               sharing="passive3", security="passive3", label="y", drop=(),
                               options=EncodingOptions()).meta


def test_a_later_owner_is_not_rounded_away_by_the_first_owners_scale(tmp_path: Path) -> None:
    """A first owner with huge values (or a dishonest one) fixes a scale at which a later
    owner's values would keep no precision: the later owner's client refuses, naming why."""
    first, later = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("x,y\n1e9,p\n-2e9,q\n")
    later.write_text("x,y\n0.001,p\n0.002,q\n")
    meta = _share(first, None, "o1")
    man = catalog.assemble("d", "rows", "passive3", [dict(catalog.entry(meta, "o1"), seq=1)])
    with pytest.raises(InputError, match=r"column 'x'.*keeps only 0 significant bits.*"
                                         "declared schema"):
        _share(later, man | {"owners": ["o1"]}, "o2")
    same = tmp_path / "c.csv"
    same.write_text("x,y\n3e8,p\n5,q\n")
    assert _share(same, man | {"owners": ["o1"]}, "o2")["exponents"] == meta["exponents"]


def test_a_declared_scale_cannot_round_a_later_owner_away_either(tmp_path: Path) -> None:
    """A dishonest first owner declares exponent -12 and missing = zero: a later owner's
    client refuses rather than encode its values as zeros, and its own --missing may not be
    overridden silently."""
    from mpcnet.parties.declared import Declared

    schema = Declared.from_toml('label = "y"\nmissing = "zero"\n[columns]\n'
                                'x = { type = "numeric", exponent = -12 }\n', "evil.toml")
    first, later = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("x,y\n1e9,p\n-2e9,q\n")
    later.write_text("x,y\n0.5,p\n,q\n")
    meta = encode_contribution(first, None, dataset="d", owner="o1", layout="rows",
                               sharing="passive3", security="passive3", label="y", drop=(),
                               options=EncodingOptions(), declared=schema).meta
    assert meta["declared"] == schema.to_dict(public=True)
    man = catalog.assemble("d", "rows", "passive3", [dict(catalog.entry(meta, "o1"), seq=1)])
    view = man | {"owners": ["o1"]}
    with pytest.raises(InputError, match="keeps only 0 significant bits"):
        _share(later, view, "o2")
    with pytest.raises(InputError, match="declared schema, which decides"):
        encode_contribution(later, view, dataset="d", owner="o2", layout="rows",
                            sharing="passive3", security="passive3", label="y", drop=(),
                            options=EncodingOptions(missing="mean"))
