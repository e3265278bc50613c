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
from mpcnet.ops.convert import local_map
from mpcnet.ops.quicksort import opened_quicksort
from mpcnet.schemes.base import Scheme, Shared

_PLACES = np.arange(64, dtype=np.uint64)


def _packed(bits: np.ndarray) -> np.ndarray:
    """Bit 0 of every word of the last axis, 64 to a word (value i at bit i mod 64 of word
    i div 64; the last word padded with zeros): a local, bitwise-linear map."""
    count = bits.shape[-1]
    padded = np.zeros(bits.shape[:-1] + (-(-count // 64) * 64,), dtype=np.uint64)
    padded[..., :count] = bits & np.uint64(1)
    grouped = padded.reshape(bits.shape[:-1] + (-1, 64)) << _PLACES
    return np.bitwise_or.reduce(grouped, axis=-1)


def _unpacked(words: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` bits that ``_packed`` put into ``words``, as 0/1 int64."""
    return ((words[:, None] >> _PLACES) & np.uint64(1)).reshape(-1)[:count].astype(np.int64)


async def word_order(s: Scheme, keys: Shared, lengths: Sequence[int] | np.ndarray
                     ) -> np.ndarray:
    """The public order (sorted position -> row) of the shuffled rows' ``keys`` (distinct
    words within each group), grouped in consecutive runs of ``lengths`` rows, each run in
    ascending signed order (module docstring). The outcomes of a batch are ANDed and opened
    64 to a word; every opening checks the pending ANDs first (``Scheme.open_of``): the
    keys' own MACs are the caller's to check before the first."""
    signs = await msb(s, keys)

    async def less(rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
        below = local_map(await msb(s, s.sub(keys[rows], keys[pivots])), _packed)
        mine, theirs = local_map(signs[rows], _packed), local_map(signs[pivots], _packed)
        wrapped = await s.and_(s.xor(mine, theirs), s.xor(mine, below))
        opened = await s.open_of(s.xor(below, wrapped), (), binary=True)
        return _unpacked(np.asarray(opened), rows.size)

    return await opened_quicksort(less, np.asarray(lengths, dtype=np.int64))
