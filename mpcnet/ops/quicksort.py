"""Layer: ops. A quicksort of shuffled rows whose comparisons are opened (Hamada et al.).

Hamada, Kikuchi, Ikarashi, Chida, Takahashi, "Practically efficient multi-party sorting
protocols from comparison sort algorithms", ICISC 2012: once the rows are shuffled (every
party lacks one permutation) and their keys are distinct, the outcomes of any comparison sort
are a function of a uniformly random permutation alone, so opening them tells nothing, and
the rows are then moved by public indices at no cost. Distinct keys are the caller's duty (a
secret tie-breaker, as the row's index before the shuffle); so is the shuffle.

The driver sorts many independent groups of rows at once (a group is a run of consecutive
positions, sorted within itself): every part's first row is its pivot (random after the
shuffle), every other row of every part is compared with its pivot in one batch, and each
part is split stably into the rows below the pivot, the pivot and the rows above. About
1.39 n log2 n comparisons per group of n rows, in about 2 to 4 log2 n batches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import numpy as np

Less = Callable[[np.ndarray, np.ndarray], Awaitable[np.ndarray]]
"""less(rows, pivots): the opened [row < pivot] (0 or 1 as int64) for each pair of row numbers."""


async def opened_quicksort(less: Less, lengths: np.ndarray) -> np.ndarray:
    """The public order (sorted position -> row) of rows 0..sum(lengths)-1, grouped in
    consecutive runs of ``lengths`` rows, each run sorted within itself by ``less``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.arange(int(lengths.sum()))
    starts = np.cumsum(lengths) - lengths
    while True:
        busy = lengths > 1
        starts, lengths = starts[busy], lengths[busy]
        if not starts.size:
            return order
        others = lengths - 1
        first = np.cumsum(others) - others  # each part's first non-pivot in the batch
        part = np.repeat(np.arange(starts.size), others)
        within = np.arange(part.size) - first[part]
        rows = order[starts[part] + 1 + within]
        pivots = order[starts[part]]
        below_pivot = await less(rows, pivots)
        below = np.cumsum(below_pivot) - below_pivot  # rows below their pivot so far, overall
        rank = below - below[first][part]
        n_less = np.bincount(part, weights=below_pivot, minlength=starts.size).astype(np.int64)
        target = np.where(below_pivot == 1, starts[part] + rank,
                          starts[part] + n_less[part] + 1 + within - rank)
        moved = order.copy()
        moved[target] = rows
        moved[starts + n_less] = order[starts]
        order = moved
        starts = np.concatenate([starts, starts + n_less + 1])
        lengths = np.concatenate([n_less, lengths - 1 - n_less])
