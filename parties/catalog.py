"""Layer: server and client. The dataset catalogue: what a contribution may add to a dataset.

Pure functions on plain dicts (the JSON manifests a server stores), shared by the client, which
checks a file against the servers' schema before sending anything, and by the server, which
checks again before storing (the server never trusts the client).

A dataset has a *layout*, fixed by its first contribution:

- ``rows`` (horizontal): every owner contributes records with the same columns, the same
  per-column scale exponents and the label column; the first contribution fixes them (the
  *schema*). A later owner may add classes and categories: its lists start with the
  schema's and new names follow, so the codes of what is stored keep their meaning, and the
  schema's lists grow (see ``_extended``; the label matrices are padded at load time,
  ``Storage.load_dataset``). A column that every contribution so far says is all zero
  (``zero_columns``) has no scale yet (the schema lists it as ``free``): the first one with
  values in it fixes its exponent (the headroom rule, ``client.encoding.scales``). Zeros are
  zeros at every scale, so the stored shares keep their meaning; a dishonest owner who
  claims zeros only changes what its own rows say, which it can always do.
- ``columns`` (vertical): every owner contributes attributes of the same records in the same row
  order; the row count must match, column names must not repeat, and exactly one contribution
  carries the label.
- ``keyed`` (vertical, keyed by record IDs: ``share --columns --id COL``): as ``columns``, but
  each owner's rows come with their record IDs' keyed hashes (``mpcnet.recordids``), in any
  order, and owners may hold different records; a job aligns them obliviously
  (``mpcnet.ops.join``). The dataset's ``rows`` is then the smallest contribution's, a bound
  on the records all of them hold, which only a job learns.

What the servers learn about a dataset is this metadata only: column names, row counts, class
names, the owners' names and the per-column power-of-two scale exponents (the exponent says
roughly how large a column's largest value is, within a factor of two; nothing else about
values). Values and labels reach them only as shares.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from mpcnet.config import NAME_RE
from mpcnet.errors import ConfigError, InputError
from mpcnet.featsel.scores import DEFAULT_SCORE, score
from mpcnet.fixedpoint import EXPONENT_RANGE, MAX_ROWS, VALUE_BITS
from mpcnet.ops.join import MAX_CONTRIBUTIONS
from mpcnet.parties.declared import Declared
from mpcnet.schemes import registry

LAYOUTS = ("rows", "columns", "keyed")
_OPTIONS = {"rows": "--rows", "columns": "--columns", "keyed": "--columns --id COLUMN"}
"""The ``share`` options that make a contribution of each layout."""
MAX_KEYED = MAX_CONTRIBUTIONS
"""Contributions a keyed dataset may have (what ``mpcnet.ops.join`` aligns)."""
MAX_COLUMNS = 1 << 20
MAX_CELLS = 1 << 32
"""Bounds on one contribution (and a dataset): rows below MAX_ROWS (the exact split test's
bound), columns and cells so that no upload claims more disk than a job could ever use."""
OLD_VALUE_BITS = 40
"""The bound on encoded values of contributions that do not record theirs (clients before
``value_bits``); they were refused only from 2^40 on."""
RELEASES = ("values", "label", "names")
"""What an analyst may receive of a result besides its shares: the values of D' (the client
reconstructs them), the label column, the selected columns' names. Owners choose per
contribution; a dataset releases what every one of its owners allows."""

Manifest = dict[str, Any]
Meta = dict[str, Any]


def contribution_meta(*, dataset: str, upload_id: str, layout: str, sharing: str, rows: int,
                      columns: list[str], exponents: list[int],
                      categories: dict[str, list[str]], label: str | None,
                      classes: list[str] | None, security: str | None = None,
                      declared: dict[str, Any] | None = None,
                      release: list[str] | None = None, value_bits: int = VALUE_BITS,
                      zero_columns: list[str] | None = None) -> Meta:
    """The description of one upload, identical for every server. ``security`` is the
    setting the owner shared for: if it is an active one, no job on the dataset may run
    under a passive one (``ready_for_selection``). ``declared`` is the dataset's declared
    schema (``parties.declared``), carried by the first contribution. ``release`` is what
    the owner lets analysts receive (``RELEASES``; default: the values). ``value_bits``
    bounds its encoded values (|x| < 2^value_bits), which bounds the rows a job may have.
    ``zero_columns``: the columns whose every value is 0 in it (their scale is still free)."""
    return {"dataset": dataset, "id": upload_id, "layout": layout, "sharing": sharing,
            "zero_columns": list(zero_columns or []),
            "value_bits": int(value_bits),
            "security": security or sharing, "declared": declared,
            "release": ["values"] if release is None else sorted(set(release)),
            "rows": int(rows), "columns": list(columns), "exponents": [int(e) for e in exponents],
            "categories": {k: list(v) for k, v in categories.items()}, "label": label,
            "classes": list(classes) if classes is not None else None}


def _fail(dataset: str, msg: str) -> InputError:
    """A refusal naming the dataset (none: the files of ``mpc-client plaintext``)."""
    return InputError(f"dataset {dataset!r}: {msg}" if dataset else f"the files: {msg}")


def check_meta(meta: Meta) -> None:
    """Shape of an upload description (types and internal consistency)."""
    ds = str(meta.get("dataset"))
    if meta.get("layout") not in LAYOUTS:
        raise _fail(ds, f"layout must be one of {LAYOUTS}")
    cols, exps = meta.get("columns"), meta.get("exponents")
    if not isinstance(cols, list) or not isinstance(exps, list) or len(cols) != len(exps):
        raise _fail(ds, "need one exponent per column")
    low, high = EXPONENT_RANGE
    if not all(isinstance(c, str) for c in cols) or not all(
            _integer(e) and low <= e <= high for e in exps):
        raise _fail(ds, f"column names must be strings and exponents integers in {low}..{high}")
    if len(set(cols)) != len(cols):
        raise _fail(ds, "column names repeat")
    zeros = meta.get("zero_columns", [])
    if not isinstance(zeros, list) or not set(zeros) <= set(cols):
        raise _fail(ds, "zero_columns must list some of this contribution's columns")
    cats = meta.get("categories")
    if not isinstance(cats, dict) or not all(
            k in cols and isinstance(v, list) and all(isinstance(x, str) for x in v)
            and len(set(v)) == len(v) for k, v in cats.items()):
        raise _fail(ds, "categories must map this contribution's columns to lists of distinct "
                        "strings")
    if not _integer(meta.get("rows")) or meta["rows"] < 1:
        raise _fail(ds, "a contribution needs at least one row")
    classes_given = meta.get("classes")
    width = len(cols) + (len(classes_given) if isinstance(classes_given, list) else 0)
    if meta["rows"] >= MAX_ROWS or width > MAX_COLUMNS or meta["rows"] * width > MAX_CELLS:
        raise _fail(ds, f"a contribution may have fewer than {MAX_ROWS:,} rows, at most "
                        f"{MAX_COLUMNS:,} columns and classes and {MAX_CELLS:,} cells; this "
                        f"one has {meta['rows']:,} rows x {width:,}")
    has_label = meta.get("label") is not None
    classes = meta.get("classes")
    if has_label and (not isinstance(meta["label"], str) or not isinstance(classes, list)
                      or len(classes) < 2 or not all(isinstance(c, str) for c in classes)
                      or len(set(classes)) != len(classes)):
        raise _fail(ds, "a labelled contribution needs at least two distinct classes")
    if meta.get("declared") is not None:
        if meta.get("layout") != "rows":
            raise _fail(ds, "a declared schema is for a dataset split by rows")
        Declared.from_dict(meta["declared"], f"dataset {ds!r}: declared schema")
    release = meta.get("release", ["values"])
    if not isinstance(release, list) or not all(isinstance(r, str) for r in release) or \
            not set(release) <= set(RELEASES) or (
            release and "values" not in release):
        raise _fail(ds, f"release must list some of {', '.join(RELEASES)}, with values if "
                        "label or names (or nothing: shares only)")
    security = meta.get("security", meta.get("sharing"))
    try:
        shared_for = registry.get(str(security))
    except ConfigError:
        raise _fail(ds, f"unknown security setting {security!r}") from None
    if shared_for.sharing != meta.get("sharing"):
        raise _fail(ds, f"{security} stores its inputs in the {shared_for.sharing} sharing, "
                        f"not {meta.get('sharing')}")
    bits = meta.get("value_bits", OLD_VALUE_BITS)
    if not _integer(bits) or not 1 <= bits <= OLD_VALUE_BITS:
        raise _fail(ds, f"value_bits must be an integer in 1..{OLD_VALUE_BITS}")
    upload_id = meta.get("id")
    if not isinstance(upload_id, str) or not NAME_RE.fullmatch(upload_id):
        raise _fail(ds, f"upload id {upload_id!r} is not allowed: an upload needs an id of "
                        "1-64 letters, digits, '_', '.', '-', starting with a letter or digit")


def _integer(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def entry(meta: Meta, owner: str) -> dict[str, Any]:
    """The manifest entry of one contribution (files and sequence number are added later)."""
    check_meta(meta)
    return {"dataset": meta["dataset"], "id": meta["id"], "owner": owner, "rows": meta["rows"],
            "columns": list(meta["columns"]), "exponents": list(meta["exponents"]),
            "categories": dict(meta["categories"]), "label": meta.get("label"),
            "classes": meta.get("classes"), "layout": meta["layout"],
            "sharing": meta.get("sharing"), "security": meta.get("security", meta["sharing"]),
            "declared": meta.get("declared"), "release": meta.get("release", ["values"]),
            "value_bits": meta.get("value_bits", OLD_VALUE_BITS),
            "zero_columns": list(meta.get("zero_columns", [])), "files": {}}


def assemble(name: str, layout: str, sharing: str, entries: list[dict[str, Any]],
             existing: tuple[str, str] | None = None) -> Manifest:
    """The manifest of dataset ``name`` made of ``entries`` in sequence order (entries without
    a sequence number go last), or an ``InputError`` saying which contribution does not fit.

    The coordinator numbers contributions in the order it commits them; every server orders
    them by that number, so rows (or columns) are in the same order on every server even if
    two owners' commits reach two servers in different orders.
    """
    if existing is not None and existing != (layout, sharing):
        if existing[0] != layout:
            raise _fail(name, f"it is split by {existing[0]}; this contribution is by {layout} "
                              f"(use {_OPTIONS[existing[0]]})")
        raise _fail(name, f"it is shared for {existing[1]}, this upload for {sharing} (use "
                          f"--security accordingly)")
    ordered = sorted(entries, key=lambda e: (e.get("seq") is None, e.get("seq") or 0))
    state: Manifest | None = None
    for e in ordered:
        state = _add(state, name, layout, sharing, e)
    assert state is not None
    p = len(state["schema"]["columns"])
    if state["rows"] >= MAX_ROWS or p > MAX_COLUMNS or state["rows"] * p > MAX_CELLS:
        raise _fail(name, f"it would have {state['rows']:,} rows x {p:,} columns; a dataset "
                          f"may have fewer than {MAX_ROWS:,} rows, at most {MAX_COLUMNS:,} "
                          f"columns and {MAX_CELLS:,} cells")
    return state


def check_against(view: dict[str, Any] | None, meta: Meta, owner: str) -> None:
    """Client side: would ``meta`` by ``owner`` fit the dataset the servers describe as
    ``view`` (``schema`` answer: layout, sharing, schema, rows, owners)? Raises ``InputError``."""
    e = entry(meta, owner)
    if view is None:
        _add(None, meta["dataset"], meta["layout"], meta["sharing"], e)
        return
    if (view["layout"], view["sharing"]) != (meta["layout"], meta["sharing"]):
        assemble(meta["dataset"], meta["layout"], meta["sharing"], [e],
                 (view["layout"], view["sharing"]))
    state = {"name": view["name"], "layout": view["layout"], "sharing": view["sharing"],
             "schema": copy.deepcopy(view["schema"]), "rows": view["rows"],
             "contributions": [{"owner": o, "id": None} for o in view["owners"]]}
    _add(state, meta["dataset"], meta["layout"], meta["sharing"], e)


def _add(manifest: Manifest | None, ds: str, layout: str, sharing: str,
         e: dict[str, Any]) -> Manifest:
    """``manifest`` with the contribution ``e`` added, after checking that it fits."""
    if e["layout"] != layout or e["sharing"] != sharing:
        raise _fail(ds, f"contribution {e['id']} is by {e['layout']} for {e['sharing']}, the "
                        f"dataset by {layout} for {sharing}")
    if manifest is None:
        if layout == "rows" and e["label"] is None:
            raise _fail(ds, "a dataset split by rows needs the label column in every "
                            "contribution; pass --label COLUMN")
        if layout == "rows" and not e["columns"]:
            raise _fail(ds, "a contribution by rows needs at least one feature column")
        schema = {"columns": list(e["columns"]), "exponents": list(e["exponents"]),
                  "categories": dict(e["categories"]), "label": e["label"],
                  "classes": e["classes"]}
        if e.get("declared") is not None:
            Declared.from_dict(e["declared"]).check_meta(e, ds)
            schema["declared"] = e["declared"]
        elif layout == "rows" and e.get("zero_columns"):
            schema["free"] = [c for c in e["columns"] if c in e["zero_columns"]]
        return {"name": ds, "layout": layout, "sharing": sharing, "schema": schema,
                "rows": e["rows"], "contributions": [e]}
    new = dict(manifest, schema=copy.deepcopy(manifest["schema"]),
               contributions=[*manifest["contributions"], e])
    schema = new["schema"]
    if any(c["owner"] == e["owner"] for c in manifest["contributions"]):
        raise _fail(ds, f"{e['owner']} has already contributed to it; each owner contributes "
                        "once per dataset (choose a new dataset name to start over)")
    if any(c["id"] == e["id"] for c in manifest["contributions"]):
        raise _fail(ds, f"upload {e['id']} is already stored")
    if e.get("declared") is not None and e["declared"] != schema.get("declared"):
        raise _fail(ds, "its schema was declared by the first contribution (or not at all); a "
                        "later one cannot declare another (see `mpc-client schema --dataset "
                        f"{ds}`)")
    if schema.get("declared") is not None:
        Declared.from_dict(schema["declared"]).check_meta(e, ds)
    if layout == "rows":
        if e["columns"] != schema["columns"]:
            missing = [c for c in schema["columns"] if c not in e["columns"]]
            extra = [c for c in e["columns"] if c not in schema["columns"]]
            what = ", ".join(x for x in (f"missing {missing[:5]}" if missing else "",
                                         f"extra {extra[:5]}" if extra else "") if x)
            what = what or "same names, other order"
            raise _fail(ds, f"the columns differ from the dataset's ({what}); every owner must "
                            "use the same columns in the same order")
        _fix_free_scales(schema, e)
        zeros = set(e.get("zero_columns", []))  # zeros are zeros at every scale
        bad = [j for j, (a, b) in enumerate(zip(e["exponents"], schema["exponents"],
                                                strict=True))
               if a != b and not (schema["columns"][j] in zeros
                                  and schema["columns"][j] in schema.get("free", []))]
        if bad:
            j = bad[0]
            raise _fail(ds, f"column {schema['columns'][j]!r} is encoded with the scale "
                            f"exponent {e['exponents'][j]}, the dataset with "
                            f"{schema['exponents'][j]}; share with an mpc-client of this "
                            "version, which encodes with the dataset's exponents")
        _extend_categories(ds, schema["categories"], e["categories"])
        if e["label"] != schema["label"]:
            raise _fail(ds, f"the label must be column {schema['label']!r} (--label "
                            f"{schema['label']}), not {e['label']!r}")
        schema["classes"] = _extended(ds, "class list", schema["classes"], e["classes"])
        new["rows"] = manifest["rows"] + e["rows"]
    else:
        if layout == "columns" and e["rows"] != manifest["rows"]:
            raise _fail(ds, f"it has {manifest['rows']} rows, this contribution {e['rows']}; a "
                            "contribution by columns must hold the same records in the same "
                            "order (or share every file with --id COLUMN)")
        if layout == "keyed":
            if len(new["contributions"]) > MAX_KEYED:
                raise _fail(ds, f"a dataset keyed by record IDs joins at most {MAX_KEYED} "
                                "contributions")
            new["rows"] = min(manifest["rows"], e["rows"])
        clash = sorted(set(e["columns"]) & set(schema["columns"]))
        if clash:
            raise _fail(ds, f"column(s) {clash[:5]} are already in it")
        if e["label"] is not None and schema["label"] is not None:
            raise _fail(ds, f"the label ({schema['label']!r}) was already contributed; exactly "
                            "one contribution carries it")
        schema["columns"] += e["columns"]
        schema["exponents"] += e["exponents"]
        schema["categories"].update(e["categories"])
        if e["label"] is not None:
            schema["label"], schema["classes"] = e["label"], e["classes"]
    return new


def _fix_free_scales(schema: dict[str, Any], e: dict[str, Any]) -> None:
    """The free columns (all zero so far) in which contribution ``e`` has values take its
    exponents; those it has as zeros too stay free (``client.encoding.scales``)."""
    free = schema.get("free")
    if not free:
        return
    zeros = set(e.get("zero_columns", []))
    for j, column in enumerate(schema["columns"]):
        if column in free and column not in zeros:
            schema["exponents"][j] = e["exponents"][j]
    still = [c for c in free if c in zeros]
    if still:
        schema["free"] = still
    else:
        del schema["free"]


def _extended(ds: str, what: str, agreed: list[str], given: list[str]) -> list[str]:
    """The longer of two lists of which one must start with the other: a later owner may add
    classes or categories after the agreed ones (earlier owners' codes keep their meaning) but
    may not reorder them."""
    short, long = sorted((agreed, given), key=len)
    if long[:len(short)] != short:
        raise _fail(ds, f"the {what} {given[:8]} does not extend the dataset's {agreed[:8]} "
                        "(another owner may have added to it since this file was read); "
                        "share the file again")
    return list(long)


def _extend_categories(ds: str, agreed: dict[str, list[str]],
                       given: dict[str, list[str]]) -> None:
    """Grow the schema's category lists ``agreed`` (in place) by a contribution's ``given``."""
    for column in sorted(agreed.keys() ^ given.keys()):
        coded, plain = ("this file", "the dataset") if column in given else ("the dataset",
                                                                            "this file")
        raise _fail(ds, f"column {column!r} is coded as categories in {coded} but holds "
                        f"numbers in {plain}; fix its text cells, or share every owner's file "
                        f"with --ordinal {column!r}")
    for column, categories in given.items():
        agreed[column] = _extended(ds, f"category list of column {column!r}", agreed[column],
                                   categories)


def digest(manifest: Manifest) -> str:
    """A fingerprint of what every server must agree on (schema and contributions, not the
    share files, which differ from server to server); for a result, the job that made it."""
    if "contributions" not in manifest:
        made = {k: manifest.get(k) for k in ("name", "owner", "job", "request", "rows",
                                             "security", "value_bits", "class_names")}
        return hashlib.sha256(json.dumps(made, sort_keys=True).encode()).hexdigest()
    public = {"layout": manifest["layout"], "sharing": manifest["sharing"],
              "schema": manifest["schema"], "rows": manifest["rows"],
              "contributions": [{k: c.get(k) for k in ("id", "owner", "seq", "rows", "columns",
                                                       "label", "security", "release",
                                                       "value_bits")}
                                # the owner's signature of its statement (parties.statements):
                                # one statement for every server, or they disagree
                                | {"signature": (c.get("signed") or {}).get("signature")}
                                for c in manifest["contributions"]]}
    return hashlib.sha256(json.dumps(public, sort_keys=True).encode()).hexdigest()


def required_security(manifest: Manifest) -> str | None:
    """The active setting an owner of the dataset shared for, if any: then every job on it
    must be actively secure (a passive job trusts every server to follow the protocol, which
    the owner did not accept)."""
    shared_for = [str(c.get("security") or c.get("sharing")) for c in manifest["contributions"]]
    demanded = sorted({s for s in shared_for if registry.get(s).active})
    return demanded[0] if demanded else None


def release_of(manifest: Manifest) -> list[str]:
    """What analysts may receive of a result on this dataset: what every owner allows
    (contributions stored before owners chose allow the values, as then)."""
    allowed = set(RELEASES)
    for c in manifest["contributions"]:
        allowed &= set(c.get("release", ["values"]))
    return sorted(allowed)


def value_bits(manifest: Manifest) -> int:
    """The bound 2^bits of the dataset's encoded values (the widest of its contributions)."""
    return max(int(c.get("value_bits", OLD_VALUE_BITS)) for c in manifest["contributions"])


def ready_for_training(result: Manifest, security: str, model_owner: str) -> None:
    """Refuse to train on a selection result made under another setting (its owners' choice
    of security holds for what is computed on it), without the label shares training needs
    (results of older servers) or with values wider than the standardisation holds, and a
    model for the analyst itself when the owners do not release the label: the analyst holds
    D', and a model with D' gives the labels away (one epoch from zero weights is linear in
    them; an adversarial review solved for them)."""
    name = result["name"]
    if model_owner == result.get("owner") and "label" not in result.get("release", []):
        raise InputError(f"the owners of dataset {result.get('dataset')!r} do not release its "
                         f"label, and a model for you, who hold D', would give it away; name "
                         "a model owner of the deployment (--owner)")
    if result.get("security") != security:
        raise InputError(f"result {name!r} was selected under {result.get('security')}; "
                         f"train on it under the same setting (--security "
                         f"{result.get('security')})")
    if "training_labels" not in result.get("files", {}) or "value_bits" not in result:
        raise InputError(f"result {name!r} was made by an older server and holds no label "
                         "shares for training; run the selection again")
    if int(result["value_bits"]) > VALUE_BITS:
        raise InputError(f"result {name!r} holds values encoded below "
                         f"2^{result['value_bits']}; training needs them below 2^{VALUE_BITS} "
                         "(share the files again with this client)")


def ready_for_selection(manifest: Manifest, k: int, security: str,
                        score_name: str = DEFAULT_SCORE) -> None:
    """Refuse a selection the dataset cannot support (no label yet, k out of range, a
    passive setting when an owner asked for active security, more rows than the score can
    rank exactly)."""
    ds = manifest["name"]
    required = required_security(manifest)
    if required is not None and not registry.get(security).active:
        owners = sorted({c["owner"] for c in manifest["contributions"]
                         if (c.get("security") or c.get("sharing")) == required})
        raise _fail(ds, f"{', '.join(owners)} shared it for {required}, so it may be used "
                        f"under active security only; run the job with --security "
                        f"{required}")
    if manifest["schema"]["label"] is None:
        raise _fail(ds, "no contribution carries the label yet; share the label column first")
    if manifest["layout"] == "keyed" and len(manifest["contributions"]) < 2:
        raise _fail(ds, "it is keyed by record IDs and has one contribution; a job joins two "
                        "or more (share the other owners' files with --columns --id COLUMN)")
    m = int(manifest["rows"])
    bits = value_bits(manifest)
    if 2 * m * 2**bits >= 2**63:  # the mean-split test (mpcnet.fixedpoint)
        older = sorted({c["owner"] for c in manifest["contributions"]
                        if int(c.get("value_bits", OLD_VALUE_BITS)) == bits})
        raise _fail(ds, f"its {m:,} rows and values encoded below 2^{bits} (shared by "
                        f"{', '.join(older)}) overflow the exact mean-split test, which needs "
                        f"2 m 2^{bits} < 2^63; share those files again with this client "
                        f"(below 2^{VALUE_BITS}) to a new dataset")
    p = len(manifest["schema"]["columns"])
    if not 0 < k <= p:
        raise _fail(ds, f"k must be between 1 and {p} (it has {p} features), got {k}")
    scoring = score(score_name)
    try:
        scoring.check_rows(m, len(manifest["schema"]["classes"]))
    except InputError as e:
        raise _fail(ds, str(e)) from None
    if scoring.value_bits is not None and bits > scoring.value_bits:
        raise _fail(ds, f"{score_name} needs values encoded below 2^{scoring.value_bits}, and "
                        f"some of its files were shared by an older client (below 2^{bits}); "
                        f"share them again with this client to a new dataset, or use another "
                        f"score")


def summary(manifest: Manifest) -> dict[str, Any]:
    """What ``mpc-client datasets`` shows: shape and contributors, never a value."""
    return {"name": manifest["name"], "layout": manifest["layout"],
            "sharing": manifest["sharing"], "rows": manifest["rows"],
            "columns": len(manifest["schema"]["columns"]),
            "label": manifest["schema"]["label"], "classes": manifest["schema"]["classes"],
            "owners": [c["owner"] for c in manifest["contributions"]],
            "requires": required_security(manifest), "release": release_of(manifest),
            "digest": digest(manifest)}
