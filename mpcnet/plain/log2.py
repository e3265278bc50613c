"""Plaintext reference layer: t log2 t of counts in fixed point, exactly as the servers compute it.

The private mutual information (``mpcnet.featsel.mi``) needs t log2 t for counts 0 <= t < 2^24.
With L the bit length of t, t 2^(24 - L) = 2^23 + f with 0 <= f < 2^23, and
log2 t = (L - 1) + log2(1 + f / 2^23). The second term is a degree-6 polynomial in f with
integer coefficients ``LOG_COEFFICIENTS`` (a least-squares fit on Chebyshev nodes of [0, 1],
scaled by 2^23), evaluated by Horner's rule with every product floored by 2^23: deterministic,
so equal counts give equal results on every server and here, and ties stay ties. Its error
against log2(1 + x), checked over all 2^23 values of f by the tests, is below ``LOG_ERROR``, so
|t_log2_t(t) / 2^23 - t log2 t| <= LOG_ERROR t for every t. t = 0 gives 0 (t times anything).
"""

from __future__ import annotations

import numpy as np

LOG_FRACTION_BITS = 23
LOG_WIDTH = 24  # counts are below 2^24 (``mpcnet.featsel.msgini.MAX_RANKED_ROWS``)
LOG_COEFFICIENTS = (18, 12100360, -6019312, 3821238, -2303707, 1000746, -210749)
"""c_0 .. c_6: log2(1 + x) ~ sum_i c_i x^i / 2^23 for x = f / 2^23 in [0, 1)."""
LOG_ERROR = 2.4e-6
"""Bound on |polynomial / 2^23 - log2(1 + f / 2^23)| over 0 <= f < 2^23 (2.33e-6 measured)."""


def log_polynomial(f: np.ndarray) -> np.ndarray:
    """Horner's rule on int64 f with floored products: y = floor(y f / 2^23) + c_i."""
    f = np.asarray(f, dtype=np.int64)
    y = np.full(f.shape, LOG_COEFFICIENTS[-1], dtype=np.int64)
    for c in LOG_COEFFICIENTS[-2::-1]:
        y = ((y * f) >> LOG_FRACTION_BITS) + c
    return y


def t_log2_t(t: np.ndarray) -> np.ndarray:
    """t log2 t with 23 fractional bits (int64) for integer counts 0 <= t < 2^24, as the servers
    compute it."""
    t = np.asarray(t, dtype=np.int64)
    if t.size and (t.min() < 0 or t.max() >= 1 << LOG_WIDTH):
        raise ValueError(f"counts must lie in 0 .. 2^{LOG_WIDTH} - 1")
    _, length = np.frexp(t.astype(np.float64))  # exact bit length: t < 2^24 is exact
    length = length.astype(np.int64)
    nonzero = t > 0
    power = np.where(nonzero, np.int64(1) << (LOG_WIDTH - length), 0)
    f = t * power - (1 << LOG_FRACTION_BITS)
    y = log_polynomial(f)
    return t * (((length - 1) << LOG_FRACTION_BITS) + y)
