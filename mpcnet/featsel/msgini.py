"""Layer: featsel. pi_MS-GINI (Protocol 2 of Li, Dowsley, De Cock, 2021) for all features at once.

The paper loops over features and rows. Here every step is one batch over the m x p matrix:
- Line 1 and 4 (split at the mean theta = S/m, flag = [theta < f_i]): no division is needed,
  since theta < f_i iff S - m*f_i < 0, an exact integer test on the encoded values.
- Lines 5-11 (counters b and B[c]): b = column sums of the flags, B = flags^T L; the binary
  flags become ring elements only inside these sums (``mpcnet.ops.count``), so what is
  reshared is p x n sums, and the conversion costs a scheme as little as it can make it.
- Lines 12-14: a, A[c], A[n], B[n] are local.
- Lines 15-17 (Gini with two divisions): kept exact as a fraction. The score without the 1/m
  factor is G = m - Q/D with Q = b*(A.A) + a*(B.B) and D = a*b, so lower G means higher Q/D.
  An empty '>' side (b = 0, all values equal) contributes 0: b is replaced by b + [b == 0],
  which leaves Q/D = A.A/a as the plaintext reference computes it.
"""

from __future__ import annotations

from mpcnet.errors import InputError
from mpcnet.fixedpoint import MAX_ROWS
from mpcnet.ops.compare import ltz, msb, signed_bits
from mpcnet.ops.count import bit_counts
from mpcnet.ops.fraction import Fractions, LimbPlan, digits, fewest_levels, whole
from mpcnet.schemes.base import Scheme, Shared, concat, split
from mpcnet.schemes.base import join as join_shared

_LIMB_WIDTHS = range(4, 33)


def bounds(m: int) -> tuple[int, int]:
    """Exclusive bounds of Q and D for m rows: with a + b' <= m + 1 (b' = b + [b == 0]),
    A.A <= a^2 and B.B <= b^2, Q <= a b' (a + b') <= (m+1)^3/4 and D = a b' <= (m+1)^2/4."""
    return (m + 1) ** 3 // 4 + 1, (m + 1) ** 2 // 4 + 1


def limb_plan(m: int, tie_range: int) -> LimbPlan | None:
    """How to compare the MS-GINI fractions of m rows exactly (``mpcnet.ops.fraction``):
    whole when the cross products fit, else the fewest levels of base-2^w limbs, with
    A.A and B.B (at most m^2, reached with a single class, so bits(m^2) bits: one more
    digit than m^2 - 1 needs where m is a power of two) and D split into digits and
    Q_u = b' (A.A)_u + a (B.B)_u < (m + 1)(2^w - 1); None beyond what Z_2^64 can compare."""
    q_bound, d_bound = bounds(m)
    return square_plan(m, tie_range, q_bound, d_bound, m * m + 1)


def square_plan(m: int, tie_range: int, q_bound: int, d_bound: int, square_bound: int
                ) -> LimbPlan | None:
    """The limb plan of fractions Q/D = (b' X + a Y) / (a b') of m rows with Q < q_bound,
    D < d_bound and X, Y < square_bound (MS-GINI: X = A.A; chi-square: weighted squares):
    whole if the cross products fit, else X, Y and D as the fewest levels of w-bit digits;
    None if X does not fit a word or nothing fits."""
    direct = LimbPlan(1, 1, 64, q_bound, d_bound, tie_range)
    if direct.fits():
        return direct
    if square_bound > 1 << 64:
        return None
    return fewest_levels(LimbPlan(-(-(square_bound - 1).bit_length() // w),
                                  -(-(d_bound - 1).bit_length() // w), w,
                                  (m + 1) * ((1 << w) - 1) + 1, 1 << w, tie_range)
                         for w in _LIMB_WIDTHS)


def _max_ranked_rows() -> int:
    """The largest m below MAX_ROWS whose fractions ``limb_plan`` can compare exactly."""
    low, high = 2, MAX_ROWS - 1
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if limb_plan(mid, 1) is not None else (low, mid - 1)
    return low


MAX_RANKED_ROWS = _max_ranked_rows()


def check_rows(m: int, score: str = "MS-GINI") -> None:
    """Refuse a row count the split test or the exact ranking cannot handle, naming the bound."""
    if not 2 <= m <= MAX_RANKED_ROWS:
        raise InputError(f"{score} is exact for 2 to {MAX_RANKED_ROWS:,} rows; this dataset "
                         f"has {m:,}")


async def square_fractions(s: Scheme, x: Shared, y: Shared, a: Shared, b_nonzero: Shared,
                           plan: LimbPlan, square_bits: int) -> Fractions:
    """Q = b' X + a Y and D = a b' as ``plan`` lays them out (whole or limbs), for X, Y below
    2^square_bits."""
    p = a.shape[0]
    q_and_d = await s.mul(concat([b_nonzero, a, a]), concat([x, y, b_nonzero]))
    ba, ab, d = split(q_and_d, [(p,), (p,), (p,)])
    if plan.levels == 1:
        return whole(s.add(ba, ab), d, plan.num_bound, plan.den_bound, plan.tie_range)
    lq, ld = plan.num_limbs, plan.den_limbs
    split_all = await digits(s, concat([x, y, d]), square_bits, plan.limb_bits)
    x_limbs, y_limbs, d_limbs = (split_all[:, i * p:(i + 1) * p] for i in range(3))
    weights = concat([b_nonzero.reshape(1, p).broadcast_to((lq, p)),
                      a.reshape(1, p).broadcast_to((lq, p))])
    parts = await s.mul(weights, concat([x_limbs, y_limbs]))
    num = s.add(*split(parts, [(lq, p), (lq, p)]))
    return Fractions(num, d_limbs[:ld], plan)


def join(parts: list[Fractions]) -> Fractions:
    """The fractions of column blocks side by side, in column order."""
    return Fractions(join_shared([f.num for f in parts], 1),
                     join_shared([f.den for f in parts], 1), parts[0].plan)


async def class_counts(s: Scheme, data: Shared, labels: Shared, column_sums: Shared, m: int
                       ) -> tuple[Shared, Shared]:
    """b and B (p x (n-1)) over the rows of ``data`` (some rows of the m, with their rows of
    ``labels``), given the column sums S over all m rows: counts of tiles of rows add up."""
    rows, p = data.shape
    # Protocol 2, lines 1 and 4: flag_ij = [theta_j < f_ij] = [S_j - m*f_ij < 0]. The block
    # is dropped here: where the caller holds no other reference (gini_fs's staggered
    # steps), it is freed before the sign tests' rounds instead of after them.
    below = [s.sub(column_sums.reshape(1, p).broadcast_to((rows, p)), s.mul_public(data, m))]
    del data
    flags = await msb(s, below.pop())
    # Lines 5-11: b = sum of flags, B[c] = sum of flag * L[., c], the flags converted to
    # ring elements only inside these sums (mpcnet.ops.count).
    return await bit_counts(s, flags, labels)


def split_table(s: Scheme, b: Shared, above: Shared, label_counts: Shared, m: int
                ) -> tuple[Shared, Shared, Shared]:
    """Lines 12-14 of Protocol 2 (local): a, and the n x p class counts of the '<=' and '>'
    sides (the last class and the '<=' side by subtraction)."""
    p = b.shape[0]
    counts_all = label_counts.reshape(1, -1).broadcast_to(above.shape)
    a = s.add_public(s.neg(b), m)
    below = s.sub(counts_all, above)
    above_all = concat([above.T, s.sub(b, s.sum(above, 1)).reshape(1, p)]).reshape(-1, p)
    below_all = concat([below.T, s.sub(a, s.sum(below, 1)).reshape(1, p)]).reshape(-1, p)
    return a, below_all, above_all


async def fractions_of_counts(s: Scheme, b: Shared, above: Shared, label_counts: Shared, m: int,
                              plan: LimbPlan) -> Fractions:
    """Lines 12-16 of Protocol 2 from the counts b and B of p features and the class sizes."""
    check_rows(m)
    a, below_all, above_all = split_table(s, b, above, label_counts, m)
    # Lines 15-16: A.A and B.B per feature, and beside them (the same rounds) b + [b == 0]
    # with [b == 0] = [b - 1 < 0], a sign test as narrow as 0 <= b <= m allows.
    counts = concat([below_all, above_all])
    squares, empty = await s.engine.together(
        s.mul(counts, counts), ltz(s, s.add_public(b, -1), signed_bits(m)))
    sq_below, sq_above = split(squares, [below_all.shape, above_all.shape])
    a_dot, b_dot = s.sum(sq_below, 0), s.sum(sq_above, 0)
    b_nonzero = s.add(b, empty)
    return await square_fractions(s, a_dot, b_dot, a, b_nonzero, plan, (m * m).bit_length())
