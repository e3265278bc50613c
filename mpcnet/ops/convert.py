"""Layer: ops. Conversions between binary (bit-sliced) and arithmetic shares, and random bits.

B2A of single bits follows the component method of ABY3 (Mohassel and Rindal, CCS 2018,
section 5.3): the XOR components of a shared bit are each held by a subset of parties, so each
has a local arithmetic sharing, and x XOR y = x + y - 2xy folds them with ring products. A tree
of pairwise folds costs ceil(log2 c) rounds for c components (2 for rep3). Under rep4 the
scheme's ``xor_terms`` shares c_0 ^ c_1 and c_2 ^ c_3 jointly instead (one round), which leaves
one product (2 rounds in all, as before, with less than half the bytes) of two terms whose
components do not overlap (``Scheme.term_product``: four cross terms instead of six).

Everything else here is built on that and on the scheme interface only:

- ``a2b``: the additive components of x are binary sharings (``arith_components``; under
  active4 ``addends`` shares the sums of two components jointly instead, in one round without
  ANDs); carry-save adders reduce them to two words (``reduce_components``) and a Kogge-Stone
  adder adds those (ABY3 section 5.3; Kogge and Stone, IEEE Trans. Computers 1973): 7 AND
  rounds after the reduction, 8 in all for rep3 (104 bytes per value and party) and rep4.
- ``b2a``: bit decomposition, every bit of every word through one batched ``bit_to_arith``,
  then sum 2^i * bit_i (2 rounds, 64 (c - 1) products per word for c components).
  ``b2a_masked`` is the byte-lean alternative: open w - r for a random arithmetic r whose binary
  form comes for free from its components (10 rounds for rep3, about 15x fewer bytes).
- ``random_bits``: arithmetic sharings of uniform bits. A random binary word
  (``s.random_binary``) is one that no single party knows (each party misses a component);
  every one of its 64 bits becomes a shared bit through ``bit_to_arith``. A random word itself
  is not a bit, hence this conversion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from mpcnet.schemes.base import Scheme, Shared, concat, split

U64 = np.uint64
_POSITIONS = np.arange(64, dtype=U64)


def local_map(x: Shared, fn: Callable[[np.ndarray], np.ndarray]) -> Shared:
    """Apply a bitwise-linear map (shift, mask, gather) to every component of a binary share."""
    return Shared(fn(x.data), x.lead, True)


async def bit_to_arith(s: Scheme, bits: Shared) -> Shared:
    """Arithmetic 0/1 sharing of bit 0 of every word of the binary sharing ``bits``."""
    comps = await s.xor_terms(bits)
    if s.split_terms:  # two terms with disjoint components: one cheaper product
        x, y = comps
        return s.sub(s.add(x, y), s.mul_public(await s.term_product(x, y), 2))
    while len(comps) > 1:
        pairs = len(comps) // 2
        left, right = comps[0:2 * pairs:2], comps[1:2 * pairs:2]
        prod = await s.mul(concat(left), concat(right))
        products = split(prod, [c.shape for c in left])
        folded = [s.sub(s.add(x, y), s.mul_public(xy, 2))
                  for x, y, xy in zip(left, right, products, strict=True)]
        comps = folded + comps[2 * pairs:]
    return comps[0]


async def bits_times(s: Scheme, bits: Shared, values: Shared) -> Shared:
    """b v for the bit b in position 0 of every word of the binary sharing ``bits``, broadcast
    to the shape of the arithmetic ``values`` (a comparison's outcome applied to values): the
    scheme's own protocol (``Scheme.bit_mul``), else ``bit_to_arith`` and one product."""
    own = await s.bit_mul(bits, values)
    if own is not None:
        return own
    arith = await bit_to_arith(s, bits)
    pad = (1,) * (len(values.shape) - len(bits.shape))
    return await s.mul(arith.reshape(pad + bits.shape).broadcast_to(values.shape), values)


# -- carry-save reduction -------------------------------------------------------------------
async def _carry_save(s: Scheme, a: Shared, b: Shared, c: Shared) -> tuple[Shared, Shared]:
    """a + b + c == sum + carry (mod 2^64), with one AND round: maj = ((a^b) & (a^c)) ^ a."""
    ab = s.xor(a, b)
    maj = s.xor(await s.and_(ab, s.xor(a, c)), a)
    return s.xor(ab, c), s.shift(maj, 1)


async def reduce_components(s: Scheme, comps: list[Shared]) -> tuple[Shared, Shared]:
    """Binary sharings of words u, v with u + v equal to the sum of ``comps`` (mod 2^64)."""
    while len(comps) > 2:
        groups = len(comps) // 3
        a, b, c = (concat(comps[i:3 * groups:3]) for i in range(3))
        total, carry = await _carry_save(s, a, b, c)
        shapes = [x.shape for x in comps[0:3 * groups:3]]
        comps = split(total, shapes) + split(carry, shapes) + comps[3 * groups:]
    return comps[0], comps[1]


# -- binary addition and A2B -----------------------------------------------------------------
async def add_binary(s: Scheme, u: Shared, v: Shared) -> Shared:
    """Binary sharing of u + v (mod 2^64) for binary sharings u, v of the same shape.

    Kogge-Stone parallel prefix over (generate, propagate) = (u & v, u ^ v): at distance w,
    G <- G ^ (P & G<<w) and P <- P & P<<w (the two terms exclude each other, so XOR is OR).
    Bit i of the sum is P_i ^ carry_i with carry_i = G_{i-1}. 7 AND rounds; 12 words per
    value are ANDed (the last level needs G only).
    """
    shape = u.shape
    u, v = u.reshape(u.size), v.reshape(v.size)
    flat = (u.size,)
    propagate = s.xor(u, v)
    g, p = await s.and_(u, v), propagate
    width = 1
    while width < 32:
        both = await s.and_(concat([p, p]), concat([s.shift(g, width), s.shift(p, width)]))
        g_term, p = split(both, [flat, flat])
        g = s.xor(g, g_term)
        width *= 2
    g = s.xor(g, await s.and_(p, s.shift(g, 32)))
    return s.xor(propagate, s.shift(g, 1)).reshape(shape)


async def a2b(s: Scheme, x: Shared) -> Shared:
    """Binary (bit-sliced) sharing of the arithmetic sharing x: all 64 bits (ABY3 5.3)."""
    u, v = await reduce_components(s, await s.addends(x))
    return await add_binary(s, u, v)


# -- B2A -------------------------------------------------------------------------------------
async def bits_of(s: Scheme, words: Shared, positions: Iterable[int] = range(64)) -> Shared:
    """Arithmetic 0/1 sharings of the given bit positions of binary words, as an array of
    shape (len(positions), *words.shape); one batched ``bit_to_arith`` (2 rounds)."""
    pos = np.asarray(list(positions), dtype=U64)
    count = words.size
    spread = local_map(words.reshape(count), lambda d: d[..., None, :] >> pos[:, None])
    bits = await bit_to_arith(s, spread)
    return bits.reshape((len(pos),) + words.shape)


async def b2a(s: Scheme, words: Shared, bits: int = 64) -> Shared:
    """Arithmetic sharing of the low ``bits`` bits of binary words (all 64: the word's ring
    value) by bit decomposition: 2 rounds, bits * (c - 1) products per word."""
    if not 1 <= bits <= 64:
        raise ValueError(f"b2a converts 1 to 64 bits, not {bits}")
    decomposed = await bits_of(s, words, range(bits))
    weights = (U64(1) << _POSITIONS[:bits]).reshape((bits,) + (1,) * len(words.shape))
    return s.sum(s.mul_public(decomposed, weights), 0)


async def b2a_masked(s: Scheme, words: Shared, *more: Shared) -> Shared:
    """Arithmetic sharing of binary words by masking: w = (w - r) + r for a random ring r
    (w the sum mod 2^64 of ``words`` and ``more``, binary words of the same shape).

    The binary form of -r comes from its additive components (``addends``). They are
    reduced together with w by carry-save adders, added by ``add_binary`` and the sum w - r,
    uniformly random, is opened. Rounds: reduction (2 for rep3, 3 with one more word) + 7 +
    1 open; per word about 15 ANDed words and one opened word, against 128 products for
    ``b2a`` under rep3.
    """
    r = await s.random(words.shape)
    u, v = await reduce_components(s, await s.addends(s.neg(r)) + [words, *more])
    masked = await s.open_masked(await add_binary(s, u, v), binary=True)
    return s.add_public(r, masked)


# -- random bits -----------------------------------------------------------------------------
def random_bit_words(s: Scheme, count: int) -> Shared:
    """Binary sharing of ``count`` words whose bit 0 are independent uniform bits nobody knows
    (no communication); feed them to ``bit_to_arith``, possibly batched with other words.

    ``s.random_binary`` words are uniform and hidden from each party (each misses at least one
    component); word j's bit i becomes bit 0 of output word 64 j + i.
    """
    words = -(-count // 64)
    source = s.random_binary((words,))
    return local_map(source, lambda d: (d[..., :, None] >> _POSITIONS)
                  .reshape(d.shape[:-1] + (64 * words,))[..., :count])


async def random_bits(s: Scheme, shape: tuple[int, ...]) -> Shared:
    """Arithmetic sharings of independent uniform 0/1 bits, unknown to every party.

    2 rounds (rep3, rep4); (c - 1) products per bit for c components (16 bytes per bit sent by
    each rep3 party)."""
    count = int(np.prod(shape, dtype=np.int64))
    return (await bit_to_arith(s, random_bit_words(s, count))).reshape(shape)
