"""Plaintext reference layer: t log2 t of counts in fixed point, exactly as the servers compute it.

The private mutual information (``mpcnet.featsel.mi``) needs t log2 t for counts 0 <= t < 2^24.
With L the bit length of t, the mantissa t 2^(32 - L) lies in [2^31, 2^32); centred,
u = t 2^(32 - L) - 3 2^30 lies in [-2^30, 2^30), and log2 t = (L - 1) + log2(1.5 + u / 2^31).
The second term is a degree-12 polynomial in u with integer coefficients ``LOG_COEFFICIENTS``
(Chebyshev interpolation of log2(1.5 + v) on [-0.5, 0.5], scaled by 2^31), evaluated by
Horner's rule with every product rounded to 31 fractional bits (floor(y u / 2^31 + 1/2)):
deterministic, so equal counts give equal results on every server and here, and ties stay
ties. Its error, checked over every count by the tests, is below ``LOG_ERROR``:
|t_log2_t(t) / 2^31 - t log2 t| <= LOG_ERROR t for 0 <= t < 2^24 (t = 0 gives 0: t times
anything). For t >= 1 every intermediate stays below 2^62 (|y u| < 2^61.3,
t log2 t 2^31 < 2^60); for t = 0 the mantissa is garbage and y u may wrap, which is harmless:
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
LOG_ERROR = 5.5e-10
"""Bound on |t_log2_t(t) / (t 2^31) - log2 t| over 1 <= t < 2^24 (5.41e-10 measured)."""


def log_polynomial(u: np.ndarray) -> np.ndarray:
    """Horner's rule on int64 u with rounded products: y = floor(y u / 2^31 + 1/2) + c_i."""
    u = np.asarray(u, dtype=np.int64)
    half = np.int64(1 << (LOG_FRACTION_BITS - 1))
    y = np.full(u.shape, LOG_COEFFICIENTS[-1], dtype=np.int64)
    for c in LOG_COEFFICIENTS[-2::-1]:
        y = ((y * u + half) >> LOG_FRACTION_BITS) + c
    return y


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
