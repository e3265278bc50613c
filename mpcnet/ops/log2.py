"""Layer: ops. t log2 t of shared counts: deterministic, in the fixed point of ``plain.log2``.

For shared integers 0 <= t < 2^24 (the counts of a job of at most ``MAX_RANKED_ROWS`` rows):

1. A2B of t, then its bit length L and 2^(32 - L) without a sign test
   (``mpcnet.ops.bitlength``); the centred mantissa u = t 2^(32 - L) - 3 2^30 (one product).
2. log2(1.5 + u / 2^31) by Estrin's scheme on ``LOG_COEFFICIENTS``: four levels, each one
   round of products and one batch of ``trunc_exact`` (every product rounded to 31 fractional
   bits), in the order of ``mpcnet.plain.log2.log_polynomial``: the result is a function of t
   alone, the one the plaintext reference computes, so equal counts give equal values (ties
   are exact, and the selection equals the reference's).
3. t ((L - 1) 2^31 + y): one product. A zero count gives 0 whatever the garbage mantissa.

Cost per count: one A2B, 5 OR rounds, one ``bits_of`` of 33 bits for two words, 10 products
and 17 exact truncations (an A2B and 33 bit conversions each) in 4 batches; about 60 rounds
for a whole batch, whatever its size.
"""

from __future__ import annotations

from mpcnet.ops.bitlength import length_and_power
from mpcnet.ops.convert import a2b
from mpcnet.ops.truncate import trunc_exact
from mpcnet.plain.log2 import CENTRE, LOG_COEFFICIENTS, LOG_FRACTION_BITS, MANTISSA_BITS
from mpcnet.schemes.base import Scheme, Shared, concat, split


async def t_log2_t(s: Scheme, t: Shared) -> Shared:
    """Shares of ``mpcnet.plain.log2.t_log2_t`` of the counts t (0 <= t < 2^24): t log2 t with
    31 fractional bits, exactly as the reference."""
    length, power = await length_and_power(s, await a2b(s, t), MANTISSA_BITS)
    u = s.add_public(await s.mul(t, power), -CENTRE)
    y = await _estrin(s, u)
    exponent = s.mul_public(s.add_public(length, -1), 1 << LOG_FRACTION_BITS)
    return await s.mul(t, s.add(exponent, y))


async def _rounded(s: Scheme, x: Shared) -> Shared:
    return await trunc_exact(s, s.add_public(x, 1 << (LOG_FRACTION_BITS - 1)),
                             LOG_FRACTION_BITS)


async def _estrin(s: Scheme, u: Shared) -> Shared:
    """``mpcnet.plain.log2.log_polynomial`` on shares, one level per batch."""
    c = LOG_COEFFICIENTS
    n = u.shape
    # level 1: v^2 and q_j = c_2j + c_2j+1 v
    level = await _rounded(s, concat([await s.mul(u, u)]
                                     + [s.mul_public(u, c[2 * j + 1]) for j in range(6)]))
    v2, *odd = split(level, [n] * 7)
    q = [s.add_public(x, c[2 * j]) for j, x in enumerate(odd)]
    # level 2: v^4 and r_j = q_2j + q_2j+1 v^2
    level = await _rounded(s, await s.mul(concat([v2, q[1], q[3], q[5]]), concat([v2] * 4)))
    v4, *odd = split(level, [n] * 4)
    r = [s.add(q[2 * j], x) for j, x in enumerate(odd)]
    # level 3: v^8, s0 = r_0 + r_1 v^4, s1 = r_2 + c_12 v^4
    level = await _rounded(s, concat([await s.mul(concat([v4, r[1]]), concat([v4, v4])),
                                      s.mul_public(v4, c[12])]))
    v8, high, top = split(level, [n] * 3)
    s0, s1 = s.add(r[0], high), s.add(r[2], top)
    return s.add(s0, await _rounded(s, await s.mul(s1, v8)))
