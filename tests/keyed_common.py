"""Test helper: the CSV files of owners keyed by record IDs (tests/test_join_e2e.py,
tests/test_cheating_e2e.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np


def keyed_files(folder: Path, records: int, owners: int, overlap: float, seed: int = 3
                ) -> list[Path]:
    """``owners`` CSV files of one population: each holds the same ``overlap`` share of its
    records (the records all hold) plus records no other owner holds, shuffled, with a ``pid``
    column spelt differently by each owner (case, blanks); the first holds the label, which
    depends on columns of all."""
    rng = np.random.default_rng(seed)
    shared = int(records * overlap)
    population = shared + owners * (records - shared)
    signal = rng.normal(size=(population, owners * 3))
    label = (signal[:, ::3].sum(axis=1) + 0.3 * rng.normal(size=population) > 0).astype(int)
    everyone = rng.permutation(population)
    common, rest = everyone[:shared], everyone[shared:].reshape(owners, -1)
    paths = []
    for o in range(owners):
        own = rest[o]
        held = rng.permutation(np.concatenate([common, own]))
        path = folder / f"owner{o}.csv"
        with open(path, "w", newline="") as f:
            w = csv.writer(f)
            names = [f"o{o}_c{j}" for j in range(3)]
            w.writerow(["pid", *names, f"o{o}_noise"] + (["label"] if o == 0 else []))
            for r in held:
                pid = f"P-{r:07d}" if o != 1 else f"  p-{r:07d} "
                noise = rng.normal()
                cells = [f"{v:.6f}" for v in signal[r, 3 * o:3 * o + 3]] + [f"{noise:.6f}"]
                w.writerow([pid, *cells] + ([str(label[r])] if o == 0 else []))
        paths.append(path)
    return paths
