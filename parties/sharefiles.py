"""Layer: server. Share files on disk, read and written a block of rows at a time.

A contribution's share array is one ``.npy`` file of shape (leading axes..., rows, columns),
uint64, C order, as ``np.save`` writes it. A job never loads a large one whole: the SHA-256 is
checked once, when the file is opened, by streaming it through the descriptor every later read
uses, and ``StoredShares`` reads the blocks pi_GINI-FS asks for (``mpcnet.featsel.source``)
through a read-only memory map of that descriptor, about READ_BYTES of whole rows mapped at a
time and unmapped before the next: only the columns asked for are copied (a one-column tile
of a 100-column file no longer copies its 99 other columns), and the memory a block takes is
the block and one mapped piece. Reading a part after checking the whole file is what the
descriptor's plain reads did too: both read the checked inode (docs/performance.md, "Large
datasets"). Uploads arrive a block of rows at a time (``ShareFileWriter``) into a file
preallocated at its final size.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.errors import StorageError
from mpcnet.signing import ComponentHash

READ_BYTES = 32 << 20  # rows are read (or mapped) in pieces of about this size


@dataclass(frozen=True)
class ShareFile:
    """One stored share array, open: where its data start and its shape. Every read goes
    through the descriptor its checksum was taken through, so a file withdrawn (unlinked) or
    replaced meanwhile does not change what a job reads."""

    path: Path
    fd: int
    offset: int
    shape: tuple[int, ...]

    @classmethod
    def open(cls, path: Path, sha256: str | None = None) -> ShareFile:
        """Open the file and parse its header, after checking ``sha256`` if given."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise StorageError(f"{path.name} is missing ({exc.strerror}); restore it from a "
                               "backup") from None
        try:
            with open(fd, "rb", closefd=False) as f:
                if sha256 is not None and hashlib.file_digest(f, "sha256").hexdigest() != sha256:
                    raise StorageError(f"{path} is damaged (SHA-256 differs from its "
                                       "manifest); restore it from a backup")
                f.seek(0)
                version = np.lib.format.read_magic(f)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = read_header(f)
                offset = f.tell()
            if fortran or dtype != np.uint64:
                raise StorageError(f"{path} is not a uint64 share file in C order")
        except (OSError, ValueError) as exc:
            os.close(fd)
            raise StorageError(f"{path} cannot be read as a share file ({exc}); restore it "
                               "from a backup") from None
        except StorageError:
            os.close(fd)
            raise
        return cls(path, fd, offset, tuple(shape))

    def close(self) -> None:
        os.close(self.fd)

    @property
    def rows(self) -> int:
        return self.shape[-2]

    def read_rows(self, start: int, stop: int, slot: int | None = None) -> np.ndarray:
        """Rows start..stop-1 (every leading index, or the one flat leading index ``slot``:
        one component; every column)."""
        lead, (m, p) = self.shape[:-2], self.shape[-2:]
        out = np.empty((lead if slot is None else ()) + (stop - start, p), dtype=np.uint64)
        flat = out.reshape(-1, stop - start, p)
        slots = range(flat.shape[0]) if slot is None else [slot]
        for i, s in enumerate(slots):
            view = memoryview(flat[i]).cast("B")
            done = 0
            while done < view.nbytes:
                got = os.preadv(self.fd, [view[done:]],
                                self.offset + (s * m + start) * p * 8 + done)
                if got == 0:
                    raise StorageError(f"{self.path} is shorter than its header says; "
                                       "restore it from a backup")
                done += got
        return out

    def read_into(self, out: np.ndarray, rows: slice, columns: slice) -> None:
        """Copy [..., rows, columns] of the file into ``out`` (of that shape, any strides),
        mapping about READ_BYTES of whole rows of one leading index at a time. A file shorter
        than its header is refused before it is mapped; one truncated by hand while it is
        mapped stops the process with SIGBUS (neither a map nor plain reads guard against the
        checked file being changed in place under a running job)."""
        m, p = self.shape[-2:]
        start, stop, _ = rows.indices(m)
        left, right, _ = columns.indices(p)
        if start >= stop or left >= right:
            return
        if os.fstat(self.fd).st_size < self.offset + 8 * int(np.prod(self.shape, dtype=np.int64)):
            raise StorageError(f"{self.path} is shorter than its header says; restore it from "
                               "a backup")
        step = max(1, READ_BYTES // (8 * p))
        for slot, index in enumerate(np.ndindex(*self.shape[:-2])):
            for lo in range(start, stop, step):
                hi = min(stop, lo + step)
                at = self.offset + (slot * m + lo) * p * 8
                base = at - at % mmap.ALLOCATIONGRANULARITY
                with mmap.mmap(self.fd, at - base + (hi - lo) * p * 8, access=mmap.ACCESS_READ,
                               offset=base) as mapped:
                    _copy_columns(mapped, at - base, (hi - lo, p), left, right,
                                  out[index + (slice(lo - start, hi - start),)])


def _copy_columns(mapped: mmap.mmap, at: int, shape: tuple[int, int], left: int, right: int,
                  out: np.ndarray) -> None:
    """Copy columns left..right-1 of the rows mapped at ``at`` into ``out``; the view of the
    map ends with the call, so the map can be closed."""
    whole = np.frombuffer(mapped, np.uint64, shape[0] * shape[1], at).reshape(shape)
    out[...] = whole[:, left:right]


def sha256_of(path: Path) -> str:
    """The file's SHA-256, read in pieces."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@dataclass(frozen=True, eq=False)
class StoredShares:
    """This server's shares of a dataset: its contributions' files joined by rows or columns,
    read a block at a time (``mpcnet.featsel.source.ShareSource``)."""

    files: Sequence[ShareFile]
    by_rows: bool

    def close(self) -> None:
        for f in self.files:
            f.close()

    @property
    def shape(self) -> tuple[int, ...]:
        first = self.files[0].shape
        if self.by_rows:
            return first[:-2] + (sum(f.rows for f in self.files), first[-1])
        return first[:-1] + (sum(f.shape[-1] for f in self.files),)

    def block(self, rows: slice, columns: slice) -> np.ndarray:
        """The rows and columns asked for, each file's part copied from its map
        (``ShareFile.read_into``)."""
        shape = self.shape
        start, stop, _ = rows.indices(shape[-2])
        left, right, _ = columns.indices(shape[-1])
        out = np.empty(shape[:-2] + (stop - start, right - left), dtype=np.uint64)
        at = 0
        for f in self.files:
            if self.by_rows:
                lo, hi = max(start, at), min(stop, at + f.rows)
                if lo < hi:
                    f.read_into(out[..., lo - start:hi - start, :], slice(lo - at, hi - at),
                                slice(left, right))
                at += f.rows
            else:  # every contribution holds these rows of its own columns
                lo, hi = max(left, at), min(right, at + f.shape[-1])
                if lo < hi:
                    f.read_into(out[..., lo - left:hi - left], slice(start, stop),
                                slice(lo - at, hi - at))
                at += f.shape[-1]
        return out


class ShareFileWriter:
    """A share file written a block of rows at a time, in any order, each row once; it is
    complete when every row has arrived, and its SHA-256 is taken then."""

    def __init__(self, path: Path, shape: tuple[int, ...], mode: int) -> None:
        self.path, self.shape = path, shape
        header: dict[str, Any] = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.uint64)),
                                  "fortran_order": False, "shape": shape}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as f:
            np.lib.format.write_array_header_1_0(f, header)
            self.offset = f.tell()
            f.truncate(self.offset + 8 * int(np.prod(shape, dtype=np.int64)))
        self.slots = int(np.prod(shape[:-2], dtype=np.int64))
        self.filled = np.zeros((self.slots, shape[-2]), dtype=bool)

    @property
    def complete(self) -> bool:
        return bool(self.filled.all())

    def write_rows(self, start: int, block: np.ndarray, slot: int | None = None) -> None:
        """Rows start..start+len-1 of every leading index, from ``block`` (lead, rows, p), or
        of the one flat leading index ``slot`` (one component) from ``block`` (rows, p)."""
        lead, (m, p) = self.shape[:-2], self.shape[-2:]
        stop = start + block.shape[-2]
        slots = range(self.slots) if slot is None else range(slot, slot + 1)
        want = (lead if slot is None else ()) + (block.shape[-2], p)
        if block.shape != want or not 0 <= start < stop <= m or not 0 <= slots[0] < \
                self.slots or self.filled[slots.start:slots.stop, start:stop].any():
            raise ValueError(f"rows {start}..{stop - 1} do not fit the {self.shape} share "
                             "file or arrived twice")
        flat = np.ascontiguousarray(block).reshape(-1, stop - start, p)
        with open(self.path, "r+b") as f:
            for i, s in enumerate(slots):
                f.seek(self.offset + (s * m + start) * p * 8)
                f.write(memoryview(flat[i]).cast("B"))
            f.flush()
            os.fsync(f.fileno())
        self.filled[slots.start:slots.stop, start:stop] = True

    def entry(self, salts: Sequence[tuple[int, bytes]] = ()) -> dict[str, Any]:
        """The file entry of a complete file (name, sha256, bytes) and, given the salt of the
        component in each slot (``(component, salt)`` in slot order), every component's
        salted digest (``mpcnet.signing``): one read of the file."""
        if salts and len(salts) != self.slots:
            raise ValueError(f"{len(salts)} salts for {self.slots} components")
        whole = hashlib.sha256()
        hashes = [ComponentHash(salt, self.shape[-2:]) for _, salt in salts]
        size = 8 * int(np.prod(self.shape[-2:], dtype=np.int64))
        with open(self.path, "rb") as f:
            whole.update(f.read(self.offset))
            for slot in range(self.slots):
                left = size
                while left:
                    chunk = f.read(min(READ_BYTES, left))
                    if not chunk:
                        raise StorageError(f"{self.path} is shorter than its shape")
                    whole.update(chunk)
                    if hashes:
                        hashes[slot].update(np.frombuffer(chunk, dtype=np.uint64))
                    left -= len(chunk)
            whole.update(f.read())
        out: dict[str, Any] = {"file": self.path.name, "sha256": whole.hexdigest(),
                               "bytes": self.path.stat().st_size}
        if salts:
            out["components"] = {str(c): {"salt": salt.hex(), "digest": h.hexdigest()}
                                 for (c, salt), h in zip(salts, hashes, strict=True)}
        return out
