"""Layer: ops. Counts of shared bits over rows, plain and weighted by 0/1 labels.

pi_MS-GINI (Li, Dowsley, De Cock 2021, Protocol 2, lines 5-11) needs, per feature j, the number
b_j of rows whose flag is set and, per class c, the number B_jc of those rows in class c. Only
these p (1 + c) sums are needed, never the m x p flags as ring elements, so the conversion of
the flags can be folded into the sums (docs/performance.md, "Fewer bytes"):

- a scheme's own protocol where it has one (``Scheme.bit_counts``: passive3 deals the
  conversion, one word per row, flag and class from one party);
- where ``xor_terms`` makes two arithmetic terms A, B of each bit (active4's joint sharings),
  b = A + B - 2 A B summed over the rows is sum A + sum B - 2 <A, B>: the product is a
  ``term_inner`` product, resharing p sums instead of m x p products. The class counts come
  the same way from the bits flag AND [row in class c], one AND of words that hold 64 rows
  each (the label bit is the XOR of the low bits of the label's components: local);
- else ``bit_to_arith`` and a matrix product with the labels.
"""

from __future__ import annotations

import numpy as np

from mpcnet.ops.convert import bit_to_arith, local_map
from mpcnet.schemes.base import Scheme, Shared

U64 = np.uint64
_ROWS = np.arange(64, dtype=U64)


def _packed_rows(x: Shared) -> Shared:
    """Bit 0 of the words of the binary sharing x (m, ...) packed 64 rows to a word:
    (ceil(m / 64), ...), row 64 w + r at bit r of word w; local."""
    m = x.shape[0]
    words = -(-m // 64)

    def pack(d: np.ndarray) -> np.ndarray:
        lead = d.shape[:x.lead]
        padded = np.zeros(lead + (words * 64,) + d.shape[x.lead + 1:], dtype=U64)
        padded[(slice(None),) * x.lead + (slice(0, m),)] = d & U64(1)
        grouped = padded.reshape(lead + (words, 64) + d.shape[x.lead + 1:])
        shifts = _ROWS.reshape((64,) + (1,) * (d.ndim - x.lead - 1))
        return np.bitwise_or.reduce(grouped << shifts, axis=x.lead + 1)

    return local_map(x, pack)


def _unpacked_rows(x: Shared, m: int) -> Shared:
    """Undo ``_packed_rows``: row i's bit in bit 0 of word i (m, ...); local."""
    def unpack(d: np.ndarray) -> np.ndarray:
        shifts = _ROWS.reshape((64,) + (1,) * (d.ndim - x.lead - 1))
        spread = (np.expand_dims(d, x.lead + 1) >> shifts) & U64(1)
        flat = spread.reshape(d.shape[:x.lead] + (-1,) + d.shape[x.lead + 1:])
        return flat[(slice(None),) * x.lead + (slice(0, m),)]

    return local_map(x, unpack)


def low_bits(s: Scheme, x: Shared) -> Shared:
    """Binary sharing of bit 0 of the arithmetic sharing x: the XOR of the components' low
    bits (carries only reach higher bits); local."""
    parts = s.arith_components(x)
    out = parts[0]
    for part in parts[1:]:
        out = s.xor(out, part)
    return s.and_public(out, 1)


async def bit_counts(s: Scheme, bits: Shared, labels: Shared) -> tuple[Shared, Shared]:
    """b = sum_i bits_ij (p,) and B = sum_i bits_ij labels_ic (p, c) for the bits in position 0
    of the binary sharing ``bits`` (m, p) and the 0/1 arithmetic ``labels`` (m, c)."""
    own = await s.bit_counts(bits, labels)
    if own is not None:
        return own
    m, p = bits.shape
    c = labels.shape[1]
    if not s.split_terms:
        flags = await bit_to_arith(s, bits)
        return s.sum(flags, 0), await s.matmul(flags.T, labels)
    # flag AND label, 64 rows a word; a label that is not 0/1 fails the one-hot check
    # (mpcnet.featsel.labels.open_one_hot) before any output, whatever its low bit made of
    # these counts
    in_class = _unpacked_rows(await s.and_(_packed_rows(bits).reshape(-1, p, 1),
                                           _packed_rows(low_bits(s, labels)).reshape(-1, 1, c)),
                              m).reshape(m, p * c)
    # the flags' terms and the class bits' in one round, their dot products in the next
    # (each pair of terms on its own: no joined copy of both)
    flag_terms, class_terms = await s.engine.together(s.xor_terms(bits), s.xor_terms(in_class))
    del in_class
    dots = await s.engine.together(s.term_inner(*flag_terms), s.term_inner(*class_terms))

    def counts(terms: list[Shared], dot: Shared) -> Shared:
        first, second = terms
        return s.sub(s.add(s.sum(first, 0), s.sum(second, 0)), s.mul_public(dot, 2))

    return counts(flag_terms, dots[0]), counts(class_terms, dots[1]).reshape(p, c)
