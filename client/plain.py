"""Layer: client. The selection the servers should produce, computed locally in the clear.

An owner or analyst runs ``mpc-client plaintext a.csv b.csv --label y --k 10`` with the same
encoding options as ``share``: the files are encoded exactly as a sequence of contributions
would be (``client.encoding``: the first one fixes the scales and the lists, later ones extend
them; or the declared schema), then scored and ranked by ``mpcnet.plain`` (the chosen score, ties by
index). The CSV it writes is in ``fetch --out``'s format, so the two can be compared with diff.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.client.encoding import Encoded, encode_contribution
from mpcnet.client.results import Reduced
from mpcnet.dataset import Dialect, EncodingOptions, read_header
from mpcnet.errors import InputError
from mpcnet.featsel.scores import DEFAULT_SCORE
from mpcnet.parties import catalog
from mpcnet.parties.declared import Declared


@dataclass(frozen=True)
class Expected:
    """The plaintext selection: the selected columns in rank order, D', the class list and
    each row's class."""

    columns: list[str]
    reduced: Reduced
    classes: list[str]
    labels: list[str]
    label: str

    def released(self, release: Sequence[str]) -> Reduced:
        """D' as ``fetch`` gives it under ``release`` (names and label where released)."""
        return Reduced(self.reduced.encoded, self.reduced.exponents,
                       self.columns if "names" in release else None, self.label,
                       self.labels if "label" in release else None)


def expected_selection(files: Sequence[str | Path], k: int, *, label: str | None,
                       layout: str = "rows", options: EncodingOptions | None = None,
                       drop: tuple[str, ...] = (), declared: Declared | None = None,
                       score: str = DEFAULT_SCORE, id_column: str | None = None) -> Expected:
    """Encode ``files`` as contributions one after the other, then select k features by
    ``score``. With ``id_column`` (by columns) the files' rows are joined first by their
    record IDs, as the servers do (the records all files hold, in the first file's order:
    the servers' order is private, so compare the rows as a set)."""
    from mpcnet.plain import reduce, score_fraction, topk_fraction

    if not files:
        raise InputError("give at least one CSV file")
    options = options or EncodingOptions()
    rows: list[np.ndarray] | None = None
    if id_column is not None:
        if layout != "columns":
            raise InputError("record IDs (--id) key files split by columns: pass --columns")
        rows = _joined_rows(files, id_column, options.dialect)
        layout, drop = "keyed", (*drop, id_column)
    view: dict[str, Any] | None = None
    parts: list[Encoded] = []
    entries: list[dict[str, Any]] = []
    for i, path in enumerate(files):
        # by columns, one file carries the label: the first that has the label column
        has_label = label is not None and (layout == "rows"
                                           or label in read_header(path, options.dialect))
        if layout != "rows" and any(p.codes is not None for p in parts):
            has_label = False
        done = encode_contribution(path, view, dataset="", owner=f"owner-{i + 1}",
                                   layout=layout, sharing="passive3", security="passive3",
                                   label=label if has_label else None, drop=drop,
                                   options=options,
                                   declared=declared if i == 0 else None)
        parts.append(done)
        entries.append(dict(catalog.entry(done.meta, f"owner-{i + 1}"), seq=i + 1))
        manifest = catalog.assemble("", layout, "passive3", entries)
        view = manifest | {"owners": [e["owner"] for e in entries]}
    assert view is not None
    schema = view["schema"]
    catalog.ready_for_selection(manifest, k, "passive3", score)
    if rows is not None:
        x = np.hstack([p.values[r] for p, r in zip(parts, rows, strict=True)])
        codes = next(p.codes[r] for p, r in zip(parts, rows, strict=True)
                     if p.codes is not None)
    else:
        x = _joined(parts, layout)
        codes = next(p.codes for p in parts if p.codes is not None) \
            if layout == "columns" else \
            np.concatenate([p.codes for p in parts if p.codes is not None])
    classes = list(schema["classes"])
    q, d = score_fraction(score, x, codes, len(classes))
    idx = topk_fraction(q, d, k)
    exps = np.asarray(schema["exponents"], dtype=np.int64)
    return Expected([schema["columns"][i] for i in idx], Reduced(reduce(x, idx), exps[idx]),
                    classes, [classes[int(c)] for c in codes], str(schema["label"]))


def expected_choice(files: Sequence[str | Path], candidates: tuple[int, ...], **options: Any
                    ) -> tuple[Expected, list[int]]:
    """``--k auto``: the selection for the k the servers choose among ``candidates``
    (``mpcnet.train.reference``: the same fixed-point training, the same held-out rows and
    rule), and the held-out rows each candidate predicts right (computed here in the clear;
    the servers never reveal them)."""
    from mpcnet.train.reference import held_out_correct

    if not candidates:
        raise InputError("--k auto goes with --candidates K1,K2,...")
    largest = expected_selection(files, max(candidates), **options)
    codes = np.array([largest.classes.index(c) for c in largest.labels])
    counts = held_out_correct(largest.reduced.encoded, codes, len(largest.classes),
                              tuple(candidates))
    k = candidates[int(np.argmax(counts))]  # the most correct, ties to the smaller k
    return expected_selection(files, k, **options), [int(c) for c in counts]


def _joined(parts: list[Encoded], layout: str) -> np.ndarray:
    return np.vstack([p.values for p in parts]) if layout == "rows" else \
        np.hstack([p.values for p in parts])


def _joined_rows(files: Sequence[str | Path], id_column: str, dialect: Dialect
                 ) -> list[np.ndarray]:
    """Per file, the rows of the records every file holds (an inner join on the normalised
    record IDs, ``mpcnet.recordids``), in the first file's order."""
    from mpcnet.dataset import read_cells
    from mpcnet.recordids import normalised

    ids = [normalised(read_cells(path, id_column, dialect), str(path)) for path in files]
    where = [{record: row for row, record in enumerate(file_ids)} for file_ids in ids]
    common = [record for record in ids[0] if all(record in w for w in where[1:])]
    if not common:
        raise InputError("no record is held by every file; nothing to select from")
    return [np.array([w[record] for record in common], dtype=np.int64) for w in where]
