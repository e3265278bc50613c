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
4. on the held-out rows, each model predicts the second class where its score is above 0 (as
   ``mpcnet.plain.logreg.Model.predict``), and n_i = the number of correct predictions is
   summed in MPC;
5. the winner is the candidate with the most correct held-out predictions, ties to the smaller
   k: for i < j one batch of sign tests b_ij = [n_i < n_j], then w_i = prod_(j < i) b_ji
   prod_(j > i) (1 - b_ij) (a tree of products) is 1 for the winner only, and only
   sum_i w_i k_i is opened.

Every truncation is the deterministic ``trunc_floor``, so the counts are exactly those of the
plaintext emulation ``mpcnet.train.reference`` and the private choice equals the plaintext one
(the stochastic rounding of ``trunc``, whose errors depend on fresh randomness, would let a
held-out row near the decision boundary flip, and with it a close choice). Two classes only:
a multi-class held-out prediction needs an argmax over classes, not done yet.
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


def check_candidates(candidates: tuple[int, ...], p: int, m: int, n_classes: int) -> None:
    """Refuse candidates that are not 2 to MAX_CANDIDATES increasing k in 1..p-1, a dataset of
    more than two classes, or too few rows to hold some out, naming the bound."""
    if not 2 <= len(candidates) <= MAX_CANDIDATES:
        raise InputError(f"--k auto needs 2 to {MAX_CANDIDATES} candidates, not "
                         f"{len(candidates)}")
    if list(candidates) != sorted(set(candidates)) or not 0 < candidates[0] \
            or candidates[-1] >= p:
        raise InputError(f"the candidates must increase, each from 1 to {p - 1} for {p} "
                         f"features, not {','.join(map(str, candidates))}")
    if n_classes != 2:
        raise InputError(f"--k auto chooses for a label of two classes only, not {n_classes}")
    if m // 4 < MIN_HELD_OUT:
        raise InputError(f"--k auto holds out a quarter of the rows: it needs at least "
                         f"{4 * MIN_HELD_OUT} rows, not {m}")


def trained_mask(candidates: tuple[int, ...]) -> np.ndarray:
    """The (k_c + 1) x c 0/1 array of the weights that train: column i the first k_i rows and
    the intercept (the last row)."""
    width = candidates[-1] + 1
    mask = np.arange(width)[:, None] < np.array(candidates)[None, :]
    mask[-1] = True
    return mask.astype(U64)


async def choose_k(s: Scheme, reduced: Shared, labels: Shared, candidates: tuple[int, ...],
                   training: Training = DEFAULT_TRAINING,
                   memory_budget: int = DEFAULT_MEMORY_BUDGET) -> tuple[int, dict[str, str]]:
    """The chosen k (opened, the only value opened) from the m x k_c ``reduced`` D'_(k_c) in
    rank order and the one-hot labels (m x 1), and the job's figures (public)."""
    check_training(training)
    m, width = reduced.shape
    check_candidates(candidates, width + 1, m, labels.shape[1] + 1)
    if width != candidates[-1]:
        raise InputError(f"D' has {width} columns, the largest candidate is {candidates[-1]}")
    split = holdout_split(m)
    data, y = reduced[split.order], targets(s, labels[split.order])  # m x 1, 0/1
    c = len(candidates)
    cut = training_layout(s.name, split.fit, width, c, memory_budget)
    columns = await standardise(s, data, cut.tile_rows, split.fit, trunc_floor)
    ones = s.public(np.full((m, 1), 1 << FEATURE_BITS, dtype=U64))
    rows = join([columns.features, ones], 1)  # [X~ 1], m x (k_c + 1)
    fit, held = slice(0, split.fit), slice(split.fit, m)
    weights = await descend(s, rows[fit], s.mul_public(y[fit], U64(1 << PROB_BITS))
                            .broadcast_to((split.fit, c)), training, cut, trunc_floor,
                            trained_mask(candidates))
    scores = await s.matmul(rows[held], weights)                    # held-out x c
    above = await ltz(s, s.neg(scores))                             # [score > 0]
    truth = y[held].broadcast_to(above.shape)
    wrong = s.sub(s.add(above, truth), s.mul_public(await s.mul(above, truth), U64(2)))
    correct = s.add_public(s.neg(s.sum(wrong, 0)), U64(split.held_out))  # n_i
    chosen = await _winner(s, correct, candidates)
    k = int((await s.open(chosen))[0])
    if k not in candidates:  # an honest run opens a candidate; anything else is an attack
        raise InputError(f"the choice of k opened {k}, not a candidate")
    return k, {"k_choice": f"k = {k} of candidates {','.join(map(str, candidates))}: trained "
                           f"on {split.fit} rows, scored on {split.held_out} held out "
                           "(their accuracies are not revealed)"}


async def _winner(s: Scheme, correct: Shared, candidates: tuple[int, ...]) -> Shared:
    """sum_i w_i k_i for the candidate with the most correct predictions, ties to the smaller
    (step 5 of the module docstring)."""
    c = len(candidates)
    pairs = [(i, j) for i in range(c) for j in range(i + 1, c)]
    diffs = s.sub(correct[[i for i, _ in pairs]], correct[[j for _, j in pairs]])
    below = await ltz(s, diffs)                                      # b_ij = [n_i < n_j]
    factors: list[list[Shared]] = [[] for _ in range(c)]
    for t, (i, j) in enumerate(pairs):
        factors[i].append(s.add_public(s.neg(below[t:t + 1]), U64(1)))  # n_i >= n_j
        factors[j].append(below[t:t + 1])                               # n_j > n_i
    level = [join(f, 0) for f in factors]  # c arrays of c - 1 bits
    while level[0].shape[0] > 1:
        n = level[0].shape[0]
        half = n // 2
        left = join([f[:half] for f in level], 0)
        right = join([f[half:2 * half] for f in level], 0)
        products = await s.mul(left, right)
        level = [join([products[i * half:(i + 1) * half]] + ([f[2 * half:]] if n % 2 else []),
                      0) for i, f in enumerate(level)]
    wins = join(level, 0)                                            # c: w_i
    return s.sum(s.mul_public(wins, np.array(candidates, dtype=U64)), 0).reshape(1)
