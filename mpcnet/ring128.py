"""Layer: arithmetic. Z_2^128 on pairs of numpy uint64 limbs, with compiled loops.

An element x = lo + 2^64 * hi is stored as an array of shape ``(2, *shape)`` with ``a[0] = lo``
and ``a[1] = hi``, so a whole batch of 128-bit values is two uint64 arrays. Used where 64 bits
do not suffice, e.g. exact cross-multiplied comparison of Gini scores beyond m ~ 9,000 rows
(docs/design.md, section 4) and the Z_2^(k+s) ring of SPDZ-wise (Cramer et al., SPDZ2k,
CRYPTO 2018).

The ring operations are numpy ufuncs compiled from ``mpcnet/_ring128.c`` (unsigned __int128
arithmetic, built by ``pip install``): one pass over memory per operation, with numpy's
broadcasting. The numpy expressions they replace took 3 to 17 passes each (the product 17, the
exact matrix product a float64 BLAS product per pair of 16-bit pieces), about a third of an
active3 server's CPU time (docs/design.md, section 5, has the profile).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    from mpcnet import _ring128  # type: ignore[attr-defined]
except ImportError as e:  # a checkout that was not installed
    raise ImportError("mpcnet's compiled loops (mpcnet/_ring128.c) are not built here, and "
                      "there is no pure-numpy fallback: install the wheel, or install the sdist "
                      "or the checkout with a C compiler present (`make test`, `pip install -e "
                      ".`, or `python setup.py build_ext --inplace` in a checkout)") from e

U64 = np.uint64
MASK64 = (1 << 64) - 1
MASK128 = (1 << 128) - 1


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
def _apply(kernel: Any, *operands: Any) -> np.ndarray:
    """``kernel`` over the limbs of 128-bit ``operands``, into a fresh (2, *shape) array (the
    compiled loops must not write over their inputs)."""
    limbs = [np.asarray(x, dtype=U64) for x in operands]
    shape = np.broadcast_shapes(*(x.shape[1:] for x in limbs))
    out = np.empty((2,) + shape, dtype=U64)
    kernel(*(limb for x in limbs for limb in (x[0], x[1])), out=(out[0, ...], out[1, ...]))
    return out


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b mod 2^128 (broadcasting over the logical shape)."""
    return _apply(_ring128.add, a, b)


def sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a - b mod 2^128."""
    return _apply(_ring128.sub, a, b)


def neg(a: np.ndarray) -> np.ndarray:
    """-a mod 2^128."""
    return _apply(_ring128.sub, zeros(()), a)


def mul64_full(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact 128-bit product of uint64 arrays as (lo, hi)."""
    a = np.asarray(a, dtype=U64)
    b = np.asarray(b, dtype=U64)
    return a * b, _ring128.mulhi(a, b)


def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a * b mod 2^128."""
    return _apply(_ring128.mul, a, b)


def dot2(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> np.ndarray:
    """a * b + c * d mod 2^128 in one pass (the cross terms of a replicated product)."""
    return _apply(_ring128.dot2, a, b, c, d)


def mul_u64(a: np.ndarray, c: np.ndarray | int) -> np.ndarray:
    """a * c for uint64 (public) c, zero-extended."""
    return mul(a, from_u64(np.asarray(c, dtype=U64)))


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


# -- matrix product and sums -------------------------------------------------------------
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact matrix product in Z_2^128 of a (2, ..., m, n) and b (2, ..., n, k), leading axes
    broadcast."""
    a, b = np.asarray(a, dtype=U64), np.asarray(b, dtype=U64)
    if a.ndim < 3 or b.ndim < 3:
        raise ValueError(f"matmul needs matrices, got shapes {a.shape[1:]} and {b.shape[1:]}")
    if b.shape[-2] != a.shape[-1]:
        raise ValueError(f"matmul shapes {a.shape[1:]} and {b.shape[1:]} do not align")
    shape = np.broadcast_shapes(a.shape[1:-2], b.shape[1:-2]) + (a.shape[-2], b.shape[-1])
    out = np.empty((2,) + shape, dtype=U64)
    _ring128.matmul(a[0], a[1], b[0], b[1], out=(out[0], out[1]))
    return out


def replicated_dot(r: np.ndarray, z: np.ndarray) -> np.ndarray:
    """This party's term of the dot product over the last axis of replicated r and z, each
    (limb, slot, ..., n): sum of r_0 (z_0 + z_1) + r_1 z_0 mod 2^128, leading axes broadcast,
    in one pass and no temporaries (the MAC check's combination)."""
    r, z = np.asarray(r, dtype=U64), np.asarray(z, dtype=U64)
    shape = np.broadcast_shapes(r.shape[2:-1], z.shape[2:-1])
    out = np.empty((2,) + shape, dtype=U64)
    _ring128.replicated_dot(r[0, 0], r[1, 0], r[0, 1], r[1, 1], z[0, 0], z[1, 0], z[0, 1],
                            z[1, 1], out=(out[0, ...], out[1, ...]))
    return out


def sum_(a: np.ndarray, axis: int) -> np.ndarray:
    """Sum over a logical axis mod 2^128."""
    a = np.asarray(a, dtype=U64)
    lo, hi = np.moveaxis(a[0], axis, -1), np.moveaxis(a[1], axis, -1)
    out = np.empty((2,) + lo.shape[:-1], dtype=U64)
    _ring128.sum(lo, hi, out=(out[0, ...], out[1, ...]))
    return out
