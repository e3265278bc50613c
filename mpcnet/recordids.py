"""Layer: base. Record IDs as keyed hashes, made on the owner's machine (issue 31).

Owners of different columns of the same records (``share --columns --id COL``) align them by
an identifier (a medical record number, a national ID) that no server may see. Each owner's
client normalises every ID (Unicode NFKC, surrounding blanks removed, case folded: " ab-12 "
and "AB-12" are one record) and hashes it with keyed BLAKE2b (RFC 7693) under a 32-byte key
that the owners agree on and keep (``--id-key FILE``, made once by ``mpc-client id-key``);
the servers receive only shares of the hash, as two words: hi, its first 57 bits, and lo, its
next 61 (``mpcnet.ops.join`` sorts on hi and compares both).

Why 57 + 61 bits are enough. Two different IDs of two owners are taken for one record only if
all 118 bits agree: for owners of n_a and n_b records, probability at most n_a n_b / 2^118,
about 3 x 10^-22 at 10^7 records each (and a hash unknown without the key cannot be aimed at).
The sort needs hi distinct within one owner's file, so a file two of whose IDs agree in hi is
refused, naming their rows, with the remedy of a new key: probability about n^2 / 2^58, below
4 x 10^-4 at 10^7 records, 4 x 10^-8 at 10^5. Duplicate IDs (equal once normalised) are
refused naming their rows; so is an empty ID.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mpcnet.errors import InputError

KEY_BYTES = 32
HI_BITS, LO_BITS = 57, 61
_PERSON = b"mpcnet-record"


def normalise(record_id: str) -> str:
    """The form two owners' spellings of one ID share: NFKC, stripped, case folded."""
    return unicodedata.normalize("NFKC", record_id).strip().casefold()


def read_key(path: str | Path) -> bytes:
    """The owners' key from its file (64 hex digits), or an ``InputError`` naming the file."""
    try:
        text = Path(path).read_text(encoding="ascii").strip()
        key = bytes.fromhex(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not a record-ID key file ({exc}); make one with "
                         "`mpc-client id-key --out FILE` and give every owner a copy") from None
    if len(key) != KEY_BYTES:
        raise InputError(f"{path}: a record-ID key has {KEY_BYTES} bytes (64 hex digits), "
                         f"this one {len(key)}")
    return key


def new_key(path: str | Path) -> None:
    """Write a fresh key to ``path`` (readable by its owner only; an existing file is kept)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InputError(f"{path} exists; the owners' key is made once, then copied "
                         "to every owner (choose another file name)") from None
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secrets.token_hex(KEY_BYTES) + "\n")


def normalised(ids: Sequence[str], where: str = "the file") -> list[str]:
    """Every ID normalised, refusing an empty one and two equal ones, naming their rows
    (counting data rows from 1)."""
    seen: dict[str, int] = {}
    for row, raw in enumerate(ids):
        norm = normalise(str(raw))
        if not norm:
            raise InputError(f"{where}: row {row + 1}: the record ID is empty; every row "
                             "needs one")
        if norm in seen:
            raise InputError(f"{where}: rows {seen[norm] + 1} and {row + 1} have the same "
                             f"record ID; each record may appear once")
        seen[norm] = row
    return list(seen)


def hashed(ids: Sequence[str], key: bytes, where: str = "the file") -> np.ndarray:
    """The n x 2 uint64 words (hi, lo) of every ID's keyed hash, after the checks of the
    module docstring."""
    words = np.empty((len(ids), 2), dtype=np.uint64)
    for row, norm in enumerate(normalised(ids, where)):
        digest = hashlib.blake2b(norm.encode("utf-8"), key=key, digest_size=16,
                                 person=_PERSON).digest()
        words[row, 0] = int.from_bytes(digest[:8], "big") >> (64 - HI_BITS)
        words[row, 1] = int.from_bytes(digest[8:], "big") >> (64 - LO_BITS)
    order = np.argsort(words[:, 0], kind="stable")
    clash = np.flatnonzero(words[order[1:], 0] == words[order[:-1], 0])
    if clash.size:
        a, b = sorted((int(order[clash[0]]), int(order[clash[0] + 1])))
        raise InputError(f"{where}: the record IDs of rows {a + 1} and {b + 1} agree in the "
                         f"first {HI_BITS} bits of their hash (a chance of about n^2 / "
                         f"2^{HI_BITS + 1}); the owners must make a new key "
                         "(`mpc-client id-key`) and share again")
    return words
