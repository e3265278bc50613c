"""Layer: featsel. The chi-square score of the mean split, as an exact fraction, for all features.

The feature is discretised as pi_MS-GINI does (Li, Dowsley, De Cock 2021, Protocol 2, lines
1-11: the split at the mean, theta < f_i, tested exactly), so the 2 x n table of counts (a, b;
A_c, B_c; class sizes n_c) is the one ``mpcnet.featsel.msgini.class_counts`` computes. Then
chi2 = m (sum_c A_c^2 / (a n_c) + B_c^2 / (b n_c) - 1), and times the common P = prod_c n_c it
is a strictly increasing function of

    Q / D = (b' sum_c w_c A_c^2 + a sum_c w_c B_c^2) / (a b'),  w_c = P / n_c,

MS-GINI's fraction with class-weighted squares (``mpcnet.plain.scores.chi2_fraction``). An
empty side (b = 0) and an absent class (n_c = 0) contribute nothing: b' = b + [b == 0] and
n'_c = n_c + [n_c == 0], one batch of sign tests. The weights w_c = prod_{c' != c} n'_c' take
prefix and suffix products (n - 2 rounds and one more). Q/D is compared exactly, whole or in
limbs (``mpcnet.featsel.msgini.square_plan``), with the bounds

    P <= max_j (m / j)^j (j nonempty classes),  X = sum_c w_c A_c^2 <= P a,
    Q <= 2 P a b' <= P (m + 1)^2 / 2,  D <= (m + 1)^2 / 4,

which needs P m < 2^64: about 4 million rows for two classes, 150,000 for three
(``max_rows``); beyond, the job is refused before it starts.
"""

from __future__ import annotations

import functools

from mpcnet.errors import InputError
from mpcnet.featsel.msgini import MAX_RANKED_ROWS, split_table, square_fractions, square_plan
from mpcnet.ops.compare import ltz
from mpcnet.ops.fraction import Fractions, LimbPlan
from mpcnet.schemes.base import Scheme, Shared, concat


def size_product_bound(m: int, n_classes: int) -> int:
    """An upper bound on P = prod of the nonzero class sizes (at most n_classes of them, summing
    to m): max over j of ceil(m / j)^j."""
    return max((-(-m // j)) ** j for j in range(1, n_classes + 1))


def limb_plan(m: int, n_classes: int, tie_range: int) -> LimbPlan | None:
    """How to compare the chi-square fractions of m rows and n classes exactly (None: beyond
    what Z_2^64 can compare)."""
    product = size_product_bound(m, n_classes)
    return square_plan(m, tie_range, product * (m + 1) ** 2 // 2 + 1, (m + 1) ** 2 // 4 + 1,
                       product * m + 1)


@functools.lru_cache(maxsize=64)
def max_rows(n_classes: int) -> int:
    """The largest m whose chi-square fractions ``limb_plan`` can compare (ranking ties)."""
    low, high = 2, MAX_RANKED_ROWS
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if limb_plan(mid, n_classes, 1) is not None else (low, mid - 1)
    return low


def check_rows(m: int, n_classes: int) -> None:
    """Refuse a job whose chi-square fractions cannot be compared exactly, naming the bound."""
    if not 2 <= m <= max_rows(n_classes):
        raise InputError(f"chi2 is exact for 2 to {max_rows(n_classes):,} rows with "
                         f"{n_classes} classes; this dataset has {m:,}")


async def _weights(s: Scheme, sizes: Shared) -> Shared:
    """w_c = prod_{c' != c} sizes_c' for the n class sizes (prefix and suffix products)."""
    n = sizes.shape[0]
    if n == 2:
        return concat([sizes[1:], sizes[:1]])
    prefix, suffix = [sizes[0:1]], [sizes[n - 1:n]]  # prefix[i] = prod_{c <= i}
    for i in range(1, n - 1):
        both = await s.mul(concat([prefix[-1], suffix[-1]]),
                           concat([sizes[i:i + 1], sizes[n - 1 - i:n - i]]))
        prefix.append(both[0:1])
        suffix.append(both[1:2])
    # w_0 = suffix of 1..n-1, w_{n-1} = prefix of 0..n-2, w_c = prefix[c-1] suffix[n-2-c]
    middle = await s.mul(concat(prefix[:n - 2]), concat(suffix[n - 3::-1]))
    return concat([suffix[n - 2], middle, prefix[n - 2]])


async def fractions_of_counts(s: Scheme, b: Shared, above: Shared, label_counts: Shared, m: int,
                              plan: LimbPlan) -> Fractions:
    """The chi-square fractions of p features from the counts of the mean split (module
    docstring)."""
    a, below_all, above_all = split_table(s, b, above, label_counts, m)
    n, p = below_all.shape
    sizes = concat([label_counts, s.add_public(s.neg(s.sum(label_counts, 0)).reshape(1), m)])
    counts = concat([below_all, above_all])
    squares = (await s.mul(counts, counts)).reshape(2 * n, p)
    zero = await ltz(s, s.add_public(concat([b, sizes]), -1))
    b_nonzero = s.add(b, zero[:p])
    weights = await _weights(s, s.add(sizes, zero[p:]))
    weighted = await s.mul(squares, concat([weights, weights]).reshape(2 * n, 1)
                           .broadcast_to((2 * n, p)))
    x, y = s.sum(weighted[:n], 0), s.sum(weighted[n:], 0)
    product = size_product_bound(m, n)
    return await square_fractions(s, x, y, a, b_nonzero, plan, (product * m).bit_length())
