"""Layer: featsel. The label matrix must be one-hot before anything leaves the servers.

pi_MS-GINI (Protocol 2) takes the m x (n-1) class-membership matrix L as given. A data owner
who uploads other values (a 2, a row with two ones, a huge word) would make the class counts
wrap in Z_2^64, the comparisons of pi_FILTER-FS inconsistent and the selection matrix T no
longer one 1 per column, so that D' = D x T could carry sums of columns nobody selected (the
fourth review, demonstrated in memory). The servers cannot see L, so they check it jointly:
every entry x and every row sum r must satisfy x (1 - x) = 0 and r (1 - r) = 0, which in
Z_2^64 holds exactly for x, r in {0, 1} (``one_hot_defects``).

The products are computed with the first products of the job and pass the scheme's checks
with all others (one product round); they are opened after the job's final check and before any
output (one round). Computing on a bad L before that is harmless: every opening on the way is
masked and no output leaves before the check. For an honest owner every product is zero, so the
opening tells nothing; for a dishonest one it shows that owner's own bad rows. The outcome
depends only on what the owners sent, never on a coin or on another owner's data.
"""

from __future__ import annotations

import numpy as np

from mpcnet.errors import InputError
from mpcnet.schemes.base import Scheme, Shared, concat


def one_hot_defects(x: np.ndarray) -> np.ndarray:
    """Where x (1 - x) != 0 in Z_2^64, i.e. where x is not 0 or 1: x and 1 - x have opposite
    parities, so one of them is odd (a unit) and the product is 0 only if the other is 0."""
    x = np.asarray(x, dtype=np.uint64)
    return x * (np.uint64(1) - x) != 0


async def one_hot_products(s: Scheme, labels: Shared) -> Shared:
    """Shares of x (1 - x) for every entry of the m x c ``labels``, then r (1 - r) for every
    row sum r: all zero exactly when ``labels`` is one-hot (at most one 1 per row)."""
    m = labels.shape[0]
    both = concat([labels, s.sum(labels, 1).reshape(m, 1)])
    return await s.mul(both, s.add_public(s.neg(both), 1))


async def open_one_hot(s: Scheme, products: Shared) -> np.ndarray:
    """Open ``one_hot_products`` before the scheme's pending checks (``Scheme.open_masked``,
    so it may travel beside other rounds: ``gini_fs`` opens them with the fractions); act on
    them only through ``refuse_malformed`` after ``verify``. What the opening shows is
    independent of the data whatever a cheating server adds: x (1 - x) + e with e its own
    additive error, chosen from shares that tell it nothing of x, so e alone for an honest
    owner's labels, and an owner's bad rows are what the check reveals anyway. The products'
    MAC records stay queued for the job's next ``verify``, which runs before the verdict, so a
    cheater's e stops the job as ``CheatingDetected`` and never blames an owner."""
    return await s.open_masked(products)


def refuse_malformed(opened: np.ndarray, m: int, c: int) -> None:
    """Abort with ``InputError`` unless the opened one-hot products of m x c labels are all
    zero, naming the first bad row (call it after ``verify``: ``open_one_hot``)."""
    bad = np.flatnonzero(opened != 0)
    if bad.size:
        cells = bad[bad < m * c]
        row = int(cells[0] // c) if cells.size else int(bad[0] - m * c)
        raise InputError(f"the label matrix is not one-hot: row {row + 1} (of all {m} rows, in "
                         "contribution order) has a value other than 0 or 1 or more than one "
                         "class; a data owner uploaded malformed labels")
