"""Layer: featsel. pi_GINI-FS (Protocol 3 of Li, Dowsley, De Cock, 2021).

The label matrix is checked to be one-hot before anything leaves (``mpcnet.featsel.labels``).
Lines 1-3 score every feature with pi_MS-GINI (one batch for all features), line 4 selects the
k features with the lowest scores through pi_FILTER-FS. Scores are compared exactly as
fractions, ties broken by the lower feature index, so the selection equals the plaintext one.
Nobody learns scores or selected indices: only D' and the selected columns' scale exponents
(and, where the data owners allow it, the selected indices) leave as shares, after the scheme's
checks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpcnet.errors import InputError
from mpcnet.featsel.filter_fs import filter_fs
from mpcnet.featsel.labels import check_one_hot, one_hot_products
from mpcnet.featsel.msgini import check_exact_ranking, msgini_fraction
from mpcnet.ops.topk import fraction_bits, topk_fraction
from mpcnet.schemes.base import Scheme, Shared


@dataclass
class SelectionResult:
    """Shares of the reduced dataset, the selected columns' fixed-point exponents and their
    indices (released only where the data owners allow it)."""

    reduced: Shared  # m x k: D' = D x T, fixed-point integers, exact
    exponents: Shared  # k: the public per-column exponents times T
    indices: Shared  # k: (0, 1, ..., p-1) times T, the selected columns in rank order


def label_codes(s: Scheme, labels: Shared) -> Shared:
    """Shares of each row's class code 0..n-1 from the m x (n-1) one-hot ``labels`` (the last
    class implicit): n - 1 + sum_j (j - (n - 1)) L_ij, a local linear map."""
    n = labels.shape[1] + 1
    weights = (np.arange(n - 1, dtype=np.int64) - (n - 1)).view(np.uint64).reshape(1, n - 1)
    return s.add_public(s.matmul_public(weights, labels.T).reshape(labels.shape[0]), n - 1)


async def gini_fs(s: Scheme, data: Shared, labels: Shared, n_classes: int, k: int,
                  exponents: np.ndarray) -> SelectionResult:
    """Select the k features of ``data`` with the best MS-GINI scores (Protocol 3)."""
    m, p = data.shape
    if labels.shape != (m, n_classes - 1):
        raise InputError(f"label matrix must be {m} x {n_classes - 1} (one-hot without the last "
                         f"class), got {labels.shape}")
    if not 0 < k < p:
        raise InputError(f"k must be between 1 and {p - 1} for {p} features, got {k}")
    check_exact_ranking(m)
    with s.engine.phase("scoring"):
        one_hot = await one_hot_products(s, labels)
    q, d = await msgini_fraction(s, data, labels)
    with s.engine.phase("selection"):
        selection = await topk_fraction(s, q, d, k, fraction_bits(m))
    reduced = await filter_fs(s, data, selection)
    chosen = s.matmul_public(np.asarray(exponents, dtype=np.int64).view(np.uint64).reshape(1, p),
                             selection).reshape(k)
    indices = s.matmul_public(np.arange(p, dtype=np.uint64).reshape(1, p), selection).reshape(k)
    with s.engine.phase("checks"):
        await s.verify()
        await check_one_hot(s, one_hot, *labels.shape)
    return SelectionResult(reduced, chosen, indices)
