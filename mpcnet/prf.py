"""Layer: correlated randomness. A keyed pseudorandom stream from AES-128-CTR.

Each pair of parties agrees on one 16-byte key per session; both expand it into the same stream of
uint64 words, so zero-sharings and random sharings cost no communication (Araki et al., CCS 2016,
section 2.2). The stream is read in call order, which is identical at both parties because
protocols are deterministic. Keystream is written with ``update_into`` into a preallocated
buffer (allocation, not AES, dominates otherwise).
"""

from __future__ import annotations

import secrets

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
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = 8 * count
        out = np.empty(nbytes + 15, dtype=np.uint8)  # update_into needs block_size - 1 spare bytes
        done = 0
        while done < nbytes:
            step = min(_CHUNK, nbytes - done)
            self._enc.update_into(memoryview(self._zeros)[:step], memoryview(out[done:]))  # type: ignore[arg-type]
            done += step
        return out[:nbytes].view(np.uint64).reshape(shape)
