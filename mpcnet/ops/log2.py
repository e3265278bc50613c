"""Layer: ops. t log2 t of shared counts: deterministic, in the fixed point of ``plain.log2``.

For shared integers 0 <= t < 2^24 (the counts of a job of at most ``MAX_RANKED_ROWS`` rows):

1. A2B of t, then its bit length L and 2^(32 - L) without a sign test
   (``mpcnet.ops.bitlength``); the centred mantissa u = t 2^(32 - L) - 3 2^30 (one product).
2. log2(1.5 + u / 2^31) by Horner's rule on ``LOG_COEFFICIENTS``, each product rounded to 31
   fractional bits with ``trunc_exact``: the result is a function of t alone, the one the
   plaintext reference computes, so equal counts give equal values (ties are exact, and the
   selection equals the reference's).
3. t ((L - 1) 2^31 + y): one product. A zero count gives 0 whatever the garbage mantissa.

Cost per count: one A2B, 5 OR rounds, one ``bits_of`` of 33 bits for two words, 13 products
and 12 exact truncations (an A2B and 33 bit conversions each); about 150 rounds for a whole
batch, whatever its size.
"""

from __future__ import annotations

from mpcnet.ops.bitlength import length_and_power
from mpcnet.ops.convert import a2b
from mpcnet.ops.truncate import trunc_exact
from mpcnet.plain.log2 import CENTRE, LOG_COEFFICIENTS, LOG_FRACTION_BITS, MANTISSA_BITS
from mpcnet.schemes.base import Scheme, Shared


async def t_log2_t(s: Scheme, t: Shared) -> Shared:
    """Shares of ``mpcnet.plain.log2.t_log2_t`` of the counts t (0 <= t < 2^24): t log2 t with
    31 fractional bits, exactly as the reference."""
    length, power = await length_and_power(s, await a2b(s, t), MANTISSA_BITS)
    u = s.add_public(await s.mul(t, power), -CENTRE)
    half = 1 << (LOG_FRACTION_BITS - 1)

    async def rounded(x: Shared) -> Shared:
        return await trunc_exact(s, s.add_public(x, half), LOG_FRACTION_BITS)

    y = s.add_public(await rounded(s.mul_public(u, LOG_COEFFICIENTS[-1])), LOG_COEFFICIENTS[-2])
    for c in LOG_COEFFICIENTS[-3::-1]:
        y = s.add_public(await rounded(await s.mul(y, u)), c)
    exponent = s.mul_public(s.add_public(length, -1), 1 << LOG_FRACTION_BITS)
    return await s.mul(t, s.add(exponent, y))
