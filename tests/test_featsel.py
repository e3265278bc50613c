"""pi_GINI-FS end to end in-process: same selection as the plaintext reference, ties included."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from conftest import ROOT, run_protocol

from mpcnet.dataset import read_bundled
from mpcnet.encoded import EncodedDataset, encode_table
from mpcnet.errors import InputError
from mpcnet.featsel.layout import SCORING_BYTES_PER_CELL, STAGGERED_BYTES_PER_CELL, held_bytes
from mpcnet.featsel.local import select_in_process
from mpcnet.featsel.scores import SCORES
from mpcnet.plain.scores import msgini_fraction
from mpcnet.plain.select import topk_fraction

EXPECTED = json.loads((ROOT / "data" / "expected_msgini.json").read_text())



@pytest.fixture(autouse=True)
def _staggered_figure_near_passive3s(monkeypatch: pytest.MonkeyPatch) -> None:
    """active4's staggered figure is 4.8 times its one-block figure (passive3's: 2.2), so the
    small budgets here, cut for a few staggered blocks, would fit the whole job in one block
    one after another; these tests use a ratio like passive3's (the mechanism, not the
    figure, is what they test: tests/test_layout.py has the figures)."""
    monkeypatch.setitem(STAGGERED_BYTES_PER_CELL, "active4", 1200)

def private_selection(scheme: str, ds: EncodedDataset,
                      k: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """Run pi_GINI-FS on ``ds``; return D', the selected exponents and party 0's report."""
    run = select_in_process(scheme, ds.values, ds.label_matrix, ds.n_classes, k, ds.exponents)
    return run.reduced, run.exponents, run.report


def block_cell_bytes(scheme: str) -> int:
    """The layout's bytes per cell of a block in a job of several blocks of MS-GINI."""
    return STAGGERED_BYTES_PER_CELL.get(scheme, SCORING_BYTES_PER_CELL[scheme])


def plain_selection(ds: EncodedDataset, k: int) -> list[int]:
    q, d = msgini_fraction(ds.values, ds.codes, ds.n_classes)
    return topk_fraction(q, d, k)


@pytest.mark.parametrize("name", ["lsvt", "cogload"])
def test_bundled_matches_independent_reference(scheme: str, name: str) -> None:
    ds = encode_table(read_bundled(name))
    expected = EXPECTED[name]
    k = expected["k"]
    reduced, exponents, _ = private_selection(scheme, ds, k)
    chosen = expected["selected_indices"]
    assert [ds.columns[j] for j in chosen] == expected["selected_in_order"]
    assert plain_selection(ds, k) == chosen
    np.testing.assert_array_equal(reduced, ds.values[:, chosen])  # exact, in the same order
    np.testing.assert_array_equal(exponents, ds.exponents[chosen])


def test_speeddating_matches_plaintext() -> None:
    ds = encode_table(read_bundled("speeddating"))
    assert ds.values.shape == (8378, 122)
    chosen = plain_selection(ds, 67)
    reduced, exponents, _ = private_selection("passive3", ds, 67)
    np.testing.assert_array_equal(reduced, ds.values[:, chosen])
    np.testing.assert_array_equal(exponents, ds.exponents[chosen])


def _synthetic(m: int, p: int, n_classes: int, seed: int) -> EncodedDataset:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, n_classes, m)
    values = rng.integers(-50, 50, (m, p)) + codes[:, None] * rng.integers(0, 30, p)
    values[:, 0] = 7  # constant feature: the '>' side is empty
    values[:, 1] = values[:, 2]  # duplicate column: an exact tie, broken by the lower index
    values[:, 3] = np.where(np.arange(m) % 2 == 0, -(2**37), 2**37 - 1)  # range limits
    return EncodedDataset([f"c{j}" for j in range(p)], values, np.zeros(p, dtype=np.int64),
                          [str(c) for c in range(n_classes)], codes)


@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_multiclass_constant_features_and_ties(scheme: str, n_classes: int) -> None:
    ds = _synthetic(90, 14, n_classes, seed=n_classes)
    k = 9
    chosen = plain_selection(ds, k)
    reduced, _, _ = private_selection(scheme, ds, k)
    np.testing.assert_array_equal(reduced, ds.values[:, chosen])


def test_rounds_constant_and_bytes_linear() -> None:
    """Rounds do not depend on m, p and k, within one width of the narrow sign tests of counts
    and ranks (``compare.signed_bits``: 9 to 11 bits here, lanes of 16)."""
    figures = {}
    for m, p, k in [(128, 8, 2), (512, 8, 2), (128, 32, 2), (128, 32, 20)]:
        _, _, report = private_selection("passive3", _synthetic(m, p, 2, seed=m + p), k)
        figures[(m, p, k)] = report
    assert len({r["rounds"] for r in figures.values()}) == 1
    scoring = {key: r["phases"]["scoring"]["bytes_sent"] for key, r in figures.items()}
    product = {key: r["phases"]["product"]["bytes_sent"] for key, r in figures.items()}
    # scoring grows with m*p (comparisons), the product with m*k (one reshare of D')
    assert scoring[(512, 8, 2)] / scoring[(128, 8, 2)] == pytest.approx(4, rel=0.1)
    assert scoring[(128, 32, 2)] / scoring[(128, 8, 2)] == pytest.approx(4, rel=0.1)
    assert product[(128, 32, 20)] == 128 * 20 * 8
    assert product[(512, 8, 2)] == 512 * 2 * 8


def test_bad_k_and_label_shape_are_refused() -> None:
    ds = _synthetic(20, 5, 2, seed=1)
    for k in (0, 6, -1):
        with pytest.raises(InputError, match="k must be"):
            private_selection("passive3", ds, k)


@pytest.mark.parametrize("method", ["ranking", "network"])
def test_k_equal_to_p_ranks_every_feature(scheme: str, method: str) -> None:
    ds = _synthetic(40, 9, 3, seed=4)
    chosen = plain_selection(ds, 9)
    run = select_in_process(scheme, ds.values, ds.label_matrix, ds.n_classes, 9, ds.exponents,
                            method=method)
    np.testing.assert_array_equal(run.reduced, ds.values[:, chosen])


@pytest.mark.parametrize("scheme", ["passive3", "active3", "active4"])
def test_a_label_matrix_that_is_not_one_hot_is_refused(scheme: str) -> None:
    """A dishonest owner's labels (a 2, a row in two classes, a huge word) stop the job before
    any score: with them, T need not have one 1 per column and D' could carry sums of columns
    nobody selected. Honest labels pass (the other tests)."""
    from mpcnet.featsel.labels import one_hot_defects

    ds = _synthetic(30, 5, 3, seed=4)
    assert one_hot_defects(np.array([0, 1, 2, 2**63, 2**64 - 1], dtype=np.uint64)).tolist() \
        == [False, False, True, True, True]
    for row, bad in [(3, [2, 0]), (7, [1, 1]), (29, [2**63, 0])]:
        labels = ds.label_matrix.copy()
        labels[row] = bad
        with pytest.raises(InputError, match=f"not one-hot: row {row + 1} "):
            select_in_process(scheme, ds.values, labels, ds.n_classes, 2, ds.exponents)


@pytest.mark.parametrize("method", ["ranking", "network"])
def test_more_rows_than_64_bit_products_allow(scheme: str, method: str) -> None:
    """m = 12,000: Q_i*D_j no longer fits 64 bits; the limb cascade stays exact."""
    ds = _synthetic(12_000, 6, 2, seed=12)
    chosen = plain_selection(ds, 3)
    run = select_in_process(scheme, ds.values, ds.label_matrix, 2, 3, ds.exponents,
                            method=method)
    assert run.plan["method"] == method and run.plan["levels"] == 3
    np.testing.assert_array_equal(run.reduced, ds.values[:, chosen])


def test_four_hundred_thousand_rows_are_exact() -> None:
    """Beyond the old limit of 370,727 rows (two limbs per fraction, three levels)."""
    ds = _synthetic(400_000, 4, 2, seed=40)
    chosen = plain_selection(ds, 2)
    run = select_in_process("passive3", ds.values, ds.label_matrix, 2, 2, ds.exponents)
    np.testing.assert_array_equal(run.reduced, ds.values[:, chosen])


def test_rows_beyond_the_proven_bound_are_refused() -> None:
    from mpcnet.featsel.msgini import MAX_RANKED_ROWS, check_rows
    assert MAX_RANKED_ROWS == 2**24 - 1 >= 10**7
    check_rows(10**7)
    with pytest.raises(InputError, match="exact for 2 to 16,777,215 rows; this dataset has "
                                         "16,777,216"):
        check_rows(2**24)


@pytest.mark.parametrize("name", ["lsvt", "cogload"])
def test_network_and_blocks_give_the_same_selection(scheme: str, name: str) -> None:
    """The selection network, and scoring a few columns at a time within a small memory
    budget, select what the ranking selects (the independent reference)."""
    ds = encode_table(read_bundled(name))
    expected = EXPECTED[name]
    m, k = ds.values.shape[0], expected["k"]
    budget = held_bytes(scheme, m, ds.n_classes, k) + 7 * m * block_cell_bytes(scheme)
    run = select_in_process(scheme, ds.values, ds.label_matrix, ds.n_classes, expected["k"],
                            ds.exponents, method="network", memory_budget=budget)
    assert run.plan["method"] == "network" and run.plan["block_columns"] == 7
    assert run.plan["row_blocks"] > 1 and run.plan["tile_rows"] == m
    np.testing.assert_array_equal(run.reduced, ds.values[:, expected["selected_indices"]])


@pytest.mark.parametrize("n_classes", [2, 3])
def test_columns_too_long_for_the_budget_are_scored_in_tiles_of_rows(
        scheme: str, n_classes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """When one column does not fit, its sum comes first, then the class counts tile by tile:
    memory no longer grows with m, and the selection is the same."""
    from mpcnet.featsel import layout

    monkeypatch.setattr(layout, "MIN_TILE_CELLS", 16)
    ds = _synthetic(300, 6, n_classes, seed=30 + n_classes)
    k = 3
    budget = held_bytes(scheme, 300, n_classes, k) + 70 * block_cell_bytes(scheme)
    run = select_in_process(scheme, ds.values, ds.label_matrix, n_classes, k, ds.exponents,
                            memory_budget=budget)
    assert run.plan["tile_rows"] == 60 and run.plan["block_columns"] == 1  # 5 tiles, <= 70
    np.testing.assert_array_equal(run.reduced, ds.values[:, plain_selection(ds, k)])


def test_a_budget_too_small_for_a_tile_is_refused() -> None:
    ds = _synthetic(1000, 5, 2, seed=2)
    with pytest.raises(InputError, match="needs at least .* over the memory budget of 0 MiB"):
        select_in_process("passive3", ds.values, ds.label_matrix, 2, 2, ds.exponents,
                          memory_budget=1000)


def test_the_digits_of_the_squares_are_those_the_limb_plan_counts() -> None:
    """A.A can be m^2 itself (one class): a plan sized for m^2 - 1 had a digit too few where m
    is a power of two, and every such job from 2^14 rows failed on mismatched shapes (found
    by review)."""
    from mpcnet.featsel.msgini import limb_plan

    for m in [1 << e for e in range(4, 24)] + [10_000, 123_457]:
        for ties in (1, 1 << 15):
            plan = limb_plan(m, ties)
            assert plan is not None
            if plan.levels > 1:
                assert plan.num_limbs == -(-(m * m).bit_length() // plan.limb_bits), (m, ties)


@pytest.mark.parametrize("n_classes", [1, 2])
def test_a_power_of_two_rows_in_digits(n_classes: int) -> None:
    """2^14 rows, one class (A.A = m^2 exactly) or two: the plan's digits and the reference
    agree."""
    ds = _synthetic(1 << 14, 5, max(n_classes, 2), seed=14)
    if n_classes == 1:
        ds.codes[:] = 0
        ds = EncodedDataset(ds.columns, ds.values, ds.exponents, ds.classes, ds.codes)
    reduced, _, _ = private_selection("passive3", ds, 2)
    np.testing.assert_array_equal(reduced, ds.values[:, plain_selection(ds, 2)])


def _fraction_rounds(scheme: str, ds: EncodedDataset, columns: int) -> int:
    """Rounds of MS-GINI's per-feature step (statistics to fractions) on ``columns`` columns."""
    m = ds.values.shape[0]
    ms_gini = SCORES["ms-gini"]
    plan = ms_gini.limb_plan(m, ds.n_classes, 1)

    async def body(s, data, labels):  # type: ignore[no-untyped-def]
        stats = await ms_gini.statistics(s, data[:, :columns], labels, s.sum(data, 0)[:columns],
                                         m)
        before = s.engine.rounds
        await ms_gini.of_statistics(s, stats, s.sum(labels, 0), m, plan)
        return s.engine.rounds - before

    return run_protocol(scheme, {"data": ds.values, "labels": ds.label_matrix}, body)[0]


def test_the_blocks_fractions_share_their_rounds(scheme: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Scoring in blocks pays the rounds of one block's fractions whatever the number of
    blocks (``RoundEngine.together``): finishing the 4 blocks one at a time instead costs 3
    more times those rounds, and the selection is the same either way."""
    from mpcnet.featsel import gini_fs

    ds = _synthetic(300, 12, 3, seed=12)
    k = 4
    budget = held_bytes(scheme, 300, 3, k) + 3 * 300 * block_cell_bytes(scheme)
    shared = select_in_process(scheme, ds.values, ds.label_matrix, 3, k, ds.exponents,
                               memory_budget=budget)
    assert shared.plan["blocks"] == 4 and shared.plan["blocks_finished_together"] == 4
    layout = gini_fs.layout
    monkeypatch.setattr(gini_fs, "layout", lambda *args: dataclasses.replace(layout(*args),
                                                                              finishing=1))
    alone = select_in_process(scheme, ds.values, ds.label_matrix, 3, k, ds.exponents,
                              memory_budget=budget)
    assert alone.plan["blocks_finished_together"] == 1
    fractions = _fraction_rounds(scheme, ds, 3)
    assert fractions >= 8
    assert alone.report["rounds"] - shared.report["rounds"] == 3 * fractions
    np.testing.assert_array_equal(shared.reduced, alone.reduced)
    np.testing.assert_array_equal(shared.reduced, ds.values[:, plain_selection(ds, k)])


@pytest.mark.parametrize("scheme", ["passive3", "active4"])
def test_staggered_blocks_cost_one_round_each(scheme: str) -> None:
    """Where no check runs per block (``layout.STAGGERED_BYTES_PER_CELL``), block i's scoring
    starts i rounds after block 0's: 12 blocks of one column take exactly 6 scoring rounds more
    than 6 blocks of two (one after another they took a block's dozen rounds each), and
    select what the plaintext selects."""
    ds = _synthetic(300, 12, 3, seed=12)
    k = 4
    runs = {}
    for columns in (1, 2):
        budget = held_bytes(scheme, 300, 3, k) + columns * 300 * block_cell_bytes(scheme)
        run = select_in_process(scheme, ds.values, ds.label_matrix, 3, k, ds.exponents,
                                memory_budget=budget)
        assert run.plan["block_columns"] == columns and run.plan["blocks"] == 12 // columns
        np.testing.assert_array_equal(run.reduced, ds.values[:, plain_selection(ds, k)])
        runs[columns] = run.report["phases"]["scoring"]["rounds"]
    assert runs[1] - runs[2] == 6
