"""How an owner's file becomes a contribution: the dataset's scales and lists, its checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpcnet.client.encoding import encode_contribution
from mpcnet.dataset import EncodingOptions
from mpcnet.errors import InputError, MPCError
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


def _sequence(tmp_path: Path, files: list[str]) -> list[dict]:
    """Encode the files' texts as contributions in order; each one's description."""
    view, entries, metas = None, [], []
    for i, text in enumerate(files):
        path = tmp_path / f"f{i}.csv"
        path.write_text(text)
        meta = _share(path, view, f"o{i}")
        metas.append(meta)
        entries.append(dict(catalog.entry(meta, f"o{i}"), seq=i + 1))
        man = catalog.assemble("d", "rows", "passive3", entries)
        view = man | {"owners": [e["owner"] for e in entries]}
    return metas


def test_an_all_zero_column_fixes_no_scale_in_any_order(tmp_path: Path) -> None:
    """The trial: the first owner's column is all zero; a later owner's 8.0 (and 0.3) must not
    be refused, and an all-zero file anywhere in the order changes no scale."""
    zero, eight, small = "x,z,y\n0,1,p\n0,2,q\n", "x,z,y\n8,1,p\n4,3,q\n", \
        "x,z,y\n0.3,1,p\n0.1,2,q\n"
    one = _sequence(tmp_path, [zero, eight, small])
    assert one[0]["zero_columns"] == ["x"] and one[1]["zero_columns"] == []
    alone = _share(_write(tmp_path, "e.csv", eight), None, "o")
    assert one[1]["exponents"] == [alone["exponents"][0], one[0]["exponents"][1]]
    assert one[2]["exponents"][0] == alone["exponents"][0]  # 0.3 at 8's scale keeps 27 bits
    two = _sequence(tmp_path, [eight, zero, small])
    assert [m["exponents"] for m in two[1:]] == [m["exponents"] for m in one[1:]]


def test_exact_values_pass_at_any_scale_and_constant_columns_are_centred(tmp_path: Path
                                                                       ) -> None:
    """A later owner's values exact at the scale pass however few bits they keep; a constant
    first column gets 2^11 of headroom upwards (2^10 downwards)."""
    metas = _sequence(tmp_path, ["x,c,y\n1e6,5,p\n2,5,q\n",
                                 "x,c,y\n1,5000,p\n8,0.01,q\n"])  # 1 and 8: 3 bits, exact
    assert metas[1]["exponents"] == metas[0]["exponents"]
    with pytest.raises(InputError, match="column 'x'.*keeps only"):
        _sequence(tmp_path, ["x,y\n1e6,p\n2,q\n", "x,y\n1.5,p\n8.1,q\n"])  # not exact
    with pytest.raises(InputError, match="column 'c'.*keeps only"):
        _sequence(tmp_path, ["c,y\n5,p\n5,q\n", "c,y\n0.0001,p\n0.0002,q\n"])


def test_the_headroom_claim_at_its_bounds(tmp_path: Path) -> None:
    """``encoding.scales``: a later peak P in [2^-14 P1, 2^7 P1) is accepted, with values
    that are not exact at the scale; a factor of two beyond, refused."""
    p1 = 3.0000001  # not a power of two, and no later value below is exact at its scale
    inside = [p1 * 2.0**-14 * 1.0000001, p1 * 127.99999]
    for p in inside:
        _sequence(tmp_path, [f"x,y\n{p1!r},p\n1.1,q\n", f"x,y\n{p!r},p\n{p / 3!r},q\n"])
    for p, why in ((p1 * 2.0**-17 * 1.0000001, "keeps only"), (p1 * 2.0**8 * 1.01, "2\\*\\*38")):
        with pytest.raises(MPCError, match=why):
            _sequence(tmp_path, [f"x,y\n{p1!r},p\n1.1,q\n", f"x,y\n{p!r},p\n{p / 3!r},q\n"])


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path
