"""Layer: ops. Shared integers wider than the ring, as signed limbs, for exact scores.

A score such as the squared correlation needs sums of squares of m values of 39 bits and their
squares again (about 200 bits), which Z_2^64 cannot hold. A ``Big`` holds each of n integers as
N = sum_u v_u 2^(w u) with limbs v (L x n) that are ring elements read as signed integers with
|v_u| < B (``BigShape``: L, w, B). Every value a limb takes is exact in the ring as long as
B <= 2^63, which every operation checks from the public shape alone:

- add, sub, shift by 2^t, times a public integer: local, the bound grows accordingly;
- times another ``Big`` (all limb pairs, one round) or times a shared word |x| < X (one round):
  the bound of the product's limbs is the sum of at most min(L_a, L_b) products;
- ``normalise`` (one ``digits`` call, an A2B per limb): limb v_u + B - 1 >= 0 is cut into w-bit
  digits, the digits are added at their positions, and the public offset (B - 1) sum_u 2^(w u)
  is subtracted digit by digit, leaving limbs with |v| < (min(D, L) + 1) 2^w for D digits per
  limb: the value is unchanged, the bound is small again, at the cost of D - 1 more limbs.

Operations normalise their operands first when the result's bound would pass 2^63, so a
formula is written without caring about growth. The shapes depend on public sizes only, and a
formula run with ``Big`` shapes whose values are None computes them without a scheme
(``dry_run``): that is how a score's limb plan is known before the job starts.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from mpcnet.ops.compare import msb
from mpcnet.ops.convert import bit_to_arith
from mpcnet.ops.fraction import LimbPlan, cascade, digits, sign_tests
from mpcnet.schemes.base import Scheme, Shared, concat
from mpcnet.schemes.base import join as join_shared

U64 = np.uint64
LIMIT = 1 << 63
T = TypeVar("T")


@dataclass(frozen=True)
class BigShape:
    """L limbs of w bits, every |limb| < bound."""

    limbs: int
    width: int
    bound: int

    def normalised(self) -> BigShape:
        per_limb = -(-(2 * (self.bound - 1)).bit_length() // self.width)
        return BigShape(self.limbs + per_limb - 1, self.width,
                        (min(per_limb, self.limbs) + 1) << self.width)


@dataclass(frozen=True, eq=False)
class Big:
    """n shared integers (``values``: L x n limbs; None in a dry run) of shape ``shape``."""

    values: Shared | None
    shape: BigShape
    count: int

    def _with(self, values: Shared | None, limbs: int, bound: int) -> Big:
        return Big(values, BigShape(limbs, self.shape.width, bound), self.count)


def dry_run(formula: Coroutine[Any, Any, T]) -> T:
    """The result of a formula on dry ``Big`` values (no scheme, nothing awaited)."""
    try:
        formula.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    formula.close()
    raise RuntimeError("a dry run awaited a protocol step")


def dry(bits: int, width: int, count: int) -> Big:
    """The shape of ``of_words(values below 2^bits)`` without values."""
    return Big(None, BigShape(-(-bits // width), width, 1 << width), count)


async def of_words(s: Scheme, words: Shared, bits: int, width: int) -> Big:
    """Ring values 0 <= x < 2^bits (bits <= 64) as w-bit digits."""
    return Big(await digits(s, words.reshape(words.size), bits, width),
               dry(bits, width, words.size).shape, words.size)


def join(s: Scheme | None, parts: list[Big]) -> Big:
    """Bigs of one shape side by side (more values, one batch)."""
    first = parts[0]
    assert all(b.shape == first.shape for b in parts)
    count = sum(b.count for b in parts)
    if s is None or first.values is None:
        return Big(None, first.shape, count)
    values = [b.values for b in parts]
    assert all(v is not None for v in values)
    return Big(join_shared(values, 1), first.shape, count)  # type: ignore[arg-type]


def parts(s: Scheme | None, a: Big, count: int) -> list[Big]:
    """Undo ``join``: ``count`` Bigs of equal size."""
    size = a.count // count
    if s is None or a.values is None:
        return [Big(None, a.shape, size) for _ in range(count)]
    return [Big(a.values[:, i * size:(i + 1) * size], a.shape, size) for i in range(count)]


def add_to_lowest(s: Scheme | None, a: Big, x: Shared | None) -> Big:
    """a + x for shared 0/1 values x (added to the lowest limb; local)."""
    bound = _check(a.shape.bound + 1)
    if s is None or a.values is None or x is None:
        return a._with(None, a.shape.limbs, bound)
    low = s.add(a.values[0], x).reshape(1, a.count)
    rest = a.values[1:]
    return a._with(concat([low, rest]).reshape(a.shape.limbs, a.count), a.shape.limbs, bound)


def lanes(s: Scheme | None, factors: list[Shared | None], size: int) -> Shared | None:
    """The words of ``mul_word`` for Bigs joined from parts of ``size`` values each: per part,
    a shared scalar (for all its values), a shared vector (one per value) or None for 1."""
    if s is None:
        return None
    out = []
    for f in factors:
        if f is None:
            out.append(s.public(np.ones(size, dtype=U64)))
        else:
            assert f.shape in ((), (size,)), f"a lane of {f.shape} for parts of {size}"
            out.append(f.reshape(1).broadcast_to((size,)) if f.shape == () else f)
    return concat(out)


def _padded(s: Scheme, a: Big, limbs: int) -> Shared | None:
    if a.values is None or a.shape.limbs == limbs:
        return a.values
    zeros = s.public(np.zeros((limbs - a.shape.limbs, a.count), dtype=U64))
    return concat([a.values, zeros]).reshape(limbs, a.count)


def _check(bound: int) -> int:
    if bound > LIMIT:
        raise ValueError(f"limb bound {bound} passes 2^63")
    return bound


async def add(s: Scheme | None, a: Big, b: Big, subtract: bool = False) -> Big:
    """a + b (or a - b), normalising first if the limbs could pass 2^63."""
    if a.shape.bound + b.shape.bound - 1 > LIMIT:
        a, b = await normalise(s, a), await normalise(s, b)
    limbs = max(a.shape.limbs, b.shape.limbs)
    bound = _check(a.shape.bound + b.shape.bound - 1)
    if s is None or a.values is None:
        return a._with(None, limbs, bound)
    x, y = _padded(s, a, limbs), _padded(s, b, limbs)
    assert x is not None and y is not None
    return a._with(s.sub(x, y) if subtract else s.add(x, y), limbs, bound)


async def total(s: Scheme | None, parts: list[Big]) -> Big:
    """The sum of one or more Bigs of the same count."""
    out = parts[0]
    for part in parts[1:]:
        out = await add(s, out, part)
    return out


async def scale(s: Scheme | None, a: Big, factor: int, shift: int = 0) -> Big:
    """a * factor * 2^shift for public factor >= 1 and shift >= 0."""
    whole, rest = divmod(shift, a.shape.width)
    multiplier = factor << rest
    if (a.shape.bound - 1) * multiplier + 1 > LIMIT:
        a = await normalise(s, a)
    bound = _check((a.shape.bound - 1) * multiplier + 1)
    limbs = a.shape.limbs + whole
    if s is None or a.values is None:
        return a._with(None, limbs, bound)
    scaled = s.mul_public(a.values, multiplier)
    if whole:
        zeros = s.public(np.zeros((whole, a.count), dtype=U64))
        scaled = concat([zeros, scaled]).reshape(limbs, a.count)
    return a._with(scaled, limbs, bound)


async def mul(s: Scheme | None, a: Big, b: Big) -> Big:
    """a * b, both of n values: every pair of limbs in one round, summed by position."""
    def product_bound(x: BigShape, y: BigShape) -> int:
        return min(x.limbs, y.limbs) * (x.bound - 1) * (y.bound - 1) + 1
    if product_bound(a.shape, b.shape) > LIMIT:
        a, b = await normalise(s, a), await normalise(s, b)
    la, lb, n = a.shape.limbs, b.shape.limbs, a.count
    bound = _check(product_bound(a.shape, b.shape))
    if s is None or a.values is None or b.values is None:
        return a._with(None, la + lb - 1, bound)
    pairs = await s.mul(a.values.reshape(la, 1, n).broadcast_to((la, lb, n)),
                        b.values.reshape(1, lb, n).broadcast_to((la, lb, n)))
    return a._with(_by_position(s, pairs, la, lb, n), la + lb - 1, bound)


async def mul_word(s: Scheme | None, a: Big, word: Shared | None, word_bound: int) -> Big:
    """a * x for a shared ring value |x| < word_bound per value (broadcast over the limbs)."""
    if (a.shape.bound - 1) * (word_bound - 1) + 1 > LIMIT:
        a = await normalise(s, a)
    bound = _check((a.shape.bound - 1) * (word_bound - 1) + 1)
    if s is None or a.values is None or word is None:
        return a._with(None, a.shape.limbs, bound)
    lanes = (a.shape.limbs, a.count)
    product = await s.mul(a.values, word.reshape(1, a.count).broadcast_to(lanes))
    return a._with(product, a.shape.limbs, bound)


def _by_position(s: Scheme, parts: Shared, rows: int, cols: int, n: int) -> Shared:
    """sum_{u + t = k} parts[u, t] for k = 0 .. rows + cols - 2 (parts: rows x cols x n)."""
    out = []
    for k in range(rows + cols - 1):
        terms = [parts[u, k - u] for u in range(max(0, k - cols + 1), min(rows, k + 1))]
        total = terms[0]
        for term in terms[1:]:
            total = s.add(total, term)
        out.append(total)
    return concat(out).reshape(rows + cols - 1, n)


async def normalise(s: Scheme | None, a: Big) -> Big:
    """The same values with small limbs again (module docstring)."""
    shape = a.shape.normalised()
    if s is None or a.values is None:
        return Big(None, shape, a.count)
    w, limbs, n = a.shape.width, a.shape.limbs, a.count
    offset = a.shape.bound - 1
    per_limb = shape.limbs - limbs + 1
    cut = await digits(s, s.add_public(a.values, offset).reshape(limbs * n),
                       (2 * offset).bit_length(), w)  # per_limb x (limbs n)
    summed = _by_position(s, _swap(cut.reshape(per_limb, limbs, n)), limbs, per_limb, n)
    constant = offset * sum(1 << (w * u) for u in range(limbs))
    public = np.array([(constant >> (w * k)) & ((1 << w) - 1) for k in range(shape.limbs)],
                      dtype=U64).reshape(shape.limbs, 1)
    assert constant >> (w * shape.limbs) == 0
    return Big(s.add_public(summed, U64(0) - np.broadcast_to(public, (shape.limbs, n))), shape,
               n)


async def is_zero(s: Scheme, a: Big) -> Shared:
    """Arithmetic 0/1 sharings of [N == 0] for nonnegative N: 1 - [-N < 0], the sign read from
    the top limb down as ``mpcnet.ops.fraction.cascade`` reads a difference of fractions."""
    plan = sign_plan(a.shape)
    negated = s.neg(a.values) if a.values is not None else None
    assert negated is not None
    below = await cascade(s, await msb(s, sign_tests(s, negated, plan)), plan, a.count)
    return s.add_public(s.neg(await bit_to_arith(s, below)), 1)


def sign_plan(shape: BigShape) -> LimbPlan:
    """The cascade's plan for the sign of one ``Big`` of this shape (its limbs are the X_n)."""
    plan = LimbPlan(shape.limbs, 1, shape.width, shape.bound, 2)
    if not plan.fits():
        raise ValueError(f"limbs below {shape.bound} of {shape.width} bits are too wide for a "
                         "sign test: normalise first")
    return plan


def _swap(x: Shared) -> Shared:
    """(a, b, n) -> (b, a, n) on the logical axes."""
    lead = x.lead
    return Shared(np.swapaxes(x.data, lead, lead + 1), lead, x.binary)
