"""Layer: ops. Constant-round argmin and top-k by ranking, yielding the selection matrix T.

Protocol 1 of Li, Dowsley, De Cock (2021) finds the k best scores with k sequential argmins.
Here every score is compared with every other in one batch (p(p-1)/2 comparisons, ties broken
by the lower index), each feature's rank is a local sum of the outcomes, and
T[j][r] = [rank_j == r] for r < k comes from one more batch of comparisons:
[rank_j <= r] - [rank_j <= r - 1]. The result is exactly the paper's T, in a number of rounds
that does not depend on p or k (docs/design.md, section 4).
"""

from __future__ import annotations

import numpy as np

from mpcnet.ops.compare import ltz, msb
from mpcnet.ops.convert import a2b, bit_to_arith, bits_of
from mpcnet.schemes.base import Scheme, Shared, concat, split


def _pairs(p: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(p, 1)


def ranks_from_losses(s: Scheme, i_loses: Shared, p: int) -> Shared:
    """Ranks (0 = best) from i_loses = [feature j beats feature i] over the pairs i < j of
    ``np.triu_indices(p, 1)``; local."""
    rows, cols = _pairs(p)
    lead = (slice(None),) * s.lead
    losses = np.zeros(i_loses.data.shape[:s.lead] + (p, p), dtype=np.uint64)
    losses[lead + (rows, cols)] = i_loses.data
    loss_matrix = Shared(losses, s.lead)
    # rank_j = #{i : i beats j}; for i < j that is 1 - losses[i, j], for i > j losses[j, i]
    beaten_by_lower = s.add_public(s.neg(s.sum(loss_matrix, 0)), np.arange(p, dtype=np.uint64))
    beaten_by_higher = s.sum(loss_matrix, 1)
    return s.add(beaten_by_lower, beaten_by_higher)


async def ranks_from_differences(s: Scheme, diff: Shared, p: int) -> Shared:
    """Ranks (0 = best) from ``diff`` over the pairs i < j of ``np.triu_indices(p, 1)``, where
    feature i beats feature j iff diff >= 0 (so ties go to the lower index)."""
    return ranks_from_losses(s, await ltz(s, diff), p)


async def selection_matrix(s: Scheme, rank: Shared, k: int) -> Shared:
    """The p x k 0/1 matrix T with T[j][r] = [rank_j == r] (Protocol 1's T)."""
    p = rank.shape[0]
    thresholds = np.arange(1, k + 1, dtype=np.int64)[None, :]
    at_most = await ltz(s, s.add_public(rank.reshape(p, 1).broadcast_to((p, k)),
                                     -thresholds))
    shifted = np.zeros(at_most.data.shape, dtype=np.uint64)
    shifted[..., 1:] = at_most.data[..., :-1]
    return s.sub(at_most, Shared(shifted, s.lead))


def fraction_bits(rows: int) -> tuple[int, int]:
    """Bit lengths of Q <= m^3/4 and D <= m^2/4 for the MS-GINI fraction of ``rows`` rows."""
    return (rows ** 3 // 4).bit_length(), (rows ** 2 // 4).bit_length()


def wide_split(q_bits: int, d_bits: int) -> int | None:
    """The split point t of ``_losses_split`` for these bounds, or None if the 64-bit ring
    cannot rank them exactly (q_bits + 2*d_bits must be at most 125)."""
    t = max(q_bits + d_bits - 63, 0)
    return t if t + d_bits + 1 <= 63 else None


async def _losses_split(s: Scheme, num: Shared, den: Shared, q_bits: int, d_bits: int) -> Shared:
    """[num_i*den_j - num_j*den_i < 0] for i < j when the products overflow 64 bits.

    num = Nh*2^t + Nl (exact bit split); then the difference is X*2^t + Y with
    X = Nh_i*den_j - Nh_j*den_i and Y = Nl_i*den_j - Nl_j*den_i, both exact in the ring, and
    |Y| < 2^(t+d_bits). If |X| >= 2^d_bits the sign is X's; otherwise X*2^t + Y is small
    enough (< 2^(t+d_bits+1) <= 2^63) to be formed and tested exactly.
    """
    p = num.shape[0]
    t = wide_split(q_bits, d_bits)
    if t is None:
        raise ValueError(f"fractions of {q_bits} and {d_bits} bits cannot be ranked exactly "
                         "in the 64-bit ring")
    words = await a2b(s, num)
    low = s.and_public(words, np.uint64((1 << t) - 1))
    high = s.shift(words, -t)
    halves = await bits_of(s, concat([high, low]), range(max(q_bits - t, t)))
    weights = (np.uint64(1) << np.arange(halves.shape[0], dtype=np.uint64)).reshape(-1, 1)
    num_split = s.sum(s.mul_public(halves, weights), 0).reshape(2 * p, 1)  # [Nh; Nl]
    cross = await s.matmul(num_split, den.reshape(1, p))  # N*_i * den_j
    rows, cols = _pairs(p)
    x = s.sub(cross[rows, cols], cross[cols, rows])
    y = s.sub(cross[p + rows, cols], cross[p + cols, rows])
    z = s.add(s.mul_public(x, 1 << t), y)
    bound = -(1 << d_bits)
    tests = await msb(s, concat([x, z, s.add_public(x, bound), s.add_public(s.neg(x), bound)]))
    x_neg, z_neg, below, above = split(tests, [x.shape] * 4)
    small = await s.and_(below, above)  # -2^d_bits < X < 2^d_bits
    use_z = await s.and_(small, s.xor(x_neg, z_neg))
    return await bit_to_arith(s, s.xor(x_neg, use_z))


async def topk_fraction(s: Scheme, num: Shared, den: Shared, k: int,
                        bits: tuple[int, int] = (31, 31)) -> Shared:
    """T for the k largest num/den (den > 0), compared exactly by cross-multiplication:
    num_i/den_i >= num_j/den_j iff num_i*den_j - num_j*den_i >= 0. ``bits`` bounds the
    bit lengths of num and den; products up to 2^63 are tested directly, larger ones through
    an exact split of num (``_losses_split``)."""
    p = num.shape[0]
    q_bits, d_bits = bits
    if q_bits + d_bits <= 63:
        cross = await s.matmul(num.reshape(p, 1), den.reshape(1, p))  # num_i * den_j
        rows, cols = _pairs(p)
        losses = await ltz(s, s.sub(cross[rows, cols], cross[cols, rows]))
    else:
        losses = await _losses_split(s, num, den, q_bits, d_bits)
    return await selection_matrix(s, ranks_from_losses(s, losses, p), k)


async def topk_values(s: Scheme, scores: Shared, k: int, largest: bool = False) -> Shared:
    """T for the k smallest (or largest) scores, ties broken by the lower index."""
    p = scores.shape[0]
    rows, cols = _pairs(p)
    diff = s.sub(scores[rows], scores[cols]) if largest else s.sub(scores[cols], scores[rows])
    return await selection_matrix(s, await ranks_from_differences(s, diff, p), k)


async def argmin(s: Scheme, scores: Shared) -> Shared:
    """One-hot vector of the smallest score (lowest index among ties), like pi_ARGMIN."""
    return (await topk_values(s, scores, 1))[:, 0]
