"""Layer: arithmetic. GF(2^64) = GF(2)[x] / (x^64 + x^4 + x^3 + x + 1), the field of active3's
AND proof (``mpcnet.schemes.dzkp``): an element is a uint64 word (bit d the coefficient of
x^d), addition is XOR, products come from the compiled kernels of ``mpcnet._gf64``
(carry-less multiplication). Scalars are Python ints below 2^64.

Evaluation points are the field elements 0, 1, 2, ... (the polynomials over GF(2) whose bits
those integers are), so point j is ``j`` and the points are distinct.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from mpcnet import _gf64  # type: ignore[attr-defined]

U64 = np.uint64


def smul(a: int, b: int) -> int:
    """a b for two scalars."""
    return int(_gf64.smul(a, b))


def inverse(a: int) -> int:
    """a^-1 = a^(2^64 - 2) (a != 0)."""
    if a == 0:
        raise ZeroDivisionError("0 has no inverse in GF(2^64)")
    out, power, e = 1, a, (1 << 64) - 2
    while e:
        if e & 1:
            out = smul(out, power)
        power = smul(power, power)
        e >>= 1
    return out


@functools.cache
def _denominators(count: int) -> tuple[int, ...]:
    """1 / prod_{j != l} (l - j) for the points 0..count-1."""
    out = []
    for point in range(count):
        den = 1
        for j in range(count):
            if j != point:
                den = smul(den, point ^ j)
        out.append(inverse(den))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def lagrange(count: int, r: int) -> list[int]:
    """The Lagrange coefficients of the points 0..count-1 at r: p(r) = sum_l c_l p(l) for
    every polynomial p of degree below ``count`` (do not modify the list: it is cached).
    prod_{j != l} (r - j) as the product of a prefix and a suffix: 3 count products."""
    prefix = [1]
    for j in range(count - 1):
        prefix.append(smul(prefix[-1], r ^ j))
    out, suffix = [0] * count, 1
    for point in range(count - 1, -1, -1):
        out[point] = smul(smul(prefix[point], suffix), _denominators(count)[point])
        suffix = smul(suffix, r ^ point)
    return out


def mul(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """Elementwise a b (a scalar or one-element operand broadcasts), as a fresh array of the
    other operand's shape."""
    a_arr, b_arr = (np.ascontiguousarray(np.asarray(v, dtype=U64)) for v in (a, b))
    shape = a_arr.shape if a_arr.size != 1 else b_arr.shape
    out = np.empty(shape, dtype=U64)
    _gf64.mul(a_arr.reshape(-1), b_arr.reshape(-1), out.reshape(-1))
    return out


def dot(a: np.ndarray, b: np.ndarray) -> int:
    """sum_i a_i b_i."""
    return int(_gf64.dot(np.ascontiguousarray(a, dtype=U64).reshape(-1),
                         np.ascontiguousarray(b, dtype=U64).reshape(-1)))


def combine(coefficients: Sequence[int], rows: np.ndarray) -> np.ndarray:
    """sum_l c_l rows[l] (rows (L, n))."""
    out = np.empty(rows.shape[1:], dtype=U64)
    _gf64.combine(np.asarray(coefficients, dtype=U64), np.ascontiguousarray(rows, dtype=U64),
                  out.reshape(-1))
    return out


def level_values(u: np.ndarray, v: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The values at 0..2L-2 of Q(X) = sum_i theta_i U_i(X) V_i(X), with U_i, V_i of degree
    L-1 through u[:, i] and v[:, i] (u, v (L, n)) at the points 0..L-1."""
    groups = u.shape[0]
    lam = np.asarray([lagrange(groups, groups + e) for e in range(groups - 1)],
                     dtype=U64).reshape(-1)
    out = np.empty(2 * groups - 1, dtype=U64)
    _gf64.level(np.ascontiguousarray(u, dtype=U64), np.ascontiguousarray(v, dtype=U64),
                np.ascontiguousarray(theta, dtype=U64), lam, out)
    return out


def tensor(vectors: Sequence[Sequence[int]]) -> np.ndarray:
    """The tensor product of ``vectors``, the first one's index most significant:
    out[i_1 ... i_s] = v_1[i_1] ... v_s[i_s] (1 for no vectors)."""
    out = np.ones(1, dtype=U64)
    for v in vectors:
        col = np.asarray(v, dtype=U64)
        out = mul(np.repeat(out, col.size), np.tile(col, out.size))
    return out


def byte_tables(coefficients: Sequence[int]) -> np.ndarray:
    """Tables of the GF(2)-linear map bits -> sum of the coefficients of the set bits, by
    bytes: table[c][y] = sum of coefficients[8c + i] over the set bits i of y, (chunks, 256)."""
    chunks = -(-len(coefficients) // 8)
    padded = np.zeros(8 * chunks, dtype=U64)
    padded[:len(coefficients)] = np.asarray(coefficients, dtype=U64)
    tables = np.zeros((chunks, 256), dtype=U64)
    for i in range(8):
        has = ((np.arange(256) >> i) & 1).astype(bool)
        tables[:, has] ^= padded[i::8][:, None]
    return tables


def weigh(words: np.ndarray, weights: np.ndarray, bit_tables: np.ndarray) -> int:
    """sum_k weights_k M(words_k), M the map of ``bit_tables`` (byte_tables of 64 values)."""
    return int(_gf64.weigh(np.ascontiguousarray(words, dtype=U64).reshape(-1),
                           np.ascontiguousarray(weights, dtype=U64), bit_tables))


def cross(p: tuple[np.ndarray, np.ndarray], q: tuple[np.ndarray, np.ndarray],
          weights: np.ndarray, bit_tables: np.ndarray) -> np.ndarray:
    """S (L, L): S[l, l'] = sum_k weights_k M(p0[l, k] q0[l', k] ^ p1[l, k] q1[l', k]), with
    AND and XOR on words (p, q as (L, K) words)."""
    groups = p[0].shape[0]
    out = np.empty((groups, groups), dtype=U64)
    p0, p1, q0, q1 = (np.ascontiguousarray(v, dtype=U64) for v in (*p, *q))
    _gf64.cross(p0, p1, q0, q1, groups, np.ascontiguousarray(weights, dtype=U64), bit_tables,
                out)
    return out


def fold_two(words: np.ndarray, coefficients: Sequence[int], high: Sequence[int]) -> np.ndarray:
    """(8, K): out[lo, k] = sum_{l, h} coefficients_l high_h bit 8 h + lo of words[l, k]
    (words (L, K)): the sums a[b, k] = sum_l coefficients_l bit b of words[l, k] folded again
    over the high digit h of b = 8 h + lo, in one pass over the bits, a never held."""
    count = words.shape[1]
    out = np.empty((8, count), dtype=U64)
    _gf64.fold2(np.ascontiguousarray(words, dtype=U64), np.asarray(coefficients, dtype=U64),
                np.asarray(high, dtype=U64), out)
    return out


def bits_cross(p: tuple[np.ndarray, np.ndarray], q: tuple[np.ndarray, np.ndarray],
               coefficients: Sequence[int], low: Sequence[int], weights: np.ndarray
               ) -> np.ndarray:
    """S (8, 8): with a_t[b, k] = sum_l coefficients_l bit b of p_t[l, k] (b_t likewise from
    q_t) read as (h, lo, k) for b = 8 h + lo, S[h, g] = sum_{lo, k} low_lo weights_k sum_t
    a_t[h, lo, k] b_t[g, lo, k]: the cross sums of the level that folds h, the field vectors
    made a column at a time in the kernel, never held."""
    out = np.empty(64, dtype=U64)
    p0, p1, q0, q1 = (np.ascontiguousarray(v, dtype=U64) for v in (*p, *q))
    _gf64.bits_level(p0, p1, q0, q1, np.asarray(coefficients, dtype=U64),
                     np.asarray(low, dtype=U64), np.ascontiguousarray(weights, dtype=U64), out)
    return out.reshape(8, 8)
