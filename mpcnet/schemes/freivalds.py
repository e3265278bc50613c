"""Layer: schemes. active3's output test of D' = D x T: Freivalds' check of a product that is
only output, never computed on (``Spdz3.output_matmul``).

z = x y is reshared as its value alone, its terms committed (``commitment``) before a public
vector r is tossed; then z r - x (y r) must be zero (z r and y r are local, x (y r) one MAC'd
product; the zero test joins the MAC check's, decided by ``Spdz3.verify`` before z is
output). Three rounds instead of one, and the product's MAC half is gone (three of its five
word products, half its words sent).

Why it holds. u = z r - w = E r - e_w for the cheater's errors E on z and the value error e_w
of w. E r is fixed by E and r, neither depending on the data (E is committed before r
exists), so a cheater passes the zero test only with e_w = E r, an error on a product, which
the MAC check lets through with at most 2^-(128 - v) for its 2-adic valuation v. A wrong low
64 bits of z (E of least valuation V < 64) gives an entry of E r of valuation v with
probability at most 2^-(v - V) over the public r, so it passes with at most about
(129 - V) 2^-(128 - V), 2^-57 at most, the MAC check's own bound. u itself, the outcome and
what the zero test's claims show are functions of E, e_w and r: never of the data. (A first
version drew r secret and computed y r as a product: its value errors of valuation 127 pass a
MAC check half the time and reached u times x, so the abort and a digest depended on the
data: found by review.) z is value-only, checked by the zero test as the inputs are by their
holders' digests, so only a product with an authenticated factor or an output can use it.
"""

from __future__ import annotations

import hashlib

import numpy as np

from mpcnet import ring128
from mpcnet.prf import PRF


def freivalds_vector(seed: bytes, columns: int) -> np.ndarray:
    """The public vector r (limb, columns, 1) in Z_2^128 drawn from the coin ``seed``."""
    return PRF(hashlib.sha256(b"freivalds" + seed).digest()[:16]).words((2, columns, 1))


def residual(values: np.ndarray, r: np.ndarray, w: np.ndarray) -> np.ndarray:
    """u = z r - w for this party's value components of z (limb, slot, m, k) and of
    w = x (y r) (limb, slot, m, 1): a sharing of zero when z = x y."""
    return ring128.sub(ring128.matmul(values, r), w)
