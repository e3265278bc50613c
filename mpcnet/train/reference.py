"""Layer: train. The plaintext reference of the private choice of k (``mpcnet.train.choose``):
the same fixed-point integers, in the clear.

The private choice truncates with ``trunc_floor`` (deterministic floor) and every other step
(products, sums, sign tests, the bit length of the normaliser) is exact in Z_2^64, so the same
steps on int64 arrays, which wrap as the ring does, give the same integers: the same
standardised features, the same weights after every epoch, the same held-out counts and so the
same k. This module mirrors ``mpcnet.train.standardise`` (steps 1-4 of its docstring),
``mpcnet.train.sigmoid`` and ``mpcnet.train.logreg.descend`` line by line, with the constants
imported from them; ``tests/test_train_choose.py`` checks the integers equal under every scheme.
"""

from __future__ import annotations

import math

import numpy as np

from mpcnet.fixedpoint import VALUE_BITS
from mpcnet.plain.logreg import DEFAULT_TRAINING, Training
from mpcnet.train import standardise as st
from mpcnet.train.choose import check_candidates, holdout_split, trained_mask
from mpcnet.train.logreg import (
    GRAD_BITS,
    KEPT_BITS,
    L2_BITS,
    PROB_BITS,
    SCORE_BITS,
    STEP_BITS,
    WEIGHT_BITS,
    check_training,
)
from mpcnet.train.sigmoid import BREAKPOINTS, SLOPE_BITS, SLOPE_STEPS

I64 = np.int64


def _floor(x: np.ndarray, f: int | np.ndarray) -> np.ndarray:
    """floor(x / 2^f): what ``trunc_floor`` computes."""
    return np.right_shift(np.asarray(x, dtype=I64), np.asarray(f, dtype=I64))


def _bit_length(words: np.ndarray) -> np.ndarray:
    """The bit length of non-negative int64 words (0 for 0)."""
    out = np.zeros(words.shape, dtype=I64)
    for b in range(64):
        out += (words >> b) != 0
    return out


def _powers(below: np.ndarray, base: int) -> np.ndarray:
    steps = np.array([base ** (st.POWERS + 1 - i) - base ** (st.POWERS - i)
                      for i in range(1, st.POWERS + 1)], dtype=I64)[:, None]
    return (below * steps).sum(0) + 1


def _inverse_sqrt(var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[V below CONSTANT_BELOW] and 1 / sqrt(V) with FEATURE_INV_BITS, as
    ``standardise._inverse_sqrt`` computes them."""
    powers = np.array([st.CONSTANT_BELOW] + [4**i for i in range(1, st.POWERS + 1)],
                      dtype=I64)[:, None]
    signs = ((var[None, :] - powers) < 0).astype(I64)
    constant, below = signs[0], signs[1:]
    scaled = var * _powers(below, 4)
    start = I64(round(st.START * 2**57)) - scaled
    a, r = _floor(scaled, 54 - st.INV_BITS), _floor(start, 57 - st.INV_BITS)
    three = I64(3 << st.INV_BITS)
    for _ in range(st.NEWTON_STEPS):
        square = _floor(r * r, st.INV_BITS)
        product = _floor(a * square, st.INV_BITS)
        r = _floor(r * (three - product), st.INV_BITS + 1)
    shift = st.POWERS - 8 + st.INV_BITS
    return constant, _floor(r * _powers(below, 2), shift - st.FEATURE_INV_BITS)


def standardised(z: np.ndarray, fit: int) -> np.ndarray:
    """The features x~ (FEATURE_BITS) ``standardise(..., fit_rows=fit, cut=trunc_floor)``
    computes from the m x k encoded integers z."""
    z = np.asarray(z, dtype=I64)
    spread = np.bitwise_or.reduce(z ^ (z >> 63), axis=0)  # |z| - [z < 0], OR over the rows
    length = _bit_length(spread)
    scale = np.where(length > 0, np.left_shift(I64(1), np.maximum(VALUE_BITS - length, 0)), 0)
    y = _floor(z * scale, VALUE_BITS - st.NORMAL_BITS)
    total = y[:fit].sum(0)
    mean = _floor(total * I64(round(2 ** (st.MEAN_BITS + 24) / fit)), 24)
    centre, coarse = _floor(mean, st.MEAN_BITS), _floor(mean, st.MEAN_BITS - st.CENTRED_BITS)
    offset = mean - centre * (1 << st.MEAN_BITS)
    d = y[:fit] - centre
    c = max(0, math.ceil(math.log2(fit)))
    var = _floor((d * d).sum(0), c) * I64(round(2 ** (c + st.MEAN_BITS) / fit)) \
        - _floor(offset * offset, st.MEAN_BITS)
    constant, feature_inv = _inverse_sqrt(var)
    feature_inv = feature_inv * (1 - constant)
    centred = y * (1 << st.CENTRED_BITS) - coarse
    return _floor(centred * feature_inv, st.CENTRED_BITS + st.FEATURE_INV_BITS - st.FEATURE_BITS)


def sigmoid(z: np.ndarray, f: int) -> np.ndarray:
    """``mpcnet.train.sigmoid.sigmoid`` in the clear (f + SLOPE_BITS fractional bits)."""
    out = z * I64(sum(SLOPE_STEPS)) + I64(1 << (f + SLOPE_BITS - 1))
    for b, a in zip(BREAKPOINTS, SLOPE_STEPS, strict=True):
        h = I64(round(b * 2**f))
        out -= I64(a) * (np.where(z > h, z - h, 0) + np.where(z < -h, z + h, 0))
    return out


def descend(rows: np.ndarray, y: np.ndarray, training: Training,
            trained: np.ndarray) -> np.ndarray:
    """``mpcnet.train.logreg.descend`` with ``trunc_floor``, in the clear: the weights."""
    m, width = rows.shape
    shape = (width, y.shape[1])
    weights = velocity = np.zeros(shape, dtype=I64)
    penalty = np.zeros(shape, dtype=I64)
    penalty[:-1] = round(training.l2 * 2**L2_BITS)
    rate = I64(round(training.learning_rate * 2**STEP_BITS / m)) * trained.astype(I64)
    keep = I64(round(training.momentum * 2**WEIGHT_BITS))
    for _ in range(training.epochs):
        errors = sigmoid(rows @ weights, SCORE_BITS) - y
        gradient = _floor(rows.T @ errors, GRAD_BITS - KEPT_BITS) + weights * penalty
        step = _floor(gradient * rate, KEPT_BITS + STEP_BITS - WEIGHT_BITS)
        velocity = _floor(velocity * keep, WEIGHT_BITS) - step
        weights = weights + velocity
    return weights


def held_out_correct(reduced: np.ndarray, codes: np.ndarray, n_classes: int,
                     candidates: tuple[int, ...], training: Training = DEFAULT_TRAINING
                     ) -> np.ndarray:
    """Per candidate, the held-out rows its model predicts right, as the servers count them
    (never revealed by them), from the m x k_c encoded D'_(k_c) in rank order and the class
    codes (0 to n_classes - 1)."""
    check_training(training)
    reduced = np.asarray(reduced, dtype=I64)
    m = reduced.shape[0]
    check_candidates(candidates, reduced.shape[1] + 1, m)
    split = holdout_split(m)
    x = standardised(reduced[split.order], split.fit)
    rows = np.hstack([x, np.full((m, 1), 1 << st.FEATURE_BITS, dtype=I64)])
    codes = np.asarray(codes)[split.order]
    onehot = (codes[:, None] == np.arange(n_classes)[None, :]).astype(I64)
    y = onehot[:, 1:] if n_classes == 2 else onehot  # ``logreg.targets``
    c, vectors = len(candidates), y.shape[1]
    fit, held = slice(0, split.fit), slice(split.fit, m)
    weights = descend(rows[fit], np.tile(y[fit] << PROB_BITS, c), training,
                      trained_mask(candidates, vectors))
    scores = (rows[held] @ weights).reshape(-1, c, vectors)
    predicted = (scores[..., 0] > 0) if vectors == 1 else scores.argmax(axis=2)
    return (predicted == codes[held][:, None]).sum(0)


def choose_k(reduced: np.ndarray, codes: np.ndarray, n_classes: int,
             candidates: tuple[int, ...], training: Training = DEFAULT_TRAINING) -> int:
    """The k the servers choose: the most correct held-out predictions, ties to the smaller."""
    counts = held_out_correct(reduced, codes, n_classes, candidates, training)
    return candidates[int(np.argmax(counts))]
