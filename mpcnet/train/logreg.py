"""Layer: train. Private logistic regression on the shares of D' (Fig. 1, step 2B).

The paper leaves training to existing MPC logistic regression (it cites De Cock, Dowsley,
Nascimento, Railsback, Shen, Todoki, BMC Medical Genomics 2021): full-batch gradient descent in
fixed point with a secure sigmoid. This is that, on the reduced dataset a selection stored,
without reconstructing it, under every scheme, and nothing is opened:

1. the columns of D' are standardised privately (``mpcnet.train.standardise``);
2. the targets come from the shared one-hot labels: for two classes the second class, else one
   column per class against the rest;
3. every epoch: scores Z = [X~ 1] W (one matrix product), P = s(Z) (``mpcnet.train.sigmoid``,
   exact, no truncation), G = [X~ 1]^T (P - Y) (one matrix product), then the update of
   ``mpcnet.plain.logreg`` (heavy-ball momentum, L2 penalty on the weights, not on the
   intercept) with two truncations of the (k + 1) x C weights only. No value of size m is
   truncated during training. Under active3 the masks of those truncations (64 shared random
   bits a value) are made for a check window's epochs at once (``_masks``).

Fixed point: features 8 fractional bits, weights ``WEIGHT_BITS`` = 12, scores 20, P 28, the
gradient 36 (|G| <= m 2^36 (1 + 0.0004) < 2^61 for m < 2^24, since sum_i |x~_i| <= m for
standardised columns), then 24 before the step: the learning rate over m is the public
round(lr 2^34 / m) (relative precision 2^-10 at m = 2^24) and l2 is rounded to 2^-12.
Memory (``training_layout``): the job holds D', its normalised and standardised copies, the
labels and, under the active schemes, the epochs' product factors (``Scheme.hold_factor``);
the steps that touch every value run a tile of rows at a time (the standardisation) or a
block of rows at a time (each epoch's scores, sigmoid and gradient, summed over the blocks),
sized by the budget. The active schemes check every product of up to
``CHECK_EVERY`` epochs at their end (``Scheme.checkpoint``; as many epochs as their records fit
the budget, at least one), so their records never hold more than that; the job's final
``verify`` runs before any share of the model leaves a server.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpcnet.errors import InputError
from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET, MIN_TILE_CELLS, WORD_BYTES
from mpcnet.ops.convert import random_bits
from mpcnet.ops.planner import FIXED_BYTES
from mpcnet.ops.truncate import CONVERSION_BATCH, trunc
from mpcnet.plain.logreg import DEFAULT_TRAINING, Training
from mpcnet.schemes.base import Scheme, Shared, concat, join, split
from mpcnet.train.sigmoid import SLOPE_BITS, sigmoid
from mpcnet.train.standardise import (
    FEATURE_BITS,
    Standardised,
    Truncation,
    row_tiles,
    standardise,
)

U64 = np.uint64
WEIGHT_BITS = 12
SCORE_BITS = FEATURE_BITS + WEIGHT_BITS
PROB_BITS = SCORE_BITS + SLOPE_BITS
GRAD_BITS = FEATURE_BITS + PROB_BITS
KEPT_BITS = 24  # the gradient's fractional bits before the step
STEP_BITS = 34  # round(lr 2^STEP_BITS / m)
L2_BITS = KEPT_BITS - WEIGHT_BITS
CHECK_EVERY = 10
MAX_EPOCHS = 10_000
STANDARDISE_BYTES_PER_CELL = {"passive3": 400, "active3": 29_000, "active4": 700}
"""Peak bytes per value of D' in a tile being standardised (an A2B, two truncations: dealt
masks under passive3 and active4, by conversion with its AND records under active3), 1.5
times what tracemalloc measured in process (2,000 and 6,000 rows of 16 columns: 280, 19,300
and 500 bytes per value and party)."""
EPOCH_BYTES_PER_SCORE = {"passive3": 3_000, "active3": 27_000, "active4": 6_000}
"""Peak bytes per row and weight vector of an epoch's block (four sign tests and products,
with their check records), measured likewise."""
MAX_LEARNING_RATE = 8.0
KEPT_FACTORS = {"active3": 2, "active4": 4}
"""Copies of [X~ 1] (in words of the setting) that ``Scheme.hold_factor`` keeps for the
epochs' products, of [X~ 1] and of [X~ 1]^T: active3's rearranged copy, active4's components
and their pair sums."""


@dataclass
class TrainedModel:
    """Shares of a model: (k + 1) x C weights (the last row the intercepts) with WEIGHT_BITS
    fractional bits, and the standardisation of its columns."""

    weights: Shared
    columns: Standardised
    layout: dict[str, int]


def check_training(training: Training) -> None:
    """Refuse hyper-parameters outside what the fixed point holds, naming the bound."""
    if not 1 <= training.epochs <= MAX_EPOCHS:
        raise InputError(f"epochs must be 1 to {MAX_EPOCHS}, not {training.epochs}")
    if not 0 < training.learning_rate <= MAX_LEARNING_RATE:
        raise InputError(f"the learning rate must be above 0 and at most {MAX_LEARNING_RATE}, "
                         f"not {training.learning_rate}")
    if not (training.l2 == 0 or 2**-L2_BITS <= training.l2 <= 1024):
        raise InputError(f"l2 must be 0 or from 2^-{L2_BITS} to 1024 (the fixed point's "
                         f"steps), not {training.l2}")
    if not 0 <= training.momentum < 1:
        raise InputError(f"the momentum must be in [0, 1), not {training.momentum}")


def targets(s: Scheme, labels: Shared) -> Shared:
    """0/1 targets (m x C) from the one-hot labels without the last class (m x (n - 1)):
    for two classes [second class] = 1 - label_0, else every class, the last one being
    1 - the sum of the others."""
    m, rest = labels.shape
    last = s.add_public(s.neg(s.sum(labels, 1)), U64(1)).reshape(m, 1)
    if rest == 1:
        return last
    return join([labels, last], 1)


@dataclass(frozen=True)
class TrainingLayout:
    """How a training job fits its memory budget: rows per standardisation tile and per
    epoch block, and how many epochs' check records are kept before a checkpoint."""

    tile_rows: int
    block_rows: int
    check_every: int

    def figures(self, m: int) -> dict[str, int]:
        return {"tiles": -(-m // self.tile_rows), "epoch_blocks": -(-m // self.block_rows),
                "check_every": self.check_every}


def training_layout(setting: str, m: int, k: int, n_weights: int,
                    memory_budget: int) -> TrainingLayout:
    """The tiles and blocks within ``memory_budget`` bytes; refuses a job whose held arrays
    (D', its normalised and standardised copies, the labels) do not fit, naming the sizes."""
    kept = KEPT_FACTORS.get(setting, 0) * (k + 1)  # Scheme.hold_factor's copies
    held = FIXED_BYTES + m * (3 * k + 2 + 2 * n_weights + kept) * WORD_BYTES[setting]
    usable = memory_budget - held
    tile = usable // (STANDARDISE_BYTES_PER_CELL[setting] * k)
    block = usable // (EPOCH_BYTES_PER_SCORE[setting] * n_weights)
    least = min(m, max(1, MIN_TILE_CELLS // k))  # rows: at least MIN_TILE_CELLS values a tile
    if min(tile, block) < least:
        raise InputError(f"training on {m:,} x {k} under {setting} holds "
                         f"{held / 2**20:,.0f} MiB of shares and needs tiles of at least "
                         f"{least} rows, more than the memory budget of "
                         f"{memory_budget / 2**20:,.0f} MiB; raise [deployment] memory_budget "
                         "or train on a smaller selection")
    every = max(1, min(CHECK_EVERY, block // m))  # as many epochs' records as fit
    return TrainingLayout(min(m, tile), min(m, block), every)


async def train(s: Scheme, data: Shared, labels: Shared,
                training: Training = DEFAULT_TRAINING,
                memory_budget: int = DEFAULT_MEMORY_BUDGET) -> TrainedModel:
    """Logistic regression on the m x k fixed-point integers ``data`` (D') and the one-hot
    labels (m x (n - 1)), as ``mpcnet.plain.logreg.fit`` on the standardised columns, within
    ``memory_budget`` bytes (``training_layout``)."""
    check_training(training)
    m, k = data.shape
    if labels.shape[0] != m or labels.shape[1] < 1:
        raise InputError(f"labels must be {m} x (classes - 1), not {labels.shape}")
    n_weights = 1 if labels.shape[1] == 1 else labels.shape[1] + 1
    if round(training.learning_rate * 2**STEP_BITS / m) < 2**10:
        raise InputError(f"a learning rate of {training.learning_rate} over {m:,} rows is below "
                         f"the fixed point's resolution (learning rate / m >= 2^-{STEP_BITS - 10})")
    cut = training_layout(s.name, m, k, n_weights, memory_budget)
    with s.engine.phase("standardise"):
        columns = await standardise(s, data, cut.tile_rows)
    with s.engine.phase("training"):
        y = s.mul_public(targets(s, labels), U64(1 << PROB_BITS))
        ones = s.public(np.full((m, 1), 1 << FEATURE_BITS, dtype=U64))
        rows = join([columns.features, ones], 1)  # [X~ 1], m x (k + 1)
        weights = await descend(s, rows, y, training, cut)
    return TrainedModel(weights, columns, cut.figures(m))


async def _gradient(s: Scheme, parts: list[tuple[Shared, Shared]], y: Shared,
                    weights: Shared, blocks: list[slice]) -> Shared:
    """[X~ 1]^T (s([X~ 1] W) - Y), GRAD_BITS fractional bits, a block of rows at a time
    (``parts``: each block of [X~ 1] and its transpose)."""
    total = None
    for block, (part, part_t) in zip(blocks, parts, strict=True):
        scores = await s.matmul(part, weights)                     # SCORE_BITS
        errors = s.sub(await sigmoid(s, scores, SCORE_BITS), y[block])  # PROB_BITS
        gradient = await s.matmul(part_t, errors)
        total = gradient if total is None else s.add(total, gradient)
    assert total is not None
    return total


async def _masks(s: Scheme, shape: tuple[int, ...], epochs: int) -> list[Shared]:
    """The masks (64 shared random bits a value, ``trunc``'s ``mask``) of both truncations
    of ``epochs`` epochs, made at once: under a scheme without a truncation of its own
    (active3) each would take three rounds of its own before its opening (a batch below
    ``CONVERSION_BATCH``), six of an epoch's rounds. They depend on nothing secret, so
    making them ahead changes no value and no check (their products' MAC records are queued
    as any product's)."""
    size = int(np.prod(shape))
    bits = await random_bits(s, (64, 3 * size * epochs))
    masks = []
    for e in range(epochs):
        base = 3 * size * e
        masks.append(bits[:, base:base + size].reshape((64,) + shape))
        masks.append(bits[:, base + size:base + 3 * size])  # the step: concat is flat
    return masks


async def _cut(s: Scheme, truncation: Truncation, x: Shared, f: int | np.ndarray,
               masks: list[Shared]) -> Shared:
    """``truncation`` of x, with the next of the epochs' ``masks`` if any were made."""
    if not masks:
        return await truncation(s, x, f)
    return await trunc(s, x, f, mask=masks.pop(0))


async def descend(s: Scheme, rows: Shared, y: Shared, training: Training,
                  cut: TrainingLayout, truncation: Truncation = trunc,
                  trained: np.ndarray | None = None) -> Shared:
    """The weights ((k + 1) x C, WEIGHT_BITS) after ``training.epochs`` epochs of gradient
    descent on the rows [X~ 1] (m x (k + 1)) and the targets ``y`` (m x C, PROB_BITS).
    ``trained``, a public 0/1 (k + 1) x C array, keeps the weights where it is 0 at exactly 0
    (their gradient is multiplied by it): several models on prefixes of the columns train as
    one (``mpcnet.train.choose``). ``truncation`` as in ``standardise``."""
    m, width = rows.shape
    blocks = row_tiles(m, cut.block_rows)
    shape = (width, y.shape[1])
    weights = velocity = s.public(np.zeros(shape, dtype=U64))
    penalty = np.zeros(shape, dtype=U64)
    penalty[:-1] = round(training.l2 * 2**L2_BITS)
    rate = np.full(shape, round(training.learning_rate * 2**STEP_BITS / m), dtype=U64)
    if trained is not None:
        rate *= np.asarray(trained, dtype=U64)
    keep = U64(round(training.momentum * 2**WEIGHT_BITS))
    shifts = np.repeat([KEPT_BITS + STEP_BITS - WEIGHT_BITS, WEIGHT_BITS], width * shape[1])
    parts = [(rows[block], rows[block].T) for block in blocks]  # the same factors every epoch
    for part in parts:
        for factor in part:
            s.hold_factor(factor)
    masks: list[Shared] = []
    # where ``trunc`` would mask both truncations with fresh random bits (no truncation of
    # the scheme's own, a batch below CONVERSION_BATCH), they are made ahead
    premade = truncation is trunc and not s.truncates and 2 * weights.size < CONVERSION_BATCH
    for epoch in range(training.epochs):
        if not masks and premade:
            masks = await _masks(s, shape, min(cut.check_every, training.epochs - epoch))
        gradient = await _cut(s, truncation, await _gradient(s, parts, y, weights, blocks),
                              GRAD_BITS - KEPT_BITS, masks)
        gradient = s.add(gradient, s.mul_public(weights, penalty))
        step, kept = split(await _cut(s, truncation, concat([s.mul_public(gradient, rate),
                                                             s.mul_public(velocity, keep)]),
                                      shifts, masks), [shape, shape])
        velocity = s.sub(kept, step)
        weights = s.add(weights, velocity)
        if (epoch + 1) % cut.check_every == 0:
            await s.checkpoint()
    s.drop_factors()
    return weights
