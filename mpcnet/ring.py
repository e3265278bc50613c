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
    """Matrix product in Z_2^64.

    numpy's integer matmul wraps modulo 2^64 like every uint64 operation; it has no BLAS path,
    so a 0/1 or small right factor is not faster, but the result is exact.
    """
    return np.matmul(a, b)


def msb(values: np.ndarray) -> np.ndarray:
    """Top bit of each Z_2^64 element as 0/1 uint64 (the sign in two's complement)."""
    return np.asarray(values, dtype=U64) >> U64(63)


def bit(values: np.ndarray, i: int) -> np.ndarray:
    """Bit i of each word as 0/1 uint64."""
    return (np.asarray(values, dtype=U64) >> U64(i)) & U64(1)
