"""Layer: ops. Constant-round argmin and top-k by ranking, yielding the selection matrix T.

Protocol 1 of Li, Dowsley, De Cock (2021) finds the k best scores with k sequential argmins.
Here every score is compared with every other in one batch (p(p-1)/2 comparisons, ties broken
by the lower index), each feature's rank is a local sum of the outcomes, and
`T[j][r] = [rank_j == r]` for r < k comes from one more batch of comparisons:
[rank_j <= r] - [rank_j <= r - 1]. The result is exactly the paper's T, in a number of rounds
that does not depend on p or k (docs/design.md, section 4).
"""

from __future__ import annotations

import numpy as np

from mpcnet.ops.compare import ltz, msb, signed_bits
from mpcnet.ops.convert import bit_to_arith
from mpcnet.ops.fraction import Fractions, cascade, digits_of_products, sign_tests
from mpcnet.schemes.base import Scheme, Shared


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
    """The p x k 0/1 matrix T with `T[j][r] = [rank_j == r]` (Protocol 1's T); 0 <= rank < p,
    so the sign tests of rank_j - r - 1 are only as wide as max(p, k) needs."""
    p = rank.shape[0]
    thresholds = np.arange(1, k + 1, dtype=np.int64)[None, :]
    at_most = await ltz(s, s.add_public(rank.reshape(p, 1).broadcast_to((p, k)),
                                     -thresholds), signed_bits(max(p, k)))
    shifted = np.zeros(at_most.data.shape, dtype=np.uint64)
    shifted[..., 1:] = at_most.data[..., :-1]
    return s.sub(at_most, Shared(shifted, s.lead))


def _ranking_products(fr: Fractions, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Flat positions, in the (Lq p) x (Ld p) matrix of all limb products num_u,i den_v,j,
    of the products (2, Lq, Ld, pairs) that ``fraction.digits_of_products`` expects."""
    lq, ld, p = fr.plan.num_limbs, fr.plan.den_limbs, fr.count
    u = np.arange(lq).reshape(lq, 1, 1)
    v = np.arange(ld).reshape(1, ld, 1)

    def flat(i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return (u * p + i) * (ld * p) + v * p + j

    return np.stack([flat(rows, cols), flat(cols, rows)])


async def topk_ranking(s: Scheme, fr: Fractions, k: int) -> Shared:
    """T for the k largest fractions num/den, compared exactly (``mpcnet.ops.fraction``):
    every pair i < j in one batch, i beats j iff num_i den_j - num_j den_i >= 0. All limb
    products come from one matrix product of the stacked limbs (~ (Lq p) x (Ld p) elements)."""
    plan, p = fr.plan, fr.count
    lq, ld = plan.num_limbs, plan.den_limbs
    cross = await s.matmul(fr.num.reshape(lq * p, 1), fr.den.reshape(1, ld * p))
    rows, cols = _pairs(p)
    products = cross.reshape(lq * p * ld * p)[_ranking_products(fr, rows, cols)]
    x = digits_of_products(s, products, plan)
    losses = await bit_to_arith(s, await cascade(s, await msb(s, sign_tests(s, x, plan)),
                                                 plan, rows.size))
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
