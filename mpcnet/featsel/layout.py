"""Layer: featsel. How a job is cut into blocks so that a server's memory stays within budget.

Scoring holds, per data cell of a block, the cell's shares and those of its sign test (about
SCORING_BYTES_PER_CELL, measured); a job also holds the label shares, D' and a fixed part for
the interpreter and the ranking (``held_bytes``). The rest of the budget goes to blocks:

- columns are scored ``columns`` at a time over all rows when a column fits;
- when even one column of m rows does not, a column is scored in tiles of ``tile_rows`` rows
  (``mpcnet.featsel.msgini.class_counts``: its column sum first, then the class counts of each
  tile), so memory does not grow with m at all;
- where the setting checks nothing per block (STAGGERED_BYTES_PER_CELL), block i starts i
  rounds after block 0 (``Layout.staggered``), so that about as many blocks are in flight as a
  block has rounds, and a block's cells are counted at what it holds over all its rounds;
- D' = D x T is computed ``product_rows`` rows at a time;
- the per-feature step that turns a block's statistics into fractions runs for ``finishing``
  blocks at once, their rounds together (``RoundEngine.together``), as many as the per-feature
  bytes of their columns fit the budget: a score's whole-column step (the best-split Gini's)
  one block at a time.

The layout depends on public numbers only (m, p, the classes, k, the setting, the budget the
servers agreed on), so every server cuts the job alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpcnet.errors import InputError
from mpcnet.ops.planner import COSTS, FIXED_BYTES

DEFAULT_MEMORY_BUDGET = 2 << 30
"""Bytes of memory a server may use for one job (2 GiB)."""

SCORING_BYTES_PER_CELL = {name: costs.test_bytes for name, costs in COSTS.items()}
"""Peak bytes per data cell of a block being scored: one sign test with its check records,
the planner's own figure (measured: bench.large, bench/README)."""

WORD_BYTES = {"passive3": 16, "active3": 64, "active4": 24}
"""Bytes one party's share of one ring element takes (components, MAC, limbs)."""

PRODUCT_BYTES_PER_CELL = {name: 4 * size for name, size in WORD_BYTES.items()}
"""Peak bytes per data cell of a row block of D' = D x T: the block as read, its input sharing
and the product's terms, counted four words (measured in process: at most 13, 23 and 87 bytes
above the shares read under passive3, active4 and active3). A sign test's bytes per cell, which
the product used before, is 10 to 40 times more: three to fifteen times as many row blocks,
each a few rounds (an input check, the product's output check)."""

STAGGERED_BYTES_PER_CELL = {"passive3": 560, "active4": 2400}
"""Bytes per data cell of a block where a job's blocks are staggered (``Layout.staggered``):
a block starts every round, so about as many are in flight as a block's scoring has rounds,
each at another of its rounds, and the figure is the sum over those rounds of what a block
holds per cell at each, not its peak. Measured in process (tracemalloc, per party, at the
steady state of 25 staggered blocks, the block freed once its sign tests' input is made):
passive3 453-472 bytes per cell (blocks of 50,000 x 4; one block alone peaks at 130), active4
1,326-1,339 (50,000 x 2; alone 325). The servers hold more, the bundles' copies in the TLS
transport: at 10^6 x 100 about 540 under passive3 (2.07 GB peak per server) and about 2,100
under active4 (blocks of one column counted at 1,600 peaked at 2.23-2.56 GB, over the 2 GiB
budget: docs/performance.md, "Staggered blocks"). A job whose staggered blocks would have
to be tiles of rows where blocks one after another are whole columns is not staggered (the
tiles' column sums are steps of their own). Settings absent (active3: a check of its ANDs
after every block, whose records are most of its bytes) score one block after another."""

CHECKED_CELLS = {"active3": 3 << 17}
"""Most cells scored in one block where every block ends with a check of its ANDs (active3's
``checkpoint``). MS-GINI's sign test queues about 3.5 AND words per cell, and an AND check costs
the same per word from 2^20 words on (``and_check.check_plan``: two pools of more than n triples,
6.0 words sent per AND word) but more below (its pools need 2^20 triples at least: 7.5 words
per word at 0.86 x 2^20). So a block should queue 2^20 AND words or more, and blocks are made
of even size (``_even``), the last one included: SpeedDating is scored in 3 blocks of 41, 41
and 40 columns (6.0 words per AND word, 371 MB sent per server) instead of 4 of at most 31
(7.5, 413 MB), for 60-100 MB more peak memory per server (bench/README, section 1).
A larger block saves only the four rounds of a checkpoint, at about 1.5 kB of peak memory
per cell. Scores whose cells cost more memory (``cell_cost``) have smaller blocks by the
budget already."""

MIN_TILE_CELLS = 4096
"""Rows of a column below which a tile is all overhead: the budget is refused instead."""


@dataclass(frozen=True)
class Layout:
    """The blocks of one job (all counts of rows or columns)."""

    columns: int  # columns scored at once
    tile_rows: int  # rows per scoring tile (m: whole columns)
    product_rows: int  # rows of D' computed at once
    usable: int  # bytes left for blocks
    finishing: int = 1  # blocks whose statistics become fractions at once
    staggered: bool = False  # block i's scoring starts i rounds after block 0's

    def figures(self, m: int, p: int) -> dict[str, int]:
        return {"block_columns": self.columns, "blocks": -(-p // self.columns),
                "blocks_finished_together": self.finishing,
                "blocks_staggered": int(self.staggered),
                "tile_rows": self.tile_rows, "tiles": -(-m // self.tile_rows),
                "row_blocks": -(-m // self.product_rows)}


def held_bytes(setting: str, m: int, n_classes: int, k: int) -> int:
    """What a job holds whatever its blocks: the label shares, D' and the fixed part."""
    return FIXED_BYTES + m * (n_classes - 1 + k) * WORD_BYTES[setting]


def feature_bytes(setting: str, values: int, limbs: int = 1) -> int:
    """Peak bytes of a score's per-feature step that cuts ``values`` words of ``limbs`` limbs
    each into bits at once (an A2B and up to 64 arithmetic bit shares per limb), counted four
    times: twice for the transport (``mpcnet.ops.planner.PIECE_OVERHEAD``) and twice for the
    wider limbs before a last normalisation (measured for chi2 with 40 classes under passive3:
    7.2 MiB per feature and party, against 3.9 MiB counted twice only)."""
    return 4 * values * limbs * 64 * WORD_BYTES[setting]


def _even(total: int, most: int) -> int:
    """The size of the fewest pieces of at most ``most`` that cover ``total``, all alike."""
    return -(-total // -(-total // most))


def layout(setting: str, m: int, p: int, n_classes: int, k: int, memory_budget: int,
           cell_cost: int = 1, per_feature: int = 0, whole_columns: bool = False,
           pipelined: bool = False) -> Layout:
    """The blocks for this job within ``memory_budget`` bytes, for a score that holds
    ``cell_cost`` times a sign test's bytes per cell and ``per_feature`` bytes per feature
    once its statistics are summed, and at most CHECKED_CELLS of them per block (or one
    column, for a score of ``whole_columns``); refuses a budget too small for one column, or
    a tile of MIN_TILE_CELLS rows of it where tiles are allowed. A ``pipelined`` score's
    blocks are staggered where the setting allows (STAGGERED_BYTES_PER_CELL) and the job
    does not fit one block."""
    one = _layout(setting, m, p, n_classes, k, memory_budget,
                  SCORING_BYTES_PER_CELL[setting] * cell_cost, per_feature, whole_columns)
    if not pipelined or setting not in STAGGERED_BYTES_PER_CELL or one.columns >= p:
        return one
    try:
        staggered = _layout(setting, m, p, n_classes, k, memory_budget,
                            STAGGERED_BYTES_PER_CELL[setting] * cell_cost, per_feature,
                            whole_columns, staggered=True)
    except InputError:  # too small a budget for a staggered tile: one block after another
        return one
    return one if staggered.tile_rows < m <= one.tile_rows else staggered


def _layout(setting: str, m: int, p: int, n_classes: int, k: int, memory_budget: int,
            per_cell: int, per_feature: int, whole_columns: bool, staggered: bool = False
            ) -> Layout:
    """``layout`` for blocks of ``per_cell`` bytes per cell."""
    held = held_bytes(setting, m, n_classes, k) + per_feature
    usable = memory_budget - held
    smallest = (m if whole_columns else min(m, MIN_TILE_CELLS)) * per_cell
    if usable < smallest:
        need = held + smallest
        whole = " (its score sorts whole columns)" if whole_columns else ""
        raise InputError(f"a job on {m:,} rows with {n_classes} classes and k = {k} under "
                         f"{setting} needs at least {need / 2**20:,.0f} MiB{whole}, over the "
                         f"memory budget of {memory_budget / 2**20:,.0f} MiB ([deployment] "
                         "memory_budget)")
    cap = CHECKED_CELLS.get(setting, m * p)
    columns = min(p, (usable + per_feature) // (m * per_cell + per_feature),
                  max(cap // m, 1 if whole_columns else 0))
    tile_rows = m if columns >= 1 else min(usable // per_cell, max(cap, MIN_TILE_CELLS))
    # blocks and tiles of even size: a small last one's AND check costs more per AND word
    columns, tile_rows = (_even(p, columns) if columns >= 1 else 0), _even(m, tile_rows)
    product_cell = PRODUCT_BYTES_PER_CELL[setting]
    product_rows = m if columns >= p else max(1, min(m, usable // (p * product_cell)))
    columns = max(1, columns)
    blocks = -(-p // columns)
    finishing = 1 if whole_columns else min(blocks, max(1, usable // max(1, columns * per_feature)))
    return Layout(columns, tile_rows, product_rows, usable, finishing, staggered)
