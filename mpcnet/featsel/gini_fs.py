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
from mpcnet.featsel.msgini import check_rows, join, limb_plan, msgini_fraction
from mpcnet.featsel.source import Blocks, Held, ShareSource, Streamed
from mpcnet.ops import planner
from mpcnet.ops.network import topk_network
from mpcnet.ops.topk import topk_ranking
from mpcnet.schemes.base import Scheme, Shared, concat

DEFAULT_MEMORY_BUDGET = 2 << 30
"""Bytes of working memory a server may use for one job's secure computation (2 GiB)."""

SCORING_BYTES_PER_CELL = {"passive3": 260, "active3": 3000, "active4": 450}
"""Measured peak bytes per data cell while a block of columns is scored (bench.large)."""

FIXED_BYTES = 256 << 20
"""What a server holds for a job besides its blocks (the interpreter, the label shares, D'):
the blocks get the rest of the budget."""


@dataclass
class SelectionResult:
    """Shares of the reduced dataset, the selected columns' fixed-point exponents and their
    indices (released only where the data owners allow it)."""

    reduced: Shared  # m x k: D' = D x T, fixed-point integers, exact
    exponents: Shared  # k: the public per-column exponents times T
    indices: Shared  # k: (0, 1, ..., p-1) times T, the selected columns in rank order
    labels: Shared  # the input label matrix (for ``label_codes``)
    plan: dict[str, object]  # how it was computed (public: depends on m, p, k only)


def block_columns(setting: str, m: int, p: int, memory_budget: int) -> int:
    """How many columns to score at once within ``memory_budget``; refuses when even one
    column of m rows does not fit."""
    per_column = m * SCORING_BYTES_PER_CELL[setting]
    if per_column + FIXED_BYTES > memory_budget:
        raise InputError(f"scoring one column of {m:,} rows under {setting} needs about "
                         f"{(per_column + FIXED_BYTES) / 2**20:,.0f} MiB, over the memory "
                         f"budget of {memory_budget / 2**20:,.0f} MiB ([deployment] "
                         "memory_budget)")
    return max(1, min(p, (memory_budget - FIXED_BYTES) // per_column))


def label_codes(s: Scheme, labels: Shared) -> Shared:
    """Shares of each row's class code 0..n-1 from the m x (n-1) one-hot ``labels`` (the last
    class implicit): n - 1 + sum_j (j - (n - 1)) L_ij, a local linear map."""
    n = labels.shape[1] + 1
    weights = (np.arange(n - 1, dtype=np.int64) - (n - 1)).view(np.uint64).reshape(1, n - 1)
    return s.add_public(s.matmul_public(weights, labels.T).reshape(labels.shape[0]), n - 1)


async def gini_fs(s: Scheme, data: Shared, labels: Shared, n_classes: int, k: int,
                  exponents: np.ndarray, memory_budget: int = DEFAULT_MEMORY_BUDGET,
                  method: str | None = None) -> SelectionResult:
    """Select the k features of the input ``data`` with the best MS-GINI scores (Protocol 3),
    scoring as many columns at once as ``memory_budget`` bytes allow; ``method`` forces the
    top-k method."""
    return await _select(s, Held(data), labels, n_classes, k, exponents, memory_budget, method)


async def select_stored(s: Scheme, data: ShareSource, labels: np.ndarray, n_classes: int,
                        k: int, exponents: np.ndarray,
                        memory_budget: int = DEFAULT_MEMORY_BUDGET,
                        method: str | None = None) -> SelectionResult:
    """``gini_fs`` on this party's shares as read from ``data`` (and its label shares), input
    here: at once when they fit ``memory_budget``, else a block at a time (columns to score
    them, rows for D'), so a server's memory stays within the budget whatever m and p are."""
    m, p = data.shape[-2:]
    if block_columns(s.name, m, p, memory_budget) >= p:
        whole, label_shares = await s.input(data.columns(0, p), labels)
        return await gini_fs(s, whole, label_shares, n_classes, k, exponents, memory_budget,
                             method)
    (label_shares,) = await s.input(labels)
    return await _select(s, Streamed(data), label_shares, n_classes, k, exponents,
                         memory_budget, method)


async def _select(s: Scheme, data: Blocks, labels: Shared, n_classes: int, k: int,
                  exponents: np.ndarray, memory_budget: int, method: str | None
                  ) -> SelectionResult:
    m, p = data.shape
    if labels.shape != (m, n_classes - 1):
        raise InputError(f"label matrix must be {m} x {n_classes - 1} (one-hot without the last "
                         f"class), got {labels.shape}")
    if not 0 < k < p:
        raise InputError(f"k must be between 1 and {p - 1} for {p} features, got {k}")
    check_rows(m)
    topk = planner.choose(s.name, p, k, lambda ties: limb_plan(m, ties),
                          memory_budget - FIXED_BYTES, method)
    width = block_columns(s.name, m, p, memory_budget)
    with s.engine.phase("scoring"):
        one_hot = await one_hot_products(s, labels)
        parts = []
        for start in range(0, p, width):
            block = await data.columns(s, start, min(p, start + width))
            parts.append(await msgini_fraction(s, block, labels, topk.limbs))
            del block
            if width < p:  # check this block's products now: their records are freed
                await s.verify()
    with s.engine.phase("selection"):
        fractions = join(parts)
        selection = (await topk_ranking(s, fractions, k) if topk.method == "ranking"
                     else await topk_network(s, fractions, k, topk.batch))
    height = m if width >= p else max(1, (memory_budget - FIXED_BYTES)
                                      // (p * SCORING_BYTES_PER_CELL[s.name]))
    with s.engine.phase("product"):
        reduced = concat([await filter_fs(s, await data.rows(s, start, min(m, start + height)),
                                          selection)
                          for start in range(0, m, height)]).reshape(m, k)
    chosen = s.matmul_public(np.asarray(exponents, dtype=np.int64).view(np.uint64).reshape(1, p),
                             selection).reshape(k)
    indices = s.matmul_public(np.arange(p, dtype=np.uint64).reshape(1, p), selection).reshape(k)
    with s.engine.phase("checks"):
        await s.verify()
        await check_one_hot(s, one_hot, *labels.shape)
    figures = dict(topk.figures(), block_columns=width, blocks=-(-p // width),
                   row_blocks=-(-m // height))
    return SelectionResult(reduced, chosen, indices, labels, figures)
