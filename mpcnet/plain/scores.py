"""Plaintext reference layer: feature scores (MS-GINI exactly, and GI, PCC, MI for comparison).

MS-GINI follows pi_MS-GINI (Li, Dowsley, De Cock 2021, Protocol 2) on the fixed-point integers
the servers hold: the mean split theta < f_i is tested as m * f_i > sum(f) (docs/design.md,
section 4), so the flags and the counts a, b, A, B are exact. The score without the 1/m factor,
G = a - A.A/a + b - B.B/b = m - Q/D with Q = b*A.A + a*B.B and D = a*b, is returned as the
integer pair (Q, D); lower G means higher Q/D. An empty '>' side (b = 0, a constant feature)
contributes 0, which b1 = max(b, 1) gives; the '<=' side always holds the smallest value.

The other private scores have exact references too (``SCORE_FRACTIONS``): chi-square and MI of
the same mean split, the squared correlation, and GI, the best-split Gini impurity. GI, PCC and
MI as in the paper's Table I (any threshold, |r| with the class code, equal-width bins) are also
given in float64 for the accuracy experiment.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from mpcnet.plain.log2 import COUNT_BITS, LOG_FRACTION_BITS, t_log2_t


def _check(X: np.ndarray, codes: np.ndarray, n_classes: int) -> np.ndarray:
    """Validate shapes and class codes; return codes as int64."""
    c = np.asarray(codes)
    if X.ndim != 2 or c.shape != (X.shape[0],):
        raise ValueError(f"need an m x p matrix and m class codes, got {X.shape} and {c.shape}")
    if not np.issubdtype(c.dtype, np.integer):
        raise ValueError(f"class codes must be integers, got {c.dtype}")
    if c.size and (c.min() < 0 or c.max() >= n_classes):
        raise ValueError(f"class codes must lie in 0..{n_classes - 1}")
    return c.astype(np.int64)


def _split_flags(X: np.ndarray) -> np.ndarray:
    """Exact m x p flags m * x_ij > sum_i x_ij: int64 if it cannot overflow, else Python ints."""
    m = X.shape[0]
    peak = max(int(X.max()), -int(X.min())) if X.size else 0
    if 2 * m * peak < 2**63:  # bounds both |m * x| and |sum x|
        return m * X > X.sum(axis=0)
    big = X.astype(object)
    return np.asarray(m * big > big.sum(axis=0), dtype=bool)


def mean_split_counts(X: np.ndarray, codes: np.ndarray, n_classes: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The exact counts of the mean split of every column of the integer matrix X (Protocol 2,
    lines 5-12): a and b (p: rows at or below / above the mean) and A and B (p x n: the same per
    class), int64."""
    X = np.asarray(X)
    if not np.issubdtype(X.dtype, np.integer):
        raise ValueError(f"mean-split scores need fixed-point integers, got {X.dtype}")
    c = _check(X, codes, n_classes)
    flags = _split_flags(X).astype(np.int64)
    onehot = (c[:, None] == np.arange(n_classes)[None, :]).astype(np.int64)
    B = flags.T @ onehot  # p x n: |S_>theta and L_c|  (Protocol 2, lines 7-8)
    A = onehot.sum(axis=0)[None, :] - B  # |S_<=theta and L_c|  (line 9)
    b = flags.sum(axis=0)  # line 5
    return X.shape[0] - b, b, A, B  # line 12


def msgini_fraction(
    X: np.ndarray, codes: np.ndarray, n_classes: int
) -> tuple[list[int], list[int]]:
    """Exact MS-GINI of every column of the integer matrix X as (Q, D): G = m - Q/D."""
    a, b, A, B = mean_split_counts(X, codes, n_classes)
    return _weighted_fraction(a, b, A, B, [1] * n_classes)


def _weighted_fraction(a: np.ndarray, b: np.ndarray, A: np.ndarray, B: np.ndarray,
                       weights: list[int]) -> tuple[list[int], list[int]]:
    """Q = b1 sum_c w_c A_c^2 + a sum_c w_c B_c^2 and D = a b1 per column, b1 = max(b, 1), in
    Python integers (MS-GINI: w = 1; chi-square: w_c = prod of the other classes' sizes)."""
    Q, D = [], []
    for j in range(a.size):
        b1 = max(int(b[j]), 1)
        x = sum(w * int(v) ** 2 for w, v in zip(weights, A[j], strict=True))
        y = sum(w * int(v) ** 2 for w, v in zip(weights, B[j], strict=True))
        Q.append(b1 * x + int(a[j]) * y)
        D.append(int(a[j]) * b1)
    return Q, D


def chi2_fraction(
    X: np.ndarray, codes: np.ndarray, n_classes: int
) -> tuple[list[int], list[int]]:
    """The chi-square statistic of every column split at its mean against the class, as the
    exact fraction Q/D of a strictly increasing function of it (higher is better).

    For the 2 x n table of the split (rows a, b; class sizes n_c; cells A_c, B_c),
    chi2 = m (sum_c A_c^2 / (a n_c) + sum_c B_c^2 / (b n_c) - 1). Times P = prod_c n_c, which is
    the same for every column: Q/D = (b sum_c w_c A_c^2 + a sum_c w_c B_c^2) / (a b) with
    w_c = P / n_c, so chi2 = m (Q / (D P) - 1). An empty side (b = 0) and an absent class
    (n_c = 0, then A_c = B_c = 0) contribute nothing: b and n_c are replaced by 1 there.
    """
    a, b, A, B = mean_split_counts(X, codes, n_classes)
    sizes, total = class_sizes(codes, n_classes)
    return _weighted_fraction(a, b, A, B, [total // n for n in sizes])


def class_sizes(codes: np.ndarray, n_classes: int) -> tuple[list[int], int]:
    """Every class's size, an absent class counted as 1 (as the servers do), and their
    product P, common to every feature."""
    sizes = [max(int(v), 1) for v in np.bincount(np.asarray(codes), minlength=n_classes)]
    return sizes, int(np.prod(sizes, dtype=object))


def chi2_scores(X: np.ndarray, codes: np.ndarray, n_classes: int) -> np.ndarray:
    """The chi-square statistic of the mean split of every column (float64, for display)."""
    Q, D = chi2_fraction(X, codes, n_classes)
    m, total = np.asarray(X).shape[0], class_sizes(codes, n_classes)[1]
    return np.array([float(m * (Fraction(q, d * total) - 1)) for q, d in zip(Q, D, strict=True)])


def mi_fraction(
    X: np.ndarray, codes: np.ndarray, n_classes: int
) -> tuple[list[int], list[int]]:
    """The mutual information of every column split at its mean with the class, as the servers
    compute it: Q = F + ``mi_offset(m)`` over D = 1 (higher is better), with
    F = sum_{cells} t log2 t - sum_{sides} t log2 t in the fixed point of ``mpcnet.plain.log2``.

    MI = H(class) + F / (m 2^31) up to the logarithm's error: at most 2 m LOG_ERROR 2^31 in F
    (the cells and the sides each count m rows), so two columns whose true MI differ by more
    than 4 LOG_ERROR bits are ranked as their true MI; equal tables give equal F.
    """
    a, b, A, B = mean_split_counts(X, codes, n_classes)
    cells = t_log2_t(A).sum(axis=1) + t_log2_t(B).sum(axis=1)
    sides = t_log2_t(a) + t_log2_t(b)
    offset = mi_offset(np.asarray(X).shape[0])
    return [int(v) + offset for v in cells - sides], [1] * a.size


def mi_offset(m: int) -> int:
    """The public offset that makes Q = F + offset positive: the cells' terms are nonnegative
    and each side's is below (COUNT_BITS + LOG_ERROR) t 2^31, so -F < (COUNT_BITS + 1) m 2^31."""
    return (COUNT_BITS + 1) * m << LOG_FRACTION_BITS


def mi_scores(X: np.ndarray, codes: np.ndarray, n_classes: int) -> np.ndarray:
    """The exact mutual information (bits, float64) of the mean split of every column with the
    class."""
    a, b, A, B = mean_split_counts(X, codes, n_classes)
    m = np.asarray(X).shape[0]
    joint = np.stack([A, B], axis=1) / m  # p x 2 x n
    side = joint.sum(axis=2, keepdims=True)
    cls = joint.sum(axis=1, keepdims=True)
    ratio = np.divide(joint, side * cls, out=np.ones_like(joint), where=joint > 0)
    return (joint * np.log2(ratio)).sum(axis=(1, 2))


def pcc_fraction(
    X: np.ndarray, codes: np.ndarray, n_classes: int
) -> tuple[list[int], list[int]]:
    """The squared correlation of every column with the class as the exact fraction U/V
    (higher is better): r^2 = U / (P V) for two classes, the correlation ratio
    eta^2 = SS_between / SS_total = U / (P V) for n, with V = m sum x^2 - S^2,
    U = m sum_c (P / n_c) S_c^2 - P S^2, P = prod_c n_c (``mpcnet.featsel.pcc``). An absent
    class counts as size 1; a constant column (V = 0 = U) gets V = 1, score 0."""
    X = np.asarray(X)
    if not np.issubdtype(X.dtype, np.integer):
        raise ValueError(f"the exact correlation needs fixed-point integers, got {X.dtype}")
    c = _check(X, codes, n_classes)
    m = X.shape[0]
    big = X.astype(object)
    sizes, total = class_sizes(c, n_classes)
    U, V = [], []
    for j in range(X.shape[1]):
        col = big[:, j]
        s = int(col.sum())
        v = m * int((col * col).sum()) - s * s
        by_class = [int(col[c == k].sum()) for k in range(n_classes)]
        U.append(m * sum(total // n * sc * sc for n, sc in zip(sizes, by_class, strict=True))
                 - total * s * s)
        V.append(v if v else 1)
    return U, V


def pcc_scores(X: np.ndarray, codes: np.ndarray, n_classes: int) -> np.ndarray:
    """|r| (two classes) or eta (n classes) of every column, float64, from ``pcc_fraction``."""
    U, V = pcc_fraction(X, codes, n_classes)
    total = class_sizes(codes, n_classes)[1]
    return np.array([math.sqrt(Fraction(u, v * total)) for u, v in zip(U, V, strict=True)])


def msgini_scores(X: np.ndarray, codes: np.ndarray, n_classes: int) -> np.ndarray:
    """MS-GINI G = m - Q/D (Protocol 2 without 1/m) as float64, for display; lower is better."""
    Q, D = msgini_fraction(X, codes, n_classes)
    m = np.asarray(X).shape[0]
    return np.array([float(m - Fraction(q, d)) for q, d in zip(Q, D, strict=True)])


def gini_fraction(
    X: np.ndarray, codes: np.ndarray, n_classes: int
) -> tuple[list[int], list[int]]:
    """The Gini impurity of every column's best split x <= t (CART; GI in Table I) as the exact
    fraction Q/D of MS-GINI's form, higher is better: impurity = (m - Q/D) / m.

    Candidate i = 1..m puts the i smallest values on the left (a = i, b = m - i); with the class
    counts A and B of the sides, Q_i = b' A.A + a B.B and D_i = a b', b' = max(b, 1)
    (``mpcnet.featsel.gini``). A split between equal values is none (Q_i = 0); i = m (no split)
    is always a candidate, so a constant column scores the impurity of the whole set. Returns
    the best candidate's (Q, D) per column (any of equal ones: they are the same score).
    """
    X = np.asarray(X)
    c = _check(X, codes, n_classes)
    m, p = X.shape
    order = np.argsort(X, axis=0, kind="stable")
    sorted_x = np.take_along_axis(X, order, axis=0)
    onehot = (c[:, None] == np.arange(n_classes)[None, :]).astype(np.int64)
    left = np.cumsum(onehot[order], axis=0)  # (m, p, n): class counts of the i + 1 smallest
    x = (left * left).sum(axis=2)
    right = onehot.sum(axis=0) - left
    y = (right * right).sum(axis=2)
    a = np.arange(1, m + 1, dtype=np.int64)[:, None]
    b1 = np.maximum(m - a, 1)
    if (m + 1) ** 3 >= 2**62:  # Q_i would pass int64
        x, y, a, b1 = (v.astype(object) for v in (x, y, a, b1))
    q = b1 * x + a * y
    valid = np.ones((m, p), dtype=bool)
    valid[:-1] = sorted_x[:-1] < sorted_x[1:]
    q = np.where(valid, q, 0)
    d = np.broadcast_to(a * b1, (m, p))
    near = q.astype(np.float64) / d.astype(np.float64)
    Q, D = [], []
    for j in range(p):  # the exact best among those the float ratio cannot tell apart
        top = np.flatnonzero(near[:, j] >= near[:, j].max() * (1 - 1e-9))
        best = max(top, key=lambda i: Fraction(int(q[i, j]), int(d[i, j])))
        Q.append(int(q[best, j]))
        D.append(int(d[best, j]))
    return Q, D


def gini_best_split(X: np.ndarray, codes: np.ndarray, n_classes: int) -> np.ndarray:
    """Gini impurity at each column's best threshold (``gini_fraction``) as float64; lower is
    better."""
    m = np.asarray(X).shape[0]
    Q, D = gini_fraction(X, codes, n_classes)
    return np.array([float((m - Fraction(q, d)) / m) for q, d in zip(Q, D, strict=True)])


SCORE_FRACTIONS = {"ms-gini": msgini_fraction, "chi2": chi2_fraction, "mi": mi_fraction,
                   "pcc": pcc_fraction, "gini": gini_fraction}
"""The private scores' exact references: name -> (X, codes, n) -> (Q, D), higher Q/D better."""


def score_fraction(score: str, X: np.ndarray, codes: np.ndarray, n_classes: int
                   ) -> tuple[list[int], list[int]]:
    """The exact reference fractions of the private score ``score`` (``SCORE_FRACTIONS``)."""
    if score not in SCORE_FRACTIONS:
        raise ValueError(f"unknown score {score!r}; known: {', '.join(SCORE_FRACTIONS)}")
    return SCORE_FRACTIONS[score](X, codes, n_classes)


def pearson(X: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """|Pearson correlation| of each column with the class code (PCC in Table I); higher is better.

    A constant column scores 0.
    """
    X = np.asarray(X, dtype=np.float64)
    c = _check(X, codes, int(np.max(codes, initial=0)) + 1)
    xc = X - X.mean(axis=0)
    yc = c - c.mean()
    den = np.sqrt((xc * xc).sum(axis=0) * float(yc @ yc))
    num = np.abs(xc.T @ yc)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def mutual_information(X: np.ndarray, codes: np.ndarray, bins: int = 10) -> np.ndarray:
    """Mutual information (nats) between each column, cut in `bins` equal-width bins, and the
    label (MI in Table I); higher is better. A constant column falls in one bin and scores 0."""
    X = np.asarray(X, dtype=np.float64)
    n = int(np.max(codes, initial=0)) + 1
    c = _check(X, codes, n)
    m, p = X.shape
    lo = X.min(axis=0)
    width = X.max(axis=0) - lo
    scaled = (X - lo) / np.where(width > 0, width, 1.0) * bins
    cell = np.clip(np.floor(scaled).astype(np.int64), 0, bins - 1)
    flat = (np.arange(p)[None, :] * bins + cell) * n + c[:, None]
    joint = np.bincount(flat.ravel(), minlength=p * bins * n).reshape(p, bins, n) / m
    p_bin = joint.sum(axis=2, keepdims=True)
    p_cls = joint.sum(axis=1, keepdims=True)
    ratio = np.divide(joint, p_bin * p_cls, out=np.ones_like(joint), where=joint > 0)
    return (joint * np.log(ratio)).sum(axis=(1, 2))
