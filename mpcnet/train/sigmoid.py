"""Layer: train. The secure sigmoid: a piecewise-linear approximation with no truncation.

Logistic regression by gradient descent needs sigma(z) = 1 / (1 + e^-z) of every row's
linear score once per epoch. We use the odd-symmetric piecewise-linear function

    s(z) = 1/2 + sum_i (a_i / 2^8) clamp(z, -h_i, h_i),   i = 1, 2,

with breakpoints h = (1.65625, 3.96875) and slope steps a = (39, 16): slope 55/256 on
[-h_1, h_1] (sigma'(0) = 1/4), 16/256 out to h_2, 0 beyond, where s stays at 1/2 +- 0.5004.
Its largest error |s(z) - sigma(z)| over the whole line is 0.0190 (at |z| = h_2;
``mpcnet.plain.logreg.SIGMOID_ERROR``, checked on a fine grid by the tests, where the float
reference ``approximate`` lives). The constants are the best of an exhaustive search over
breakpoints in steps of 1/32 and integer slope steps whose plateau is 1/2 +- 0.50 to 0.51: a
plateau inside (0, 1) (the best unconstrained pair, error 0.0151, stays at 1/2 +- 0.4856)
pushes every confidently classified row on, and the weights away from scikit-learn's (a
coefficient gap of 9.9 on SpeedDating's folds against 0.66 with this pair and 0.85 with four
breakpoints a side).

Why this one. With clamp(z, -h, h) = z - [z > h](z - h) - [z < -h](z + h), evaluating s costs
four sign tests, run as one batch, and four products of a 0/1 bit with a value, in one round;
the slopes are integers over 2^8, so s(z) is exact in fixed point with 8 more fractional bits
than z, and no value is truncated. Two pieces more (h = (1.09375, 2.1875, 3.6875, 6.46875),
a = (25, 22, 11, 2), error 0.0073) cost eight sign tests, twice these, which were two thirds
of a passive3 epoch's CPU time (py-spy on the servers, docs/performance.md, "Training"), and
changed no trained model's accuracy by more than 0.31 points (plaintext, 5 folds on LSVT,
CogLoad, SpeedDating with and without its label-leaking columns, and wine; bench.accuracy runs
the private models). An odd polynomial (0.0036 at degree 9 on [-6, 6], with five
truncated products per value and a clip) needs its products one after another: four levels of
a product and a truncation (``mpcnet.ops.truncate``: 3 to 4 rounds each) after the clip's sign
tests, where these tests run in one batch. Mohassel and Zhang (SecureML, S&P 2017) use three
pieces (error 0.38, at z = 1/2); more pieces buy accuracy at the price of sign tests only.
"""

from __future__ import annotations

import numpy as np

from mpcnet.ops.compare import msb
from mpcnet.ops.convert import bits_times
from mpcnet.plain.logreg import SIGMOID_BREAKPOINTS, SIGMOID_STEP_BITS, SIGMOID_STEPS
from mpcnet.schemes.base import Scheme, Shared, concat, split

BREAKPOINTS = SIGMOID_BREAKPOINTS
SLOPE_STEPS = SIGMOID_STEPS
SLOPE_BITS = SIGMOID_STEP_BITS


async def sigmoid(s: Scheme, z: Shared, f: int) -> Shared:
    """s(z) for shared fixed-point z with f fractional bits, with f + SLOPE_BITS fractional
    bits (exact: no truncation). |z| < 2^(61 - f - SLOPE_BITS) suffices for every sign test and
    product to stay in the ring. Rounds: one batch of sign tests, then their bits times the
    values (``bits_times``)."""
    shape = z.shape
    h = np.array([round(b * 2**f) for b in BREAKPOINTS], dtype=np.uint64)
    if any(abs(round(b * 2**f) - b * 2**f) > 0 for b in BREAKPOINTS):
        raise ValueError(f"the breakpoints need at least 5 fractional bits, not {f}")
    zs = z.reshape(1, -1).broadcast_to((len(h), z.size))
    hs = np.broadcast_to(h[:, None], zs.shape)
    above = s.sub(s.public(hs), zs)        # [z > h_i]   = [h_i - z < 0]
    below = s.add_public(zs, hs)           # [z < -h_i]  = [z + h_i < 0]
    bits = await msb(s, concat([above, below]))
    over = s.sub(zs, s.public(hs))         # z - h_i
    under = s.add_public(zs, hs)           # z + h_i
    clipped = split(await bits_times(s, bits, concat([over, under])), [zs.shape, zs.shape])
    steps = np.array(SLOPE_STEPS, dtype=np.uint64)[:, None]
    cut = s.sum(s.mul_public(s.add(*clipped), np.broadcast_to(steps, zs.shape)), 0)
    linear = s.mul_public(z.reshape(-1), np.uint64(sum(SLOPE_STEPS)))
    half = np.uint64(1 << (f + SLOPE_BITS - 1))
    return s.add_public(s.sub(linear, cut), half).reshape(shape)
