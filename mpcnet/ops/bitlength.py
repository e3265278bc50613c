"""Layer: ops. The bit length of shared nonnegative words, and the power of two that normalises.

For binary sharings of words below 2^width: a prefix OR spreads every word's leading one down
(ceil(log2 width) AND rounds: v |= v >> 1, >> 2, >> 4, ...), so the spread word has L ones for
the bit length L; its leading one (spread XOR spread >> 1), bit-reversed and shifted, is the
word 2^(width - L). Both become arithmetic in one ``bits_of`` (2 rounds), so L and 2^(width - L)
cost no sign test. Used by the training's normaliser (``mpcnet.train.standardise``) and by the
logarithm of counts (``mpcnet.ops.log2``).
"""

from __future__ import annotations

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


async def length_and_power(s: Scheme, words: Shared, width: int) -> tuple[Shared, Shared]:
    """Arithmetic sharings of the bit length L of every binary word (below 2^width, 1 <= width
    <= 63) and of 2^(width - L) (0 for a zero word)."""
    spread, step = words, 1
    while step < width:
        spread = await or_(s, spread, s.shift(spread, -step))
        step *= 2
    leading = s.xor(spread, s.shift(spread, -1))
    power = local_map(leading, lambda d: reverse_bits(d) >> U64(64 - width))
    n = words.size
    bits = await bits_of(s, concat([spread, power]), range(width + 1))  # (width + 1, 2n)
    length = s.sum(bits[:, :n], 0)
    weights = (U64(1) << np.arange(width + 1, dtype=U64))[:, None]
    power_value = s.sum(s.mul_public(bits[:, n:], np.broadcast_to(weights, (width + 1, n))), 0)
    return length.reshape(words.shape), power_value.reshape(words.shape)
