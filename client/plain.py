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
from mpcnet.dataset import EncodingOptions, read_header
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
                       score: str = DEFAULT_SCORE) -> Expected:
    """Encode ``files`` as contributions one after the other, then select k features by
    ``score``."""
    from mpcnet.plain import reduce, score_fraction, topk_fraction

    if not files:
        raise InputError("give at least one CSV file")
    options = options or EncodingOptions()
    view: dict[str, Any] | None = None
    parts: list[Encoded] = []
    entries: list[dict[str, Any]] = []
    for i, path in enumerate(files):
        # by columns, one file carries the label: the first that has the label column
        has_label = label is not None and (layout == "rows"
                                           or label in read_header(path, options.dialect))
        if layout == "columns" and any(p.codes is not None for p in parts):
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
    x = _joined(parts, layout)
    codes = next(p.codes for p in parts if p.codes is not None) if layout == "columns" else \
        np.concatenate([p.codes for p in parts if p.codes is not None])
    classes = list(schema["classes"])
    q, d = score_fraction(score, x, codes, len(classes))
    idx = topk_fraction(q, d, k)
    exps = np.asarray(schema["exponents"], dtype=np.int64)
    return Expected([schema["columns"][i] for i in idx], Reduced(reduce(x, idx), exps[idx]),
                    classes, [classes[int(c)] for c in codes], str(schema["label"]))


def _joined(parts: list[Encoded], layout: str) -> np.ndarray:
    return np.vstack([p.values for p in parts]) if layout == "rows" else \
        np.hstack([p.values for p in parts])


