"""parties.heap: a freed large array stays resident for reuse until the heap is released.

Run in a child interpreter each time, so the test process keeps its own allocator settings."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mpcnet.parties import heap

CHILD = """
import sys
import numpy as np
from mpcnet.parties import heap

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

keep = sys.argv[1] == "keep"
if keep:
    assert heap.keep_freed_memory()
before = rss_mb()
block = np.ones(1 << 24, dtype=np.uint64)  # 128 MB, far above malloc's mmap threshold
del block
after_free = rss_mb() - before
heap.release_freed_memory()
print(round(after_free), round(rss_mb() - before))
"""


def _resident_after(mode: str) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True,
                         check=True).stdout.split()
    return int(out[0]), int(out[1])


@pytest.mark.skipif(heap._LIBC is None, reason="needs glibc's malloc")
def test_a_freed_block_stays_resident_until_released() -> None:
    kept, released = _resident_after("keep")
    assert kept >= 120  # freed, but still in the heap for the next array of the job
    assert released < 20  # handed back to the kernel


@pytest.mark.skipif(heap._LIBC is None, reason="needs glibc's malloc")
def test_by_default_a_freed_block_is_unmapped_at_once() -> None:
    kept, _ = _resident_after("default")
    assert kept < 20  # what the server would fault in afresh next time
