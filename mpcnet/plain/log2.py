"""Plaintext reference layer: t log2 t of counts in fixed point, exactly as the servers compute it.

The private mutual information (``mpcnet.featsel.mi``) needs t log2 t for counts 0 <= t < 2^24.
With L the bit length of t, the mantissa t 2^(32 - L) lies in [2^31, 2^32); centred,
u = t 2^(32 - L) - 3 2^30 lies in [-2^30, 2^30), and log2 t = (L - 1) + log2(1.5 + u / 2^31).
The second term is a degree-12 polynomial in u with integer coefficients ``LOG_COEFFICIENTS``
(Chebyshev interpolation of log2(1.5 + v) on [-0.5, 0.5], scaled by 2^31), evaluated by
Estrin's scheme (``log_polynomial``: four levels of products instead of Horner's twelve, so the
servers need 4 exact truncations in sequence, not 12) with every product rounded to 31
fractional bits (floor(x y / 2^31 + 1/2)): deterministic, so equal counts give equal results
on every server and here, and ties stay ties. Its error, checked over every count by the
tests, is below ``LOG_ERROR``:
|t_log2_t(t) / 2^31 - t log2 t| <= LOG_ERROR t for 0 <= t < 2^24 (t = 0 gives 0: t times
anything). For t >= 1 every intermediate stays below 2^62 (every product below 2^61.7,
t log2 t 2^31 < 2^60); for t = 0 the mantissa is garbage and u^2 wraps, which is harmless:
``trunc_exact`` floors any ring element and the result is multiplied by t = 0 (a truncation
that needs a bounded input, such as ``trunc``, must not be used here).
"""

from __future__ import annotations

import numpy as np

LOG_FRACTION_BITS = 31
COUNT_BITS = 24  # counts are below 2^24 (``mpcnet.featsel.msgini.MAX_RANKED_ROWS``)
MANTISSA_BITS = LOG_FRACTION_BITS + 1  # t 2^(32 - L) in [2^31, 2^32)
CENTRE = 3 << (LOG_FRACTION_BITS - 1)  # 1.5 in the mantissa's scale
LOG_COEFFICIENTS = (1256197405, 2065442672, -688480890, 305991654, -152995845, 81593080,
                    -45329185, 25966862, -15149690, 8547995, -5120407, 4477448, -2747431)
"""c_0 .. c_12: log2(1.5 + v) ~ sum_i c_i v^i / 2^31 for v = u / 2^31 in [-0.5, 0.5)."""
LOG_ERROR = 1.1e-9
"""Bound on |t_log2_t(t) / (t 2^31) - log2 t| over 1 <= t < 2^24 (1.093e-9 measured)."""


def rounded(x: np.ndarray) -> np.ndarray:
    """floor(x / 2^31 + 1/2) of int64 fixed-point products (wrapping as the ring does)."""
    return (x + np.int64(1 << (LOG_FRACTION_BITS - 1))) >> LOG_FRACTION_BITS


def log_polynomial(u: np.ndarray) -> np.ndarray:
    """sum_i c_i v^i by Estrin's scheme on int64 u = v 2^31, every product rounded: the pairs
    q_j = c_2j + c_2j+1 v and v^2; then q_2j + q_2j+1 v^2 and v^4; then the same with v^4 and
    v^8; then the last sum. ``mpcnet.ops.log2`` computes the same products, level by level."""
    u = np.asarray(u, dtype=np.int64)
    c = [np.int64(x) for x in LOG_COEFFICIENTS]
    v2 = rounded(u * u)
    q = [c[2 * j] + rounded(c[2 * j + 1] * u) for j in range(6)]
    v4 = rounded(v2 * v2)
    r = [q[2 * j] + rounded(q[2 * j + 1] * v2) for j in range(3)]
    v8 = rounded(v4 * v4)
    s0, s1 = r[0] + rounded(r[1] * v4), r[2] + rounded(c[12] * v4)
    return s0 + rounded(s1 * v8)


def t_log2_t(t: np.ndarray) -> np.ndarray:
    """t log2 t with 31 fractional bits (int64) for integer counts 0 <= t < 2^24, as the servers
    compute it."""
    t = np.asarray(t, dtype=np.int64)
    if t.size and (t.min() < 0 or t.max() >= 1 << COUNT_BITS):
        raise ValueError(f"counts must lie in 0 .. 2^{COUNT_BITS} - 1")
    _, length = np.frexp(t.astype(np.float64))  # exact bit length: t < 2^24 is exact
    length = length.astype(np.int64)
    power = np.where(t > 0, np.int64(1) << (MANTISSA_BITS - length), 0)
    y = log_polynomial(t * power - CENTRE)
    return t * (((length - 1) << LOG_FRACTION_BITS) + y)
