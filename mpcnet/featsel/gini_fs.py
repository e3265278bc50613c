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

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from mpcnet.errors import InputError
from mpcnet.featsel.filter_fs import filter_fs
from mpcnet.featsel.labels import one_hot_products, open_one_hot, refuse_malformed
from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET, Layout, layout
from mpcnet.featsel.msgini import join
from mpcnet.featsel.scores import DEFAULT_SCORE, Score, score
from mpcnet.featsel.source import Blocks, Held, ShareSource, Streamed
from mpcnet.ops import planner
from mpcnet.ops.fraction import Fractions, LimbPlan
from mpcnet.ops.network import topk_network
from mpcnet.ops.topk import topk_ranking
from mpcnet.schemes.base import Rounds, Scheme, Shared, all_rounds, concat


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
                 scoring.feature_bytes(s.name, m, n_classes), scoring.whole_columns,
                 scoring.pipelined)
    # the labels are input as the data are (value-only for the mean-split scores, whose
    # statistics only take a product of them with authenticated flags; their MACs are made
    # beside the first block), with one input check for both
    macs = scoring.authenticate_data
    if cut.columns >= p:
        whole, label_shares = await s.input(data.block(slice(None), slice(None)), labels,
                                            authenticate=macs)
        return await _select(s, Held(whole), label_shares, n_classes, k, exponents,
                             memory_budget, method, scoring, macs)
    return await _select(s, Streamed(data), labels, n_classes, k, exponents, memory_budget,
                         method, scoring, macs)


async def select_keyed(s: Scheme, parts: list[tuple[np.ndarray, np.ndarray]],
                       label_part: int, n_classes: int, k: int, exponents: np.ndarray,
                       memory_budget: int = DEFAULT_MEMORY_BUDGET,
                       score_name: str = DEFAULT_SCORE) -> tuple[SelectionResult, int]:
    """``gini_fs`` on a dataset keyed by record IDs: per contribution this party's shares of
    its ID hashes and of its columns (the label contribution's followed by its label matrix),
    input (authenticated: the alignment's shuffles carry the MACs) and aligned by
    ``mpcnet.ops.join.inner_join``; also the number of aligned rows (public). ``parts`` is
    emptied once input, so that a large job does not hold its shares twice."""
    from mpcnet.ops.join import inner_join

    widths = [data.shape[-1] for _, data in parts]
    start = sum(widths[:label_part + 1]) - (n_classes - 1)
    label_columns = np.arange(start, start + n_classes - 1)
    features = np.setdiff1d(np.arange(sum(widths)), label_columns)
    inputs = await s.input(*(a for part in parts for a in part))
    parts.clear()  # the caller's list: its arrays are the inputs, or copies they no longer need
    joined = await inner_join(s, list(zip(inputs[::2], inputs[1::2], strict=True)),
                              memory_budget, [*features, *label_columns])
    del inputs  # the features and labels are views of the joined rows: nothing else is held
    if joined.rows == 0:
        raise InputError("no record is held by every contribution of the dataset; nothing "
                         "to select from")
    p = features.size
    data = joined.values[:, :p]
    # the joined rows stay in memory through the scoring (a stored dataset's are read in
    # blocks): what they take is not the scoring's
    result = await gini_fs(s, data, joined.values[:, p:], n_classes, k, exponents,
                           memory_budget - data.data.nbytes, score_name=score_name)
    return result, joined.rows


async def _select(s: Scheme, data: Blocks, labels: Shared | np.ndarray, n_classes: int, k: int,
                  exponents: np.ndarray, memory_budget: int, method: str | None,
                  scoring: Score, label_macs: bool = True) -> SelectionResult:
    """Protocol 3 on ``data``; ``labels`` input already, or this party's label shares, to
    input beside the first block; without ``label_macs`` they are (or are input) value-only
    and get their MACs beside the first block's rounds (``_statistics``)."""
    m, p = data.shape
    shape = labels.shape if isinstance(labels, Shared) else tuple(labels.shape[-2:])
    if shape != (m, n_classes - 1):
        raise InputError(f"label matrix must be {m} x {n_classes - 1} (one-hot without the last "
                         f"class), got {shape}")
    if not 0 < k <= p:
        raise InputError(f"k must be between 1 and {p} for {p} features, got {k}")
    scoring.check_rows(m, n_classes)
    cut = layout(s.name, m, p, n_classes, k, memory_budget, scoring.cell_cost,
                 scoring.feature_bytes(s.name, m, n_classes), scoring.whole_columns,
                 scoring.pipelined)
    topk = planner.choose(s.name, p, k, lambda ties: scoring.limb_plan(m, n_classes, ties),
                          cut.usable, method)
    with s.engine.phase("scoring"):
        blocks = [slice(start, min(p, start + cut.columns)) for start in range(0, p, cut.columns)]
        one_hot, labels, stats, checks = await _statistics(s, data, labels, label_macs, blocks,
                                                           cut, scoring)
        parts, checks, one_hot_opened = await _fractions(s, stats, labels, m, cut, topk.limbs,
                                                         scoring, checks, one_hot)
    with s.engine.phase("selection"):
        first_rows = slice(0, min(m, cut.product_rows))
        rows: Shared | None = None
        if topk.method == "ranking":  # no checkpoint inside: the first rows of D are input
            # and the fractions' ANDs checked beside it (docs/active3.md)
            ranked, rows, *_ = await s.engine.together(
                topk_ranking(s, parts, k), data.block(s, first_rows, slice(None), False),
                *(all_rounds(check) for check in checks))
            selection = cast(Shared, ranked)
        else:
            for check in checks:
                await all_rounds(check)
            selection = await topk_network(s, parts, k, topk.batch)
    with s.engine.phase("product"):
        pieces = []
        for start in range(0, m, cut.product_rows):
            if rows is None:
                rows = await data.block(s, slice(start, min(m, start + cut.product_rows)),
                                        slice(None), authenticate=False)  # D' needs no MAC of D
            pieces.append(await filter_fs(s, rows, selection))
            rows = None
            if cut.product_rows < m:  # free the records of the rows' input checks
                await s.checkpoint()
        reduced = concat(pieces).reshape(m, k)
    chosen = s.matmul_public(np.asarray(exponents, dtype=np.int64).view(np.uint64).reshape(1, p),
                             selection).reshape(k)
    indices = s.matmul_public(np.arange(p, dtype=np.uint64).reshape(1, p), selection).reshape(k)
    with s.engine.phase("checks"):
        await s.verify()
        refuse_malformed(one_hot_opened, *labels.shape)  # opened with the fractions
    return SelectionResult(reduced, chosen, indices, labels,
                           dict(topk.figures(), **cut.figures(m, p)))


async def _nothing() -> None:
    """A ``together`` member with no rounds."""


def _rest(parts: Sequence[object]) -> list[Rounds]:
    """What pending checkpoints' rounds returned (``Scheme.checkpoint_later``): the rest of
    those that have not run all of theirs, to run beside the next group."""
    return [cast(Rounds, part) for part in parts if part is not None]


async def _given(labels: Shared) -> list[Shared]:
    """Labels input already, as ``Scheme.input`` returns them."""
    return [labels]


async def _statistics(s: Scheme, data: Blocks, labels: Shared | np.ndarray, label_macs: bool,
                      blocks: list[slice], cut: Layout, scoring: Score
                      ) -> tuple[Shared, Shared, list[tuple[Shared, ...]], list[Rounds]]:
    """The one-hot products of the labels, the labels with their MACs and the statistics of
    every block of columns: each in one go, or tile by tile of rows when a column does not fit
    (the column sums first if the score needs them, then each tile's statistics, which add
    up); also the checkpoints' rounds still to run (``Scheme.checkpoint_later``: the last
    step's, and the rest of earlier ones that run in parts). Labels not input yet are input
    beside the first block; labels without MACs (``label_macs`` false) get them
    (``Scheme.refresh``) beside it, the first block's class counts taking them value-only (a
    product with authenticated flags).

    Where the setting checks nothing per block (``Layout.staggered``: passive3, active4), step
    i starts i rounds after step 0 (``_staggered``), so a job of n steps of L rounds costs
    n - 1 + L rounds. Elsewhere (active3) a job of several steps checkpoints after each, and
    the steps are pipelined: step i's rounds travel with step i+1's input and step i-1's
    checkpoint (``RoundEngine.together``), so each step costs its own rounds only, whatever
    its input and check take (a check that runs in parts has its next part beside step i+2);
    a score whose statistics checkpoint themselves (``Score.pipelined`` false) runs them one
    after another. Each group holds one step's sign tests and the previous step's check
    records."""
    m = data.shape[0]
    tiles = [slice(start, min(m, start + cut.tile_rows)) for start in range(0, m, cut.tile_rows)]
    steps: list[tuple[slice, slice, bool]] = []  # (rows, columns, column sums only)
    for columns in blocks:
        if scoring.uses_mean and len(tiles) > 1:
            steps += [(rows, columns, True) for rows in tiles]  # the column sums first
        steps += [(rows, columns, False) for rows in tiles]
    several = len(steps) > 1
    column_sums: dict[int, Shared] = {}
    stats: dict[int, tuple[Shared, ...]] = {}

    async def step(block: Shared, labels: Shared, rows: slice, columns: slice,
                   sums_only: bool) -> None:
        if sums_only or (scoring.uses_mean and columns.start not in column_sums):
            tile_sums = s.sum(block, 0)
            before = column_sums.get(columns.start)
            column_sums[columns.start] = tile_sums if before is None else s.add(before,
                                                                               tile_sums)
        if sums_only:
            return
        counting = scoring.statistics(s, block, labels[rows], column_sums.get(columns.start), m)
        del block  # the statistics may free it before their last round
        tile_stats = await counting
        before_stats = stats.get(columns.start)
        stats[columns.start] = tile_stats if before_stats is None else tuple(
            s.add(x, y) for x, y in zip(before_stats, tile_stats, strict=True))

    def read(i: int) -> Awaitable[Shared]:
        rows, columns, _ = steps[i]
        return data.block(s, rows, columns, scoring.authenticate_data)

    async def labelled(value_only: Shared) -> tuple[Shared, Shared]:
        with_macs = value_only if label_macs else await s.refresh(value_only)
        return with_macs, await one_hot_products(s, with_macs)

    label_input = (s.input(labels, authenticate=label_macs) if isinstance(labels, np.ndarray)
                   else _given(labels))
    block, given = await s.engine.together(read(0), label_input)
    block, (first_labels,) = cast(Shared, block), cast(list[Shared], given)
    if cut.staggered and scoring.pipelined:
        held = [block]  # step 0's, freed when it is done
        del block
        with_macs, products = await _staggered(s, steps, held, first_labels, read, step,
                                               labelled)
        return products, with_macs, [stats[columns.start] for columns in blocks], []
    one_hot: Shared | None = None
    current = first_labels  # value-only in the first step without label_macs
    checks: list[Rounds] = []
    for i, (rows, columns, sums_only) in enumerate(steps):
        following = read(i + 1) if i + 1 < len(steps) else _nothing()
        first = labelled(current) if i == 0 else _nothing()
        work = step(block, current, rows, columns, sums_only)
        if scoring.pipelined:
            _, block_next, made, *rest = await s.engine.together(work, following, first,
                                                                 *checks)
            checks = _rest(rest)
        else:
            for check in checks:
                await all_rounds(check)
            checks = []
            made = await first
            await work
            block_next = await following
        if i == 0:
            current, one_hot = cast(tuple[Shared, Shared], made)
        block = cast(Shared, block_next)  # the step's block is freed
        if several:
            checks.append(s.checkpoint_later())
    assert one_hot is not None
    return one_hot, current, [stats[columns.start] for columns in blocks], checks


async def _staggered(s: Scheme, steps: list[tuple[slice, slice, bool]], held: list[Shared],
                     value_only: Shared, read: Callable[[int], Awaitable[Shared]],
                     step: Callable[[Shared, Shared, slice, slice, bool], Awaitable[None]],
                     labelled: Callable[[Shared], Awaitable[tuple[Shared, Shared]]]
                     ) -> tuple[Shared, Shared]:
    """The scoring steps of a setting with no check per block (``Layout.staggered``), step i
    starting i rounds after step 0 (``RoundEngine.staggered``): about as many blocks in
    flight as a step has rounds, each at another of its rounds, which the layout's bytes
    per cell count. Step 0 takes the block ``held`` (read already) and the labels
    value-only, as in ``_statistics``; a later step waits for the labels with their MACs
    and, for a tile's class counts, until every tile of its column is summed (a step never
    waits for one after it, so the schedule cannot stall). Returns the labels with MACs and
    the one-hot products."""
    made: list[tuple[Shared, Shared]] = []
    sums = Counter(columns.start for _, columns, sums_only in steps if sums_only)
    summed: Counter[int] = Counter()

    async def labels() -> None:
        made.append(await labelled(value_only))

    async def run(i: int) -> None:
        rows, columns, sums_only = steps[i]
        if i == 0:
            await step(held.pop(), value_only, rows, columns, sums_only)
        else:
            while not made or (not sums_only and summed[columns.start] < sums[columns.start]):
                await s.engine.idle()
            await step(await read(i), made[0][0], rows, columns, sums_only)
        if sums_only:
            summed[columns.start] += 1

    await s.engine.together(labels(), s.engine.staggered(*(run(i) for i in range(len(steps)))))
    return made[0]


async def _fractions(s: Scheme, stats: list[tuple[Shared, ...]], labels: Shared, m: int,
                     cut: Layout, plan: LimbPlan, scoring: Score,
                     checks: list[Rounds], one_hot: Shared
                     ) -> tuple[Fractions, list[Rounds], np.ndarray]:
    """The fractions of every block from its statistics, ``cut.finishing`` blocks together
    (``RoundEngine.together``: their rounds travel as one), so that a job's rounds do not grow
    with its number of blocks, the scoring's pending ``checks`` (their parts beside each
    group) and the opening of the ``one_hot`` products (``open_one_hot``: acted on after
    ``verify``) beside the first group (a score that is not ``pipelined`` runs the checks
    first and computes its fractions after them, one block at a time: they may checkpoint);
    then, in a job of several blocks, the checkpoints' rounds still to run."""
    sizes = s.sum(labels, 0)
    parts: list[Fractions] = []
    opened: np.ndarray | None = None
    for start in range(0, len(stats), cut.finishing):
        group = [scoring.of_statistics(s, block, sizes, m, plan)
                 for block in stats[start:start + cut.finishing]]
        opening = open_one_hot(s, one_hot) if opened is None else _nothing()
        if scoring.pipelined:
            got, *done = await s.engine.together(opening, *group, *checks)
            parts += cast(list[Fractions], done[:len(group)])
            checks = _rest(done[len(group):])
        else:  # its fractions checkpoint (gini's tournament in pieces): the checks first
            got, *_ = await s.engine.together(opening, *(all_rounds(c) for c in checks))
            checks = []
            parts += [await fractions for fractions in group]
        opened = cast(np.ndarray, got) if opened is None else opened
    if len(stats) > 1:
        checks.append(s.checkpoint_later())
    assert opened is not None
    return join(parts), checks, opened
