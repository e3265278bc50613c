"""Layer: ops. Shuffled rows sorted by distinct keys, one sign test per opened comparison.

The opened quicksort (``mpcnet.ops.quicksort``, Hamada et al., ICISC 2012) tells nothing only
if its comparisons are those of a total order on distinct keys: then, the rows shuffled, the
outcomes are a function of a uniformly random permutation alone. [a < b] is the sign of
a - b, a total order while no difference wraps the ring, that is for keys in [-2^62, 2^62).
Keys come from the data owners, who may send any word; a key outside that range would make
the comparisons a cycle, whose outcomes depend on the other keys. So the keys are checked
first: the sign of key + 2^62 is 0 exactly for those in range (one sign test per key, opened
64 to a word), and any 1 aborts the job (``InputError``). Honest keys are all in range, so
the opening shows nothing of them; a dishonest owner's show only how many of the shuffled
keys are its own out-of-range ones, and the abort depends on what the owners sent alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mpcnet.errors import InputError
from mpcnet.ops.compare import msb, packed_bits, unpacked_bits
from mpcnet.ops.convert import local_map
from mpcnet.ops.quicksort import opened_quicksort
from mpcnet.schemes.base import Scheme, Shared

KEY_BOUND = 1 << 62
"""Keys must lie in [-KEY_BOUND, KEY_BOUND): their differences then never wrap Z_2^64."""


async def _opened_signs(s: Scheme, x: Shared) -> np.ndarray:
    """[x < 0] for every value of x, opened 64 to a word once the pending ANDs pass
    (``Scheme.open_of``: the values' own MACs are the caller's to check before)."""
    signs = local_map(await msb(s, x), packed_bits)
    return unpacked_bits(np.asarray(await s.open_of(signs, (), binary=True)), x.size)


async def word_order(s: Scheme, keys: Shared, lengths: Sequence[int] | np.ndarray
                     ) -> np.ndarray:
    """The public order (sorted position -> row) of the shuffled rows' ``keys`` (distinct
    within each group), grouped in consecutive runs of ``lengths`` rows, each run in
    ascending order; ``InputError`` if a key lies outside [-KEY_BOUND, KEY_BOUND) (module
    docstring)."""
    outside = int((await _opened_signs(s, s.add_public(keys, KEY_BOUND))).sum())
    if outside:
        raise InputError(f"{outside} of the {keys.size:,} values to sort lie outside the "
                         "encoded range (a data owner uploaded values that no honest client "
                         "encodes); nothing was revealed of the others")

    async def less(rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
        return await _opened_signs(s, s.sub(keys[rows], keys[pivots]))

    return await opened_quicksort(less, np.asarray(lengths, dtype=np.int64))
