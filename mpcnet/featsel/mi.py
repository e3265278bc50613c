"""Layer: featsel. The mutual information of the mean split with the class, for all features.

The feature is discretised as for MS-GINI and chi-square (the split at the mean, Protocol 2 of
Li, Dowsley, De Cock 2021, lines 1-14), giving the 2 x n table of counts: sides a, b and cells
A_c, B_c. The class entropy is the same for every feature, so MI ranks as

    F = sum_{cells} t log2 t - sum_{sides} t log2 t,   MI = H(class) + F / m,

with t log2 t computed privately and deterministically in fixed point (``mpcnet.ops.log2``,
31 fractional bits, relative error below ``LOG_ERROR`` = 1.1e-9), exactly as the reference
``mpcnet.plain.scores.mi_fraction`` does. The fixed-point F is an integer, compared exactly:
Q = F + ``mi_offset(m)`` > 0 over D = 1, whole when Q N fits 63 bits for the tie range N, else
Q in two or more digits. The selection therefore equals the reference's exactly, ties
included; against the real-valued MI, the error of F is at most 2 m LOG_ERROR (the cells and
the sides each count m rows), so only features whose true MI differ by less than
4 LOG_ERROR = 4.4e-9 bits can be ordered differently (docs/design.md, section 4.1, counts
them on the bundled datasets). Bounded mutual information (ESORICS 2024) was not needed: the
logarithm costs 2n + 2 values per feature, negligible beside the split.
"""

from __future__ import annotations

import numpy as np

from mpcnet.featsel import layout
from mpcnet.featsel.msgini import split_table
from mpcnet.ops.fraction import Fractions, LimbPlan, digits, fewest_levels, whole
from mpcnet.ops.log2 import t_log2_t
from mpcnet.plain.log2 import LOG_FRACTION_BITS
from mpcnet.plain.scores import mi_offset
from mpcnet.schemes.base import Scheme, Shared, concat

_LIMB_WIDTHS = range(16, 33)


def numerator_bound(m: int) -> int:
    """Q = F + offset < offset + m 2^31 (F exceeds 0 by at most 2 m LOG_ERROR 2^31)."""
    return mi_offset(m) + (m << LOG_FRACTION_BITS)


def feature_bytes(setting: str, m: int, n_classes: int) -> int:
    """Peak bytes per feature of the logarithm: 2n + 2 counts, each cut into bits."""
    del m
    return layout.feature_bytes(setting, 2 * n_classes + 2)


def limb_plan(m: int, n_classes: int, tie_range: int) -> LimbPlan | None:
    """Whole when Q N fits, else Q as the fewest w-bit digits over the one-limb D = 1."""
    del n_classes  # the bound does not depend on the classes
    q_bound = numerator_bound(m)
    direct = LimbPlan(1, 1, 64, q_bound, 2, tie_range)
    if direct.fits():
        return direct
    bits = (q_bound - 1).bit_length()
    return fewest_levels(LimbPlan(-(-bits // w), 1, w, 1 << w, 2, tie_range)
                         for w in _LIMB_WIDTHS)


async def fractions_of_counts(s: Scheme, b: Shared, above: Shared, label_counts: Shared, m: int,
                              plan: LimbPlan) -> Fractions:
    """The MI fractions Q / 1 of p features from the counts of the mean split."""
    a, below_all, above_all = split_table(s, b, above, label_counts, m)
    n, p = below_all.shape
    logs = await t_log2_t(s, concat([below_all, above_all, a, b]))
    cells = s.sum(logs[:2 * n * p].reshape(2 * n, p), 0)
    sides = s.add(logs[2 * n * p:(2 * n + 1) * p], logs[(2 * n + 1) * p:])
    q = s.add_public(s.sub(cells, sides), mi_offset(m))
    one = s.public(np.ones((1, p), dtype=np.uint64))
    if plan.levels == 1:
        return whole(q, one, plan.num_bound, plan.den_bound, plan.tie_range)
    bits = (numerator_bound(m) - 1).bit_length()
    return Fractions(await digits(s, q, bits, plan.limb_bits), one, plan)

