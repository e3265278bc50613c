"""Layer: arithmetic. Z_2^64 on numpy uint64 arrays and bit-sliced Z_2 on uint64 words.

Z_2^64 is numpy's native uint64 wrap-around; this module adds the few helpers that are not a
single numpy operator. Bit-sliced Z_2 stores the 64 bits of one value in one uint64 word, so XOR,
AND and shifts act on all bits of all values at once.
"""

from __future__ import annotations

import numpy as np

U64 = np.uint64
MASK64 = (1 << 64) - 1


def to_ring(values: np.ndarray | int | np.integer) -> np.ndarray:
    """Signed integers (any int dtype or Python ints) to Z_2^64 elements, two's complement."""
    arr = np.asarray(values)
    if arr.dtype == np.uint64:
        return arr
    if arr.dtype == object:
        return np.array([int(v) & MASK64 for v in arr.ravel()], dtype=U64).reshape(arr.shape)
    return arr.astype(np.int64).view(U64)


def to_signed(values: np.ndarray) -> np.ndarray:
    """Z_2^64 elements to int64, reading the top bit as the sign."""
    return np.asarray(values, dtype=U64).view(np.int64)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Matrix product in Z_2^64 (numpy's uint64 arithmetic wraps modulo 2^64).

    Integer matmul has no BLAS path; ``einsum`` over a right factor transposed to be
    contiguous along the summed axis is 1.6-4x faster than ``np.matmul`` here (measured on
    8378x122 @ 122x67: 41 ms against 70 ms), and exact all the same.
    """
    right = np.ascontiguousarray(np.swapaxes(b, -1, -2))
    return np.einsum("...ij,...kj->...ik", a, right)


def msb(values: np.ndarray) -> np.ndarray:
    """Top bit of each Z_2^64 element as 0/1 uint64 (the sign in two's complement)."""
    return np.asarray(values, dtype=U64) >> U64(63)


def bit(values: np.ndarray, i: int) -> np.ndarray:
    """Bit i of each word as 0/1 uint64."""
    return (np.asarray(values, dtype=U64) >> U64(i)) & U64(1)
