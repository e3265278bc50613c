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
from mpcnet.featsel.msgini import check_rows, limb_plan, msgini_fraction
from mpcnet.ops import planner
from mpcnet.ops.network import topk_network
from mpcnet.ops.topk import topk_ranking
from mpcnet.schemes.base import Scheme, Shared

DEFAULT_MEMORY_BUDGET = 2 << 30
"""Bytes of working memory a server may use for one job's secure computation (2 GiB)."""

SCORING_BYTES_PER_CELL = {"passive3": 260, "active3": 3000, "active4": 450}
"""Measured peak bytes per data cell while a block of columns is scored (bench.network)."""


@dataclass
class SelectionResult:
    """Shares of the reduced dataset, the selected columns' fixed-point exponents and their
    indices (released only where the data owners allow it)."""

    reduced: Shared  # m x k: D' = D x T, fixed-point integers, exact
    exponents: Shared  # k: the public per-column exponents times T
    indices: Shared  # k: (0, 1, ..., p-1) times T, the selected columns in rank order
    plan: dict[str, object]  # how it was computed (public: depends on m, p, k only)


def block_columns(setting: str, m: int, p: int, memory_budget: int) -> int:
    """How many columns to score at once within ``memory_budget``; refuses when even one
    column of m rows does not fit."""
    per_column = m * SCORING_BYTES_PER_CELL[setting]
    if per_column > memory_budget:
        raise InputError(f"scoring one column of {m:,} rows under {setting} needs about "
                         f"{per_column / 2**20:,.0f} MiB, over the memory budget of "
                         f"{memory_budget / 2**20:,.0f} MiB ([deployment] memory_budget)")
    return max(1, min(p, memory_budget // per_column))


def label_codes(s: Scheme, labels: Shared) -> Shared:
    """Shares of each row's class code 0..n-1 from the m x (n-1) one-hot ``labels`` (the last
    class implicit): n - 1 + sum_j (j - (n - 1)) L_ij, a local linear map."""
    n = labels.shape[1] + 1
    weights = (np.arange(n - 1, dtype=np.int64) - (n - 1)).view(np.uint64).reshape(1, n - 1)
    return s.add_public(s.matmul_public(weights, labels.T).reshape(labels.shape[0]), n - 1)


async def gini_fs(s: Scheme, data: Shared, labels: Shared, n_classes: int, k: int,
                  exponents: np.ndarray, memory_budget: int = DEFAULT_MEMORY_BUDGET,
                  method: str | None = None) -> SelectionResult:
    """Select the k features of ``data`` with the best MS-GINI scores (Protocol 3), within
    ``memory_budget`` bytes of working memory; ``method`` forces the top-k method."""
    m, p = data.shape
    if labels.shape != (m, n_classes - 1):
        raise InputError(f"label matrix must be {m} x {n_classes - 1} (one-hot without the last "
                         f"class), got {labels.shape}")
    if not 0 < k < p:
        raise InputError(f"k must be between 1 and {p - 1} for {p} features, got {k}")
    check_rows(m)
    topk = planner.choose(s.name, p, k, lambda ties: limb_plan(m, ties), memory_budget, method)
    blocks = block_columns(s.name, m, p, memory_budget)
    with s.engine.phase("scoring"):
        one_hot = await one_hot_products(s, labels)
    fractions = await msgini_fraction(s, data, labels, topk.limbs, blocks)
    with s.engine.phase("selection"):
        rank = topk_ranking if topk.method == "ranking" else topk_network
        selection = await rank(s, fractions, k)
    reduced = await filter_fs(s, data, selection)
    chosen = s.matmul_public(np.asarray(exponents, dtype=np.int64).view(np.uint64).reshape(1, p),
                             selection).reshape(k)
    indices = s.matmul_public(np.arange(p, dtype=np.uint64).reshape(1, p), selection).reshape(k)
    with s.engine.phase("checks"):
        await s.verify()
        await check_one_hot(s, one_hot, *labels.shape)
    figures = dict(topk.figures(), block_columns=blocks, blocks=-(-p // blocks))
    return SelectionResult(reduced, chosen, indices, figures)
