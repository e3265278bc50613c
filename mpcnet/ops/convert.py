"""Layer: ops. Conversions between binary (bit-sliced) and arithmetic shares.

B2A of single bits follows the component method of ABY3 (Mohassel and Rindal, CCS 2018,
section 5.3): the XOR components of a shared bit are each held by a subset of parties, so each
has a local arithmetic sharing, and x XOR y = x + y - 2xy folds them with ring products. A tree
of pairwise folds costs ceil(log2 c) rounds for c components (2 for rep3 and rep4).
"""

from __future__ import annotations

from mpcnet.schemes.base import Scheme, Shared, concat, split


async def bit_to_arith(s: Scheme, bits: Shared) -> Shared:
    """Arithmetic 0/1 sharing of bit 0 of every word of the binary sharing ``bits``."""
    comps = s.bit_components(bits)
    while len(comps) > 1:
        pairs = len(comps) // 2
        left, right = comps[0:2 * pairs:2], comps[1:2 * pairs:2]
        prod = await s.mul(concat(left), concat(right))
        products = split(prod, [c.shape for c in left])
        folded = [s.sub(s.add(x, y), s.mul_public(xy, 2))
                  for x, y, xy in zip(left, right, products, strict=True)]
        comps = folded + comps[2 * pairs:]
    return comps[0]
