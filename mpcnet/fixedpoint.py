"""Encoding layer: per-column power-of-two fixed point for the values data owners share.

A value x of column j is encoded as the integer round(x * 2**e_j) (round half to even), where
e_j is the column's scale exponent; it may be negative (large values) or far above 64 (tiny
values), since only the encoded integer has to fit the ring.

Why one exponent per column and not one global scale: the mean-split test of pi_MS-GINI
(Li, Dowsley, De Cock 2021, Protocol 2, line 4: theta < f_i, computed as sum_i f_i < m * f_i,
docs/design.md, section 4) is invariant to multiplying a column by a positive constant, so a
per-column scale loses nothing. One global scale cannot hold LSVT, whose values run from
1.8e-13 to 8.2e10, in 64 bits: global scales of 2**-16 .. 2**-24 were measured to change the
LSVT selection, while per-column scaling of every column to 24..48 bits reproduces it exactly.

Precision limits (the secure split test depends on them):

- VALUE_BITS = 38: every encoded value satisfies |x_enc| < 2**38.
- Split test: with m rows, S_j = sum_i x_ij and |S_j - m * x_ij| <= 2 * m * 2**38, which fits
  a signed 64-bit ring (< 2**63) exactly when m < 2**24 = MAX_ROWS (16.7 million rows).
- AUTO_BITS = 31: auto-scaling picks e_j so that the column's largest |x| encodes below 2**31;
  the 2**7 headroom up to VALUE_BITS lets later data owners upload values up to 128 times
  larger than the first owner's largest under the same, agreed exponent. (VALUE_BITS was 40,
  with 2**9 of headroom, while jobs were limited to 2**22 rows.)
"""

from __future__ import annotations

import numpy as np

from mpcnet.errors import InputError, RangeError

EXPONENT_RANGE = (-960, 1060)
"""Scale exponents a dataset may use: every encoded value (|z| < 2**VALUE_BITS) then decodes to a
finite, nonzero float64 z * 2**-e."""

VALUE_BITS = 38
"""Every encoded value must satisfy |x_enc| < 2**VALUE_BITS."""

AUTO_BITS = 31
"""Auto-scaling puts a column's largest |x| below 2**AUTO_BITS (2**7 headroom to VALUE_BITS)."""

MAX_ROWS = 2**24
"""Row limit of the secure split test: 2 * m * 2**VALUE_BITS < 2**63 requires m < 2**24."""


NO_EXPONENT = -1100
"""``finest_exponents`` of an all-zero column: below every float64's (a zero is exact at any
scale; the largest float64 is exact from exponent -971 on)."""


def finest_exponents(values: np.ndarray) -> np.ndarray:
    """Per column of finite floats, the smallest exponent e at which every value encodes
    exactly (x * 2**e is an integer: nothing is rounded), NO_EXPONENT for an all-zero column.

    x = M * 2**(b - 53) with the 53-bit integer mantissa M (np.frexp); M's t trailing zero
    bits make x an odd integer times 2**(b - 53 + t), exact from e = 53 - b - t on.
    """
    x = np.asarray(values, dtype=np.float64)
    mant, binexp = np.frexp(x)
    ints = np.ldexp(np.abs(mant), 53).astype(np.int64)
    _, lowbit = np.frexp((ints & -ints).astype(np.float64))  # 2**t has frexp exponent t + 1
    need = 53 - binexp.astype(np.int64) - (lowbit.astype(np.int64) - 1)
    need[x == 0] = NO_EXPONENT
    return need.max(axis=0) if x.shape[0] else np.full(x.shape[1], NO_EXPONENT)


def _column_name(columns: list[str] | None, j: int) -> str:
    """Name column j for an error message (the given name, else its 1-based position)."""
    return repr(columns[j]) if columns is not None else f"{j + 1} (1-based)"


def _check_matrix(values: np.ndarray, columns: list[str] | None) -> np.ndarray:
    """Return values as a 2-D float64 array with only finite entries, else raise InputError."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise InputError(f"fixed point: expected an m x p matrix of values, got shape {x.shape}")
    if columns is not None and len(columns) != x.shape[1]:
        raise InputError(f"fixed point: {len(columns)} column names given for {x.shape[1]} columns")
    bad = ~np.isfinite(x)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InputError(
            f"fixed point: row {i + 1}, column {_column_name(columns, j)} holds {x[i, j]!r}, "
            "which has no fixed-point encoding; fill or drop it before encoding"
        )
    return x


def auto_exponents(values: np.ndarray, columns: list[str] | None = None) -> np.ndarray:
    """Scale exponents (int64, one per column) putting each column's max |x| below 2**AUTO_BITS.

    e_j = AUTO_BITS - floor(log2(max|x|)) - 1 (that is AUTO_BITS - ceil(log2(max|x|)) unless
    max|x| is a power of two), from the exact binary exponent (np.frexp), so that
    2**(AUTO_BITS-1) <= max|x| * 2**e_j < 2**AUTO_BITS; lowered by one more if rounding would
    reach 2**AUTO_BITS. An all-zero column gets 0.
    """
    x = _check_matrix(values, columns)
    peak = np.abs(x).max(axis=0) if x.shape[0] else np.zeros(x.shape[1])
    _, binexp = np.frexp(peak)  # peak = mant * 2**binexp with 0.5 <= mant < 1
    exps = AUTO_BITS - binexp.astype(np.int64)
    exps[peak == 0] = 0
    over = np.rint(np.ldexp(peak, exps)) >= 2.0**AUTO_BITS
    exps[over] -= 1
    return exps


def encode(
    values: np.ndarray, exponents: np.ndarray, columns: list[str] | None = None,
    first_row: int = 0,
) -> np.ndarray:
    """Encode an m x p float matrix as int64 round(x_ij * 2**e_j), refusing
    |x_enc| >= 2**VALUE_BITS (naming the row as row ``first_row`` + i of the file)."""
    x = _check_matrix(values, columns)
    exps = np.asarray(exponents)
    if exps.shape != (x.shape[1],) or not np.issubdtype(exps.dtype, np.integer):
        raise InputError(
            f"fixed point: need one integer exponent per column ({x.shape[1]}), "
            f"got {exps.dtype} array of shape {exps.shape}"
        )
    scaled = np.rint(np.ldexp(x, exps.astype(np.int64)))
    over = np.abs(scaled) >= 2.0**VALUE_BITS
    if over.any():
        i, j = np.argwhere(over)[0]
        raise RangeError(
            f"fixed point: row {first_row + i + 1}, column {_column_name(columns, j)}: value "
            f"{float(x[i, j])!r} encodes to about {scaled[i, j]:.4g} at the column's scale "
            f"exponent {exps[j]} (x * 2**{exps[j]}), but encoded values must stay below "
            f"2**{VALUE_BITS} in magnitude, so at this scale |x| < "
            f"{2.0 ** (VALUE_BITS - exps[j]):g}"
            f" (a scale exponent of at most {_largest_exponent(x[:, j])} would fit the column; "
            f"auto_exponents puts its largest |x| below 2**{AUTO_BITS})"
        )
    return scaled.astype(np.int64)


def _largest_exponent(column: np.ndarray) -> int:
    """Largest exponent under which every value of the column encodes below 2**VALUE_BITS."""
    exp = int(auto_exponents(column[:, None])[0]) + VALUE_BITS - AUTO_BITS
    peak = float(np.abs(column).max())
    while round(np.ldexp(peak, exp)) >= 2**VALUE_BITS:
        exp -= 1
    return exp


def decode(ints: np.ndarray, exponents: np.ndarray) -> np.ndarray:
    """Decode int64 fixed-point values back to float64: x_ij = ints_ij * 2**-e_j."""
    z = np.asarray(ints)
    exps = np.asarray(exponents, dtype=np.int64)
    if z.ndim == 0 or z.shape[-1] != exps.shape[0] or exps.ndim != 1:
        raise InputError(
            f"fixed point: need one exponent per column; values have shape {z.shape}, "
            f"exponents {exps.shape}"
        )
    return np.ldexp(z.astype(np.float64), -exps)
