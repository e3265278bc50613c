"""Layer: featsel. pi_MS-GINI (Protocol 2 of Li, Dowsley, De Cock, 2021) for all features at once.

The paper loops over features and rows. Here every step is one batch over the m x p matrix:
- Line 1 and 4 (split at the mean theta = S/m, flag = [theta < f_i]): no division is needed,
  since theta < f_i iff S - m*f_i < 0, an exact integer test on the encoded values.
- Lines 5-11 (counters b and B[c]): b = column sums of the flags; B = flags^T L is one matrix
  product whose communication is p x (n-1) ring elements, independent of m.
- Lines 12-14: a, A[c], A[n], B[n] are local.
- Lines 15-17 (Gini with two divisions): kept exact as a fraction. The score without the 1/m
  factor is G = m - Q/D with Q = b*(A.A) + a*(B.B) and D = a*b, so lower G means higher Q/D.
  An empty '>' side (b = 0, all values equal) contributes 0: b is replaced by b + [b == 0],
  which leaves Q/D = A.A/a as the plaintext reference computes it.
"""

from __future__ import annotations

from mpcnet.errors import InputError
from mpcnet.fixedpoint import MAX_ROWS
from mpcnet.ops.compare import ltz
from mpcnet.ops.topk import fraction_bits, wide_split
from mpcnet.schemes.base import Scheme, Shared, concat, split


def _max_ranked_rows() -> int:
    """The largest m whose MS-GINI fractions the 64-bit ring can still rank exactly."""
    low, high = 2, MAX_ROWS
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if wide_split(*fraction_bits(mid)) is not None else (low, mid - 1)
    return low


MAX_RANKED_ROWS = _max_ranked_rows()  # 370,727


async def msgini_fraction(s: Scheme, data: Shared, labels: Shared) -> tuple[Shared, Shared]:
    """Shares of (Q, D) per feature for the m x p ``data`` and m x (n-1) one-hot ``labels``."""
    m, p = data.shape
    if not 2 <= m < MAX_ROWS:
        raise InputError(f"MS-GINI needs between 2 and {MAX_ROWS - 1} rows, got {m}")
    # Protocol 2, lines 1 and 4: flag_ij = [theta_j < f_ij] = [S_j - m*f_ij < 0].
    with s.engine.phase("scoring"):
        column_sums = s.sum(data, 0).reshape(1, p).broadcast_to((m, p))
        flags = await ltz(s, s.sub(column_sums, s.mul_public(data, m)))
        # Lines 5-11: b = sum of flags, B[c] = sum of flag * L[., c] (one matrix product).
        b = s.sum(flags, 0)
        above = await s.matmul(flags.T, labels)  # p x (n-1)
        label_counts = s.sum(labels, 0).reshape(1, -1).broadcast_to(above.shape)
        # Lines 12-14: the last class and the '<=' side by subtraction.
        a = s.add_public(s.neg(b), m)
        below = s.sub(label_counts, above)
        above_all = concat([above.T, s.sub(b, s.sum(above, 1)).reshape(1, p)]).reshape(-1, p)
        below_all = concat([below.T, s.sub(a, s.sum(below, 1)).reshape(1, p)]).reshape(-1, p)
        # Lines 15-16: A.A and B.B per feature, then b + [b == 0] with [b == 0] = [b - 1 < 0].
        counts = concat([below_all, above_all])
        squares = await s.mul(counts, counts)
        sq_below, sq_above = split(squares, [below_all.shape, above_all.shape])
        a_dot, b_dot = s.sum(sq_below, 0), s.sum(sq_above, 0)
        b_nonzero = s.add(b, await ltz(s, s.add_public(b, -1)))
        q_and_d = await s.mul(concat([b_nonzero, a, a]), concat([a_dot, b_dot, b_nonzero]))
        ba, ab, d = split(q_and_d, [(p,), (p,), (p,)])
    return s.add(ba, ab), d


def check_exact_ranking(m: int) -> None:
    """The exact ranking splits Q when products exceed 2^63; beyond that it cannot fit."""
    if wide_split(*fraction_bits(m)) is None:
        raise InputError(f"exact MS-GINI ranking in the 64-bit ring supports up to "
                         f"{MAX_RANKED_ROWS:,} rows; this dataset has {m:,}")
