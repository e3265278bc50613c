"""Tests of mpcnet.plain: exact MS-GINI, chi2 and MI, the other scores, and the top-k selection."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpcnet.dataset import BUNDLED, class_codes, read_bundled
from mpcnet.encoded import encode_table
from mpcnet.fixedpoint import auto_exponents, encode
from mpcnet.plain import (
    gini_best_split,
    gini_fraction,
    msgini_fraction,
    msgini_scores,
    mutual_information,
    pearson,
    reduce,
    selection_matrix,
    topk_fraction,
    topk_scores,
)
from mpcnet.plain.log2 import LOG_ERROR, LOG_FRACTION_BITS
from mpcnet.plain.scores import (
    chi2_fraction,
    chi2_scores,
    mi_fraction,
    mi_offset,
    mi_scores,
    pcc_fraction,
    pcc_scores,
)

EXPECTED = Path(__file__).resolve().parent.parent / "data" / "expected_msgini.json"

# Toy data set, m = 6 rows, n = 3 classes (labels 0,0,1,1,2,2), four features:
#  f0 = 1..6:        sum 21, 6x > 21 -> rows 4,5,6: b=3, a=3, B=[0,1,2], A=[2,1,0],
#                    A.A = B.B = 5, Q = 3*5 + 3*5 = 30, D = 9, G = 6 - 30/9 = 8/3
#                    (check: each side 3 * (1 - 5/9) = 4/3).
#  f1 = 5,0,0,0,0,1: sum 6, 6x > 6 -> row 1 only: b=1, a=5, B=[1,0,0], A=[1,2,2],
#                    Q = 1*9 + 5*1 = 14, D = 5, G = 16/5 (left 5 * (1 - 9/25), right 0).
#  f2 = constant 7:  no row above the mean: b=0 -> b1=1, a=6, A=[2,2,2], B=0,
#                    Q = 12, D = 6, G = 4 (= 6 * (1 - 12/36)).
#  f3 = -3,-1,0,0,2,2: sum 0 -> rows 5,6: b=2, a=4, B=[0,0,2], A=[2,2,0],
#                    Q = 2*8 + 4*4 = 32, D = 8, G = 2 (left 4 * (1 - 8/16), right 0).
TOY_X = np.array(
    [[1, 5, 7, -3], [2, 0, 7, -1], [3, 0, 7, 0], [4, 0, 7, 0], [5, 0, 7, 2], [6, 1, 7, 2]],
    dtype=np.int64,
)
TOY_Y = np.array([0, 0, 1, 1, 2, 2])


def test_msgini_toy_by_hand() -> None:
    Q, D = msgini_fraction(TOY_X, TOY_Y, 3)
    assert Q == [30, 14, 12, 32] and D == [9, 5, 6, 8]
    assert all(type(q) is int and type(d) is int for q, d in zip(Q, D, strict=True))
    G = msgini_scores(TOY_X, TOY_Y, 3)
    assert G.tolist() == pytest.approx([8 / 3, 16 / 5, 4.0, 2.0], abs=0)
    assert topk_fraction(Q, D, 3) == [3, 0, 1]


def test_split_is_strictly_above_the_mean() -> None:
    X = np.array([[1], [2], [3]], dtype=np.int64)  # 2 equals the mean: '<=' side
    Q, D = msgini_fraction(X, np.array([0, 1, 1]), 2)
    # a = 2 (A = [1, 1]), b = 1 (B = [0, 1]): Q = 1*2 + 2*1 = 4, D = 2
    assert (Q, D) == ([4], [2])


def test_constant_feature_has_empty_upper_side() -> None:
    X = np.zeros((5, 1), dtype=np.int64)
    Q, D = msgini_fraction(X, np.array([0, 1, 1, 0, 1]), 2)
    assert (Q, D) == ([2 * 2 + 3 * 3], [5])
    assert msgini_scores(X, np.array([0, 1, 1, 0, 1]), 2)[0] == pytest.approx(5 - 13 / 5)


def test_msgini_matches_paper_formula_on_random_data() -> None:
    rng = np.random.default_rng(1)
    X = rng.integers(-50, 50, size=(40, 9))
    y = rng.integers(0, 3, size=40)
    Q, D = msgini_fraction(X, y, 3)
    for j in range(X.shape[1]):
        upper = X[:, j] * 40 > X[:, j].sum()
        g = Fraction(0)
        for side in (upper, ~upper):
            size = int(side.sum())
            if size:
                g += size - Fraction(sum(int((y[side] == c).sum()) ** 2 for c in range(3)), size)
        assert 40 - Fraction(Q[j], D[j]) == g


def test_large_values_use_exact_python_integers() -> None:
    small = TOY_X[:, [0, 3]]
    big = small * 2**60  # m * x overflows int64; the scale does not change the split
    assert msgini_fraction(big, TOY_Y, 3) == msgini_fraction(small, TOY_Y, 3)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(0, 20))
def test_positive_column_scale_does_not_change_msgini(seed: int, shift: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.integers(-1000, 1000, size=(12, 3))
    y = rng.integers(0, 2, size=12)
    assert msgini_fraction(X << shift, y, 2) == msgini_fraction(X, y, 2)


def test_msgini_refuses_floats_and_bad_codes() -> None:
    with pytest.raises(ValueError, match="integers"):
        msgini_fraction(TOY_X.astype(float), TOY_Y, 3)
    with pytest.raises(ValueError, match="0..1"):
        msgini_fraction(TOY_X, TOY_Y, 2)


@pytest.mark.parametrize("shift", [0, -7, 7], ids=["31bit", "24bit", "38bit"])
@pytest.mark.parametrize("name", ["lsvt", "cogload"])
def test_selection_equals_independent_reference(name: str, shift: int) -> None:
    """Auto-scaled columns (and 24- or 38-bit ones) give exactly the reference selection."""
    expected = json.loads(EXPECTED.read_text())[name]
    table = read_bundled(name)
    assert table.labels is not None
    classes, codes = class_codes(table.labels)
    exps = auto_exponents(table.values, table.columns) + shift
    X = encode(table.values, exps, table.columns)
    Q, D = msgini_fraction(X, codes, len(classes))
    chosen = topk_fraction(Q, D, BUNDLED[name].k)
    assert chosen == expected["selected_indices"]
    assert [table.columns[j] for j in chosen] == expected["selected_in_order"]


# ---- other scores ---------------------------------------------------------------------------


def _gini_brute(x: np.ndarray, y: np.ndarray, n: int) -> float:
    """Best-threshold weighted Gini impurity by trying every distinct threshold."""
    m = len(x)

    def impurity(part: np.ndarray) -> float:
        if not len(part):
            return 0.0
        return len(part) / m * (1 - sum((np.mean(part == c)) ** 2 for c in range(n)))

    best = impurity(y)
    for t in np.unique(x)[:-1]:
        best = min(best, impurity(y[x <= t]) + impurity(y[x > t]))
    return best


def test_gini_best_split() -> None:
    X = np.array([[1.0, 3.0, 5.0], [2.0, 1.0, 5.0], [3.0, 4.0, 5.0], [4.0, 2.0, 5.0]])
    y = np.array([0, 0, 1, 1])
    # column 1 sorted: classes 0,1,0,1; best cut after the first row: 3/4 * (1 - 5/9) = 1/3
    assert gini_best_split(X, y, 2).tolist() == pytest.approx([0.0, 1 / 3, 0.5])
    rng = np.random.default_rng(2)
    X = rng.integers(0, 6, size=(30, 5)).astype(float)
    y = rng.integers(0, 3, size=30)
    brute = [_gini_brute(X[:, j], y, 3) for j in range(5)]
    assert gini_best_split(X, y, 3) == pytest.approx(brute)


def test_gini_fraction_toy_by_hand() -> None:
    """The toy set's best splits: f0 and f3 after two rows (or four: the same 32/8), f1 after
    the five values below 5 (the split inside the four zeros is none), f2 none at all (the
    whole set, 12/6); G = m - Q/D."""
    Q, D = gini_fraction(TOY_X, TOY_Y, 3)
    assert [Fraction(q, d) for q, d in zip(Q, D, strict=True)] == [4, Fraction(14, 5), 2, 4]
    assert gini_best_split(TOY_X, TOY_Y, 3).tolist() == pytest.approx(
        [(6 - 4) / 6, (6 - 2.8) / 6, (6 - 2) / 6, (6 - 4) / 6])
    assert topk_fraction(Q, D, 3) == [0, 3, 1]  # the tie of f0 and f3 to the lower index


def test_pearson() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 4))
    X[:, 3] = 1.5
    y = rng.integers(0, 2, size=50)
    r = pearson(X, y)
    for j in range(3):
        assert r[j] == pytest.approx(abs(np.corrcoef(X[:, j], y)[0, 1]))
    assert r[3] == 0.0


def test_mutual_information() -> None:
    y = np.array([0, 1] * 10)
    X = np.stack([y * 3.0, np.full(20, 2.0), np.arange(20.0)], axis=1)
    mi = mutual_information(X, y, bins=10)
    assert mi[0] == pytest.approx(math.log(2))
    assert mi[1] == 0.0
    # column 2: 10 bins of 2 rows, one of each class: independent of the label
    assert mi[2] == pytest.approx(0.0, abs=1e-12)


def _mean_split_table(X: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """p x 2 x n counts of (x above its mean, class), straight from the definition."""
    above = X * X.shape[0] > X.sum(axis=0)  # theta < x, exactly
    return np.stack([[[np.sum((above[:, j] == side) & (y == c)) for c in range(n)]
                      for side in (False, True)] for j in range(X.shape[1])]).astype(float)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_chi2_is_the_chi_square_statistic_of_the_mean_split(n: int) -> None:
    rng = np.random.default_rng(n)
    y = rng.integers(0, n, 120)
    y[y == n - 1] = 0 if n == 4 else y[y == n - 1]  # with 4 classes, one never occurs
    X = rng.integers(-9, 9, (120, 8)) + y[:, None] * rng.integers(0, 4, 8)
    X[:, 0] = 3  # constant: one side empty, chi2 = 0
    table = _mean_split_table(X, y, n)
    expected = table.sum(axis=2, keepdims=True) * table.sum(axis=1, keepdims=True) / 120
    textbook = np.where(expected > 0, (table - expected) ** 2 / np.where(expected > 0,
                                                                      expected, 1), 0)
    np.testing.assert_allclose(chi2_scores(X, y, n), textbook.sum(axis=(1, 2)), atol=1e-9)
    assert chi2_scores(X, y, n)[0] == 0
    # the fraction ranks as the statistic does (ties by index)
    q, d = chi2_fraction(X, y, n)
    assert topk_fraction(q, d, 7) == topk_scores(np.round(chi2_scores(X, y, n), 9), 7, True)


@pytest.mark.parametrize("n", [2, 3])
def test_mi_fraction_is_the_mutual_information_within_its_bound(n: int) -> None:
    rng = np.random.default_rng(10 + n)
    m = 500
    y = rng.integers(0, n, m)
    X = rng.integers(-50, 50, (m, 10)) + y[:, None] * rng.integers(0, 20, 10)
    table = _mean_split_table(X, y, n) / m
    side, cls = table.sum(axis=2, keepdims=True), table.sum(axis=1, keepdims=True)
    ratio = np.divide(table, side * cls, out=np.ones_like(table), where=table > 0)
    exact = (table * np.log2(ratio)).sum(axis=(1, 2))
    np.testing.assert_allclose(mi_scores(X, y, n), exact, atol=1e-12)
    q, d = mi_fraction(X, y, n)
    assert d == [1] * 10
    sizes = np.bincount(y, minlength=n) / m
    entropy = -(sizes * np.log2(sizes)).sum()
    fixed = (np.array(q) - mi_offset(m)) / (m * 2.0**LOG_FRACTION_BITS) + entropy
    assert np.abs(fixed - exact).max() <= 2 * LOG_ERROR  # |F error| <= 2 m LOG_ERROR


@pytest.mark.parametrize("name", [*sorted(BUNDLED), "wine"])
def test_mi_fraction_ranks_the_bundled_features_as_their_true_mi(name: str) -> None:
    """The logarithm's error (4 LOG_ERROR bits at most between two features) reorders none of
    the bundled datasets' features, nor those of scikit-learn's 3-class wine: the whole order
    equals the real-valued MI's."""
    if name == "wine":
        datasets = pytest.importorskip("sklearn.datasets")
        wine = datasets.load_wine()
        X, codes, n = encode(wine.data, auto_exponents(wine.data), None), wine.target, 3
    else:
        ds = encode_table(read_bundled(name))
        X, codes, n = ds.values, ds.codes, ds.n_classes
    q, d = mi_fraction(X, codes, n)
    p = X.shape[1]
    exact = np.round(mi_scores(X, codes, n), 12)
    assert topk_fraction(q, d, p - 1) == topk_scores(exact, p - 1, largest=True)


def test_pcc_is_the_correlation_for_two_classes_and_the_correlation_ratio_for_more() -> None:
    rng = np.random.default_rng(21)
    X = rng.integers(-(2**37), 2**37, (200, 6))
    y = rng.integers(0, 3, 200)
    X[:, 1] += y * 2**35
    X[:, 2] = 9  # constant: score 0
    binary = (y == 2).astype(int)
    np.testing.assert_allclose(pcc_scores(X, binary, 2), pearson(X.astype(float), binary),
                               atol=1e-12)
    xf = X.astype(float)
    total = ((xf - xf.mean(axis=0)) ** 2).sum(axis=0)
    between = sum((y == c).sum() * (xf[y == c].mean(axis=0) - xf.mean(axis=0)) ** 2
                  for c in range(3))
    eta = np.sqrt(np.divide(between, total, out=np.zeros(6), where=total > 0))
    np.testing.assert_allclose(pcc_scores(X, y, 3), eta, atol=1e-9)
    renamed = (y + 1) % 3  # unlike a correlation with the class code, eta ignores the order
    assert pcc_fraction(X, renamed, 3) == pcc_fraction(X, y, 3)


# ---- selection ------------------------------------------------------------------------------


def test_topk_fraction_ties_go_to_lower_index() -> None:
    # 2/1 == 4/2 == 6/3: one exact tie of three features, then 1/1
    assert topk_fraction([1, 2, 4, 6], [1, 1, 2, 3], 3) == [1, 2, 3]
    assert topk_fraction([6, 4, 2, 1], [3, 2, 1, 1], 2) == [0, 1]
    with pytest.raises(ValueError, match="k = 5"):
        topk_fraction([1, 2], [1, 1], 5)
    with pytest.raises(ValueError):
        topk_fraction([1, 2], [1, 0], 1)


def test_topk_scores_is_stable() -> None:
    scores = np.array([0.5, 0.2, 0.5, 0.9, 0.2])
    assert topk_scores(scores, 3, largest=True) == [3, 0, 2]
    assert topk_scores(scores, 3, largest=False) == [1, 4, 0]
    with pytest.raises(ValueError):
        topk_scores(scores, 0, largest=True)


def test_selection_matrix_and_reduce() -> None:
    indices = [3, 0, 1]
    T = selection_matrix(indices, 4)
    assert T.dtype == np.uint64 and T.shape == (4, 3)
    assert T.sum(axis=0).tolist() == [1, 1, 1] and T[3, 0] == T[0, 1] == T[1, 2] == 1
    X = TOY_X.astype(np.uint64)
    assert np.array_equal(X @ T, reduce(X, indices))
    assert reduce(TOY_X, indices).tolist() == TOY_X[:, indices].tolist()
