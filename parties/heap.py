"""Layer: parties. The server's heap: freed arrays stay in the process for the rest of a job.

By default glibc's malloc serves every block above its mmap threshold (at most 32 MB) with a
fresh ``mmap`` and unmaps it when freed, so a job that allocates and frees the same large
arrays block after block makes the kernel fault in and zero new pages every time. An active3
job allocates gigabytes that way: on this project's benchmark machine (a VM, where a page
fault costs more than on bare metal) SpeedDating under active3 ran 4.10 s with the default
heap and 2.99 s with this one, one run after the other (bench/README.md, section 1). So a
server serves large blocks from its heap, keeps what is freed there for reuse (nothing is
trimmed while a job runs), and hands the free pages back to the kernel once it is idle
(``runner.IDLE_RELEASE_S`` after a job; trimming right after each job made the next one fault
them in again: SpeedDating under passive3 took 1.4 s instead of 0.6 s in back-to-back runs).

Only glibc has these knobs; elsewhere (musl, macOS) both functions do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("mpcnet.party")

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # mallopt parameters (glibc's malloc.h)
_NEVER_TRIM = (1 << 31) - 1  # the largest C int mallopt takes: 2 GB free at the top


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not (hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim")):
        return None
    return libc


_LIBC = _glibc()


def keep_freed_memory() -> bool:
    """Serve large blocks from the heap and never trim it on free (until
    ``release_freed_memory``); False where the C library has no such knobs."""
    if _LIBC is None:
        return False
    kept = bool(_LIBC.mallopt(_M_MMAP_MAX, 0)) and bool(
        _LIBC.mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM))
    if not kept:
        log.warning("could not configure malloc; large arrays are mapped afresh each time")
    return kept


def release_freed_memory() -> None:
    """Give the heap's free pages back to the kernel (once the server is idle, so that it
    keeps only what it uses)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
