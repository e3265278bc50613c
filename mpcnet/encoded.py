"""Layer: encoding. A dataset as the protocol sees it: fixed-point integers and a one-hot label.

Joins ``mpcnet.dataset`` (reading CSV files) and ``mpcnet.fixedpoint`` (per-column scales) for
the client, the demo, the plaintext checks and the benchmarks, so that all of them encode a
table in exactly the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpcnet.dataset import Table, class_codes, one_hot
from mpcnet.errors import InputError
from mpcnet.fixedpoint import auto_exponents, encode


@dataclass(frozen=True, eq=False)
class EncodedDataset:
    """Encoded features (m x p int64), their scale exponents, and the label in both forms."""

    columns: list[str]
    values: np.ndarray
    exponents: np.ndarray
    classes: list[str]
    codes: np.ndarray

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def label_matrix(self) -> np.ndarray:
        """The m x (n-1) one-hot label matrix of Protocol 2 (last class implicit)."""
        return one_hot(self.codes, self.n_classes)


def encode_table(table: Table, exponents: np.ndarray | None = None) -> EncodedDataset:
    """Encode a labelled table, choosing per-column exponents unless they are given."""
    if table.labels is None:
        raise InputError("the table has no label column; pass --label NAME")
    exps = auto_exponents(table.values, table.columns) if exponents is None else exponents
    classes, codes = class_codes(table.labels)
    return EncodedDataset(table.columns, encode(table.values, exps, table.columns),
                          np.asarray(exps, dtype=np.int64), classes, codes)
