"""The private scores of mpcnet.featsel.scores (chi2, mi, pcc, gini beside ms-gini) against
their exact plaintext references, under every scheme: same selection, same order, ties
included."""

from __future__ import annotations

import numpy as np
import pytest
from test_featsel import _synthetic

from mpcnet.dataset import read_bundled
from mpcnet.encoded import EncodedDataset, encode_table
from mpcnet.errors import InputError
from mpcnet.featsel import chi2, mi
from mpcnet.featsel.layout import SCORING_BYTES_PER_CELL, STAGGERED_BYTES_PER_CELL, held_bytes
from mpcnet.featsel.local import select_in_process
from mpcnet.featsel.scores import SCORES, score
from mpcnet.net.engine import RoundEngine
from mpcnet.plain.scores import SCORE_FRACTIONS, score_fraction
from mpcnet.plain.select import topk_fraction

NEW_SCORES = ("chi2", "mi", "pcc", "gini")



@pytest.fixture(autouse=True)
def _staggered_figure_near_passive3s(monkeypatch: pytest.MonkeyPatch) -> None:
    """active4's staggered figure is 4.8 times its one-block figure (passive3's: 2.2), so the
    small budgets here, cut for a few staggered blocks, would fit the whole job in one block
    one after another; these tests use a ratio like passive3's (the mechanism, not the
    figure, is what they test: tests/test_layout.py has the figures)."""
    monkeypatch.setitem(STAGGERED_BYTES_PER_CELL, "active4", 1200)

def expected(ds: EncodedDataset, name: str, k: int) -> list[int]:
    q, d = score_fraction(name, ds.values, ds.codes, ds.n_classes)
    return topk_fraction(q, d, k)


def test_every_private_score_has_its_reference() -> None:
    assert set(SCORES) == set(SCORE_FRACTIONS) == {"ms-gini", "chi2", "mi", "pcc", "gini"}
    with pytest.raises(InputError, match="unknown score 'gi'; available: ms-gini, chi2, mi, pcc, "
                                         "gini"):
        score("gi")


@pytest.mark.parametrize("name,k", [("lsvt", 10), ("cogload", 5)])
@pytest.mark.parametrize("score_name", NEW_SCORES)
def test_bundled_selection_equals_the_reference(scheme: str, name: str, k: int,
                                                score_name: str) -> None:
    ds = encode_table(read_bundled(name))
    chosen = expected(ds, score_name, k)
    run = select_in_process(scheme, ds.values, ds.label_matrix, ds.n_classes, k, ds.exponents,
                            score=score_name)
    assert run.indices.tolist() == chosen
    np.testing.assert_array_equal(run.reduced, ds.values[:, chosen])
    np.testing.assert_array_equal(run.exponents, ds.exponents[chosen])


@pytest.mark.parametrize("score_name", [*NEW_SCORES[:-1],
                                        pytest.param("gini", marks=pytest.mark.slow)])
def test_speeddating_needs_limbs_and_still_equals_the_reference(score_name: str) -> None:
    ds = encode_table(read_bundled("speeddating"))
    chosen = expected(ds, score_name, 67)
    run = select_in_process("passive3", ds.values, ds.label_matrix, ds.n_classes, 67,
                            ds.exponents, score=score_name)
    if score_name not in ("mi", "gini"):  # 8378 rows: cross products of 73 bits and more
        assert run.plan["levels"] > 1
    assert run.indices.tolist() == chosen


@pytest.mark.parametrize("n_classes", [2, 3, 5])
@pytest.mark.parametrize("score_name", NEW_SCORES)
def test_multiclass_constant_features_ties_and_an_absent_class(
        scheme: str, n_classes: int, score_name: str) -> None:
    """Constant and duplicate columns and extreme values (``_synthetic``); with 5 classes the
    last never occurs (a class size of 0), which neither score may divide by."""
    ds = _synthetic(90, 14, n_classes, seed=n_classes)
    if n_classes == 5:
        ds.codes[ds.codes == 4] = 3
        ds = EncodedDataset(ds.columns, ds.values, ds.exponents, ds.classes, ds.codes)
    chosen = expected(ds, score_name, 9)
    for method in ("ranking", "network"):
        run = select_in_process(scheme, ds.values, ds.label_matrix, n_classes, 9,
                                ds.exponents, method=method, score=score_name)
        assert run.indices.tolist() == chosen  # the tie of columns 1 and 2 included
        np.testing.assert_array_equal(run.reduced, ds.values[:, chosen])


@pytest.mark.parametrize("score_name", NEW_SCORES[:-1])
def test_blocks_and_tiles_of_rows_give_the_same_selection(
        scheme: str, score_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from mpcnet.featsel import layout

    monkeypatch.setattr(layout, "MIN_TILE_CELLS", 16)
    ds = _synthetic(300, 6, 3, seed=33)
    scoring = score(score_name)
    per_cell = (STAGGERED_BYTES_PER_CELL.get(scheme, SCORING_BYTES_PER_CELL[scheme])
                * scoring.cell_cost)
    budget = (held_bytes(scheme, 300, 3, 3) + scoring.feature_bytes(scheme, 300, 3)
              + 70 * per_cell)
    run = select_in_process(scheme, ds.values, ds.label_matrix, 3, 3, ds.exponents,
                            memory_budget=budget, score=score_name)
    assert run.plan["tile_rows"] == 60 and run.plan["block_columns"] == 1  # 5 tiles, <= 70
    assert run.indices.tolist() == expected(ds, score_name, 3)


def test_gini_scores_blocks_of_whole_columns_and_never_tiles(scheme: str) -> None:
    """The best split needs each column sorted whole: a budget of two columns cuts the job into
    blocks of two, and a budget below one column is refused, where other scores would tile."""
    from mpcnet.featsel.layout import layout

    ds = _synthetic(300, 6, 3, seed=34)
    gini = score("gini")
    column = 300 * SCORING_BYTES_PER_CELL[scheme] * gini.cell_cost
    per_feature = gini.feature_bytes(scheme, 300, 3)
    budget = held_bytes(scheme, 300, 3, 3) + 2 * (column + per_feature)
    run = select_in_process(scheme, ds.values, ds.label_matrix, 3, 3, ds.exponents,
                            memory_budget=budget, score="gini")
    assert run.plan["tile_rows"] == 300 and run.plan["block_columns"] == 2
    assert run.indices.tolist() == expected(ds, "gini", 3)
    small = held_bytes(scheme, 300, 3, 3) + per_feature + column - 1
    with pytest.raises(InputError, match="sorts whole columns"):
        layout(scheme, 300, 6, 3, 3, small, gini.cell_cost, per_feature, True)


@pytest.mark.parametrize("scheme", ["active3", "active4"])
def test_gini_tournament_checkpointing_in_pieces_in_several_blocks(
        scheme: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block of more than ``gini.PIECE`` cells checkpoints inside its tournament, which must
    then not run inside ``RoundEngine.together`` (a review found active3 stopping there when a
    memory budget of 3 GiB gave SpeedDating blocks of 41 columns)."""
    from mpcnet.featsel import gini

    monkeypatch.setattr(gini, "PIECE", 16)
    ds = _synthetic(60, 6, 3, seed=35)
    g = score("gini")
    column = 60 * SCORING_BYTES_PER_CELL[scheme] * g.cell_cost
    budget = held_bytes(scheme, 60, 3, 3) + 2 * (column + g.feature_bytes(scheme, 60, 3))
    run = select_in_process(scheme, ds.values, ds.label_matrix, 3, 3, ds.exponents,
                            memory_budget=budget, score="gini")
    assert run.plan["block_columns"] == 2
    assert run.indices.tolist() == expected(ds, "gini", 3)


def test_gini_tournament_checks_its_ands_before_the_next_block() -> None:
    """A block's tournament runs (m - 1) p comparisons, below its piece of m p sign tests, so
    it checks what is left at its end: else every block's ANDs stayed queued until the
    job's last check (SpeedDating under active3 peaked at 2.5 GB per server that way)."""
    from mpcnet.featsel import gini
    from mpcnet.featsel.msgini import limb_plan
    from mpcnet.net.local import run_local_sync
    from mpcnet.schemes import registry

    ds = _synthetic(60, 4, 2, seed=36)
    info = registry.get("active3")
    data = info.share(np.ascontiguousarray(ds.values).view(np.uint64))
    labels = info.share(np.asarray(ds.label_matrix, dtype=np.uint64))

    async def party(engine: RoundEngine) -> list[str]:
        s = await info.scheme.setup(engine)
        values, label_shares = await s.input(data[engine.party], labels[engine.party])
        stats = await gini.statistics(s, values, label_shares, None, 60)
        await s.checkpoint()
        await gini.of_statistics(s, stats, s.sum(label_shares, 0), 60, limb_plan(60, 2))
        left = [check for check in s.pending_checks() if check == "AND"]
        await s.verify()
        return left

    assert run_local_sync(info.n_parties, party) == [[], [], []]


def test_gini_in_digits_past_the_whole_tournament() -> None:
    """Past 10,808 rows the tournament's cross products pass 2^63 and its fractions are
    compared in digits; the selection still equals the reference."""
    from mpcnet.featsel.msgini import limb_plan

    assert limb_plan(10_808, 1).levels == 1 and limb_plan(10_809, 1).levels > 1
    ds = _synthetic(12_000, 4, 2, seed=12)
    run = select_in_process("passive3", ds.values, ds.label_matrix, 2, 2, ds.exponents,
                            score="gini", round_timeout=300)
    assert run.indices.tolist() == expected(ds, "gini", 2)


def test_chi2_switches_to_limbs_where_its_weights_pass_a_word(scheme: str) -> None:
    """Six classes over 3,000 rows: P m passes 2^64, so the weighted squares are limbs
    (``mpcnet.ops.bigint``), and the selection still equals the reference."""
    assert not chi2.limb_plan(3000, 5, 1).signed and chi2.limb_plan(3000, 6, 1).signed
    assert chi2.limb_plan(2**24 - 2, 8, 2**15) is not None  # every size is comparable
    ds = _synthetic(3000, 6, 6, seed=66)
    run = select_in_process(scheme, ds.values, ds.label_matrix, 6, 3, ds.exponents,
                            score="chi2")
    assert run.plan["levels"] > 4
    assert run.indices.tolist() == expected(ds, "chi2", 3)


def test_the_per_feature_step_of_many_classes_is_sized_by_the_memory_budget() -> None:
    """chi2 with 40 classes holds its 80 weighted squares per feature as limbs cut into bits:
    about 7 MB per feature under passive3 (measured in process: 6.4 GB for 300 features and 3
    parties in one block before this bound, 0.8 GB in 10 blocks after), so the layout cuts the
    features into blocks that fit, where MS-GINI keeps one."""
    from mpcnet.featsel.layout import layout

    budget = 512 << 20
    per_feature = score("chi2").feature_bytes("passive3", 300, 40)
    assert 4 << 20 < per_feature < 16 << 20
    assert layout("passive3", 300, 300, 40, 3, budget).columns == 300
    cut = layout("passive3", 300, 300, 40, 3, budget, 1, per_feature)
    assert 1 < -(-300 // cut.columns) and cut.columns * per_feature < budget


def test_mi_compares_the_largest_jobs_exactly() -> None:
    """The MI fraction fits whole for small jobs and in limbs for the largest row count with
    the widest tie range a network can need."""
    assert mi.limb_plan(8378, 2, 1).levels == 1
    big = mi.limb_plan(2**24 - 1, 2, 2**20)
    assert big is not None and big.fits() and big.levels > 1


def test_every_honest_gini_key_lies_in_the_sorts_range() -> None:
    """The sort's key x 2^b + r (b the bits of m - 1) must stay below 2^62 for every value
    an honest client encodes and every row count, or honest jobs would be refused."""
    from mpcnet.fixedpoint import MAX_ROWS, VALUE_BITS
    from mpcnet.ops.wordsort import KEY_BOUND

    assert ((2**VALUE_BITS - 1) << (MAX_ROWS - 1).bit_length()) + MAX_ROWS - 1 < KEY_BOUND


@pytest.mark.parametrize("bad", [2**56, -(2**56) - 1])
def test_gini_refuses_values_no_honest_client_encodes(scheme: str, bad: int) -> None:
    """A dishonest owner's value whose key x 2^6 + r (40 rows) leaves [-2^62, 2^62) could
    make the opened comparisons a cycle: the job stops before any comparison. Values at the
    edges of the encoded range, which an honest client can send, are sorted exactly."""
    ds = _synthetic(40, 4, 2, seed=4)
    values = ds.values.copy()
    values[:, 2] = np.where(np.arange(40) % 2 == 0, -(2**38 - 1), 2**38 - 1)
    run = select_in_process(scheme, values, ds.label_matrix, 2, 2, ds.exponents, score="gini")
    assert run.indices.tolist() == expected(
        EncodedDataset(ds.columns, values, ds.exponents, ds.classes, ds.codes), "gini", 2)
    values[7, 1] = bad
    with pytest.raises(InputError, match="1 of the 160 values to sort lie outside"):
        select_in_process(scheme, values, ds.label_matrix, 2, 2, ds.exponents, score="gini")
