"""Layer: ops. Truncation of shared fixed-point values: x -> x / 2^f (rounded down or up).

Probabilistic truncation after Catrina and Saxena, "Secure computation with fixed-point
numbers" (FC 2010, protocol TruncPr), moved from a prime field to Z_2^64 as in ABY3 (Mohassel
and Rindal, CCS 2018, section 5.1) and in the ring version of Escudero, Ghosh, Keller,
Rachuri, Scholl ("Improved primitives for MPC over mixed arithmetic-binary circuits", CRYPTO
2020, section 5): add a mask r whose bits are shared, open c = x + r, and return
(c >> f) - (r >> f) corrected for the offset and the wrap. The result is floor(x / 2^f) + e
with e in {0, 1} and P[e = 1] = (x mod 2^f) / 2^f, i.e. unbiased stochastic rounding: the error
is below one unit in the last place. One opening round once the mask exists.

Two masks, chosen by ``k``:

- ``k=None`` (default), perfect: r uniform in Z_2^64. Works for |x| < 2^62 (x + 2^62 is read
  as a 63-bit value; its carry into bit 63 is c_63 XOR r_63). c = x + r is uniform whatever x
  is. How r is made, cheapest first:
  1. by the scheme (``Scheme.truncate``), where some parties may know r and others see c:
     passive3 deals it from one party (2 rounds, 2 words per value and party), active4 from
     two, every message a joint message (3 rounds, 3.5 words);
  2. elsewhere (active3), for a batch of ``CONVERSION_BATCH`` values or more: no mask, but
     the same rounding in binary (``_trunc_converted``: x plus t random low bits through the
     adders of ``a2b``, shifted, back by ``b2a_masked``; 24 rounds, 2.3 KB per value);
  3. else from 64 shared random bits (2 rounds, 1 KB per rep3 party, 6 KB under active3)
     + 1 opened word. ``random_bits(s, (64, *shape))`` can be made ahead and passed as
     ``mask`` (this way is then taken whatever the scheme), so that several truncations share
     the 2 rounds.
- ``k`` given, statistical: |x| < 2^k. Only the f low bits of r are shared random bits; the
  high part is the sum, over the c XOR components of a random word, of each component's bits
  f..n-1, each taken with ``bit_components`` (local under passive3 and active4, one round to
  authenticate them under active3). The part that a party
  does not know is uniform on [0, 2^n), so c reveals x with statistical distance at most
  2^(k+1-n): ``statistical_security`` = n - k - 1 bits, where n is the largest width with
  c * 2^n + 2^(k+1) + 2^f <= 2^64 (no wrap): n = 62 for rep3 (61 - k bits of security), 61 for
  rep4 (60 - k). Cost per value: f random bits (2 rounds, 16 f bytes per rep3 party) + 1 word,
  and local work for the n - f free bits (about 4 us per value and party for f = 16).

``trunc_exact`` is deterministic floor(x / 2^f) for every 64-bit x: A2B, then the bits f..63
back to arithmetic (10 rounds for rep3). ``trunc_floor`` is the same floor by conversion (the
adders of ``a2b``, an arithmetic shift, ``b2a_masked``): more rounds, about one word a value
instead of 64 - f bits, and per-value shifts; what a computation that a plaintext reference
must reproduce bit for bit uses (``mpcnet.train.reference``).
"""

from __future__ import annotations

import numpy as np

from mpcnet.ops.convert import (
    a2b,
    add_binary,
    b2a_masked,
    bits_of,
    local_map,
    random_bits,
    reduce_components,
)
from mpcnet.schemes.base import Scheme, Shared

U64 = np.uint64
FULL_RANGE_BITS = 62
"""The perfect-mask ``trunc`` (k=None) needs |x| < 2^62."""
CONVERSION_BATCH = 4096
"""From this many values on, a scheme without a truncation of its own (active3) truncates by
conversion (about 2.3 KB and 21 rounds a value under active3) rather than with 64 shared random
bits (6.1 KB and 4 rounds): bench/README, "Training on the result"."""


def _weights(exponents: np.ndarray) -> np.ndarray:
    """2^e as uint64 for non-negative integer exponents."""
    return np.left_shift(U64(1), np.asarray(exponents).astype(U64))


def _component_count(s: Scheme) -> int:
    """Number of XOR components ``bit_components`` returns (3 for rep3, 4 for rep4)."""
    return len(s.arith_components(s.public(np.zeros(0, dtype=U64))))


def _mask_width(components: int, k: int, f: int) -> int:
    """Largest n with components * 2^n + 2^(k+1) + 2^f <= 2^64."""
    n = 63
    while n > 0 and components * (1 << n) + (1 << (k + 1)) + (1 << f) > 1 << 64:
        n -= 1
    return n


def statistical_security(s: Scheme, f: int, k: int) -> int:
    """Bits of statistical security of ``trunc(s, x, f, k)``: the opened value is within
    statistical distance 2^-result of one independent of x."""
    return _mask_width(_component_count(s), max(k, f), f) - max(k, f) - 1


async def trunc(s: Scheme, x: Shared, f: int | np.ndarray, k: int | None = None, *,
                mask: Shared | None = None) -> Shared:
    """floor(x / 2^f) + e, e in {0, 1} (stochastic rounding), for signed shared x.

    With ``k=None``: |x| < 2^62, perfectly hiding mask; ``f`` may be an array of per-value
    shifts in [0, 62] (broadcast to x's shape) and ``mask`` optional pre-made random bits of
    shape (64, *x.shape). With ``k``: |x| < 2^k, cheaper statistically hiding mask (see the
    module docstring); ``f`` is one integer. Rounds: 3 (1 with ``mask``).
    """
    if k is None:
        if mask is None:
            t = _shifts(x, f)
            own = await s.truncate(x, t)
            if own is not None:
                return own
            if x.size >= CONVERSION_BATCH:
                return await _trunc_converted(s, x, t)
        return await _trunc_perfect(s, x, f, mask)
    if mask is not None or np.ndim(f) != 0:
        raise ValueError("trunc with a bound k takes one shift f and makes its own mask")
    return await _trunc_statistical(s, x, int(f), k)


def _shifts(x: Shared, f: int | np.ndarray) -> np.ndarray:
    """The shift of every value of x (flat int64), checked to be within 0..FULL_RANGE_BITS."""
    t = np.broadcast_to(np.asarray(f, dtype=np.int64), x.shape).reshape(x.size)
    if t.size and (t.min() < 0 or t.max() > FULL_RANGE_BITS):
        raise ValueError(f"trunc shifts by 0 to {FULL_RANGE_BITS} bits, not {t.min()}..{t.max()}")
    return t


async def _trunc_perfect(s: Scheme, x: Shared, f: int | np.ndarray,
                         mask: Shared | None) -> Shared:
    shape, count = x.shape, x.size
    t = _shifts(x, f)
    bits = mask if mask is not None else await random_bits(s, (64,) + shape)
    if bits.shape != (64,) + shape:
        raise ValueError(f"trunc mask must have shape {(64,) + shape}, not {bits.shape}")
    bits = bits.reshape(64, count)
    position = np.arange(64)[:, None]
    r = s.sum(s.mul_public(bits, _weights(position)), 0)
    # r_hi = (r mod 2^63) >> t: bits t..62 weighted 2^(i - t)
    keep = (position >= t) & (position <= 62)
    r_hi = s.sum(s.mul_public(bits, np.where(keep, _weights(np.maximum(position - t, 0)), U64(0))),
                 0)
    opened = await s.open_masked(s.add(s.add_public(x.reshape(count), U64(1 << 62)), r))
    low, top = opened & U64((1 << 63) - 1), opened >> U64(63)
    # s = x + 2^62 + (r mod 2^63) < 2^64 has s mod 2^63 = low and s_63 = top XOR r_63, so
    # s >> t = (low >> t) + (top XOR r_63) 2^(63-t), and (s >> t) - r_hi = (x >> t) + 2^(62-t) + e
    carry = s.add_public(s.mul_public(bits[63], U64(1) - U64(2) * top), top)
    tu = t.astype(U64)
    out = s.sub(s.mul_public(carry, _weights(63 - t)), r_hi)
    out = s.add_public(out, (low >> tu) - _weights(62 - t))
    return out.reshape(shape)


async def _trunc_converted(s: Scheme, x: Shared, t: np.ndarray, rounding: bool = True
                           ) -> Shared:
    """floor((x + u) / 2^t) for u uniform on [0, 2^t) (the stochastic rounding of the perfect
    mask), or floor(x / 2^t) without ``rounding``: x and u, a random binary word nobody knows
    cut to t bits, are added in binary (the carry-save adders and the adder of ``a2b``),
    shifted there (an arithmetic shift is local) and converted back by ``b2a_masked``.
    x + u < 2^63 since |x| < 2^62; without u, any 64-bit x."""
    shape, count = x.shape, x.size
    tu = t.astype(U64)
    low = [local_map(s.random_binary((count,)), lambda d: d & ((U64(1) << tu) - U64(1)))
           ] if rounding else []
    u, v = await reduce_components(s, await s.addends(x.reshape(count)) + low)
    word = await add_binary(s, u, v)
    # arithmetic shift: d >> t and the sign's copies in the top t bits (disjoint bits, so
    # XOR-linear in the components)
    shifted = local_map(word, lambda d: (d >> tu)
                        ^ (((U64(0) - (d >> U64(63))) << (U64(63) - tu)) << U64(1)))
    return (await b2a_masked(s, shifted)).reshape(shape)


async def _trunc_statistical(s: Scheme, x: Shared, f: int, k: int) -> Shared:
    if f == 0:
        return x
    shape, count = x.shape, x.size
    bound = max(k, f)  # x + 2^bound is non-negative and its shift by f exact
    source = s.random_binary((count,))
    width = _mask_width(_component_count(s), bound, f)
    if f < 0 or width - bound - 1 < 1:
        raise ValueError(f"trunc: |x| < 2^{k} leaves no statistical masking in Z_2^64 (mask "
                         f"width {width}); lower k or use k=None (perfect mask, |x| < 2^62)")
    low_bits = await random_bits(s, (f, count))
    r_low = s.sum(s.mul_public(low_bits, _weights(np.arange(f))[:, None]), 0)
    # high part: sum over components of bits f..width-1 of each, from bit_components
    positions = np.arange(f, width, dtype=U64)
    spread = local_map(source, lambda d: d[..., None, :] >> positions[:, None])
    parts = await s.bit_components(spread)
    r_high = s.sum(s.mul_public(_ring_sum(s, parts), _weights(positions - U64(f))[:, None]), 0)
    r = s.add(r_low, s.mul_public(r_high, U64(1 << f)))
    opened = await s.open(s.add(s.add_public(x.reshape(count), U64(1 << bound)), r))
    # opened >> f = (x + 2^bound + r_low) >> f + r_high, with (x + 2^bound + r_low) >> f =
    # (x >> f) + 2^(bound - f) + e
    out = s.add_public(s.neg(r_high), (opened >> U64(f)) - U64(1 << (bound - f)))
    return out.reshape(shape)


def _ring_sum(s: Scheme, parts: list[Shared]) -> Shared:
    """Ring sum of arithmetic sharings (not their XOR: only the bound of the sum matters)."""
    total = parts[0]
    for part in parts[1:]:
        total = s.add(total, part)
    return total


async def trunc_floor(s: Scheme, x: Shared, f: int | np.ndarray) -> Shared:
    """Deterministic floor(x / 2^f) of signed 64-bit x, ``f`` one shift or one per value in
    [0, 62], by conversion (the module docstring): 18 rounds (19 under active3), whatever x
    and the randomness, so a plaintext reference computes the same integers."""
    return await _trunc_converted(s, x, _shifts(x, f), rounding=False)


async def trunc_exact(s: Scheme, x: Shared, f: int) -> Shared:
    """Deterministic floor(x / 2^f) of any signed 64-bit x, 0 <= f < 64: A2B, then bits
    f..63 back to arithmetic (bit 63 with weight -2^(63-f)). 10 rounds for rep3."""
    if not 0 <= f < 64:
        raise ValueError(f"trunc_exact shifts by 0 to 63 bits, not {f}")
    if f == 0:
        return x
    bits = await bits_of(s, await a2b(s, x), range(f, 64))
    weights = _weights(np.arange(64 - f))
    weights[-1:] = U64(0) - weights[-1:]  # array op: wraps without a warning
    return s.sum(s.mul_public(bits, weights.reshape((64 - f,) + (1,) * len(x.shape))), 0)
