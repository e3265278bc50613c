"""Benchmark: reading blocks of a stored share file (``StoredShares.block``), in one process.

A server scoring a column too long for its memory budget reads it a tile of rows at a time
(``mpcnet.featsel.gini_fs``): at 10^6 x 100 under active3, one column of 333,334 rows of a
file holding both components of all 100 columns, twice per tile. This writes such a file
(``--rows`` x ``--columns`` x ``--components`` random uint64 words, in a temporary folder),
reads it once to have it in the page cache, as a server re-reading its tiles does, then
times ``block`` over all its rows for blocks of several widths: the median CPU and wall
seconds of ``--repeat`` reads and the most resident memory a read adds (VmHWM, reset before
each read) beyond its block. Writes ``bench/results/sharefiles.md`` and ``.json`` (``--out``)
naming the commit, the machine and the load.

    python -m bench.sharefiles [--rows 333334] [--columns 100] [--components 2 3]
                               [--widths 1 6 25 100] [--repeat 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(ROOT))

from bench import report  # noqa: E402
from bench.measure import _peak_bytes, _reset_peak  # noqa: E402
from mpcnet.parties.sharefiles import ShareFile, StoredShares  # noqa: E402


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise OSError("no VmRSS in /proc/self/status")


def _write(path: Path, shape: tuple[int, int, int]) -> None:
    array = np.lib.format.open_memmap(path, "w+", np.uint64, shape)
    rng = np.random.default_rng(0)
    for i in range(shape[0]):
        array[i] = rng.integers(0, 2**64, shape[1:], dtype=np.uint64)
    array.flush()
    del array


def measure(rows: int, columns: int, components: int, widths: list[int], repeat: int
            ) -> list[dict[str, Any]]:
    """One row per width: median CPU and wall seconds of a block over all rows, and the peak
    memory a read adds beyond its block."""
    pid = int(Path("/proc/self/stat").read_text().split()[0])
    out = []
    with tempfile.TemporaryDirectory(prefix="bench-sharefiles-") as tmp:
        path = Path(tmp) / "shares.npy"
        _write(path, (components, rows, columns))
        source = StoredShares([ShareFile.open(path)], True)
        reference = np.load(path, mmap_mode="r")
        source.block(slice(0, rows), slice(0, columns))  # into the page cache
        for width in widths:
            cpu, wall, extra = [], [], []
            block_columns = slice(columns - width, columns)  # the last columns, as a tile's
            for _ in range(repeat):
                before = _rss_bytes()
                _reset_peak(pid)
                c, t = time.process_time(), time.perf_counter()
                block = source.block(slice(0, rows), block_columns)
                wall.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
                extra.append((_peak_bytes(pid) or 0) - before - block.nbytes)
                del block
            block = source.block(slice(0, rows), block_columns)
            if not np.array_equal(block, reference[..., :, block_columns]):
                raise AssertionError(f"the block of {width} column(s) differs from the file")
            del block
            out.append({"components": components, "width": width, "cpu_s": statistics.median(cpu),
                        "wall_s": statistics.median(wall), "extra_peak_mb": max(extra) / 1e6,
                        "file_mb": 8 * components * rows * columns / 1e6})
        del reference
        source.close()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.sharefiles",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=333_334)
    ap.add_argument("--columns", type=int, default=100)
    ap.add_argument("--components", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--widths", type=int, nargs="+", default=[1, 6, 25, 100])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "sharefiles.md")
    args = ap.parse_args(argv)
    load = [Path("/proc/loadavg").read_text().split()[:3]]
    results = []
    for components in args.components:
        results += measure(args.rows, args.columns, components, args.widths, args.repeat)
        load.append(Path("/proc/loadavg").read_text().split()[:3])
    lines = ["# Reading blocks of a stored share file (`python -m bench.sharefiles`)\n",
             f"{report.code_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"{report.machine()}; load average (1, 5, 15 min) "
             + " then ".join("/".join(x) for x in load) + ".\n",
             f"`StoredShares.block` over all {args.rows:,} rows of a {args.rows:,} x "
             f"{args.columns} file (the page cache warm), median of {args.repeat} reads.\n",
             "| components | columns | CPU s | wall s | peak MB beyond the block |",
             "|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['components']} | {r['width']} | {r['cpu_s']:.3f} | {r['wall_s']:.3f} | "
              f"{r['extra_peak_mb']:.0f} |" for r in results]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(
        {"code": report.code_version(), "load": load, "rows": args.rows,
         "columns": args.columns, "repeat": args.repeat, "results": results}, indent=1))


if __name__ == "__main__":
    main()
