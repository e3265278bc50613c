"""Layer: featsel. The chi-square score of the mean split, as an exact fraction, for all features.

The feature is discretised as pi_MS-GINI does (Li, Dowsley, De Cock 2021, Protocol 2, lines
1-11: the split at the mean, theta < f_i, tested exactly), so the 2 x n table of counts (a, b;
A_c, B_c; class sizes n_c) is the one ``mpcnet.featsel.msgini.class_counts`` computes. Then
chi2 = m (sum_c A_c^2 / (a n_c) + B_c^2 / (b n_c) - 1), and times the common P = prod_c n_c it
is a strictly increasing function of

    Q / D = (b' sum_c w_c A_c^2 + a sum_c w_c B_c^2) / (a b'),  w_c = P / n_c,

MS-GINI's fraction with class-weighted squares (``mpcnet.plain.scores.chi2_fraction``). An
empty side (b = 0) and an absent class (n_c = 0) contribute nothing: b' = b + [b == 0] and
n'_c = n_c + [n_c == 0], one batch of sign tests. Two layouts, by public bounds:

- P m < 2^64 (about 4.2 million rows for two classes, 149,388 for three, 21,616 for four):
  the weights w_c = prod_{c' != c} n'_c' by prefix and suffix products (n - 2 rounds and one
  more), X = sum_c w_c A_c^2 <= P a and Y in one word each, and Q/D compared whole or in limbs
  as MS-GINI's (``mpcnet.featsel.msgini.square_plan``), with Q <= 2 P a b' <= P (m + 1)^2 / 2
  and D <= (m + 1)^2 / 4, P bounded by max_j (m / j)^j over j nonempty classes;
- beyond, Q has up to 24 (n + 2) bits, so the squares (below 2^48) become limbs
  (``mpcnet.ops.bigint``) and are multiplied by the n - 1 other class sizes and by b' or a, one
  round each, the limbs normalised where their bounds would pass the ring; D = a b' < 2^48 is
  cut into limbs of the same width. That plan comes from a dry run of the same steps.

So Q/D is exact for every m up to ``MAX_RANKED_ROWS`` and every number of classes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from mpcnet.featsel import layout
from mpcnet.featsel.msgini import MAX_RANKED_ROWS, split_table, square_fractions, square_plan
from mpcnet.ops import bigint
from mpcnet.ops.bigint import Big
from mpcnet.ops.compare import ltz, signed_bits
from mpcnet.ops.fraction import Fractions, LimbPlan, fewest_levels
from mpcnet.schemes.base import Scheme, Shared, concat

COUNT_BITS = MAX_RANKED_ROWS.bit_length()  # every count is below 2^24
_WIDTHS = (24, 20, 16, 12, 8)


def size_product_bound(m: int, n_classes: int) -> int:
    """An upper bound on P = prod of the nonzero class sizes (at most n_classes of them, summing
    to m): max over j of ceil(m / j)^j."""
    return max((-(-m // j)) ** j for j in range(1, n_classes + 1))


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


async def _numerator(s: Scheme | None, squares: Big, sizes: list[Shared | None],
                     sides: tuple[Shared, Shared] | None, m: int) -> Big:
    """Q = b' sum_c w_c A_c^2 + a sum_c w_c B_c^2 from the squares (A_c^2 then B_c^2, c < n)
    as limbs, the class sizes and (b', a); dry when ``s`` is None."""
    n = len(sizes)
    p = squares.count // (2 * n)
    weighted = await times_other_sizes(s, squares, list(range(n)) * 2, sizes, m)
    parts = bigint.parts(s, weighted, 2 * n)
    x, y = await bigint.total(s, parts[:n]), await bigint.total(s, parts[n:])
    both = await bigint.mul_word(s, bigint.join(s, [x, y]),
                                 bigint.lanes(s, list(sides), p) if sides else None, m + 1)
    below, above = bigint.parts(s, both, 2)
    return await bigint.normalise(s, await bigint.add(s, below, above))


def feature_bytes(setting: str, m: int, n_classes: int) -> int:
    """Peak bytes per feature of the limb layout's step (its 2n weighted squares as limbs, cut
    into bits by ``normalise``); the word layout's is a few words."""
    plan = limb_plan(m, n_classes, 1)
    if plan is None or not plan.signed:
        return 0
    return layout.feature_bytes(setting, 2 * n_classes, plan.num_limbs)


async def times_other_sizes(s: Scheme | None, terms: Big, classes: Sequence[int | None],
                            sizes: list[Shared | None], m: int) -> Big:
    """Each part of ``terms`` (parts of equal size, one per entry of ``classes``) times the
    size of every class but its own (None: times every size), n rounds of ``mul_word``, the
    sizes at most m: w_c = P / n_c without dividing."""
    size = terms.count // len(classes)
    for j, class_size in enumerate(sizes):
        factors = [class_size if c != j else None for c in classes]
        terms = await bigint.mul_word(s, terms, bigint.lanes(s, factors, size), m + 1)
    return terms


@functools.lru_cache(maxsize=256)
def limb_plan(m: int, n_classes: int, tie_range: int) -> LimbPlan | None:
    """How to compare the chi-square fractions of m rows and n classes exactly: as MS-GINI's
    (``square_plan``: X and Y in one word, then whole or in digits) where P m < 2^64 and that
    fits, else from a dry run of the numerator as limbs at each width (signed limbs), the
    fewest levels that fit."""
    product = size_product_bound(m, n_classes)
    square = square_plan(m, tie_range, product * (m + 1) ** 2 // 2 + 1, (m + 1) ** 2 // 4 + 1,
                         product * m + 1)
    if square is not None:
        return square
    def at(width: int) -> LimbPlan:
        q = bigint.dry_run(_numerator(None, bigint.dry(2 * COUNT_BITS, width, 2 * n_classes),
                                      [None] * n_classes, None, m))
        d = bigint.dry(2 * COUNT_BITS, width, 1)
        return LimbPlan(q.shape.limbs, d.shape.limbs, width, q.shape.bound, d.shape.bound,
                        tie_range, signed=True)
    return fewest_levels(at(width) for width in _WIDTHS)


async def fractions_of_counts(s: Scheme, b: Shared, above: Shared, label_counts: Shared, m: int,
                              plan: LimbPlan) -> Fractions:
    """The chi-square fractions of p features from the counts of the mean split (module
    docstring)."""
    a, below_all, above_all = split_table(s, b, above, label_counts, m)
    n, p = below_all.shape
    sizes = concat([label_counts, s.add_public(s.neg(s.sum(label_counts, 0)).reshape(1), m)])
    counts = concat([below_all, above_all])
    squares, zero = await s.engine.together(  # 2n x p squares, each below 2^48; counts <= m
        s.mul(counts, counts), ltz(s, s.add_public(concat([b, sizes]), -1), signed_bits(m)))
    b_nonzero, sizes = s.add(b, zero[:p]), s.add(sizes, zero[p:])
    if not plan.signed:  # P m < 2^64: the weighted sums X and Y fit a word
        weights = await _weights(s, sizes)
        weighted = await s.mul(squares.reshape(2 * n, p), concat([weights, weights])
                               .reshape(2 * n, 1).broadcast_to((2 * n, p)))
        x, y = s.sum(weighted[:n], 0), s.sum(weighted[n:], 0)
        product = size_product_bound(m, n)
        return await square_fractions(s, x, y, a, b_nonzero, plan, (product * m).bit_length())
    d = await s.mul(a, b_nonzero)
    limbs = await bigint.of_words(s, concat([squares, d]), 2 * COUNT_BITS, plan.limb_bits)
    assert limbs.values is not None
    square_limbs = Big(limbs.values[:, :2 * n * p], limbs.shape, 2 * n * p)
    q = await _numerator(s, square_limbs, [sizes[c] for c in range(n)], (b_nonzero, a), m)
    assert q.values is not None
    assert (q.shape.limbs, limbs.shape.limbs) == (plan.num_limbs, plan.den_limbs)
    return Fractions(q.values, limbs.values[:, 2 * n * p:], plan)
