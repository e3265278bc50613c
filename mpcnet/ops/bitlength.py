"""Layer: ops. The bit length of shared nonnegative words, and the power of two that normalises.

For binary sharings of words below 2^width: a prefix OR spreads every word's leading one down
(ceil(log2 width) AND rounds: v |= v >> 1, >> 2, >> 4, ...), so the spread word has L ones for
the bit length L; its leading one (spread XOR spread >> 1), bit-reversed and shifted, is the
word 2^(width - L). Both become arithmetic in one ``bits_of`` (2 rounds), so L and 2^(width - L)
cost no sign test. Used by the training's normaliser (``mpcnet.train.standardise``) and by the
logarithm of counts (``mpcnet.ops.log2``).

``length_bits`` gives L in binary instead, from the same leading one and without a round more:
bit j of L is the parity of the leading one's bits p with bit j of p + 1 set (XOR-linear, so
local), the control bits of a barrel shift by L (``shift_right``: one AND round per bit, for
a scheme whose truncation is a binary circuit anyway: ``mpcnet.train.standardise``).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from mpcnet.ops.convert import bits_of, local_map
from mpcnet.schemes.base import Scheme, Shared, concat

U64 = np.uint64


def reverse_bits(words: np.ndarray) -> np.ndarray:
    """Every uint64's bits in reverse order (bit i to bit 63 - i); linear over XOR."""
    as_bytes = np.ascontiguousarray(words).view(np.uint8).reshape(words.shape + (8,))
    flipped = np.unpackbits(as_bytes, axis=-1, bitorder="little")[..., ::-1]
    return np.packbits(flipped, axis=-1, bitorder="little").view(np.uint64).reshape(words.shape)


async def or_(s: Scheme, x: Shared, y: Shared) -> Shared:
    """Bitwise OR of binary sharings: x XOR y XOR (x AND y), one AND round."""
    return s.xor(s.xor(x, y), await s.and_(x, y))


async def _spread(s: Scheme, words: Shared, width: int) -> tuple[Shared, Shared]:
    """The prefix OR of every binary word below 2^width (its L low bits set) and its leading
    one (bit L - 1 alone; 0 for a zero word)."""
    spread, step = words, 1
    while step < width:
        spread = await or_(s, spread, s.shift(spread, -step))
        step *= 2
    return spread, s.xor(spread, s.shift(spread, -1))


async def length_and_power(s: Scheme, words: Shared, width: int) -> tuple[Shared, Shared]:
    """Arithmetic sharings of the bit length L of every binary word (below 2^width, 1 <= width
    <= 63) and of 2^(width - L) (0 for a zero word)."""
    spread, leading = await _spread(s, words, width)
    power = local_map(leading, lambda d: reverse_bits(d) >> U64(64 - width))
    n = words.size
    bits = await bits_of(s, concat([spread, power]), range(width + 1))  # (width + 1, 2n)
    length = s.sum(bits[:, :n], 0)
    weights = (U64(1) << np.arange(width + 1, dtype=U64))[:, None]
    power_value = s.sum(s.mul_public(bits[:, n:], np.broadcast_to(weights, (width + 1, n))), 0)
    return length.reshape(words.shape), power_value.reshape(words.shape)


def length_width(width: int) -> int:
    """Bits of a bit length 0..width."""
    return max(1, width.bit_length())


async def length_bits(s: Scheme, words: Shared, width: int) -> Shared:
    """Binary sharings of the bits of the bit length L of every binary word (below 2^width,
    1 <= width <= 63): shape (``length_width(width)``, *words.shape), bit j of L in bit 0 of
    word j (all 0 for a zero word)."""
    _, leading = await _spread(s, words, width)
    places = np.arange(width, dtype=U64) + U64(1)  # the bit length a leading one at p means
    masks = np.array([np.bitwise_or.reduce(np.where((places >> U64(j)) & U64(1),
                                                    U64(1) << (places - U64(1)), U64(0)))
                      for j in range(length_width(width))], dtype=U64)
    flat = local_map(leading.reshape(leading.size), lambda d: np.bitwise_count(
        d[..., None, :] & masks[:, None]).astype(U64) & U64(1))
    return flat.reshape((len(masks),) + words.shape)


def arithmetic_shift(d: np.ndarray, shift: int) -> np.ndarray:
    """Every word's two's complement value shifted right by 0 <= shift < 64, the sign copied
    into the top bits (XOR-linear: a local map of binary components)."""
    if shift == 0:
        return d
    return (d >> U64(shift)) ^ ((U64(0) - (d >> U64(63))) << U64(64 - shift))


async def shift_right(s: Scheme, words: Shared, bits: Shared) -> Shared:
    """floor(w / 2^L) of the two's complement binary words w (any shape) for the binary bits
    of L from ``length_bits`` (len x a shape that broadcasts to words'): a barrel shifter,
    one AND round a bit of L, w <- w XOR (b_j AND (w XOR (w >> 2^j)))."""
    pad = (1,) * (len(words.shape) - len(bits.shape) + 1) + bits.shape[1:]
    for j in range(bits.shape[0]):
        control = local_map(bits[j], lambda d: U64(0) - (d & U64(1))).reshape(pad) \
            .broadcast_to(words.shape)
        moved = local_map(words, partial(arithmetic_shift, shift=1 << j))
        words = s.xor(words, await s.and_(control, s.xor(words, moved)))
    return words
