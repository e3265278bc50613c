"""Layer: client. The commands that need no server: ``draft-schema``, ``plaintext`` and
``id-key``.

They read the owners' files on this machine only (no ``--config``, no ``--as``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mpcnet.errors import InputError


def release(args: argparse.Namespace) -> tuple[str, ...]:
    """--release as catalog.RELEASES: 'shares' alone means none of them."""
    chosen = set(args.release)
    if "shares" in chosen and len(chosen) > 1:
        raise InputError("--release shares means shares only; do not combine it with "
                         f"{', '.join(sorted(chosen - {'shares'}))}")
    if chosen & {"label", "names"} and "values" not in chosen:
        raise InputError("--release label or names comes with the values: add values")
    return tuple(sorted(chosen - {"shares"}))


def print_result(args: argparse.Namespace, obj: Any, text: str) -> None:
    """``obj`` as JSON with --json, else ``text``."""
    print(json.dumps(obj, indent=1, default=str) if args.json else text)


def run(args: argparse.Namespace) -> int:
    """``draft-schema``, ``plaintext`` or ``id-key``, as parsed by ``client.main.parser``."""
    from mpcnet.client.plain import expected_choice, expected_selection
    from mpcnet.client.results import check_writable, write_csv
    from mpcnet.client.uploads import read_declared
    from mpcnet.dataset import EncodingOptions, read_csv
    from mpcnet.parties.declared import draft
    from mpcnet.recordids import new_key

    if args.cmd == "id-key":
        new_key(args.out)
        print_result(args, {"out": str(args.out)},
                     f"wrote a new record-ID key to {args.out}; give every owner of the "
                     "dataset a copy (never a server)")
        return 0
    options = EncodingOptions(args.categorical, args.missing, ordinal_columns=tuple(args.ordinal),
                              missing_categorical=args.missing_categorical,
                              delimiter=args.delimiter, quotechar=args.quote)
    if args.cmd == "draft-schema":
        if args.label is None:
            raise InputError("a schema names the label column: pass --label COLUMN")
        table = read_csv(args.file, args.label, tuple(args.drop), options)
        text = draft(table, args.label, args.missing).to_toml(
            f"draft schema from {args.file.name} ({table.values.shape[0]} rows): widen max_abs "
            "and the lists to what every owner holds,\nthen pass it to the first share with "
            "--schema")
        write_or_print(args.out, text)
        return 0
    if args.out is not None:
        check_writable(args.out, args.force)
    chosen: dict[str, Any] = {}
    same = dict(label=args.label, layout=args.layout or "rows", options=options,
                drop=tuple(args.drop),
                declared=read_declared(args.schema) if args.schema else None, score=args.score,
                id_column=args.id_column)
    if args.k == "auto":
        got, counts = expected_choice(args.files, args.candidates, **same)
        chosen = {"k": len(got.columns), "candidates": list(args.candidates),
                  "held_out_correct": counts}
    elif args.candidates:
        raise InputError("--candidates goes with --k auto")
    else:
        got = expected_selection(args.files, args.k, **same)
    rows, k = got.reduced.encoded.shape[0], len(got.columns)
    text = f"selected ({k} by {args.score}, best first): {', '.join(got.columns)}"
    if chosen:
        text = (f"k = {k} chosen of {','.join(map(str, args.candidates))} (held-out rows "
                f"predicted right: {', '.join(map(str, counts))}; the servers reveal only k)\n"
                + text)
    if args.out is not None:
        write_csv(args.out, got.released(release(args)), overwrite=args.force)
        text += f"\nwrote {rows} x {k} reduced dataset to {args.out}"
    print_result(args, {"columns": got.columns, "classes": got.classes, "rows": rows,
                        "out": None if args.out is None else str(args.out)} | chosen, text)
    return 0


def write_or_print(out: Path | None, text: str) -> None:
    """``text`` into the new file ``out``, or to standard output."""
    if out is None:
        print(text, end="")
        return
    if out.exists():
        raise InputError(f"{out} exists; choose another --out")
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)
