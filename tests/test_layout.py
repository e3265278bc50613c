"""Tests of mpcnet.featsel.layout: blocks within the memory budget, and active3's check size."""

from __future__ import annotations

from mpcnet.featsel.layout import (
    CHECKED_CELLS,
    DEFAULT_MEMORY_BUDGET,
    STAGGERED_BYTES_PER_CELL,
    layout,
)


def test_an_active3_block_holds_at_most_the_cells_one_check_needs() -> None:
    speed = layout("active3", 8378, 122, 2, 67, DEFAULT_MEMORY_BUDGET)
    most = CHECKED_CELLS["active3"] // 8378  # 46 columns
    assert -(-122 // speed.columns) == -(-122 // most) == 3  # the budget alone: 2 blocks
    assert speed.columns == 41  # 41 + 41 + 40 rather than 46 + 46 + 30


def test_blocks_are_of_even_size() -> None:
    for p in (7, 100, 122, 123, 1000):
        blocks = layout("active3", 8378, p, 2, 1, DEFAULT_MEMORY_BUDGET)
        count = -(-p // blocks.columns)
        assert blocks.columns * 8378 <= CHECKED_CELLS["active3"]
        assert count == -(-p // (CHECKED_CELLS["active3"] // 8378))  # no more blocks than needed
        assert p - (count - 1) * blocks.columns >= blocks.columns - count  # last: about full
    big = layout("active3", 1_000_000, 100, 2, 10, DEFAULT_MEMORY_BUDGET)
    assert big.tile_rows == 333_334  # 3 even tiles per column of at most CHECKED_CELLS


def test_settings_without_checks_per_block_fill_the_budget() -> None:
    for setting in ("passive3", "active4"):
        assert layout(setting, 8378, 122, 2, 67, DEFAULT_MEMORY_BUDGET).columns == 122


def test_a_score_heavier_per_cell_is_cut_by_the_budget_first() -> None:
    assert layout("active3", 8378, 122, 2, 67, DEFAULT_MEMORY_BUDGET, cell_cost=7).columns == 11


def test_blocks_are_staggered_only_where_no_check_runs_per_block_and_one_block_is_not_enough(
        ) -> None:
    """A staggered block's cells are counted at STAGGERED_BYTES_PER_CELL, which the budget
    divides; a job that fits one block, a score that is not pipelined and active3 are not
    staggered."""
    for setting, m in (("passive3", 1_000_000), ("active4", 300_000)):
        one = layout(setting, 8378, 122, 2, 67, DEFAULT_MEMORY_BUDGET, pipelined=True)
        assert one.columns == 122 and not one.staggered
        big = layout(setting, m, 100, 2, 10, DEFAULT_MEMORY_BUDGET, pipelined=True)
        assert big.staggered and big.tile_rows == m
        assert big.columns == big.usable // (m * STAGGERED_BYTES_PER_CELL[setting])
        assert not layout(setting, m, 100, 2, 10, DEFAULT_MEMORY_BUDGET).staggered
    # active4 at 10^6 rows: staggered blocks would be tiles, one after another 3 columns
    whole = layout("active4", 1_000_000, 100, 2, 10, DEFAULT_MEMORY_BUDGET, pipelined=True)
    assert not whole.staggered and whole.columns == 3
    assert "active3" not in STAGGERED_BYTES_PER_CELL
    assert not layout("active3", 1_000_000, 100, 2, 10, DEFAULT_MEMORY_BUDGET,
                      pipelined=True).staggered
