"""Layer: train. Private training with every party in this process, over loopback channels.

What the accuracy experiment and the tests do with a reduced dataset: share its encoded values
(m x k integers), their exponents and the one-hot labels as a selection's result holds them,
train at every party (``train_on_result``) and reconstruct the model as its owner would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpcnet.net.engine import RoundEngine
from mpcnet.net.local import run_local_sync
from mpcnet.plain.logreg import DEFAULT_TRAINING, Model, Training
from mpcnet.ring import to_signed
from mpcnet.schemes import registry
from mpcnet.train.model import PARTS, model_of, train_on_result


@dataclass(frozen=True, eq=False)
class LocalTraining:
    """The model of one in-process training and what it cost."""

    model: Model
    report: dict[str, Any]  # party 0's engine report: rounds, bytes and time per phase
    seconds: float


def train_in_process(security: str, values: np.ndarray, exponents: np.ndarray,
                     codes: np.ndarray, classes: list[str], columns: list[str],
                     training: Training = DEFAULT_TRAINING) -> LocalTraining:
    """Train on the m x k encoded ``values`` (D') with class ``codes`` under ``security``."""
    info = registry.get(security)
    n = len(classes)
    onehot = (np.asarray(codes)[:, None] == np.arange(n - 1)[None, :]).astype(np.uint64)
    arrays = {"reduced": info.share(np.ascontiguousarray(values, dtype=np.int64)
                                    .view(np.uint64)),
              "exponents": info.share(np.asarray(exponents, dtype=np.int64).view(np.uint64)),
              "training_labels": info.share(onehot)}

    async def party(engine: RoundEngine) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        s = await info.scheme.setup(engine)
        mine = {name: shares[engine.party] for name, shares in arrays.items()}
        outputs, _ = await train_on_result(s, mine, n, training)
        return {name: await s.output(outputs[name]) for name in PARTS}, engine.report()

    start = time.perf_counter()
    outs = run_local_sync(info.n_parties, party, 120.0)
    seconds = time.perf_counter() - start
    values_of = {part: to_signed(info.reconstruct({i: out[0][part]
                                                   for i, out in enumerate(outs)}))
                 for part in PARTS}
    return LocalTraining(model_of(values_of, classes, columns), outs[0][1], seconds)
