"""Layer: ops. Division of shared fixed-point values, reciprocals, exact small-integer division.

The quotient Q = 2^f a / b of a signed numerator and a positive divisor, in fixed point with f
fractional bits, after Catrina and Saxena, "Secure computation with fixed-point numbers"
(FC 2010, section 3.4: normalisation, linear initial approximation, then Goldschmidt's
iteration, R. E. Goldschmidt, MIT thesis 1964), in Z_2^64 and with no data-dependent control
flow. With X the divisor's integer encoding, 2^lo <= X < 2^hi:

1. Normalise. The sign tests [X < 2^i], i = lo+1 .. hi-1, run as one batch (``compare.msb``)
   and give u = 2^(hi-1-m) for the leading bit m of X, so c = X u / 2^hi lies in [1/2, 1).
   Sign tests rather than A2B plus leading-one detection: 8 + 2 rounds instead of
   8 (A2B) + log2(hi - lo) (prefix OR) + 2 (B2A); their bytes are small next to step 4's.
2. Initial approximation y0 = alpha - 2c with alpha = sqrt(48) - 4, the best constant for the
   slope 2 (a local operation): |e0| = |1 - c y0| <= 3 - alpha < 0.0718.
3. Goldschmidt: q0 = n0 y0 with n0 = Q c (= A u 2^(f-hi)), d0 = c y0 = 1 - e0, then
   q <- q (1 + e), e <- e^2, both products in the same round; three iterations leave a
   relative error e0^8 < 2^-30.
4. Every product is truncated with the perfectly hiding ``truncate.trunc`` (any |x| < 2^62);
   the 64 mask bits of all nine truncations are converted in the same two rounds as the sign
   bits of step 1, so each truncation costs one opening round.

Rounds: 20 for rep3 and rep4, for any batch size. Bytes per quotient and party: about 10 KB
(rep3), 22 KB (rep4), nine-tenths of it the random bits of the truncation masks (64 bits per
truncation): meant for batches of scores, not of data.

Precision. Internally c, d and e carry F fractional bits and the quotient f + g bits (g guard
bits), with F + g <= 61 - q_bits - f and hi + F <= 61 so that no product reaches 2^62 (see
``precision``). Bound (tested): |Q - 2^f a/b| <= 1 + 5 * 2^-g units in the last place
+ |2^f a/b| * 4 * 2^-F. For f = 16, 1 <= b < 2^20, |a/b| < 2^20 (the defaults): F = 21, g = 4;
measured over 60,000 quotients, the relative term stays below 2^-19.6 and the absolute one
below 1.07 units: the relative error is below 2^-16 whenever |a/b| >= 1, and ``reciprocal``
is within one unit in the last place (worst 0.9993).
"""

from __future__ import annotations

import math

import numpy as np

from mpcnet.errors import RangeError
from mpcnet.ops.compare import ltz, msb
from mpcnet.ops.convert import bit_to_arith, random_bit_words
from mpcnet.ops.truncate import FULL_RANGE_BITS, trunc
from mpcnet.schemes.base import Scheme, Shared, concat, split

U64 = np.uint64
ALPHA = math.sqrt(48) - 4  # y0 = ALPHA - 2c minimises max |1 - c y0| on [1/2, 1]
ITERATIONS = 3
MAX_FRACTION_BITS = 30  # c y0 < 2^(2F+1) must stay below 2^62
MAX_GUARD_BITS = 8
_TRUNCATIONS = 2 + 2 + 2 * (ITERATIONS - 1) + 1  # masks needed per quotient


def precision(f: int, lo: int, hi: int, q_bits: int) -> tuple[int, int]:
    """Internal fraction bits F and guard bits g for 2^lo <= X < 2^hi and |Q| < 2^(q_bits+f)
    in integer terms; raises ``RangeError`` when Z_2^64 cannot hold the computation."""
    if not 0 <= lo < hi:
        raise RangeError(f"division: divisor range 2^{lo} <= X < 2^{hi} (integer encoding) is "
                         "empty or includes values below 1")
    if q_bits + hi > FULL_RANGE_BITS:
        raise RangeError(f"division: |a/b| < 2^{q_bits} with divisors below 2^{hi} (integer "
                         f"encoding) needs {q_bits + hi} > {FULL_RANGE_BITS} bits; narrow the "
                         "ranges")
    budget = 61 - q_bits - f  # bits for F + g in q (1 + e) < 2^62
    frac = min(MAX_FRACTION_BITS, budget - 4, 61 - hi)  # 61 - hi: X u y0 < 2^62
    if frac < 12:
        raise RangeError(f"division: |a/b| < 2^{q_bits} with f = {f} and divisors below 2^{hi} "
                         f"leave {frac} < 12 bits for the iteration; narrow the ranges")
    return frac, min(budget - frac, MAX_GUARD_BITS)


async def quotient(s: Scheme, a: Shared, b: Shared, f: int, lo: int, hi: int,
                   q_bits: int) -> Shared:
    """2^f a / b (one unit in the last place = 2^-f) for integer encodings with
    2^lo <= b < 2^hi and |a / b| < 2^q_bits; the building block of ``divide``."""
    frac, guard = precision(f, lo, hi, q_bits)
    shape, count = b.shape, b.size
    a, b = a.reshape(count), b.reshape(count)
    one = U64(1) << U64(frac)

    # 1. sign tests [b < 2^i] and the mask bits of all truncations, in one bit_to_arith
    thresholds = np.arange(lo + 1, hi)
    tests = len(thresholds)
    words = [random_bit_words(s, 64 * _TRUNCATIONS * count)]
    if tests:
        powers = np.left_shift(U64(1), thresholds.astype(U64))[:, None]
        diff = s.sub(b.reshape(1, count).broadcast_to((tests, count)),
                     s.public(np.broadcast_to(powers, (tests, count))))
        words.insert(0, await msb(s, diff))
    bits = await bit_to_arith(s, concat(words))
    below, masks = split(bits, [(tests, count), (64, _TRUNCATIONS * count)])
    used = 0

    async def truncated(x: Shared, shift: int | np.ndarray) -> Shared:
        nonlocal used
        mask = masks[:, used:used + x.size]
        used += x.size
        return await trunc(s, x, shift, mask=mask)

    # u = 2^(hi-1-m) = 1 + sum_i [b < 2^i] 2^(hi-1-i)
    scale = s.add_public(s.sum(s.mul_public(below, np.left_shift(
        U64(1), (hi - 1 - thresholds).astype(U64))[:, None]), 0), U64(1))

    # 2. normalise: X u in [2^(hi-1), 2^hi) exactly; c with F bits, n0 = Q c with f + g bits
    c_full, n_full = split(await s.mul(concat([b, a]), concat([scale, scale])),
                           [(count,), (count,)])
    shifts = [hi - frac, hi - f - guard]
    parts = [s.mul_public(x, U64(1) << U64(-t)) if t < 0 else x
             for x, t in zip([c_full, n_full], shifts, strict=True)]
    shift = np.repeat([max(t, 0) for t in shifts], count)
    c, n0 = split(await truncated(concat(parts), shift), [(count,), (count,)])

    # 3. y0 = alpha - 2c; d0 = c y0 from the exact X u; q0 = n0 y0
    y0 = s.add_public(s.mul_public(c, U64(2**64 - 2)), U64(round(ALPHA * 2**frac)))
    prod = await s.mul(concat([c_full, n0]), concat([y0, y0]))
    d0, q = split(await truncated(prod, np.repeat([hi, frac], count)), [(count,), (count,)])
    e = s.add_public(s.neg(d0), one)

    # Goldschmidt: q <- q (1 + e), e <- e^2; the last step drops the guard bits
    for step in range(ITERATIONS):
        factor = s.add_public(e, one)
        if step < ITERATIONS - 1:
            prod = await s.mul(concat([q, e]), concat([factor, e]))
            q, e = split(await truncated(prod, frac), [(count,), (count,)])
        else:
            q = await truncated(await s.mul(q, factor), frac + guard)
    return q.reshape(shape)


async def divide(s: Scheme, a: Shared, b: Shared, f: int, *,
                 b_bits: tuple[int, int] = (0, 20), q_bits: int = 20) -> Shared:
    """a / b for fixed-point values with f fractional bits (result likewise).

    Needs 2^b_bits[0] <= b < 2^b_bits[1] and |a / b| < 2^q_bits as real values (so
    |a| < 2^(q_bits + b_bits[0]) suffices). Error: see the module docstring; 20 rounds."""
    return await quotient(s, a, b, f, f + b_bits[0], f + b_bits[1], q_bits)


async def reciprocal(s: Scheme, x: Shared, f: int, *,
                     x_bits: tuple[int, int] = (0, 20)) -> Shared:
    """1 / x for fixed-point x with f fractional bits and 2^x_bits[0] <= x < 2^x_bits[1]."""
    one = s.public(np.full(x.shape, 1 << f, dtype=U64))
    return await quotient(s, one, x, f, f + x_bits[0], f + x_bits[1], 1 - x_bits[0])


async def divide_int(s: Scheme, a: Shared, b: Shared, *, bits: int = 24) -> Shared:
    """floor(a / b), exactly, for integers 0 <= a < 2^bits and 1 <= b < 2^bits (bits <= 24).

    The approximate quotient q0 (``quotient`` with f = 0) is within one of a/b and rounded up
    or down, so q0 - floor(a/b) is in {-1, 0, 1, 2}; with r = a - q0 b, three sign tests fix it:
    floor(a/b) = q0 - [r < 0] - [r < -b] + [r >= b]. 20 + 1 + 10 rounds."""
    if not 1 <= bits <= 24:
        raise RangeError(f"divide_int handles integers below 2^24, not 2^{bits}")
    q0 = await quotient(s, a, b, 0, 0, bits, bits)
    r = s.sub(a, await s.mul(q0, b))
    low, very_low, high = split(await ltz(s, concat([r, s.add(r, b), s.sub(r, b)])),
                                [a.shape] * 3)
    fix = s.sub(s.neg(s.add(low, very_low)), high)  # -[r<0] - [r<-b] - [r<b]
    return s.add_public(s.add(q0, fix), U64(1))     # ... + 1 - [r<b] = + [r>=b]
