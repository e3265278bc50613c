"""Layer: ops. Constant-round argmin and top-k by ranking, yielding the selection matrix T.

Protocol 1 of Li, Dowsley, De Cock (2021) finds the k best scores with k sequential argmins.
Here every score is compared with every other in one batch (p(p-1)/2 comparisons, ties broken
by the lower index), each feature's rank is a local sum of the outcomes, and
T[j][r] = [rank_j == r] for r < k comes from one more batch of comparisons:
[rank_j <= r] - [rank_j <= r - 1]. The result is exactly the paper's T, in a number of rounds
that does not depend on p or k (DESIGN.md section 4).
"""

from __future__ import annotations

import numpy as np

from mpcnet.ops.compare import ltz
from mpcnet.schemes.base import Scheme, Shared


def _pairs(p: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(p, 1)


async def ranks_from_differences(s: Scheme, diff: Shared, p: int) -> Shared:
    """Ranks (0 = best) from ``diff`` over the pairs i < j of ``np.triu_indices(p, 1)``, where
    feature i beats feature j iff diff >= 0 (so ties go to the lower index)."""
    i_loses = await ltz(s, diff)  # [i does not beat j] for i < j
    rows, cols = _pairs(p)
    lead = (slice(None),) * s.lead
    losses = np.zeros(i_loses.data.shape[:s.lead] + (p, p), dtype=np.uint64)
    losses[lead + (rows, cols)] = i_loses.data
    loss_matrix = Shared(losses, s.lead)
    # rank_j = #{i < j : i beats j} + #{i > j : i beats j}
    #        = (j - #{i < j : j beats i}) ... written with the pairs' outcomes:
    beaten_by_lower = s.add_public(s.neg(loss_matrix.sum(0)), np.arange(p, dtype=np.uint64))
    beaten_by_higher = loss_matrix.sum(1)
    return s.add(beaten_by_lower, beaten_by_higher)


async def selection_matrix(s: Scheme, rank: Shared, k: int) -> Shared:
    """The p x k 0/1 matrix T with T[j][r] = [rank_j == r] (Protocol 1's T)."""
    p = rank.shape[0]
    thresholds = np.arange(1, k + 1, dtype=np.uint64)[None, :]
    at_most = await ltz(s, s.add_public(rank.reshape(p, 1).broadcast_to((p, k)),
                                     np.uint64(0) - thresholds))
    shifted = np.zeros(at_most.data.shape, dtype=np.uint64)
    shifted[..., 1:] = at_most.data[..., :-1]
    return s.sub(at_most, Shared(shifted, s.lead))


async def topk_fraction(s: Scheme, num: Shared, den: Shared, k: int) -> Shared:
    """T for the k largest num/den (den > 0), compared exactly by cross-multiplication:
    num_i/den_i >= num_j/den_j iff num_i*den_j - num_j*den_i >= 0 (needs |that| < 2^63)."""
    p = num.shape[0]
    cross = await s.matmul(num.reshape(p, 1), den.reshape(1, p))  # num_i * den_j
    rows, cols = _pairs(p)
    diff = s.sub(cross[rows, cols], cross[cols, rows])
    return await selection_matrix(s, await ranks_from_differences(s, diff, p), k)


async def topk_values(s: Scheme, scores: Shared, k: int, largest: bool = False) -> Shared:
    """T for the k smallest (or largest) scores, ties broken by the lower index."""
    p = scores.shape[0]
    rows, cols = _pairs(p)
    diff = s.sub(scores[rows], scores[cols]) if largest else s.sub(scores[cols], scores[rows])
    return await selection_matrix(s, await ranks_from_differences(s, diff, p), k)


async def argmin(s: Scheme, scores: Shared) -> Shared:
    """One-hot vector of the smallest score (lowest index among ties), like pi_ARGMIN."""
    return (await topk_values(s, scores, 1))[:, 0]
