"""Layer: train. A private choice of k among candidates (``select --k auto``), in MPC.

For candidates k_1 < ... < k_c, the selection is made once for k_c = max; its columns are in
rank order, so the reduced dataset of every candidate is a prefix of D'_(k_c) and nothing about
ranks is revealed. Then, with nothing opened but the winner:

1. the rows are split by a public permutation (``holdout_split``: SHA-256 of a fixed tag and
   the row index, the same for every job of m rows, reproducible by the plaintext reference):
   the first m - m // 4 rows of the permuted order fit, the last m // 4 are held out;
2. the columns of D'_(k_c) are standardised on the fitted rows (``standardise`` with
   ``fit_rows``: the held-out rows are standardised by the fitted rows' mean and scale);
3. c logistic regressions (``mpcnet.train.logreg``, the job's hyper-parameters) train as one:
   the weights are (k_c + 1) x c, column i trained on the first k_i columns and the intercept
   (``descend`` with a trained mask), so every epoch is the rounds of one training;
4. on the held-out rows, each model predicts as ``mpcnet.plain.logreg.Model.predict`` does
   (two classes: the second where its score is above 0; more: the class of the first largest
   score, by ``first_max`` per row), and n_i = the number of correct predictions is summed in
   MPC;
5. the winner is the candidate with the most correct held-out predictions, ties to the smaller
   k (``first_max``): for i < j one batch of sign tests b_ij = [n_i < n_j], then w_i =
   prod_(j < i) b_ji prod_(j > i) (1 - b_ij) (a tree of products) is 1 for the winner only, and
   only sum_i w_i k_i is opened.

Every truncation is the deterministic ``trunc_floor``, so the counts are exactly those of the
plaintext emulation ``mpcnet.train.reference`` and the private choice equals the plaintext one
(the stochastic rounding of ``trunc``, whose errors depend on fresh randomness, would let a
held-out row near the decision boundary flip, and with it a close choice).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from mpcnet.errors import InputError
from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET
from mpcnet.ops.compare import ltz
from mpcnet.ops.truncate import trunc_floor
from mpcnet.plain.logreg import DEFAULT_TRAINING, Training
from mpcnet.schemes.base import Scheme, Shared, join
from mpcnet.train.logreg import (
    PROB_BITS,
    check_training,
    descend,
    targets,
    training_layout,
)
from mpcnet.train.standardise import FEATURE_BITS, standardise

U64 = np.uint64
SPLIT_TAG = b"mpcnet k-choice split v1\n"
MAX_CANDIDATES = 16
MIN_HELD_OUT = 4


@dataclass(frozen=True)
class Split:
    """The public split of m rows: ``order`` permutes them, its first ``fit`` rows fit."""

    order: np.ndarray
    fit: int

    @property
    def held_out(self) -> int:
        return len(self.order) - self.fit


def holdout_split(m: int) -> Split:
    """The public split of m rows: rows ordered by SHA-256(SPLIT_TAG, index as 8 bytes), the
    last m // 4 of that order held out."""
    keys = [hashlib.sha256(SPLIT_TAG + i.to_bytes(8, "big")).digest() for i in range(m)]
    order = np.array(sorted(range(m), key=keys.__getitem__), dtype=np.int64)
    return Split(order, m - m // 4)


def check_candidates(candidates: tuple[int, ...], p: int, m: int) -> None:
    """Refuse candidates that are not 2 to MAX_CANDIDATES increasing k in 1..p-1, or too few
    rows to hold some out, naming the bound."""
    if not 2 <= len(candidates) <= MAX_CANDIDATES:
        raise InputError(f"--k auto needs 2 to {MAX_CANDIDATES} candidates, not "
                         f"{len(candidates)}")
    if list(candidates) != sorted(set(candidates)) or not 0 < candidates[0] \
            or candidates[-1] >= p:
        raise InputError(f"the candidates must increase, each from 1 to {p - 1} for {p} "
                         f"features, not {','.join(map(str, candidates))}")
    if m // 4 < MIN_HELD_OUT:
        raise InputError(f"--k auto holds out a quarter of the rows: it needs at least "
                         f"{4 * MIN_HELD_OUT} rows, not {m}")


def trained_mask(candidates: tuple[int, ...], vectors: int = 1) -> np.ndarray:
    """The (k_c + 1) x (c vectors) 0/1 array of the weights that train: candidate i's
    ``vectors`` columns (one per class against the rest; one for two classes) the first k_i
    rows and the intercept (the last row)."""
    width = candidates[-1] + 1
    mask = np.arange(width)[:, None] < np.array(candidates)[None, :]
    mask[-1] = True
    return np.repeat(mask, vectors, axis=1).astype(U64)


def first_max_factors(c: int) -> tuple[list[tuple[int, int]], np.ndarray]:
    """For the one-hot of the first maximum among c values: the pairs (i, j), i < j, whose
    sign tests b_t = [x_i < x_j] are made, and per value i the c - 1 factors of its product,
    as indices into [b, 1 - b] (c - 1 x c): 1 - b_t where i is the first of pair t (x_i >=
    x_j), b_t where it is the second (x_i > x_j)."""
    pairs = [(i, j) for i in range(c) for j in range(i + 1, c)]
    picks: list[list[int]] = [[] for _ in range(c)]
    for t, (i, j) in enumerate(pairs):
        picks[i].append(len(pairs) + t)
        picks[j].append(t)
    return pairs, np.array(picks, dtype=np.int64).T.reshape(c - 1, c)


async def first_max(s: Scheme, x: Shared) -> Shared:
    """Per row of x (r x c, signed values), the 0/1 one-hot of its largest value, ties to the
    lower index (``np.argmax``): one batch of c(c - 1)/2 sign tests, then per value the product
    of its c - 1 factors (``first_max_factors``) by a tree, ceil(log2(c - 1)) rounds."""
    r, c = x.shape
    pairs, picks = first_max_factors(c)
    below = await ltz(s, s.sub(x[:, [i for i, _ in pairs]], x[:, [j for _, j in pairs]]))
    level = join([below, s.add_public(s.neg(below), U64(1))], 1)[:, picks]  # r x (c-1) x c
    while level.shape[1] > 1:
        half = level.shape[1] // 2
        products = await s.mul(level[:, :half], level[:, half:2 * half])
        level = join([products, level[:, 2 * half:]], 1) if level.shape[1] % 2 else products
    return level.reshape(r, c)


async def choose_k(s: Scheme, reduced: Shared, labels: Shared, candidates: tuple[int, ...],
                   training: Training = DEFAULT_TRAINING,
                   memory_budget: int = DEFAULT_MEMORY_BUDGET) -> tuple[int, dict[str, str]]:
    """The chosen k (opened, the only value opened) from the m x k_c ``reduced`` D'_(k_c) in
    rank order and the one-hot labels (m x (n - 1)), and the job's figures (public)."""
    check_training(training)
    m, width = reduced.shape
    check_candidates(candidates, width + 1, m)
    if width != candidates[-1]:
        raise InputError(f"D' has {width} columns, the largest candidate is {candidates[-1]}")
    split = holdout_split(m)
    data, y = reduced[split.order], targets(s, labels[split.order])  # m x C, 0/1
    c, vectors = len(candidates), y.shape[1]
    cut = training_layout(s.name, split.fit, width, c * vectors, memory_budget)
    columns = await standardise(s, data, cut.tile_rows, split.fit, trunc_floor)
    ones = s.public(np.full((m, 1), 1 << FEATURE_BITS, dtype=U64))
    rows = join([columns.features, ones], 1)  # [X~ 1], m x (k_c + 1)
    fit, held = slice(0, split.fit), slice(split.fit, m)
    every = np.tile(np.arange(vectors), c)  # column i C + j: candidate i, class j
    weights = await descend(s, rows[fit], s.mul_public(y[fit][:, every], U64(1 << PROB_BITS)),
                            training, cut, trunc_floor, trained_mask(candidates, vectors))
    scores = await s.matmul(rows[held], weights)               # held-out x (c C)
    correct = s.add_public(s.neg(s.sum(await _wrong(s, scores, y[held], c), 0)),
                           U64(split.held_out))                # n_i
    wins = (await first_max(s, correct.reshape(1, c))).reshape(c)
    chosen = s.sum(s.mul_public(wins, np.array(candidates, dtype=U64)), 0).reshape(1)
    k = int((await s.open(chosen))[0])
    if k not in candidates:  # an honest run opens a candidate; anything else is an attack
        raise InputError(f"the choice of k opened {k}, not a candidate")
    return k, {"k_choice": f"k = {k} of candidates {','.join(map(str, candidates))}: trained "
                           f"on {split.fit} rows, scored on {split.held_out} held out "
                           "(their accuracies are not revealed)"}


async def _wrong(s: Scheme, scores: Shared, y: Shared, c: int) -> Shared:
    """Per held-out row and candidate (h x c), 1 where its model predicts another class than
    the row's (step 4): for two classes [score > 0] XOR y, else 1 - sum_j y_j [j is the first
    largest score] (``mpcnet.plain.logreg.Model.predict``)."""
    h, vectors = y.shape
    if vectors == 1:
        above = await ltz(s, s.neg(scores))                    # [score > 0], h x c
        truth = y.broadcast_to(above.shape)
        return s.sub(s.add(above, truth), s.mul_public(await s.mul(above, truth), U64(2)))
    best = (await first_max(s, scores.reshape(h * c, vectors))).reshape(h, c, vectors)
    hits = s.sum(await s.mul(best, y.reshape(h, 1, vectors).broadcast_to(best.shape)), 2)
    return s.add_public(s.neg(hits), U64(1))
