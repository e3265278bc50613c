"""Layer: train. Private standardisation of the columns of D': (x - mean) / scale, in MPC.

The columns of D' hold fixed-point integers z with |z| < 2^38 (``mpcnet.fixedpoint``) whose
scales are secret (they would tell which features were chosen), and one column's values may be
2^30 times another's. Standardising does not depend on a column's scale, but squares of z do not
fit the ring, so every column is first brought to 17-18 significant bits by a secret power of
two, and the statistics are computed there. For m rows and k columns, nothing opened:

1. Normaliser (per column). L = the bit length of max_i |z_i|: the binary form of every z
   (``a2b``), its sign spread over the word (z XOR (z >> 63) is |z| - [z < 0], local), an OR
   over the rows (a tree, ceil(log2 m) AND rounds) and over the lower bits (prefix OR, six AND
   rounds); the leading one, bit-reversed and shifted, is the word 2^(38 - L). Both become
   arithmetic in one ``bits_of``. Then y = trunc(z 2^(38 - L), 20): |y| <= 2^18, and the
   column's largest |y| is at least 2^17. Under active3, whose truncation of a batch is a
   binary circuit anyway, y comes from the binary form of z made above instead: L's bits,
   read off the leading one (local), shift z 2^19 right by L (a barrel shift, six AND rounds)
   and y = z 2^(18 - L) rounded half up (floor under ``trunc_floor``) is converted back in
   one ``b2a_masked`` (``_normalised``): no product, and 21 ANDs a value instead of 28.
2. Mean and variance of y (Welford-free, exact where it matters): S = sum y (exact),
   mu = S / m with 16 fractional bits (times the public round(2^40 / m), truncated by 24:
   relative error below 2^-16 of one unit), the integer centre c = round(mu), d = y - c,
   V = sum d^2 / m - (mu - c)^2 with 16 fractional bits (sum d^2 < 2^62 for m < 2^24; it is
   truncated by ceil(log2 m) bits before the public 1/m, an error of at most 2 units of y^2).
   This is the population variance, as scikit-learn's StandardScaler uses.
3. 1 / sqrt(V), as in ``mpcnet.ops.division`` for 1/x: 27 sign tests [V < 4^i] give j with
   4^j <= V < 4^(j+1) and, linearly, 4^(27 - j) and 2^(27 - j); a = V 4^-j lies in [1, 4); the
   linear start r0 = 1.0092 - a/8 (|1 - a r0^2| <= 0.219) and four Newton steps
   r <- r (3 - a r^2) / 2 leave a relative error of about 10^-12, below the 2^-30 of the
   representation. A column with V below 4 units of y^2 (``CONSTANT_BELOW``: a standard
   deviation below 2^-16 of its largest magnitude, which includes every constant column, whose
   y, rounded stochastically, varies by up to 1/4) gets scale 1 and features 0, as
   scikit-learn gives a constant column.
4. Features x~ = (y - mu) / sqrt(V) with ``FEATURE_BITS`` = 8 fractional bits (one truncation
   per value: |x~| <= sqrt(m) < 2^12).

What leaves with the model (``Standardised``): per column, mean / scale (34 fractional bits),
the mantissa sqrt(a) of the scale in y units (in [1, 2), 30 bits) and its exponent j + L, so the
model owner reads scale = mantissa 2^(j + L - e - 26) for the column's fixed-point exponent e,
and mean = (mean / scale) scale; nothing else about the column (not L alone).

Precision: y keeps 17 significant bits of the column's largest value, so a column whose
standard deviation is below 2^-12 of its largest magnitude is standardised to within a few
percent only (one outlier among near-constant values); the rest is within 2^-10 relative.
Cost: one ``a2b`` and two truncations per value of D' (``mpcnet.ops.truncate``: a dealt mask
under passive3 and active4), the rest per column; about 100 rounds for a tile. Under active3
one ``a2b``, the shift and ``b2a_masked`` for y and one truncation by conversion for x~: 63
AND words a value (70 with two truncations), about 170 rounds for a tile.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from mpcnet.errors import RangeError
from mpcnet.fixedpoint import MAX_ROWS, VALUE_BITS
from mpcnet.ops.bitlength import (
    arithmetic_shift,
    length_and_power,
    length_bits,
    or_,
    shift_right,
)
from mpcnet.ops.compare import ltz
from mpcnet.ops.convert import a2b, b2a_masked, bit_to_arith, local_map
from mpcnet.ops.truncate import trunc, trunc_floor
from mpcnet.schemes.base import Scheme, Shared, concat, join, split

U64 = np.uint64
FEATURE_BITS = 8
"""Fractional bits of the standardised features x~."""
NORMAL_BITS = 18  # |y| <= 2^18 after the normaliser
MEAN_BITS = 16
INV_BITS = 30  # the Newton iteration's r and the mantissa sqrt(a)
FEATURE_INV_BITS = 40  # 1 / sqrt(V) for the features (times y - mu with CENTRED_BITS)
CENTRED_BITS = 10
RATIO_BITS = 34  # mean / scale (and 1 / sqrt(V) for it: centre < 2^18 times it < 2^62)
POWERS = 27  # sign tests V < 4^i, i = 1..27: V <= 2^52 < 4^27
START = 1.0092  # r0 = START - a / 8 for 1 / sqrt(a), a in [1, 4)
CONSTANT_BELOW = 4 << MEAN_BITS
"""A column whose variance is below 4 units of y^2 is constant: for a constant column the
rounding of y alone gives up to 1/4 (its y is one of two neighbours) and the variance's
truncation up to 2."""
NEWTON_STEPS = 4
Truncation = Callable[[Scheme, Shared, "int | np.ndarray"], Awaitable[Shared]]
"""How the steps truncate: ``trunc`` or ``trunc_floor`` (``mpcnet.ops.truncate``)."""


@dataclass
class Standardised:
    """The standardised features and what the model owner needs to apply them."""

    features: Shared   # m x k, FEATURE_BITS fractional bits
    ratio: Shared      # k: mean / scale, RATIO_BITS fractional bits (0 for a constant column)
    mantissa: Shared   # k: scale in y units, in [1, 2), INV_BITS bits (1 for a constant one)
    exponent: Shared   # k: j + L (integer); scale = mantissa 2^(exponent - e - 26)
    constant: Shared   # k: 0/1, [the column is constant]


async def _spread_or(s: Scheme, z: Shared) -> tuple[Shared, Shared]:
    """The binary form of z (rows x k) and, per column, the binary OR over the rows of
    |z| - [z < 0]."""
    words = await a2b(s, z)
    spread = local_map(words, lambda d: d ^ (U64(0) - (d >> U64(63))))
    while spread.shape[0] > 1:
        if spread.shape[0] % 2:
            zero = local_map(spread[:1], np.zeros_like)
            spread = concat([spread, zero]).reshape((spread.shape[0] + 1,) + spread.shape[1:])
        spread = await or_(s, spread[0::2], spread[1::2])
    return words, spread.reshape(z.shape[1])


async def _prefix(s: Scheme, z: Shared, tiles: list[slice]) -> tuple[Shared, list[Shared]]:
    """Per column of z (m x k), the OR over all rows of |z| - [z < 0], reading z a tile of
    rows at a time, and each tile's binary form."""
    prefix, words = None, []
    for rows in tiles:
        binary, part = await _spread_or(s, z[rows])
        words.append(binary)
        prefix = part if prefix is None else await or_(s, prefix, part)
        await _after_tile(s, tiles)
    assert prefix is not None
    return prefix, words


async def normaliser(s: Scheme, z: Shared, tiles: list[slice]) -> tuple[Shared, Shared]:
    """Per column of z (m x k), the arithmetic sharings of L = the bit length of max |z| and of
    2^(38 - L) (step 1 of the module docstring), reading z a tile of rows at a time."""
    prefix, _ = await _prefix(s, z, tiles)
    return await length_and_power(s, prefix, VALUE_BITS)


async def _normalised(s: Scheme, z: Shared, tiles: list[slice], cut: Truncation
                      ) -> tuple[Shared, list[Shared]]:
    """L per column (arithmetic) and y = cut(z 2^(38 - L), 20) per tile (step 1): by a
    product and a truncation where the scheme truncates by a protocol of its own; else
    (active3, whose truncation of a batch is a binary circuit) from the binary form of z the
    normaliser made anyway: w = floor(z 2^19 / 2^L) by L's bits (``bitlength.shift_right``),
    then y = floor(w / 2) + (w mod 2), z 2^(18 - L) rounded half up, the two terms added in
    ``b2a_masked``'s adder (one AND a value more); with ``trunc_floor`` y = floor(w / 2), the
    floor it promises. 7 + 15 ANDs a value instead of a product and 28. Rounding to nearest,
    not down, keeps the mean of y (it leaves with the model: ``Standardised.ratio``) within
    2^-(d + 1) units of z 2^(18 - L)'s for d dropped bits of uniform low bits, where a floor
    is half a unit low (the ratio's test caught that); ``trunc``'s stochastic rounding has
    no bias at all."""
    if s.truncates:
        length, scale = await normaliser(s, z, tiles)
        ys = []
        for t in tiles:
            ys.append(await cut(s, await s.mul(z[t], _down(scale, t.stop - t.start)),
                                VALUE_BITS - NORMAL_BITS))
            await _after_tile(s, tiles)
        return length, ys
    prefix, words = await _prefix(s, z, tiles)
    bits = await length_bits(s, prefix, VALUE_BITS)
    weights = (U64(1) << np.arange(bits.shape[0], dtype=U64))[:, None]
    length = s.sum(s.mul_public(await bit_to_arith(s, bits),
                                np.broadcast_to(weights, bits.shape)), 0)
    ys = []
    rounding = cut is not trunc_floor
    for i, w in enumerate(words):
        shifted = await shift_right(s, s.shift(w, NORMAL_BITS + 1), bits)
        words[i] = shifted  # the tile's binary form is not needed again
        half = local_map(shifted, partial(arithmetic_shift, shift=1))
        ys.append(await (b2a_masked(s, half, s.and_public(shifted, 1)) if rounding
                         else b2a_masked(s, half)))
        await _after_tile(s, tiles)
    return length, ys


def _powers(s: Scheme, below: Shared, base: int) -> Shared:
    """base^(POWERS - j) per column from the bits [V < 4^i], i = 1..POWERS (POWERS x k), of
    which the first j are 0: 1 + sum_i [V < 4^i] (base^(POWERS + 1 - i) - base^(POWERS - i))
    telescopes to it (a local sum)."""
    steps = np.array([base ** (POWERS + 1 - i) - base ** (POWERS - i)
                      for i in range(1, POWERS + 1)], dtype=U64)[:, None]
    return s.add_public(s.sum(s.mul_public(below, np.broadcast_to(steps, below.shape)), 0),
                        U64(1))


async def _inverse_sqrt(s: Scheme, var: Shared, cut: Truncation
                        ) -> tuple[Shared, Shared, Shared, Shared, Shared]:
    """For V (k values, MEAN_BITS fractional bits, V <= 2^52): [V < 1], 1/sqrt(V / 2^16)
    with FEATURE_INV_BITS and with RATIO_BITS, the mantissa sqrt(a) (INV_BITS bits), and j
    (step 3 of the module docstring)."""
    k = var.shape[0]
    powers = np.array([CONSTANT_BELOW] + [4**i for i in range(1, POWERS + 1)],
                      dtype=U64)[:, None]
    tests = s.sub(var.reshape(1, k).broadcast_to((POWERS + 1, k)),
                  s.public(np.broadcast_to(powers, (POWERS + 1, k))))
    signs = (await ltz(s, tests)).reshape(POWERS + 1, k)
    constant, below = signs[0], signs[1:]
    j = s.add_public(s.neg(s.sum(below, 0)), U64(POWERS))
    scaled = await s.mul(var, _powers(s, below, 4))  # a 2^54, a = V 4^-j in [1, 4)
    start = s.add_public(s.neg(scaled), U64(round(START * 2**57)))  # (START - a/8) 2^57
    a, r = split(await cut(s, concat([scaled, start]),
                             np.repeat([54 - INV_BITS, 57 - INV_BITS], k)), [(k,), (k,)])
    three = U64(3 << INV_BITS)
    for _ in range(NEWTON_STEPS):
        square = await cut(s, await s.mul(r, r), INV_BITS)
        product = await cut(s, await s.mul(a, square), INV_BITS)
        r = await cut(s, await s.mul(r, s.add_public(s.neg(product), three)), INV_BITS + 1)
    # 1 / sqrt(V / 2^16) = 2^8 2^-j r = r 2^(27 - j) 2^(8 - 27), r with INV_BITS bits (the
    # product < 2^57 keeps all of r's precision); sqrt(a) = a r
    scaled_r, mantissa = split(await s.mul(concat([r, a]), concat([_powers(s, below, 2), r])),
                               [(k,), (k,)])
    shift = POWERS - 8 + INV_BITS
    feature_inv, ratio_inv, mantissa = split(await cut(
        s, concat([scaled_r, scaled_r, mantissa]),
        np.repeat([shift - FEATURE_INV_BITS, shift - RATIO_BITS, INV_BITS], k)), [(k,)] * 3)
    return constant, feature_inv, ratio_inv, mantissa, j


def _down(x: Shared, m: int) -> Shared:
    """A per-column value (k) repeated down m rows (m x k)."""
    return x.reshape(1, x.size).broadcast_to((m, x.size))


def row_tiles(m: int, rows: int) -> list[slice]:
    """Slices of at most ``rows`` rows covering 0..m-1."""
    rows = max(1, rows)
    return [slice(start, min(m, start + rows)) for start in range(0, m, rows)]


async def standardise(s: Scheme, z: Shared, tile_rows: int | None = None,
                      fit_rows: int | None = None, cut: Truncation = trunc) -> Standardised:
    """Standardise the columns of the m x k fixed-point integers z (the module docstring),
    ``tile_rows`` rows at a time in the steps that touch every value (bounded memory; the
    statistics are sums over the tiles). With ``fit_rows``, the mean and the variance are
    those of the first ``fit_rows`` rows only (a training part; the normaliser is still every
    row's, so the other rows' y stay within 2^18 too) and every row is standardised by them.
    ``cut`` truncates: ``trunc`` (stochastic rounding) or ``trunc_floor`` (deterministic)."""
    m, k = z.shape
    n = m if fit_rows is None else fit_rows
    if not 2 <= n <= m < MAX_ROWS:
        raise RangeError(f"standardising needs 2 to {MAX_ROWS - 1} rows, not {n} of {m}")
    tiles = row_tiles(n, tile_rows or n) + [slice(t.start + n, t.stop + n)
                                           for t in row_tiles(m - n, tile_rows or m)]
    fitted = len(row_tiles(n, tile_rows or n))  # the first tiles hold the fitted rows
    length, ys = await _normalised(s, z, tiles, cut)

    # 2. mean with MEAN_BITS bits, the integer centre, variance with MEAN_BITS bits
    total = _sum_all(s, [s.sum(y, 0) for y in ys[:fitted]])
    mean = await cut(s, s.mul_public(total, U64(round(2 ** (MEAN_BITS + 24) / n))), 24)
    centre, coarse = split(await cut(s, concat([mean, mean]),
                                       np.repeat([MEAN_BITS, MEAN_BITS - CENTRED_BITS], k)),
                           [(k,), (k,)])
    offset = s.sub(mean, s.mul_public(centre, U64(1 << MEAN_BITS)))  # mu - c, |.| < 2^17
    sums = []
    for y in ys[:fitted]:
        d = s.sub(y, _down(centre, y.shape[0]))
        sums.append(s.sum(await s.mul(d, d), 0))
        await _after_tile(s, tiles)
    c = max(0, math.ceil(math.log2(n)))  # an error of at most 2 units of y^2
    spread, offset_sq = split(await cut(
        s, concat([_sum_all(s, sums), await s.mul(offset, offset)]),
        np.repeat([c, MEAN_BITS], k)), [(k,), (k,)])
    var = s.sub(s.mul_public(spread, U64(round(2 ** (c + MEAN_BITS) / n))), offset_sq)

    # 3. 1 / sqrt(V); 4. the features and the model's column figures
    constant, feature_inv, ratio_inv, mantissa, j = await _inverse_sqrt(s, var, cut)
    varies = s.add_public(s.neg(constant), U64(1))
    feature_inv, ratio_inv, mantissa = split(await s.mul(
        concat([feature_inv, ratio_inv, mantissa]), concat([varies, varies, varies])),
        [(k,)] * 3)
    mantissa = s.add(mantissa, s.mul_public(constant, U64(1 << INV_BITS)))
    whole, part = split(await s.mul(concat([centre, offset]), concat([ratio_inv, ratio_inv])),
                        [(k,), (k,)])
    ratio = s.add(whole, await cut(s, part, MEAN_BITS))  # (c + (mu - c)) / sqrt(V)
    # x~ = (y - mu) / sqrt(V): (y - mu) 2^10 < 2^29 times 1 / sqrt(V) 2^40, |x~| < 2^12
    features = []
    for y in ys:
        rows = y.shape[0]
        centred = s.sub(s.mul_public(y, U64(1 << CENTRED_BITS)), _down(coarse, rows))
        features.append(await cut(s, await s.mul(centred, _down(feature_inv, rows)),
                                  CENTRED_BITS + FEATURE_INV_BITS - FEATURE_BITS))
        await _after_tile(s, tiles)
    del ys
    return Standardised(join(features, 0), ratio, mantissa, s.add(j, length), constant)


async def _after_tile(s: Scheme, tiles: list[slice]) -> None:
    """In a job of several tiles, free the tile's check records (``Scheme.checkpoint``: the
    active3 MAC records are folded into the job's one zero test, its ANDs checked now)."""
    if len(tiles) > 1:
        await s.checkpoint()


def _sum_all(s: Scheme, parts: list[Shared]) -> Shared:
    total = parts[0]
    for part in parts[1:]:
        total = s.add(total, part)
    return total
