"""Layer: ops. Exact comparison of shared fractions whose cross products pass 64 bits.

Scores such as MS-GINI's Q/D are compared by cross-multiplication: num_A/den_A < num_B/den_B
iff V = num_A den_B - num_B den_A < 0. With m rows, V has about 3 log2 m + 2 log2 m bits
(113 bits at m = 10^7), more than Z_2^64 holds. Here num and den are given as nonnegative
base-2^w digits ("limbs", not necessarily below 2^w: only their bounds matter), so V is a
polynomial in 2^w whose coefficients are exact in the ring:

    V = sum_n X_n 2^(w n),  X_n = sum_{u+v=n} (num_A[u] den_B[v] - num_B[u] den_A[v]),
    |X_n| <= min(Lq, Ld) (num_bound - 1)(den_bound - 1) < X  (``LimbPlan.digit_bound``),

since each side of X_n is a sum of at most min(Lq, Ld) nonnegative products (with signed
limbs, |limb| < bound, each side lies in (-X/2, X/2) for twice that X: ``LimbPlan.signed``,
used by ``mpcnet.ops.bigint``'s normalised limbs). Where ties must
be broken inside the test (``with_ties``, for the selection network), the tested value is
W = V N + (idx_b - idx_a) instead, whose digits are X_n N plus the index term in X_0: the same
argument with X scaled by N.

The sign of V is read from the top (``sign_tests`` and ``cascade``), without carries:

- Z_top = X_top and Z_n = Z_{n+1} 2^w + X_n, so V = Z_n 2^(w n) + R_n with
  |R_n| < X (2^(w n) - 1) / (2^w - 1) < T 2^(w n) for T = ceil(X / (2^w - 1)).
- If |Z_n| >= T, V has Z_n's sign (and V != 0): the digits below cannot overturn it.
- If |Z_n| < T, then |Z_{n-1}| < T 2^w + X, which ``plan`` keeps below 2^63 - T, so Z_{n-1}
  (and Z_{n-1} +- T) is exact in the ring.
- Hence sign(V) = sign(Z_n) for the highest n with |Z_n| >= T, or sign(Z_0) = sign(V) if there
  is none; V = 0 iff no level is large and Z_0 = 0. Every Z_n is formed locally; the 3 tests
  per level (sign, Z_n <= -T, Z_n >= T) run in one batch of sign tests, and a log-depth tree
  of ANDs picks the deciding level. Values computed from wrapped Z_n are never selected.

With one limb each (Lq = Ld = 1) this is the plain test V < 0, valid when X <= 2^63.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mpcnet.errors import InputError
from mpcnet.ops.convert import a2b, bits_of
from mpcnet.schemes.base import Scheme, Shared, concat, split

U64 = np.uint64
_RING_HALF = 1 << 63


@dataclass(frozen=True)
class LimbPlan:
    """The public layout of a batch of fractions: limb counts, width and exclusive bounds."""

    num_limbs: int
    den_limbs: int
    limb_bits: int
    num_bound: int  # every num limb is in [0, num_bound)
    den_bound: int  # every den limb is in [0, den_bound)
    tie_range: int = 1  # N of ``with_ties``: W = V N + (idx_b - idx_a), |idx_b - idx_a| < N
    signed: bool = False  # limbs may be negative: |limb| < bound, which doubles X

    @property
    def levels(self) -> int:
        return self.num_limbs + self.den_limbs - 1

    @property
    def digit_bound(self) -> int:
        """X: every |X_n| (tie term included) is below it."""
        products = min(self.num_limbs, self.den_limbs) * (self.num_bound - 1) * (self.den_bound - 1)
        if self.signed:  # each side of X_n lies in (-products, products)
            products *= 2
        return (products + 1) * self.tie_range

    @property
    def threshold(self) -> int:
        """T: a level with |Z_n| >= T decides the sign."""
        return -(-self.digit_bound // ((1 << self.limb_bits) - 1))

    def fits(self) -> bool:
        """Whether every value the cascade forms is exact in Z_2^64 (module docstring)."""
        x = self.digit_bound
        if self.levels == 1:
            return x <= _RING_HALF  # |V| < 2^63: its sign bit is its sign
        t = self.threshold
        return t * (1 << self.limb_bits) + x + t <= _RING_HALF

    def tests_per_comparison(self) -> int:
        """Sign tests per comparison (for the cost model of ``mpcnet.ops.planner``)."""
        return 3 * (self.levels - 1) + 1


def fewest_levels(plans: Iterable[LimbPlan]) -> LimbPlan | None:
    """Of candidate layouts, the first of those that fit with the fewest levels (None if none
    fits): how every score picks its limb width."""
    fitting = [plan for plan in plans if plan.fits()]
    return min(fitting, key=lambda plan: plan.levels) if fitting else None


@dataclass(frozen=True, eq=False)
class Fractions:
    """Shares of p fractions num/den as limbs: num (Lq, p), den (Ld, p)."""

    num: Shared
    den: Shared
    plan: LimbPlan

    @property
    def count(self) -> int:
        return self.num.shape[1]

    def columns(self, index: np.ndarray | slice) -> Fractions:
        return Fractions(self.num[:, index], self.den[:, index], self.plan)


def whole(num: Shared, den: Shared, num_bound: int, den_bound: int,
          tie_range: int = 1) -> Fractions:
    """Fractions given as single ring values (one limb each), checked to compare exactly."""
    plan = LimbPlan(1, 1, 64, num_bound, den_bound, tie_range)
    if not plan.fits():
        raise InputError(f"fractions below {num_bound} / {den_bound} have cross products "
                         "beyond 2^63: split them into limbs")
    return Fractions(num.reshape(1, -1), den.reshape(1, -1), plan)


def with_ties(s: Scheme, x: Shared, plan: LimbPlan, idx_a: Shared, idx_b: Shared) -> Shared:
    """X_n of W = V N + (idx_b - idx_a), N = ``plan.tie_range``: since V is an integer and
    0 < |idx_b - idx_a| < N, W < 0 iff V < 0, or V = 0 and idx_b < idx_a, so the sign of W
    is the comparison with ties broken by the lower index (local)."""
    scaled = s.mul_public(x, plan.tie_range)
    low = s.add(scaled[0], s.sub(idx_b, idx_a)).reshape(1, -1)
    return concat([low, scaled[1:]]).reshape(x.shape)


async def digits(s: Scheme, values: Shared, bits: int, width: int) -> Shared:
    """Exact base-2^width digits, shape (ceil(bits / width), n), of nonnegative values below
    2^bits (A2B, then every bit to arithmetic in one batch and weighted local sums)."""
    count = -(-bits // width)
    bit_shares = await bits_of(s, await a2b(s, values.reshape(values.size)), range(bits))
    padded = np.zeros(bit_shares.data.shape[:s.lead] + (count * width, values.size), dtype=U64)
    padded[(slice(None),) * s.lead + (slice(0, bits),)] = bit_shares.data
    weights = (U64(1) << np.arange(width, dtype=U64)).reshape(1, width, 1)
    grouped = Shared(padded, s.lead).reshape(count, width, values.size)
    return s.sum(s.mul_public(grouped, weights), 1)


def digits_of_products(s: Scheme, products: Shared, plan: LimbPlan) -> Shared:
    """X_n (levels, n) from the limb products of a comparison, ``products`` of shape
    (2, Lq, Ld, n): [0] = num_A[u] den_B[v], [1] = num_B[u] den_A[v]; local."""
    lq, ld = plan.num_limbs, plan.den_limbs
    diff = s.sub(products[0], products[1])  # (Lq, Ld, n)
    levels = []
    for n in range(plan.levels):
        terms = [diff[u, n - u] for u in range(max(0, n - ld + 1), min(lq, n + 1))]
        total = terms[0]
        for term in terms[1:]:
            total = s.add(total, term)
        levels.append(total)
    return concat(levels).reshape(plan.levels, -1)


async def cross_digits(s: Scheme, a: Fractions, b: Fractions) -> Shared:
    """X_n (levels, n) of V = num_a den_b - num_b den_a for the n pairs (a[i], b[i]): one
    round of 2 Lq Ld products per pair."""
    plan = a.plan
    lq, ld, n = plan.num_limbs, plan.den_limbs, a.count
    left = concat([a.num.reshape(lq, 1, n).broadcast_to((lq, ld, n)),
                   b.num.reshape(lq, 1, n).broadcast_to((lq, ld, n))])
    right = concat([b.den.reshape(1, ld, n).broadcast_to((lq, ld, n)),
                    a.den.reshape(1, ld, n).broadcast_to((lq, ld, n))])
    products = await s.mul(left, right)
    return digits_of_products(s, products.reshape(2, lq, ld, n), plan)


def sign_tests(s: Scheme, x: Shared, plan: LimbPlan) -> Shared:
    """The values whose sign bits ``cascade`` needs, flat, for X_n of shape (levels, n):
    per level n >= 1 Z_n, Z_n + T - 1 and T - 1 - Z_n; then Z_0."""
    t = plan.threshold
    z = x[plan.levels - 1]
    tests = []
    for n in range(plan.levels - 1, 0, -1):
        tests += [z, s.add_public(z, t - 1), s.add_public(s.neg(z), t - 1)]
        z = s.add(s.mul_public(z, 1 << plan.limb_bits), x[n - 1])
    tests.append(z)
    return concat(tests)


async def cascade(s: Scheme, signs: Shared, plan: LimbPlan, count: int) -> Shared:
    """Binary shares (bit 0) of [V < 0] from the sign bits of ``sign_tests`` (module
    docstring): ceil(log2 levels) AND rounds. Adjacent levels merge, the higher one first:
    (large_h, sign_h) o (large_l, sign_l) = (large_h OR large_l, large_h ? sign_h : sign_l),
    an associative rule; level 0 enters as (0, sign(Z_0))."""
    parts = split(signs, [(count,)] * plan.tests_per_comparison())
    # (large, sign) per level, highest first; level 0 decides only if no level above is large
    pairs = [(s.xor(parts[3 * i + 1], parts[3 * i + 2]), parts[3 * i])
             for i in range(plan.levels - 1)]
    pairs.append((s.and_public(parts[-1], 0), parts[-1]))
    while len(pairs) > 1:
        higher, lower = pairs[0:len(pairs) - 1:2], pairs[1::2]
        # sign = big_h ? sign_h : sign_l, large = big_h OR big_l
        xs = [big_h for (big_h, _), _ in zip(higher, lower, strict=True)] * 2
        ys = ([s.xor(sign_h, sign_l) for (_, sign_h), (_, sign_l) in zip(higher, lower,
                                                                           strict=True)]
              + [big_l for big_l, _ in lower])
        products = split(await s.and_(concat(xs), concat(ys)), [(count,)] * len(xs))
        n = len(higher)
        merged = [(s.xor(s.xor(big_h, big_l), products[n + i]), s.xor(sign_l, products[i]))
                  for i, ((big_h, _), (big_l, sign_l)) in enumerate(zip(higher, lower,
                                                                       strict=True))]
        pairs = merged + pairs[2 * n:]
    return pairs[0][1]
