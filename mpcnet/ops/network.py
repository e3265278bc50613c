"""Layer: ops. Top-k by an oblivious selection network, for many features.

The ranking of ``mpcnet.ops.topk`` compares all p(p-1)/2 pairs; at p = 20,000 that is 2 x 10^8
comparisons. A selection network compares O(p log^2 K) pairs in O(log^2 K + log(p/K) log K)
stages for K = the power of two at or above k (the bitonic top-k: Batcher, "Sorting networks
and their applications", AFIPS 1968, with blocks merged pairwise keeping the better half):

1. Pad the p features to a multiple of K with dummies num/den = 0/1 and indices p, p+1, ...
   (a dummy loses to every feature: the tie rule sends equal ratios to the lower index).
2. Sort every block of K best-first with a bitonic sorting network.
3. While more than one block is left: pair the blocks; compare element t of the first with
   element K-1-t of the second and keep the better (a bitonic sequence holding the best K of
   both), then sort it with a bitonic merge (log2 K stages).
4. The first k elements of the last block are the k best in order; `T[j][r] = [idx_r == j]`.

Every compare-exchange is exact with the lower-index tie rule: the sign of
W = (num_a den_b - num_b den_a) N + idx_b - idx_a (``fraction.with_ties``) says whether b beats
a, and the elements (limbs and index) are swapped obliviously by one product with that bit.
The schedule depends only on p and k, so the result is exactly the ranking's T. With K = 1 the
network is the tournament of the paper's pi_ARGMIN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpcnet.ops.compare import eqz, msb
from mpcnet.ops.convert import bit_to_arith
from mpcnet.ops.fraction import Fractions, cascade, cross_digits, sign_tests, with_ties
from mpcnet.schemes.base import Scheme, Shared, concat, same_layout

Stage = tuple[np.ndarray, np.ndarray]  # (first, second): the better of each pair goes first


def exchanged(s: Scheme, elements: Shared, lower: np.ndarray, upper: np.ndarray,
              moved: Shared) -> Shared:
    """``elements`` (rows, n) with ``moved`` added to the columns ``lower`` and taken from the
    columns ``upper`` (a compare-exchange, given moved = swap * (upper - lower)); local."""
    low, high = s.add(elements[:, lower], moved), s.sub(elements[:, upper], moved)
    same_layout([elements, low, high])  # written into a copy of elements: no broadcasting
    data = elements.data.copy()
    lead = (slice(None),) * (s.lead + 1)
    data[lead + (lower,)], data[lead + (upper,)] = low.data, high.data
    return Shared(data, s.lead)


@dataclass(frozen=True)
class Schedule:
    """The public compare-exchange stages of the bitonic top-k for p elements and k."""

    block: int  # K
    padded: int  # p rounded up to a multiple of K
    stages: tuple[Stage, ...]

    @property
    def comparisons(self) -> int:
        return sum(first.size for first, _ in self.stages)


def _pairs_at(starts: np.ndarray, size: int, stride: int, block_bit: int | None) -> Stage:
    """One bitonic stage on the blocks at ``starts``: i pairs with i ^ stride; the better goes
    to the smaller position unless the local index has ``block_bit`` set."""
    local = np.arange(size)
    low = local[(local & stride) == 0]
    reverse = (low & block_bit) != 0 if block_bit is not None else np.zeros(low.size, bool)
    i = (starts[:, None] + low[None, :]).reshape(-1)
    j = i + stride
    rev = np.tile(reverse, starts.size)
    return np.where(rev, j, i), np.where(rev, i, j)


def schedule(p: int, k: int) -> Schedule:
    """The stages of steps 2 and 3 of the module docstring."""
    block = 1 << max(0, (k - 1).bit_length())
    padded = -(-p // block) * block
    starts = np.arange(0, padded, block)
    stages: list[Stage] = []
    size = 2
    while size <= block:  # step 2: bitonic sort of every block
        stride = size // 2
        while stride >= 1:
            stages.append(_pairs_at(starts, block, stride, size if size < block else None))
            stride //= 2
        size *= 2
    while starts.size > 1:  # step 3: merge pairs of blocks, keep the better half
        firsts, seconds = starts[0:starts.size - 1:2], starts[1::2]
        t = np.arange(block)
        stages.append(((firsts[:, None] + t).reshape(-1),
                       (seconds[:, None] + block - 1 - t).reshape(-1)))
        stride = block // 2
        while stride >= 1:
            stages.append(_pairs_at(firsts, block, stride, None))
            stride //= 2
        starts = np.concatenate([firsts, starts[2 * firsts.size:]])
    return Schedule(block, padded, tuple(stages))


async def _compare_exchange(s: Scheme, limbs: Shared, fr: Fractions, stage: Stage) -> Shared:
    """The elements (rows: num limbs, den limbs, index) after one stage."""
    plan = fr.plan
    lq, ld = plan.num_limbs, plan.den_limbs
    first, second = stage
    a, b = limbs[:, first], limbs[:, second]
    x = await cross_digits(s, Fractions(a[:lq], a[lq:lq + ld], plan),
                           Fractions(b[:lq], b[lq:lq + ld], plan))
    x = with_ties(s, x, plan, a[lq + ld], b[lq + ld])
    b_wins = await bit_to_arith(s, await cascade(s, await msb(s, sign_tests(s, x, plan)),
                                                 plan, first.size))
    rows = lq + ld + 1
    delta = s.sub(b, a)
    moved = await s.mul(b_wins.reshape(1, -1).broadcast_to((rows, first.size)), delta)
    return exchanged(s, limbs, first, second, moved)


async def topk_network(s: Scheme, fr: Fractions, k: int, batch: int | None = None) -> Shared:
    """T for the k largest fractions of ``fr`` (whose plan's tie range is at least the padded
    count), by the bitonic top-k network; the same T as ``topk.topk_ranking``. At most
    ``batch`` comparisons (or equality tests) run at once: a larger stage is done in pieces,
    one after the other (its pairs are disjoint), and the scheme's check records are freed
    (``Scheme.checkpoint``) every ``batch`` comparisons, to bound memory."""
    p = fr.count
    plan = schedule(p, k)
    if fr.plan.tie_range < plan.padded:
        raise ValueError(f"tie range {fr.plan.tie_range} is below the {plan.padded} elements")
    lq, ld = fr.plan.num_limbs, fr.plan.den_limbs
    pad = plan.padded - p
    dummies = np.zeros((lq + ld + 1, pad), dtype=np.uint64)
    dummies[lq] = 1  # den = 1 (its lowest limb)
    dummies[lq + ld] = np.arange(p, plan.padded, dtype=np.uint64)
    elements = concat([fr.num, fr.den, s.public(np.arange(p, dtype=np.uint64))]
                      ).reshape(lq + ld + 1, p)
    if pad:
        elements = concat([elements.T, s.public(dummies).T]).reshape(plan.padded,
                                                                     lq + ld + 1).T
    step = batch or plan.padded
    since = 0  # comparisons since the last checkpoint (their check records are kept)
    for first, second in plan.stages:
        for lo in range(0, first.size, step):
            piece = (first[lo:lo + step], second[lo:lo + step])
            elements = await _compare_exchange(s, elements, fr, piece)
            since += piece[0].size
            if batch is not None and since >= batch:
                await s.checkpoint()
                since = 0
    best = elements[lq + ld, :k].reshape(1, k)  # indices in rank order
    rows = max(1, step // (2 * k))
    parts = []
    for lo in range(0, p, rows):
        hi = min(p, lo + rows)
        columns = np.arange(lo, hi, dtype=np.int64).reshape(hi - lo, 1)
        parts.append(await eqz(s, s.add_public(best.broadcast_to((hi - lo, k)), -columns)))
        if batch is not None and rows < p:
            await s.checkpoint()
    return concat(parts).reshape(p, k)
