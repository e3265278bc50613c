"""Layer: featsel. The correlation of every feature with the class, as an exact fraction.

For a binary class, the score is the squared Pearson correlation r^2 of the feature with the
label (ranking by r^2 is ranking by |r|, PCC in the paper's Table I). For n classes it is the
correlation ratio eta^2 = SS_between / SS_total, the share of the feature's variance that the
class explains: it equals r^2 for two classes, and unlike the correlation with a class code it
does not depend on how the classes are numbered. With S = sum x, S_c = the sum over class c,
n_c the class sizes and P = prod_c n_c (the same for every feature):

    eta^2 = U / (P V),  V = m sum x^2 - S^2 = m SS_total,  U = m sum_c w_c S_c^2 - P S^2,

w_c = P / n_c, so features rank by the fraction U / V, both integers (``mpcnet.plain.scores.
pcc_fraction``). Both are invariant to shifting x, so the servers use x + 2^38 >= 0.

Per data cell (the ``statistics`` of a block or tile, additive over tiles): one A2B of x + 2^38
splits it into hi (19 bits) and lo (20 bits), both back to arithmetic by one masked B2A; the
sums H = sum hi^2, M = sum hi lo and L = sum lo^2 are inner products over the rows, one batched
matrix product (communication 3p, not 3 m p), so sum x^2 = H 2^40 + 2 M 2^20 + L with each sum
below 2^64; S_c comes from one matrix product with the one-hot labels. Per feature: the sums
become limbs (``mpcnet.ops.bigint``, about 200-bit integers), V and U are formed exactly, and
a constant feature (V = 0, then U = 0) gets V = 1: its score is 0, as the reference's. An
absent class (n_c = 0, S_c = 0) counts as size 1. Nothing is opened.
"""

from __future__ import annotations

import functools

import numpy as np

from mpcnet.featsel import layout
from mpcnet.featsel.chi2 import times_other_sizes
from mpcnet.fixedpoint import VALUE_BITS
from mpcnet.ops import bigint
from mpcnet.ops.bigint import Big
from mpcnet.ops.compare import ltz, signed_bits
from mpcnet.ops.convert import a2b, b2a_masked, local_map
from mpcnet.ops.fraction import Fractions, LimbPlan, fewest_levels
from mpcnet.schemes.base import Scheme, Shared, concat, split

U64 = np.uint64
LOW_BITS = 20  # x + 2^38 < 2^39 = hi 2^20 + lo
_WIDTHS = (24, 20, 16, 12, 8)
CELL_COST = 7
"""Bytes held per cell, in sign tests: an A2B and a masked B2A of two words with their check
records. Measured in process on SpeedDating under active3: 2.56 GB per party with blocks of 27
columns at 3, against 1.14 GB for MS-GINI's blocks of 81, so about 6.7 times MS-GINI's per
cell."""


async def statistics(s: Scheme, data: Shared, labels: Shared, column_sums: Shared | None,
                     m: int) -> tuple[Shared, ...]:
    """S, S_c (p x (n - 1)), H, M, L of the rows of ``data`` (module docstring)."""
    del column_sums, m
    rows, p = data.shape
    shifted = s.add_public(data, 1 << VALUE_BITS)
    words = await a2b(s, shifted.reshape(rows * p))
    low = local_map(words, lambda d: d & U64((1 << LOW_BITS) - 1))
    high = local_map(words, lambda d: d >> U64(LOW_BITS))
    hi, lo = split(await b2a_masked(s, concat([high, low])), [(rows, p), (rows, p)])
    # the 3p sums of products are 3p inner products over the rows: one batched matrix product
    # (a reshare of 3p values, and under active3 3p MAC records instead of 3 rows p)
    left = concat([hi.T, hi.T, lo.T]).reshape(3 * p, 1, rows)
    right = concat([hi.T, lo.T, lo.T]).reshape(3 * p, rows, 1)
    squares = split(await s.matmul(left, right), [(p,)] * 3)
    return (s.sum(shifted, 0), await s.matmul(shifted.T, labels), *squares)


async def _terms(s: Scheme | None, sums: Big, high: Big, middle: Big, low: Big,
                 class_sums: list[Big], sizes: list[Shared | None], m: int) -> tuple[Big, Big]:
    """U and V (module docstring) from the sums as limbs; dry when ``s`` is None."""
    squares = await bigint.add(s, await bigint.scale(s, high, 1, 2 * LOW_BITS),
                               await bigint.add(s, await bigint.scale(s, middle, 2, LOW_BITS),
                                                low))
    v = await bigint.add(s, await bigint.scale(s, squares, m), await bigint.mul(s, sums, sums),
                         subtract=True)
    n = len(sizes)
    terms = bigint.join(s, class_sums + [sums])  # (n + 1) p values
    # S_c^2 times every class size but its own (P / n_c), S^2 times all of them (P)
    weighted = await times_other_sizes(s, await bigint.mul(s, terms, terms),
                                       [*range(n), None], sizes, m)
    parts = bigint.parts(s, weighted, n + 1)
    between = await bigint.total(s, parts[:n])
    u = await bigint.add(s, await bigint.scale(s, between, m), parts[n], subtract=True)
    return u, v


async def _final(s: Scheme | None, u: Big, v: Big) -> tuple[Big, Big]:
    """U and V + [V == 0], normalised to small limbs for the comparison."""
    u, v = await bigint.normalise(s, u), await bigint.normalise(s, v)
    zero = await bigint.is_zero(s, v) if s is not None else None
    return u, bigint.add_to_lowest(s, v, zero)


def feature_bytes(setting: str, m: int, n_classes: int) -> int:
    """Peak bytes per feature once the sums are in: n + 4 sums as limbs, cut into bits."""
    plan = limb_plan(m, n_classes, 1)
    return layout.feature_bytes(setting, n_classes + 4, plan.num_limbs if plan else 1)


@functools.lru_cache(maxsize=256)
def limb_plan(m: int, n_classes: int, tie_range: int) -> LimbPlan | None:
    """The plan of the fractions U / V of m rows and n classes, from a dry run of the formula
    at each limb width: the fewest levels that compare exactly."""
    def at(width: int) -> LimbPlan:
        u, v = _dry_shapes(m, n_classes, width)
        return LimbPlan(u.limbs, v.limbs, width, u.bound, v.bound, tie_range, signed=True)
    return fewest_levels(at(width) for width in _WIDTHS)


def sum_bits(m: int) -> int:
    """Every sum of ``statistics`` over m rows is below 2^sum_bits (the largest, sum lo^2,
    below m 2^40)."""
    return (m << (2 * LOW_BITS)).bit_length()


def _dry_shapes(m: int, n: int, width: int) -> tuple[bigint.BigShape, bigint.BigShape]:
    def word(count: int) -> Big:
        return bigint.dry(sum_bits(m), width, count)
    u, v = bigint.dry_run(_terms(None, word(1), word(1), word(1), word(1),
                                 [word(1) for _ in range(n)], [None] * n, m))
    u, v = bigint.dry_run(_final(None, u, v))
    return u.shape, v.shape


async def fractions_of_statistics(s: Scheme, stats: tuple[Shared, ...], label_counts: Shared,
                                  m: int, plan: LimbPlan) -> Fractions:
    """The fractions U / V of p features from the sums of ``statistics``."""
    total, by_class, high, middle, low = stats
    p = total.shape[0]
    last = s.sub(total, s.sum(by_class, 1))
    class_sums = concat([by_class.T, last.reshape(1, p)]).reshape(-1, p)
    n = class_sums.shape[0]
    sizes = concat([label_counts, s.add_public(s.neg(s.sum(label_counts, 0)).reshape(1), m)])
    sizes = s.add(sizes, await ltz(s, s.add_public(sizes, -1), signed_bits(m)))  # absent: 1
    words = await bigint.of_words(s, concat([total, class_sums, high, middle, low]),
                                  sum_bits(m), plan.limb_bits)
    sums, *rest = bigint.parts(s, words, n + 4)
    class_parts, (h, mid, lo) = rest[:n], rest[n:]
    u, v = await _terms(s, sums, h, mid, lo, class_parts, [sizes[c] for c in range(n)], m)
    u, v = await _final(s, u, v)
    assert (u.shape.limbs, v.shape.limbs) == (plan.num_limbs, plan.den_limbs)
    assert u.values is not None and v.values is not None
    return Fractions(u.values, v.values, plan)
