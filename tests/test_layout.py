"""Tests of mpcnet.featsel.layout: blocks within the memory budget, and active3's check size."""

from __future__ import annotations

from mpcnet.featsel.layout import CHECKED_CELLS, DEFAULT_MEMORY_BUDGET, layout


def test_an_active3_block_holds_at_most_the_cells_one_check_needs() -> None:
    speed = layout("active3", 8378, 122, 2, 67, DEFAULT_MEMORY_BUDGET)
    assert speed.columns * 8378 <= CHECKED_CELLS["active3"] < (speed.columns + 1) * 8378
    assert -(-122 // speed.columns) == 4  # SpeedDating: 4 blocks (the budget alone: 2)
    big = layout("active3", 1_000_000, 100, 2, 10, DEFAULT_MEMORY_BUDGET)
    assert big.tile_rows == CHECKED_CELLS["active3"]  # 4 tiles per column (the budget: 3)


def test_settings_without_checks_per_block_fill_the_budget() -> None:
    for setting in ("passive3", "active4"):
        assert layout(setting, 8378, 122, 2, 67, DEFAULT_MEMORY_BUDGET).columns == 122


def test_a_score_heavier_per_cell_is_cut_by_the_budget_first() -> None:
    assert layout("active3", 8378, 122, 2, 67, DEFAULT_MEMORY_BUDGET, cell_cost=7).columns == 11
