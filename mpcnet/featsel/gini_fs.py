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
from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET, Layout, layout
from mpcnet.featsel.msgini import join
from mpcnet.featsel.scores import DEFAULT_SCORE, Score, score
from mpcnet.featsel.source import Blocks, Held, ShareSource, Streamed
from mpcnet.ops import planner
from mpcnet.ops.fraction import Fractions, LimbPlan
from mpcnet.ops.network import topk_network
from mpcnet.ops.topk import topk_ranking
from mpcnet.schemes.base import Scheme, Shared, concat


@dataclass
class SelectionResult:
    """Shares of the reduced dataset, the selected columns' fixed-point exponents and their
    indices (released only where the data owners allow it)."""

    reduced: Shared  # m x k: D' = D x T, fixed-point integers, exact
    exponents: Shared  # k: the public per-column exponents times T
    indices: Shared  # k: (0, 1, ..., p-1) times T, the selected columns in rank order
    labels: Shared  # the input label matrix (for ``label_codes``)
    plan: dict[str, object]  # how it was computed (public: depends on m, p, k only)


def label_codes(s: Scheme, labels: Shared) -> Shared:
    """Shares of each row's class code 0..n-1 from the m x (n-1) one-hot ``labels`` (the last
    class implicit): n - 1 + sum_j (j - (n - 1)) L_ij, a local linear map."""
    n = labels.shape[1] + 1
    weights = (np.arange(n - 1, dtype=np.int64) - (n - 1)).view(np.uint64).reshape(1, n - 1)
    return s.add_public(s.matmul_public(weights, labels.T).reshape(labels.shape[0]), n - 1)


async def gini_fs(s: Scheme, data: Shared, labels: Shared, n_classes: int, k: int,
                  exponents: np.ndarray, memory_budget: int = DEFAULT_MEMORY_BUDGET,
                  method: str | None = None, score_name: str = DEFAULT_SCORE
                  ) -> SelectionResult:
    """Select the k features of the input ``data`` with the best scores (Protocol 3; MS-GINI
    unless ``score_name`` names another of ``mpcnet.featsel.scores``), scoring as many columns
    at once as ``memory_budget`` bytes allow; ``method`` forces the top-k method."""
    return await _select(s, Held(data), labels, n_classes, k, exponents, memory_budget, method,
                         score(score_name))


async def select_stored(s: Scheme, data: ShareSource, labels: np.ndarray, n_classes: int,
                        k: int, exponents: np.ndarray,
                        memory_budget: int = DEFAULT_MEMORY_BUDGET,
                        method: str | None = None, score_name: str = DEFAULT_SCORE
                        ) -> SelectionResult:
    """``gini_fs`` on this party's shares as read from ``data`` (and its label shares), input
    here: at once when they fit ``memory_budget``, else a block at a time
    (``mpcnet.featsel.layout``), so a server's memory stays within the budget whatever m and
    p are."""
    m, p = data.shape[-2:]
    scoring = score(score_name)
    cut = layout(s.name, m, p, n_classes, k, memory_budget, scoring.cell_cost,
                 scoring.feature_bytes(s.name, m, n_classes), scoring.whole_columns)
    if cut.columns >= p:
        (whole,) = await s.input(data.block(slice(None), slice(None)),
                                 authenticate=scoring.authenticate_data)
        (label_shares,) = await s.input(labels)
        return await gini_fs(s, whole, label_shares, n_classes, k, exponents, memory_budget,
                             method, score_name)
    (label_shares,) = await s.input(labels)
    return await _select(s, Streamed(data), label_shares, n_classes, k, exponents,
                         memory_budget, method, score(score_name))


async def select_keyed(s: Scheme, parts: list[tuple[np.ndarray, np.ndarray]],
                       label_part: int, n_classes: int, k: int, exponents: np.ndarray,
                       memory_budget: int = DEFAULT_MEMORY_BUDGET,
                       score_name: str = DEFAULT_SCORE) -> tuple[SelectionResult, int]:
    """``gini_fs`` on a dataset keyed by record IDs: per contribution this party's shares of
    its ID hashes and of its columns (the label contribution's followed by its label matrix),
    input (authenticated: the alignment's shuffles carry the MACs) and aligned by
    ``mpcnet.ops.join.inner_join``; also the number of aligned rows (public)."""
    from mpcnet.ops.join import inner_join

    inputs = await s.input(*(a for part in parts for a in part))
    joined = await inner_join(s, [(inputs[2 * o], inputs[2 * o + 1])
                                  for o in range(len(parts))], memory_budget)
    if joined.rows == 0:
        raise InputError("no record is held by every contribution of the dataset; nothing "
                         "to select from")
    widths = [data.shape[-1] for _, data in parts]
    start = sum(widths[:label_part + 1]) - (n_classes - 1)
    label_columns = np.arange(start, start + n_classes - 1)
    features = np.setdiff1d(np.arange(sum(widths)), label_columns)
    result = await gini_fs(s, joined.values[:, features], joined.values[:, label_columns],
                           n_classes, k, exponents, memory_budget, score_name=score_name)
    return result, joined.rows


async def _select(s: Scheme, data: Blocks, labels: Shared, n_classes: int, k: int,
                  exponents: np.ndarray, memory_budget: int, method: str | None,
                  scoring: Score) -> SelectionResult:
    m, p = data.shape
    if labels.shape != (m, n_classes - 1):
        raise InputError(f"label matrix must be {m} x {n_classes - 1} (one-hot without the last "
                         f"class), got {labels.shape}")
    if not 0 < k <= p:
        raise InputError(f"k must be between 1 and {p} for {p} features, got {k}")
    scoring.check_rows(m, n_classes)
    cut = layout(s.name, m, p, n_classes, k, memory_budget, scoring.cell_cost,
                 scoring.feature_bytes(s.name, m, n_classes), scoring.whole_columns)
    topk = planner.choose(s.name, p, k, lambda ties: scoring.limb_plan(m, n_classes, ties),
                          cut.usable, method)
    with s.engine.phase("scoring"):
        one_hot = await one_hot_products(s, labels)
        blocks = [slice(start, min(p, start + cut.columns)) for start in range(0, p, cut.columns)]
        stats = [await _statistics(s, data, labels, columns, cut, scoring) for columns in blocks]
        parts = await _fractions(s, stats, labels, m, cut, topk.limbs, scoring)
    with s.engine.phase("selection"):
        selection = (await topk_ranking(s, parts, k) if topk.method == "ranking"
                     else await topk_network(s, parts, k, topk.batch))
    with s.engine.phase("product"):
        pieces = []
        for start in range(0, m, cut.product_rows):
            rows = await data.block(s, slice(start, min(m, start + cut.product_rows)),
                                    slice(None), authenticate=False)  # D' needs no MAC of D
            pieces.append(await filter_fs(s, rows, selection))
            del rows
            if cut.product_rows < m:  # free the records of the rows' input checks
                await s.checkpoint()
        reduced = concat(pieces).reshape(m, k)
    chosen = s.matmul_public(np.asarray(exponents, dtype=np.int64).view(np.uint64).reshape(1, p),
                             selection).reshape(k)
    indices = s.matmul_public(np.arange(p, dtype=np.uint64).reshape(1, p), selection).reshape(k)
    with s.engine.phase("checks"):
        await s.verify()
        await check_one_hot(s, one_hot, *labels.shape)
    return SelectionResult(reduced, chosen, indices, labels,
                           dict(topk.figures(), **cut.figures(m, p)))


async def _statistics(s: Scheme, data: Blocks, labels: Shared, columns: slice, cut: Layout,
                      scoring: Score) -> tuple[Shared, ...]:
    """The statistics of one block of columns: in one go, or tile by tile of rows when a column
    does not fit (the column sums first if the score needs them, then each tile's statistics,
    which add up). A job in more than one block frees the records of each block's (tile's)
    checks before the next (``Scheme.checkpoint``)."""
    m = data.shape[0]
    tiles = [slice(start, min(m, start + cut.tile_rows)) for start in range(0, m, cut.tile_rows)]
    column_sums = None
    if scoring.uses_mean and len(tiles) > 1:
        for rows in tiles:
            tile_sums = s.sum(await data.block(s, rows, columns, scoring.authenticate_data), 0)
            column_sums = tile_sums if column_sums is None else s.add(column_sums, tile_sums)
            await s.checkpoint()
    stats: tuple[Shared, ...] = ()
    for rows in tiles:
        block = await data.block(s, rows, columns, scoring.authenticate_data)
        if scoring.uses_mean and column_sums is None:  # one tile: all rows at once
            column_sums = s.sum(block, 0)
        tile_stats = await scoring.statistics(s, block, labels[rows], column_sums, m)
        del block
        stats = tile_stats if not stats else tuple(
            s.add(x, y) for x, y in zip(stats, tile_stats, strict=True))
        if len(tiles) > 1 or cut.columns < data.shape[1]:
            await s.checkpoint()
    return stats


async def _fractions(s: Scheme, stats: list[tuple[Shared, ...]], labels: Shared, m: int,
                     cut: Layout, plan: LimbPlan, scoring: Score) -> Fractions:
    """The fractions of every block from its statistics, ``cut.finishing`` blocks together
    (``RoundEngine.together``: their rounds travel as one), so that a job's rounds do not grow
    with its number of blocks; then, in a job of several blocks, one checkpoint."""
    sizes = s.sum(labels, 0)
    parts: list[Fractions] = []
    for start in range(0, len(stats), cut.finishing):
        parts += await s.engine.together(*(scoring.of_statistics(s, block, sizes, m, plan)
                                           for block in stats[start:start + cut.finishing]))
    if len(stats) > 1:
        await s.checkpoint()
    return join(parts)
