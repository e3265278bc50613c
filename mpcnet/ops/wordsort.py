"""Layer: ops. Shuffled rows sorted by distinct words, one sign test per opened comparison.

The opened quicksort (``mpcnet.ops.quicksort``, Hamada et al., ICISC 2012) tells nothing only
if its comparisons are those of a total order on distinct keys: then, the rows shuffled, the
outcomes are a function of a uniformly random permutation alone. Keys here are any words of
Z_2^64 (a data owner may send any), ordered as signed integers, which is a total order on all
words: [a < b] is the sign of a - b unless that difference wraps, which happens only when a
and b have different signs, and then [a < b] is a's sign. With s_a, s_b the keys' signs (one
sign test per row, once) and d the sign of a - b (one per comparison),
[a < b] = d XOR ((s_a XOR s_b) AND (s_a XOR d)): one sign test and one AND per comparison.
Keys below 2^62 in magnitude never wrap, and the order is theirs as integers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mpcnet.ops.compare import msb
from mpcnet.ops.quicksort import opened_quicksort
from mpcnet.schemes.base import Scheme, Shared


async def word_order(s: Scheme, keys: Shared, lengths: Sequence[int] | np.ndarray
                     ) -> np.ndarray:
    """The public order (sorted position -> row) of the shuffled rows' ``keys`` (distinct
    words within each group), grouped in consecutive runs of ``lengths`` rows, each run in
    ascending signed order (module docstring). Every opening checks the pending ANDs
    (``Scheme.open_of``): the keys' own MACs are the caller's to check before."""
    signs = await msb(s, keys)

    async def less(rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
        below = await msb(s, s.sub(keys[rows], keys[pivots]))
        mine, theirs = signs[rows], signs[pivots]
        wrapped = await s.and_(s.xor(mine, theirs), s.xor(mine, below))
        opened = await s.open_of(s.xor(below, wrapped), (), binary=True)
        return (np.asarray(opened) & np.uint64(1)).astype(np.int64)

    return await opened_quicksort(less, np.asarray(lengths, dtype=np.int64))
