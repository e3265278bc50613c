"""Layer: ops. Secure comparison: the sign bit of a shared ring element, and what builds on it.

The additive components of x are bit-decomposed locally (each is known to a subset of parties),
reduced to two words with carry-save adders (one AND round per level), and the carry into bit
63 comes from a parallel-prefix tree (log2 64 = 6 AND rounds). This is the A2B conversion of
ABY3 (Mohassel and Rindal, CCS 2018, section 5.3) specialised to the top bit, with the tree's
traffic halved at every level by packing (see ``msb``). All values of a batch move together:
one buffer per peer per round, whatever their number.

Where a public bound says |x| < 2^(w-1) for a small w (a count against a threshold, a rank),
``msb(s, x, bits=w)`` tests bit w - 1 of the low w bits instead (``_msb_lanes``): 64/W values
share each word in lanes of W >= w bits (a power of two), and the tree has log2 W levels, so a
rank of up to 127 costs 5 rounds instead of 8 and an eighth of the ANDed words.
"""

from __future__ import annotations

import numpy as np

from mpcnet.ops.convert import bit_to_arith, local_map, reduce_components
from mpcnet.schemes.base import Scheme, Shared, concat, split
from mpcnet.schemes.base import join as stacked

_VALUES_PER_WORD = 32  # after five packings, 32 values share one word
_ALL_ONES = np.uint64((1 << 64) - 1)
_BIT_PLACES = np.arange(64, dtype=np.uint64)


def _block_tops(width: int) -> np.uint64:
    """Mask of the top ``width`` bits of every 2*width-bit block of a word."""
    block = ((1 << width) - 1) << width
    return np.uint64(sum(block << shift for shift in range(0, 64, 2 * width)))


_PACK_WORDS = 1 << 14  # words per component packed at a time: small temporaries, in cache


def _pack(data: np.ndarray, width: int, out: np.ndarray | None = None, shift: int = 0
          ) -> np.ndarray:
    """Merge the words of the second half into the first: keep the top ``width`` bits of each
    2*width block of both, the second half's shifted down into the free low bits; with
    ``shift``, of the words shifted left by that many bits first. A block of words at a time,
    so that no shifted or masked copy of the whole is made."""
    half = data.shape[-1] // 2
    mask = _block_tops(width)
    if out is None:
        out = np.empty(data.shape[:-1] + (half,), dtype=np.uint64)
    for start in range(0, half, _PACK_WORDS):
        stop = min(half, start + _PACK_WORDS)
        high, low = data[..., start:stop], data[..., half + start:half + stop]
        part = out[..., start:stop]
        if shift:
            np.left_shift(high, np.uint64(shift), out=part)
            part &= mask
            low = low << np.uint64(shift)
            low &= mask
        else:
            np.bitwise_and(high, mask, out=part)
            low = low & mask
        low >>= np.uint64(width)
        part |= low
    return out


def _packed(parts: list[Shared], width: int, shifts: tuple[int, ...] | None = None) -> Shared:
    """Binary sharings of one shape (N,), each shifted left by its ``shifts`` (none by
    default) and packed (``_pack``) straight into the rows of one (len(parts), N/2) sharing,
    without a concatenated or shifted copy."""
    first = parts[0].data
    out = np.empty(first.shape[:-1] + (len(parts), first.shape[-1] // 2), dtype=np.uint64)
    for row, part in enumerate(parts):
        _pack(part.data, width, out[..., row, :], shifts[row] if shifts else 0)
    return Shared(out, parts[0].lead, True)


def _bit_positions() -> np.ndarray:
    """Bit position of the carry of value h*W + w in word w after the five packings: value
    group h (of 32) ends at bit 63 - reverse5(h), where reverse5 reverses 5-bit numbers."""
    h = np.arange(_VALUES_PER_WORD)
    reversed_h = np.zeros_like(h)
    for b in range(5):
        reversed_h |= ((h >> b) & 1) << (4 - b)
    return (63 - reversed_h).astype(np.uint64)


_POSITIONS = _bit_positions()


def _unpack_carries(final: np.ndarray, count: int, low: bool = False) -> np.ndarray:
    """Each value's carry bit, in value order, from the packed words of the last level (with
    ``low``, from those before it: the signal of each value's low 32-bit block, 32 bits below
    its high block's)."""
    positions = _POSITIONS - np.uint64(32) if low else _POSITIONS
    spread = (final[..., None, :] >> positions[:, None]) & np.uint64(1)  # (.., 32, W)
    return spread.reshape(final.shape[:-1] + (-1,))[..., :count]


def signed_bits(bound: int) -> int:
    """The ``bits`` of a sign test (``msb``, ``ltz``) of values with |x| <= bound."""
    return bound.bit_length() + 1


def _lane_bits(width: int, low: int) -> np.uint64:
    """Mask of the bits ``low`` .. width - 1 of every ``width``-bit lane of a word."""
    lane = ((1 << width) - 1) ^ ((1 << low) - 1)
    return np.uint64(sum(lane << shift for shift in range(0, 64, width)))


async def _msb_lanes(s: Scheme, x: Shared, bits: int) -> Shared:
    """``msb`` of values with |x| < 2^(bits-1): bit bits-1 of x is that of the low bits of
    u + v = x, u_(w-1) ^ v_(w-1) ^ c, with c the generate signal of the lower bits. Values sit
    in lanes of W bits (64/W per word, value i in lane i mod 64/W of word i div 64/W), shifted
    up by one so that c is the generate of a whole lane; a Kogge-Stone tree within the lanes
    (Kogge and Stone 1973; the shifts masked at lane boundaries) takes 1 + log2 W AND rounds
    after the reduction to u and v."""
    width = 1 << max(1, (bits - 1).bit_length())
    per_word, count = 64 // width, x.size
    words = -(-count // per_word)
    u, v = await reduce_components(s, await s.addends(x.reshape(count)))
    places = np.arange(per_word, dtype=np.uint64) * np.uint64(width)

    def lanes(d: np.ndarray) -> np.ndarray:
        padded = np.zeros(d.shape[:-1] + (words * per_word,), dtype=np.uint64)
        padded[..., :count] = d & np.uint64((1 << width) - 1)
        grouped = padded.reshape(d.shape[:-1] + (words, per_word)) << places
        return np.bitwise_or.reduce(grouped, axis=-1)

    def lane_tops(d: np.ndarray) -> np.ndarray:
        spread = (d[..., :, None] >> (places + np.uint64(width - 1))) & np.uint64(1)
        return spread.reshape(d.shape[:-1] + (words * per_word,))[..., :count]

    u, v = local_map(u, lanes), local_map(v, lanes)
    top = local_map(s.xor(u, v), lane_tops)
    up = _lane_bits(width, 1)
    u, v = s.and_public(s.shift(u, 1), up), s.and_public(s.shift(v, 1), up)
    gen, prop = await s.and_(u, v), s.xor(u, v)
    distance = 1
    while distance < width // 2:  # G ^= P & G<<d, P &= P<<d within lanes
        inside = _lane_bits(width, distance)
        both = await s.and_(concat([prop, prop]),
                            concat([s.and_public(s.shift(gen, distance), inside),
                                    s.and_public(s.shift(prop, distance), inside)]))
        gen_term, prop = split(both, [(words,), (words,)])
        gen = s.xor(gen, gen_term)
        distance *= 2
    last = s.and_public(s.shift(gen, distance), _lane_bits(width, distance))
    gen = s.xor(gen, await s.and_(prop, last))
    return s.xor(top, local_map(gen, lane_tops)).reshape(x.shape)


async def _blocks32(s: Scheme, words: list[Shared], split_addends: bool = False
                    ) -> tuple[Shared, Shared]:
    """The generate and propagate signals of the two 32-bit blocks of every value of u + v,
    for binary sharings ``words`` = [u, v] of (W,) words, W a multiple of 32, as packed words:
    a value's high block at ``_POSITIONS``, its low block 32 bits below (``_unpack_carries``).
    The list is emptied, so that u and v are freed with this function's own copies.

    A tree combines (G, P) of adjacent blocks; only the high half of every block is needed
    after a level, so each level packs two words into one before its AND and the traffic
    halves level by level. The 2-bit blocks take their generate from a majority,
    u1 ^ (p1 & (u1 ^ u0 v0)), so the first two rounds AND 1.5 words per value where
    g = u & v and a first level would AND 2: about 2.5 AND words per value in 6 rounds. With
    ``split_addends``, u and v are (shifts of) a scheme's two split addends, whose u0 v0 needs fewer
    cross terms (``Scheme.term_product``)."""
    u, v = words
    words.clear()
    # 2-bit blocks, computed at their high bits only (packed before the AND): round 1 the
    # block's propagate p1 p0 and the low bit's generate u0 v0 (moved up by the shift);
    # u and v are packed at once, so that they are freed before round 1, and p = u ^ v is
    # formed from the packed words (packing is linear)
    tops = _packed([u, v], 1)  # u1, v1 of every block
    lows = _packed([u, v], 1, (1, 1))  # u0, v0, moved up to the blocks' high bits
    del u, v
    top_words, low_words = tops.data, lows.data
    top_words[..., 1, :] ^= top_words[..., 0, :]  # tops: u1, p1
    if split_addends:  # u0 v0 of the two split terms needs fewer cross terms
        p0 = Shared(low_words[..., 0, :] ^ low_words[..., 1, :], lows.lead, True)
        generate, propagate = await s.engine.together(s.term_product(lows[0], lows[1]),
                                                      s.and_(tops[1], p0))
        del lows, low_words, p0
        low = concat([generate, propagate]).reshape(2, -1)
    else:
        low_words[..., 1, :] ^= low_words[..., 0, :]  # lows: u0, p0
        left = np.empty_like(low_words)
        np.bitwise_xor(low_words[..., 0, :], low_words[..., 1, :], out=left[..., 0, :])
        left[..., 1, :] = top_words[..., 1, :]  # v0, p1
        low = await s.and_(Shared(left, lows.lead, True), lows)
        del left, lows, low_words
    u1, p1 = tops[0], tops[1]
    del tops, top_words
    # round 2 the block's generate, the majority of u1, v1 and that carry: u1 ^ (p1 & (u1 ^ c))
    gen = s.xor(u1, await s.and_(p1, s.xor(u1, low[0])))
    prop = low[1]
    del u1, p1, low
    width = 2
    while width < 32:  # combine adjacent blocks: G ^ P & G<<w, P & P<<w at the high halves
        both = await s.and_(_packed([prop], width),
                            _packed([gen, prop], width, (width, width)))
        gen, prop = s.xor(_packed([gen], width)[0], both[0]), both[1]
        width *= 2
    return gen, prop


async def _carry_tree(s: Scheme, words: list[Shared], split_addends: bool = False
                      ) -> Shared:
    """The generate signal of all 64 bits of u + v (the carry out of bit 63) for ``words`` =
    [u, v], as packed words (``_unpack_carries``): ``_blocks32`` and a last level, 7 rounds."""
    gen, prop = await _blocks32(s, words, split_addends)
    return s.xor(gen, await s.and_(prop, s.shift(gen, 32)))


def _padded(x: Shared, shift: int = 0) -> Shared:
    """The words of a binary sharing shifted left by ``shift``, flat and padded with zero
    words to a multiple of 32 (the packings of ``_carry_tree``)."""
    count = x.size
    padded = -(-count // _VALUES_PER_WORD) * _VALUES_PER_WORD

    def fill(d: np.ndarray) -> np.ndarray:  # one pass: no zeroed array, no shifted copy
        out = np.empty(d.shape[:-1] + (padded,), dtype=np.uint64)
        np.left_shift(d, np.uint64(shift), out=out[..., :count])
        out[..., count:] = 0
        return out

    return local_map(x.reshape(count), fill)


async def msb(s: Scheme, x: Shared, bits: int = 64) -> Shared:
    """Binary sharing (bit 0 of each word) of the top bit of x, i.e. [x < 0] in two's complement;
    with ``bits`` < 64 the caller vouches that |x| < 2^(bits-1) (``_msb_lanes``).

    With u + v = x, the top bit is u63 ^ v63 ^ c63, where the carry c63 is the generate signal
    of bits 0..62, i.e. of all 64 bits of (u << 1, v << 1), from ``_carry_tree``. With the
    carry-save round, about 28 bytes per comparison (3.5 AND words) instead of 104 for a full
    Kogge-Stone circuit, in the same 8 rounds.
    """
    if bits < 33:
        return await _msb_lanes(s, x, bits)
    shape, count = x.shape, x.size
    addends = await s.addends(x.reshape(count))
    del x  # a caller's temporary goes here: every array of the first rounds is as large
    split_addends = s.split_terms and len(addends) == 2  # ``Scheme.term_product`` applies
    u, v = await reduce_components(s, addends)
    del addends
    top = local_map(s.xor(u, v), lambda d: (d >> np.uint64(63)).astype(np.uint8))
    words = [_padded(u, 1)]
    del u
    words.append(_padded(v, 1))
    del v
    final = await _carry_tree(s, words, split_addends)
    carry = local_map(final, lambda d: _unpack_carries(d, count))
    return s.xor(top, carry).reshape(shape)


def packed_bits(d: np.ndarray) -> np.ndarray:
    """Bit 0 of every word of the last axis, 64 to a word (value i at bit i mod 64 of word
    i div 64, the last word padded with zeros): a local, bitwise-linear map."""
    count = d.shape[-1]
    padded = np.zeros(d.shape[:-1] + (-(-count // 64) * 64,), dtype=np.uint64)
    padded[..., :count] = d & np.uint64(1)
    grouped = padded.reshape(d.shape[:-1] + (-1, 64)) << _BIT_PLACES
    return np.bitwise_or.reduce(grouped, axis=-1)


def unpacked_bits(words: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` bits of opened ``packed_bits`` words (``greater_pairs``) as 0/1 int64,
    in value order."""
    bits = (np.asarray(words, dtype=np.uint64)[..., None] >> _BIT_PLACES) & np.uint64(1)
    return bits.reshape(-1)[:count].astype(np.int64)


async def greater_pairs(s: Scheme, x: Shared, y: Shared, a: Shared, b: Shared) -> Shared:
    """[(x, a) > (y, b)] lexicographically for binary sharings of unsigned 64-bit words x, y
    and of words a, b below 2^32, all of shape (n,), as bits packed 64 to a word (value i at
    bit i mod 64 of word i div 64: a last AND and an opening move a bit per value).

    It is [x > y] XOR ([x == y] AND [a > b]) (the terms exclude each other). The carry out of
    x + ~y is [x > y] (x + 2^64 - 1 - y reaches 2^64 exactly then) and its propagate signal,
    every bit of x ^ ~y set, is [x == y]; a and b go two to a word (a_i in the high half,
    a_(i+h) in the low one), whose 32-bit blocks' generate signals, read before the last
    level, are [a > b] of each. One carry tree for all: about 2.5 + 1.25 AND words per
    value, 8 rounds."""
    n = x.size
    h = -(-n // 2)

    def paired(d: np.ndarray) -> np.ndarray:
        out = d[..., :h] << np.uint64(32)
        out[..., :n - h] ^= d[..., h:]
        return out

    count = n + h
    u = _padded(concat([x, local_map(a.reshape(n), paired)]))
    v = _padded(s.xor_public(concat([y, local_map(b.reshape(n), paired)]), _ALL_ONES))
    gen, prop = await _blocks32(s, [u, v])
    words = (1, gen.shape[0])
    last = await s.and_(prop.reshape(words), stacked([s.shift(gen, 32).reshape(words),
                                                      s.shift(prop, 32).reshape(words)], 0))

    def bits(signal: Shared, low: bool = False) -> Shared:
        return local_map(signal, lambda d: _unpack_carries(d, count, low))

    words_greater = bits(s.xor(gen, last[0]))[:n]
    words_equal = bits(last[1])[:n]
    halves = concat([bits(gen)[n:], bits(gen, low=True)[n:]])[:n]
    greater = s.xor(local_map(words_greater, packed_bits),
                    await s.and_(local_map(words_equal, packed_bits),
                                 local_map(halves, packed_bits)))
    return greater


async def ltz(s: Scheme, x: Shared, bits: int = 64) -> Shared:
    """Arithmetic 0/1 sharing of [x < 0] (x read as a signed 64-bit integer; with ``bits``,
    the caller vouches that |x| < 2^(bits-1))."""
    return await bit_to_arith(s, await msb(s, x, bits))


async def lt(s: Scheme, x: Shared, y: Shared) -> Shared:
    """[x < y] for signed values with |x - y| < 2^63."""
    return await ltz(s, s.sub(x, y))


async def eqz(s: Scheme, x: Shared) -> Shared:
    """Arithmetic 0/1 sharing of [x == 0]: neither x nor -x is negative (x != -2^63)."""
    both = await msb(s, concat([x, s.neg(x)]))
    neg_x, neg_minus_x = split(both, [x.shape, x.shape])
    ones = np.uint64(1)
    zero = await s.and_(s.xor_public(neg_x, ones), s.xor_public(neg_minus_x, ones))
    return await bit_to_arith(s, zero)
