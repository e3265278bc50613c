"""Layer: ops. Oblivious sort of many columns at once, by a bitonic sorting network.

Batcher's bitonic sort ("Sorting networks and their applications", AFIPS 1968) in the form
where every comparator sends the smaller element to the lower position: for each block size
2, 4, ..., N (N = the power of two at or above m), first every position i of a block's lower
half is compared with its mirror image in the upper half, then with i + N/4, ..., i + 1
(half-cleaners). For m below N the network runs as if rows m..N-1 held +infinity: a comparator
never moves the larger element down, so those rows keep +infinity and every comparator that
touches one is a no-op and is left out, with no padding at all (433,390 comparators for
SpeedDating's 8,378 rows instead of 860,160 for N = 16,384).

Each stage is one batch over every column: the swap bit [key_hi < key_lo] (one sign test),
then one product moves the key and its payload rows (the class labels). The schedule depends
on m only, so nothing about the data is revealed; the order of equal keys is unspecified.
"""

from __future__ import annotations

import numpy as np

from mpcnet.ops.compare import ltz
from mpcnet.schemes.base import Scheme, Shared

Stage = tuple[np.ndarray, np.ndarray]  # (lower, upper) rows: the smaller key goes to lower


def stages(m: int) -> list[Stage]:
    """The comparators of the bitonic sort of m rows, stage by stage (module docstring)."""
    size_all = 1 << max(0, (m - 1).bit_length())
    rows = np.arange(size_all)
    out: list[Stage] = []
    size = 2
    while size <= size_all:
        offset = rows % size
        lower = rows[offset < size // 2]
        out.append((lower, lower - lower % size + size - 1 - lower % size))
        stride = size // 4
        while stride >= 1:
            lower = rows[(rows & stride) == 0]
            out.append((lower, lower + stride))
            stride //= 2
        size *= 2
    return [(lo[hi < m], hi[hi < m]) for lo, hi in out if np.any(hi < m)]


def comparisons(m: int) -> int:
    """Comparators per column (for costs and progress)."""
    return sum(lower.size for lower, _ in stages(m))


async def sort_columns(s: Scheme, elements: Shared, batch: int | None = None) -> Shared:
    """``elements`` (r, m, p): row 0 the keys, rows 1.. their payload; every column sorted by
    its keys (ascending), the payload moving with them. Keys must differ by less than 2^63.
    With ``batch``, the scheme's check records are freed (``Scheme.checkpoint``) whenever
    about that many comparisons have run since the last time, to bound memory."""
    r, m, p = elements.shape
    since = 0
    for lower, upper in stages(m):
        low, high = elements[:, lower], elements[:, upper]
        swap = await ltz(s, s.sub(high[0], low[0]))  # [key_upper < key_lower]
        moved = await s.mul(swap.reshape(1, lower.size, p).broadcast_to((r, lower.size, p)),
                            s.sub(high, low))
        data = elements.data.copy()
        lead = (slice(None),) * (s.lead + 1)
        data[lead + (lower,)] = s.add(low, moved).data
        data[lead + (upper,)] = s.sub(high, moved).data
        elements = Shared(data, s.lead)
        since += lower.size * p
        if batch is not None and since >= batch:
            await s.checkpoint()
            since = 0
    return elements
