"""Layer: schemes. active3's MAC check: the records it weighs, their folding at a checkpoint,
and each party's local terms of the combination [CGHIKLN18 over rings, as in MP-SPDZ's
SpdzWise; the bound of SPDZ2k].

[CGHIKLN18] Chida et al., "Fast large-scale honest-majority MPC for malicious adversaries",
CRYPTO 2018 (checking all products at once); [SPDZ2k] Cramer, Damgard, Escudero, Scholl,
Xing, CRYPTO 2018 (MACs over Z_2^(k+s)). MP-SPDZ's ``SpdzWise`` check (data61/MP-SPDZ,
Protocols/SpdzWise.hpp) combines the products with secret coefficients, as done here.

Every product output, every input's MAC, every authenticated bit and random value is queued
(z_j, m_j); write d_j = alpha z_j - m_j. ``Spdz3.verify`` combines them with coefficients r_j
that are themselves replicated random values nobody knows (uniform in Z_2^128, drawn from the
pairwise PRFs): each party's 3-out-of-3 terms of w = sum r_j z_j and u = sum r_j m_j are local
dot products (``local_terms``), reshared in one round, then t = u - alpha w (one more
product) must be zero.

Why the coefficients are secret. Errors reach later MACs multiplied by secrets: an error e on
m_x becomes e y in the MAC of x y. With public coefficients the cheater knows every r_j, so
with e = 2^127 the check passes exactly when r_x + r_z y is even, a parity it can evaluate for
each guess of y: the abort itself reveals y, whatever happens after the coin; and any product
it sends after the coin could cancel its error for a guessed y. With secret coefficients
t = -sum r_j d_j + (errors added to w, u and alpha w); let V be the least 2-adic valuation
among the d_j. V is fixed by the cheater's own additive errors and alpha, not by data (every
d_j is its own error plus earlier d_i times secrets, so the first output reaching valuation V
keeps it). The component of each r_j the cheater lacks is uniform, so sum r_j d_j is uniform
over the multiples of 2^V whatever the secrets are, and t is uniform on a coset that depends
on its errors and alpha only: both the outcome and the value t itself are independent of the
data. A wrong low 64 bits (V < 64 unless the cheater guesses alpha) passes with probability
about 2^-57 (s + 1 possible valuations, each passing with 2^-(128 - V) at most: the bound of
[SPDZ2k] for s = 64); errors only in the upper 64 bits cannot change any output and pass with
a probability that depends on nothing secret. A product with a value-only factor takes its MAC
from the other factor; its record's d is then the cheater's errors plus that factor's d times
the data, and the least valuation is still reached first by the cheater's own error, so the
argument holds unchanged (docs/active3.md).

Folding. A job too large to keep every record until its end folds them after each block
(``MacRecords.fold``): their coefficients are drawn then, after every record they weigh, and
stay secret (nothing is sent), so the one zero test at the end weighs every record of the job
exactly as a single check would. Running the check in parts instead would let an error that
passed one part reach the next only multiplied by secrets, so that a later abort told their
parity (found by review; tests/test_adaptive.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mpcnet import ring128

_CHUNK = 1 << 13  # elements per piece of the combination
Terms = Callable[[list[np.ndarray]], np.ndarray]  # records -> this party's terms of w and u


def local_terms(records: list[np.ndarray], coefficients: Callable[[int], np.ndarray],
                observe: Callable[[str, object], None]) -> np.ndarray:
    """This party's 3-out-of-3 terms of w = sum_j r_j z_j and u = sum_j r_j (alpha z)_j over
    the records (limb, slot, v, n), as (limb, v), without its share of zero: per record and
    cache-sized piece, r_i (z_i + z_{i+1}) + r_{i+1} z_i for the replicated coefficients
    ``coefficients(count)`` (limb, slot, count), each drawn after every record it weighs."""
    total = ring128.zeros((2,))
    for entry, data in enumerate(records):
        for start in range(0, data.shape[-1], _CHUNK):
            z = data[..., start:start + _CHUNK]  # (limb, slot, v, c)
            r = coefficients(z.shape[-1])  # (limb, slot, c)
            observe("mac-coefficients", (entry, start, r))
            total = ring128.add(total, ring128.replicated_dot(r[:, :, None], z))
    return total


class MacRecords:
    """The MAC check's queued (value, MAC) records and the terms of w and u folded from
    earlier ones; ``len`` counts the records not yet folded."""

    def __init__(self) -> None:
        self._records: list[np.ndarray] = []
        self._folded: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._records)

    @property
    def pending(self) -> bool:
        """Whether the MAC zero test has anything to weigh."""
        return bool(self._records) or self._folded is not None

    def queue(self, data: np.ndarray) -> None:
        """Queue the (limb, slot, v, ...) value/MAC pairs of ``data``."""
        self._records.append(data.reshape(2, 2, 2, -1))

    def fold(self, terms: Terms) -> None:
        """Fold the records into this party's running terms of w and u and free them."""
        if self._records:
            sums = terms(self._records)
            self._folded = sums if self._folded is None else ring128.add(self._folded, sums)
            self._records = []

    def take(self, terms: Terms) -> np.ndarray | None:
        """This party's terms of w and u over every record and fold (None if there are
        none); the check starts afresh."""
        sums = terms(self._records) if self._records else None
        if self._folded is not None:
            sums = self._folded if sums is None else ring128.add(sums, self._folded)
        self._records, self._folded = [], None
        return sums
