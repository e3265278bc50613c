"""Layer: featsel. pi_GINI-FS with every party in this process, over loopback channels.

One place for what the in-process benchmarks, the accuracy experiment and the tests all do:
share the encoded data as a client would, run the protocol at every party, reconstruct D' and
the selected columns' exponents as the analyst would (checking the servers' copies agree).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpcnet.featsel.gini_fs import select_stored
from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET
from mpcnet.featsel.scores import DEFAULT_SCORE
from mpcnet.featsel.source import ArraySource
from mpcnet.net.engine import RoundEngine
from mpcnet.net.local import run_local_sync
from mpcnet.schemes import registry


@dataclass(frozen=True, eq=False)
class LocalSelection:
    """The reconstructed result of one in-process selection and what it cost."""

    reduced: np.ndarray  # m x k encoded values (int64)
    exponents: np.ndarray  # k scale exponents of the selected columns (int64)
    indices: np.ndarray  # k selected column indices, in rank order (int64)
    report: dict[str, Any]  # party 0's engine report: rounds, bytes and time per phase
    plan: dict[str, Any]  # how the selection was computed (``gini_fs.SelectionResult.plan``)
    seconds: float


def select_in_process(security: str, values: np.ndarray, label_matrix: np.ndarray,
                      n_classes: int, k: int, exponents: np.ndarray,
                      round_timeout: float | None = 60.0, method: str | None = None,
                      memory_budget: int = DEFAULT_MEMORY_BUDGET,
                      score: str = DEFAULT_SCORE) -> LocalSelection:
    """Run pi_GINI-FS on the encoded m x p ``values`` under ``security``, all parties here
    (``method``, ``memory_budget`` and the score as for ``gini_fs``)."""
    info = registry.get(security)
    data = info.share(np.ascontiguousarray(values).view(np.uint64))
    labels = info.share(np.asarray(label_matrix, dtype=np.uint64))

    async def party(engine: RoundEngine) -> tuple[np.ndarray, np.ndarray, dict[str, Any],
                                                  dict[str, Any], np.ndarray]:
        s = await info.scheme.setup(engine)
        result = await select_stored(s, ArraySource(data[engine.party]), labels[engine.party],
                                     n_classes, k, exponents, memory_budget, method, score)
        return (await s.output(result.reduced), await s.output(result.exponents),
                engine.report(), result.plan, await s.output(result.indices))

    start = time.perf_counter()
    outs = run_local_sync(info.n_parties, party, round_timeout)
    seconds = time.perf_counter() - start
    reduced = info.reconstruct({i: out[0] for i, out in enumerate(outs)}).view(np.int64)
    chosen = info.reconstruct({i: out[1] for i, out in enumerate(outs)}).view(np.int64)
    indices = info.reconstruct({i: out[4] for i, out in enumerate(outs)}).view(np.int64)
    return LocalSelection(reduced, chosen, indices, outs[0][2], outs[0][3], seconds)
