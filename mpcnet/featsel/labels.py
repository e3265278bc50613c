"""Layer: featsel. The label matrix must be one-hot before anything is computed on it.

pi_MS-GINI (Protocol 2) takes the m x (n-1) class-membership matrix L as given. A data owner
who uploads other values (a 2, a row with two ones, a huge word) would make the class counts
wrap in Z_2^64, the comparisons of pi_FILTER-FS inconsistent and the selection matrix T no
longer one 1 per column, so that D' = D x T could carry sums of columns nobody selected (the
fourth review, demonstrated in memory). The servers cannot see L, so they check it jointly:
every entry x and every row sum r must satisfy x (1 - x) = 0 and r (1 - r) = 0, which holds in
Z_2^64 exactly for x, r in {0, 1} (``one_hot_defects`` says why). The products
are opened in one round: for an honest owner they are all zero, so the opening tells nothing;
for a dishonest one it shows that owner's own bad rows. The outcome depends only on what the
owners sent, never on a coin or another owner's data.
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


async def check_label_matrix(s: Scheme, labels: Shared) -> None:
    """Abort (``InputError``) unless every entry of ``labels`` and every row sum is 0 or 1."""
    m, c = labels.shape
    rows = s.sum(labels, 1).reshape(m, 1)
    both = concat([labels, rows])
    products = await s.mul(both, s.add_public(s.neg(both), 1))
    bad = np.flatnonzero(await s.open(products) != 0)
    if bad.size:
        cells = bad[bad < m * c]
        row = int(cells[0] // c) if cells.size else int(bad[0] - m * c)
        raise InputError(f"the label matrix is not one-hot: row {row + 1} (of all {m} rows, in "
                         "contribution order) has a value other than 0 or 1 or more than one "
                         "class; a data owner uploaded malformed labels")
