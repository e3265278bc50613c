"""Plaintext reference layer: top-k selection, the selection matrix T and the reduced data D'.

Follows pi_FILTER-FS (Li, Dowsley, De Cock 2021, Protocol 1): the k best features in rank order
form the p x k 0/1 matrix T with `T[j][r] = 1` iff feature j has rank r, and D' = D x T. Ties are
broken by the lower feature index (docs/design.md, section 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cmp_to_key

import numpy as np


def _check_k(k: int, p: int) -> None:
    """Refuse a k outside 1..p (as the private protocol does; k = p ranks every feature)."""
    if not 1 <= k <= p:
        raise ValueError(f"k = {k} is out of range: choose 1 <= k <= p = {p}")


def topk_fraction(Q: Sequence[int], D: Sequence[int], k: int) -> list[int]:
    """Indices of the k features with the highest Q/D (lowest MS-GINI), best first.

    Compares Q_i/D_i with Q_j/D_j exactly by cross-multiplying, Q_i * D_j against Q_j * D_i,
    with Python integers; equal ratios go to the lower index.
    """
    if len(Q) != len(D) or any(d <= 0 for d in D):
        raise ValueError("need one positive denominator D per numerator Q")
    _check_k(k, len(Q))

    def better(i: int, j: int) -> int:
        left, right = Q[i] * D[j], Q[j] * D[i]
        if left != right:
            return -1 if left > right else 1
        return -1 if i < j else (1 if i > j else 0)

    return sorted(range(len(Q)), key=cmp_to_key(better))[:k]


def topk_scores(scores: np.ndarray, k: int, largest: bool) -> list[int]:
    """Indices of the k best float scores (highest if `largest`, else lowest), best first;
    ties go to the lower index."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or np.isnan(s).any():
        raise ValueError("scores must be a vector without NaN")
    _check_k(k, s.size)
    order = np.argsort(-s if largest else s, kind="stable")
    return [int(i) for i in order[:k]]


def selection_matrix(indices: Sequence[int], p: int) -> np.ndarray:
    """The p x k uint64 matrix T of Protocol 1 with T[indices[r], r] = 1."""
    T = np.zeros((p, len(indices)), dtype=np.uint64)
    T[list(indices), np.arange(len(indices))] = 1
    return T


def reduce(X: np.ndarray, indices: Sequence[int]) -> np.ndarray:
    """The reduced data D' = D x T: the selected columns of X in rank order."""
    return np.asarray(X)[:, list(indices)]
