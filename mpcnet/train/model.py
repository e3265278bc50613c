"""Layer: train. A training job's computation on a stored selection result, and the model the
owner reconstructs from the servers' shares.

The servers hold, per selection result, shares of D' (m x k fixed-point integers), of the
selected columns' exponents (k), of the one-hot labels (m x (n - 1)) and, when the owners
release names, of the selected indices. ``train_on_result`` inputs them again (the holders of
every component compare it, active schemes authenticate it), trains (``mpcnet.train.logreg``)
and returns what the servers store for the model owner: the weights, and per column mean /
scale, the scale's mantissa and its binary exponent (``mpcnet.train.standardise``), the
column's own exponent e already folded in so that nothing about e is revealed beyond the
scale. ``model_of`` turns the reconstructed integers into ``mpcnet.plain.logreg.Model``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET
from mpcnet.plain.logreg import Model, Training
from mpcnet.schemes.base import Scheme, Shared
from mpcnet.train.logreg import WEIGHT_BITS, train
from mpcnet.train.standardise import INV_BITS, RATIO_BITS

U64 = np.uint64
SCALE_OFFSET = 26  # scale = mantissa 2^(exponent - SCALE_OFFSET)
PARTS = ("weights", "ratio", "mantissa", "exponent")


async def train_on_result(s: Scheme, arrays: dict[str, np.ndarray], n_classes: int,
                          training: Training, memory_budget: int = DEFAULT_MEMORY_BUDGET
                          ) -> tuple[dict[str, Shared], dict[str, Any]]:
    """This party's part of training on a selection result's share ``arrays`` within
    ``memory_budget`` bytes: the shares to store for the model's owner and the job's
    figures."""
    names = ["reduced", "training_labels", "exponents"] + (
        ["indices"] if "indices" in arrays else [])
    shares = dict(zip(names, await s.input(*(arrays[n] for n in names)), strict=True))
    labels = shares["training_labels"]
    if labels.shape[1] != n_classes - 1:
        raise ValueError(f"the result's labels have {labels.shape[1] + 1} classes, its "
                         f"dataset {n_classes}")
    model = await train(s, shares["reduced"], labels, training, memory_budget)
    cols = model.columns
    k = cols.ratio.shape[0]
    # scale = mantissa 2^(j + L - e - 26); a constant column's scale is 1 (exponent 26)
    free = s.sub(cols.exponent, shares["exponents"])
    fix = await s.mul(cols.constant, s.add_public(s.neg(free), U64(SCALE_OFFSET)))
    outputs = {"weights": model.weights, "ratio": cols.ratio, "mantissa": cols.mantissa,
               "exponent": s.add(free, fix)}
    if "indices" in shares:
        outputs["indices"] = shares["indices"]
    classes = model.weights.shape[1]
    figures = {"model": f"logistic regression on {k} standardised columns, {classes} weight "
                        f"vector(s), {training.epochs} epochs (learning rate "
                        f"{training.learning_rate:g}, l2 {training.l2:g}, momentum "
                        f"{training.momentum:g}); standardised in {model.layout['tiles']} "
                        f"tile(s), epochs in {model.layout['epoch_blocks']} block(s), checked "
                        f"every {model.layout['check_every']} epoch(s)"}
    return outputs, figures


def model_of(values: dict[str, np.ndarray], classes: list[str], columns: list[str]) -> Model:
    """The model from its reconstructed integers (signed), as the owner reads it."""
    weights = values["weights"].astype(np.float64) / 2**WEIGHT_BITS
    mantissa = values["mantissa"].astype(np.float64) / 2**INV_BITS
    scale = np.ldexp(mantissa, values["exponent"].astype(np.int64) - SCALE_OFFSET)
    mean = values["ratio"].astype(np.float64) / 2**RATIO_BITS * scale
    k = len(scale)
    return Model(list(classes), list(columns), weights[:k].T.copy(), weights[k].copy(), mean,
                 scale)
