"""Layer: featsel. The best-split Gini impurity of every feature (GI of the paper's Table I).

CART's score: the Gini impurity of the best binary split x <= t over every threshold t. With
the column sorted, the split after the i-th smallest value has a = i rows on the left and
b = m - i on the right, and with per-class counts A (left) and B (right) its impurity without
the 1/m factor is m - Q_i/D_i with MS-GINI's fraction (``mpcnet.featsel.msgini``):
Q_i = b'_i (A.A) + a_i (B.B), D_i = a_i b'_i, b' = max(b, 1). A split between two equal
values is not a split: it gets Q_i = 0 (below every real candidate). The candidate i = m (no
split, D = m) is always there, so a constant column scores the impurity of the whole set, and
every real split scores at least as well (Gini impurity is concave), which is the reference's
rule (``mpcnet.plain.scores.gini_fraction``). The score is max_i Q_i/D_i, exact.

Per block of whole columns (``Score.whole_columns``), following the sort-then-scan of Abspoel,
Escudero, Volgushev (PETS 2021) for decision trees:
1. sort every column with its labels (``mpcnet.ops.sort``: one odd-even merge network for
   all columns, about m log^2 m / 4 sign tests per column);
2. the class counts of every prefix, by a log-step prefix sum (local), and the other side by
   subtraction from the class sizes;
3. A.A and B.B of every split (one product round), zeroed where the next value is equal (one
   sign test per row: [key_{i+1} - key_i - 1 < 0], the keys being sorted);
4. a tournament over the m candidates of every column (log2 m levels of exact fraction
   comparisons, ``mpcnet.ops.fraction``), in a plan of its own without a tie range (whole
   while (m + 1)^5 / 16 < 2^63, about 10,900 rows, else digits), keeping A.A, B.B, a and b'
   of the winner, from which the ranking's fractions are formed as MS-GINI's.
Equal fractions are equal scores whichever candidate wins, so the ranking's ties stay exact.
"""

from __future__ import annotations

import numpy as np

from mpcnet.featsel import layout
from mpcnet.featsel.msgini import limb_plan, square_fractions
from mpcnet.ops.compare import ltz, msb
from mpcnet.ops.convert import bit_to_arith
from mpcnet.ops.fraction import Fractions, LimbPlan, cascade, cross_digits, sign_tests
from mpcnet.ops.sort import sort_columns
from mpcnet.schemes.base import Scheme, Shared, concat, join, split

CELL_COST = 2
"""Bytes held per cell, in sign tests: the sorted columns with their labels beside a stage's
sign tests (half a column's rows each) and check records."""


def prefix_sums(s: Scheme, x: Shared) -> Shared:
    """Running sums along logical axis 1 of x (r, m, p), by log2 m shifted additions (local)."""
    m = x.shape[1]
    shift = 1
    while shift < m:
        x = join([x[:, :shift], s.add(x[:, shift:], x[:, :m - shift])], 1)
        shift *= 2
    return x


def _sides(m: int) -> tuple[np.ndarray, np.ndarray]:
    """a_i = i and b'_i = max(m - i, 1) of the candidates i = 1..m, as (m, 1) columns."""
    a = np.arange(1, m + 1, dtype=np.uint64)
    return a.reshape(m, 1), np.maximum(m - a, 1).astype(np.uint64).reshape(m, 1)


async def statistics(s: Scheme, data: Shared, labels: Shared, column_sums: Shared | None,
                     m: int) -> tuple[Shared, ...]:
    """A.A and B.B (m, p) of every candidate split of every column, 0 for those between equal
    values (steps 1-3 of the module docstring); ``data`` holds all m rows."""
    del column_sums
    rows, p = data.shape
    assert rows == m, "the best split needs whole columns (Score.whole_columns)"
    n1 = labels.shape[1]
    payload = labels.T.reshape(n1, m, 1).broadcast_to((n1, m, p))
    elements = concat([data.reshape(1, m, p), payload]).reshape(1 + n1, m, p)
    ordered = await sort_columns(s, elements, layout.CHECKED_CELLS.get(s.name))
    keys, below = ordered[0], prefix_sums(s, ordered[1:])
    a, _ = _sides(m)
    last = s.add_public(s.neg(s.sum(below, 0)), a).reshape(1, m, p)
    below_all = concat([below, last]).reshape(1 + n1, m, p)
    sizes = s.sum(labels, 0)
    sizes_all = concat([sizes, s.add_public(s.neg(s.sum(sizes, 0)), m).reshape(1)])
    above_all = s.sub(sizes_all.reshape(1 + n1, 1, 1).broadcast_to((1 + n1, m, p)), below_all)
    tied = await ltz(s, s.add_public(s.sub(keys[1:], keys[:-1]), -1))  # key_{i+1} == key_i
    valid = concat([s.add_public(s.neg(tied), 1), s.public(np.ones((1, p), np.uint64))])
    counts = concat([below_all, above_all])
    squares = (await s.mul(counts, counts)).reshape(2, 1 + n1, m, p)
    sums = concat([s.sum(squares[0], 0), s.sum(squares[1], 0)])
    kept = await s.mul(concat([valid, valid]), sums)
    x, y = split(kept, [(m, p), (m, p)])
    return x, y


async def of_statistics(s: Scheme, stats: tuple[Shared, ...], sizes: Shared, m: int,
                        plan: LimbPlan) -> Fractions:
    """The best candidate of every column (step 4) as fractions laid out by ``plan``."""
    del sizes
    x, y = stats
    p = x.shape[1]
    a, b_nonzero = _sides(m)
    ones = np.ones((1, p), dtype=np.uint64)
    candidates = concat([x, y, s.public(a * ones), s.public(b_nonzero * ones)]
                        ).reshape(4, m, p)
    match = limb_plan(m, 1)
    assert match is not None  # every accepted m (``msgini.check_rows``) has one
    square_bits = (m * m).bit_length()
    while candidates.shape[1] > 1:
        count = candidates.shape[1]
        pairs = count // 2
        first = candidates[:, 0:2 * pairs:2].reshape(4, pairs * p)
        second = candidates[:, 1:2 * pairs:2].reshape(4, pairs * p)
        both = join([first, second], 1)
        fr = await square_fractions(s, both[0], both[1], both[2], both[3], match, square_bits)
        diff = await cross_digits(s, fr.columns(slice(0, pairs * p)),
                                  fr.columns(slice(pairs * p, 2 * pairs * p)))
        first_loses = await bit_to_arith(s, await cascade(
            s, await msb(s, sign_tests(s, diff, match)), match, pairs * p))
        moved = await s.mul(first_loses.reshape(1, pairs * p).broadcast_to((4, pairs * p)),
                            s.sub(second, first))
        winners = s.add(first, moved).reshape(4, pairs, p)
        candidates = winners if count % 2 == 0 else join([winners, candidates[:, count - 1:]], 1)
    best = candidates.reshape(4, p)
    return await square_fractions(s, best[0], best[1], best[2], best[3], plan, square_bits)
