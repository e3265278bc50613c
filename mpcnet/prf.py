"""Layer: correlated randomness. A keyed pseudorandom stream from AES-128-CTR.

Each pair of parties agrees on one 16-byte key per session; both expand it into the same stream of
uint64 words, so zero-sharings and random sharings cost no communication (Araki et al., CCS 2016,
section 2.2). The stream is read in call order, which is identical at both parties because
protocols are deterministic. Keystream is written with ``update_into`` into a preallocated
buffer (allocation, not AES, dominates otherwise).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

KEY_BYTES = 16
_CHUNK = 1 << 20  # bytes of zeros kept for keystream generation


def random_key() -> bytes:
    """A fresh key from the operating system's cryptographic generator."""
    return secrets.token_bytes(KEY_BYTES)


class PRF:
    """A deterministic stream of pseudorandom uint64 words under one AES key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError(f"PRF key must be {KEY_BYTES} bytes, got {len(key)}")
        self._enc = Cipher(algorithms.AES(key), modes.CTR(b"\x00" * 16)).encryptor()
        self._zeros = bytes(_CHUNK)

    def words(self, shape: int | tuple[int, ...]) -> np.ndarray:
        """The next ``prod(shape)`` uint64 words of the stream."""
        out = np.empty(shape, dtype=np.uint64)
        self.fill(out)
        return out

    def fill(self, out: np.ndarray) -> None:
        """Write the next ``out.size`` words of the stream into the C-contiguous uint64 array
        ``out`` (where they are wanted: a fresh array and a copy cost a pass over memory)."""
        if out.dtype != np.uint64 or not out.flags.c_contiguous:
            raise ValueError("PRF.fill needs a C-contiguous uint64 array")
        view = memoryview(out.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
        # update_into needs block_size - 1 spare bytes after what it writes: the last bytes go
        # through a small scratch buffer, the rest straight into ``out``
        tail = min(len(view), 64)
        done = 0
        while done < len(view) - tail:
            step = min(_CHUNK, len(view) - tail - done)
            self._enc.update_into(memoryview(self._zeros)[:step], view[done:])
            done += step
        scratch = bytearray(tail + 15)
        self._enc.update_into(memoryview(self._zeros)[:tail], scratch)
        view[done:] = scratch[:tail]


def stacked_words(prfs: Sequence[PRF], shape: tuple[int, ...]) -> np.ndarray:
    """The next words of each stream in ``prfs``, one row each: (len(prfs), *shape), each row
    written in place (the components of a replicated random value)."""
    out = np.empty((len(prfs),) + shape, dtype=np.uint64)
    for row, prf in zip(out.reshape(len(prfs), -1), prfs, strict=True):  # views, also for ()
        prf.fill(row)
    return out
