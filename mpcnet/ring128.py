"""Layer: arithmetic. Z_2^128 on pairs of numpy uint64 limbs, fully vectorised.

An element x = lo + 2^64 * hi is stored as an array of shape ``(2, *shape)`` with ``a[0] = lo``
and ``a[1] = hi``, so a whole batch of 128-bit values is two uint64 arrays. Used where 64 bits
do not suffice, e.g. exact cross-multiplied comparison of Gini scores beyond m ~ 9,000 rows
(docs/design.md, section 4) and the Z_2^(k+s) ring of SPDZ-wise (Cramer et al., SPDZ2k,
CRYPTO 2018).

Carries are recovered with unsigned comparisons (``lo < a_lo`` after an addition), products with
the schoolbook method on 32-bit halves (Knuth, TAOCP vol. 2, 4.3.1, algorithm M). The matrix
product is exact: operands are cut into w-bit pieces small enough that every piece product,
summed over the inner dimension, stays below 2^53, so BLAS float64 matmuls compute them without
rounding; the partial sums are shifted back and added with carries in Z_2^128.
"""

from __future__ import annotations

from typing import Any

import numpy as np

U64 = np.uint64
MASK64 = (1 << 64) - 1
MASK128 = (1 << 128) - 1
_M32 = U64(0xFFFFFFFF)
_S32 = U64(32)
_FLOAT_EXACT_BITS = 53  # float64 holds every integer below 2^53 exactly


# -- conversion ----------------------------------------------------------------------------
def zeros(shape: int | tuple[int, ...]) -> np.ndarray:
    """The zero element in every position of ``shape``."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return np.zeros((2,) + shape, dtype=U64)


def from_int(values: Any) -> np.ndarray:
    """Python ints (a scalar, nested lists or an object/int array) reduced mod 2^128."""
    arr = np.asarray(values, dtype=object)
    flat = [int(v) & MASK128 for v in arr.ravel()]
    lo = np.array([v & MASK64 for v in flat], dtype=U64).reshape(arr.shape)
    hi = np.array([v >> 64 for v in flat], dtype=U64).reshape(arr.shape)
    return np.stack([lo, hi])


def to_int(a: np.ndarray) -> Any:
    """The elements as Python ints in [0, 2^128): an int for a scalar, else an object array."""
    lo = np.asarray(a[0]).astype(object)
    hi = np.asarray(a[1]).astype(object)
    out = lo + (hi << 64)
    return int(out) if np.ndim(out) == 0 else out


def to_signed_int(a: np.ndarray) -> Any:
    """The elements as Python ints in [-2^127, 2^127) (two's complement)."""
    vals = np.asarray(to_int(a), dtype=object)
    out = np.where(vals >= (1 << 127), vals - (1 << 128), vals)
    return int(out) if np.ndim(out) == 0 else out


def from_u64(lo: np.ndarray) -> np.ndarray:
    """Zero-extend uint64 values into Z_2^128."""
    lo = np.asarray(lo, dtype=U64)
    return np.stack([lo, np.zeros_like(lo)])


def from_i64(values: np.ndarray) -> np.ndarray:
    """Sign-extend int64 (or uint64 read as two's complement) values into Z_2^128."""
    lo = np.asarray(values).astype(np.int64).view(U64)
    hi = U64(0) - (lo >> U64(63))  # all ones for negative values
    return np.stack([lo, hi])


def low64(a: np.ndarray) -> np.ndarray:
    """Reduction mod 2^64 (the low limb)."""
    return np.asarray(a[0])


# -- ring operations -----------------------------------------------------------------------
def _result(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Room for a result of the broadcast logical shape of a and b."""
    return np.empty((2,) + np.broadcast_shapes(np.shape(a)[1:], np.shape(b)[1:]), dtype=U64)


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b mod 2^128 (broadcasting over the logical shape)."""
    out = _result(a, b)
    np.add(a[0], b[0], out=out[0])
    np.add(a[1], b[1], out=out[1])
    out[1] += out[0] < a[0]  # the carry out of the low limb
    return out


def sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b mod 2^128."""
    out = _result(a, b)
    np.subtract(a[1], b[1], out=out[1])
    out[1] -= a[0] < b[0]  # the borrow into the low limb
    np.subtract(a[0], b[0], out=out[0])
    return out


def neg(a: np.ndarray) -> np.ndarray:
    """-a mod 2^128."""
    return sub(np.zeros_like(a), a)


def _mul_high(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The high 64 bits of the 128-bit products of uint64 arrays (schoolbook on 32-bit
    halves; Knuth, TAOCP vol. 2, 4.3.1, algorithm M). The low 64 bits are a * b itself."""
    al, ah = a & _M32, a >> _S32
    bl, bh = b & _M32, b >> _S32
    cross = al * bh  # each partial product is below 2^64: no wrap
    mid = (al * bl) >> _S32
    mid += cross & _M32
    high = ah * bh
    high += cross >> _S32
    np.multiply(ah, bl, out=cross)
    mid += cross & _M32
    high += cross >> _S32
    high += mid >> _S32
    return high


def mul64_full(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact 128-bit product of uint64 arrays as (lo, hi)."""
    a = np.asarray(a, dtype=U64)
    b = np.asarray(b, dtype=U64)
    return a * b, _mul_high(a, b)


def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b mod 2^128: (a0 + 2^64 a1)(b0 + 2^64 b1) = a0 b0 + 2^64 (a0 b1 + a1 b0) mod 2^128."""
    out = _result(a, b)
    np.multiply(a[0], b[0], out=out[0])
    out[1] = _mul_high(a[0], b[0])
    out[1] += a[0] * b[1]  # uint64 wrap is exactly the mod 2^128 truncation
    out[1] += a[1] * b[0]
    return out


def mul_u64(a: np.ndarray, c: np.ndarray | int) -> np.ndarray:
    """a * c for uint64 (public) c, zero-extended; a scalar power of two is a shift."""
    c = np.asarray(c, dtype=U64)
    if c.ndim == 0 and int(c) and int(c) & (int(c) - 1) == 0:
        return shl(np.asarray(a), int(c).bit_length() - 1)
    out = _result(a, c[None])
    np.multiply(a[0], c, out=out[0])
    out[1] = _mul_high(a[0], c)
    out[1] += a[1] * c
    return out


def shl(a: np.ndarray, s: int) -> np.ndarray:
    """a << s mod 2^128 for a public shift 0 <= s < 128."""
    if not 0 <= s < 128:
        raise ValueError(f"shift must be in [0, 128), got {s}")
    if s == 0:
        return np.array(a, copy=True)
    if s >= 64:
        return np.stack([np.zeros_like(a[0]), a[0] << U64(s - 64)])
    return np.stack([a[0] << U64(s), (a[1] << U64(s)) | (a[0] >> U64(64 - s))])


def shr(a: np.ndarray, s: int) -> np.ndarray:
    """Logical a >> s for a public shift 0 <= s < 128."""
    if not 0 <= s < 128:
        raise ValueError(f"shift must be in [0, 128), got {s}")
    if s == 0:
        return np.array(a, copy=True)
    if s >= 64:
        return np.stack([a[1] >> U64(s - 64), np.zeros_like(a[1])])
    return np.stack([(a[0] >> U64(s)) | (a[1] << U64(64 - s)), a[1] >> U64(s)])


def sar(a: np.ndarray, s: int) -> np.ndarray:
    """Arithmetic a >> s (top bit replicated) for 0 <= s < 128."""
    out = shr(a, s)
    if s == 0:
        return out
    fill = shl(np.stack([np.full_like(a[0], MASK64), np.full_like(a[0], MASK64)]), 128 - s)
    negative = (a[1] >> U64(63)).astype(bool)
    return np.where(negative, out | fill, out)


# -- comparisons ---------------------------------------------------------------------------
def eq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality as a bool array of the logical shape."""
    return (a[0] == b[0]) & (a[1] == b[1])


def ult(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Unsigned a < b as a bool array."""
    return (a[1] < b[1]) | ((a[1] == b[1]) & (a[0] < b[0]))


def slt(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Signed (two's complement) a < b as a bool array."""
    top = U64(1 << 63)
    return ult(np.stack([a[0], a[1] ^ top]), np.stack([b[0], b[1] ^ top]))


def msb(a: np.ndarray) -> np.ndarray:
    """Bit 127 of each element as 0/1 uint64 (the sign in two's complement)."""
    return np.asarray(a[1]) >> U64(63)


def bit(a: np.ndarray, i: int) -> np.ndarray:
    """Bit i (0 <= i < 128) of each element as 0/1 uint64."""
    limb, pos = divmod(i, 64)
    return (np.asarray(a[limb]) >> U64(pos)) & U64(1)


# -- matrix product ------------------------------------------------------------------------
def _piece_width(inner: int) -> tuple[int, int]:
    """Piece width w and piece count P such that P * inner * (2^w - 1)^2 < 2^53.

    The partial sum S_s = sum_{i+j=s} A_i B_j has at most P * inner terms below 2^(2w), so every
    intermediate BLAS sum is an integer below 2^53 and float64 arithmetic is exact.
    """
    for w in range(26, 0, -1):
        pieces = -(-128 // w)
        if pieces * max(inner, 1) * ((1 << w) - 1) ** 2 < (1 << _FLOAT_EXACT_BITS):
            return w, pieces
    raise ValueError(f"inner dimension {inner} too large for an exact float64 matmul")


def _pieces(a: np.ndarray, w: int, count: int) -> list[np.ndarray]:
    """The w-bit pieces of each element, least significant first, as float64 arrays."""
    mask = U64((1 << w) - 1)
    out = []
    for i in range(count):
        start = i * w
        limb, pos = divmod(start, 64)
        piece = a[limb] >> U64(pos)
        if pos + w > 64 and limb == 0:
            piece = piece | (a[1] << U64(64 - pos))
        out.append((piece & mask).astype(np.float64))
    return out


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact matrix product in Z_2^128 of a (2, ..., m, n) and b (2, ..., n, k).

    With A = sum_i 2^(wi) A_i and B = sum_j 2^(wj) B_j (w-bit pieces), A B mod 2^128 is
    sum_s 2^(ws) S_s with S_s = sum_{i+j=s} A_i B_j over s < P only. Each A_i is multiplied
    once (a float64 BLAS matmul) by the pieces [B_0 | .. | B_{P-1-i}] side by side, and the
    column blocks are added into the S_s they belong to.
    """
    inner, k = a.shape[-1], b.shape[-1]
    if b.shape[-2] != inner:
        raise ValueError(f"matmul shapes {a.shape[1:]} and {b.shape[1:]} do not align")
    w, count = _piece_width(inner)
    used = count if a[1].any() else -(-64 // w)  # a below 2^64: its top pieces are zero
    pa = _pieces(a, w, used)
    pb = _pieces(b, w, count)
    sums: list[np.ndarray] = []
    for i in range(used):
        product = np.matmul(pa[i], np.concatenate(pb[:count - i], axis=-1))
        for j in range(count - i):
            block = product[..., j * k:(j + 1) * k]
            if i == 0:
                sums.append(np.array(block))
            else:
                sums[i + j] += block
    out = from_u64(sums[0].astype(U64))
    for s in range(1, count):
        out = add(out, shl(from_u64(sums[s].astype(U64)), w * s))
    return out


def sum_(a: np.ndarray, axis: int) -> np.ndarray:
    """Sum over a logical axis mod 2^128, carries counted exactly.

    The low limb is summed as two 32-bit halves, whose uint64 sums cannot wrap for any axis
    shorter than 2^32 elements; the high limb wraps like the ring does.
    """
    lo_lo = (a[0] & _M32).sum(axis=axis, dtype=U64)
    lo_hi = (a[0] >> _S32).sum(axis=axis, dtype=U64)
    hi = a[1].sum(axis=axis, dtype=U64)
    total = add(from_u64(lo_lo), shl(from_u64(lo_hi), 32))
    return add(total, np.stack([np.zeros_like(hi), hi]))
