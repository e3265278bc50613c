"""Smoke run of the accuracy benchmark (bench/accuracy.py) on a tiny setting, so it cannot rot.

LSVT with 2 folds and k = 10: the private protocol runs once per fold under passive3 over
loopback channels; a few seconds in all. Needs the optional 'bench' extra (scikit-learn).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import ROOT

pytest.importorskip(
    "sklearn", reason="the accuracy benchmark needs scikit-learn: pip install -e '.[bench]'")

sys.path.insert(0, str(ROOT))  # bench/ is not an installed package

from bench import accuracy  # noqa: E402


def test_match_columns_takes_the_lowest_unused_duplicate() -> None:
    X = np.array([[1, 5, 1, 7], [2, 6, 2, 8]], dtype=np.int64)
    reduced = X[:, [3, 0, 2]]
    assert accuracy.match_columns(reduced, X) == [3, 0, 2]


def test_smoke_run_writes_every_method_and_the_private_check(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "accuracy.md"
    code = accuracy.main(["--datasets", "lsvt", "--folds", "2", "--k", "10",
                          "--out", str(out)])
    assert code == 0, "the private selection differed from the plaintext MS-GINI selection"
    text = out.read_text(encoding="utf-8")
    header = next(line for line in text.splitlines() if line.startswith("| dataset | m |"))
    for method in accuracy.METHODS:
        assert f" {method} |" in header, f"column {method} missing from {header}"
    row = next(line for line in text.splitlines() if line.startswith("| lsvt |"))
    assert "2/2 folds" in row
    assert "python -m bench.accuracy --datasets lsvt --folds 2 --k 10" in text
    assert "scikit-learn" in text


def test_run_dataset_checks_every_fold() -> None:
    result = accuracy.run_dataset("lsvt", folds=2, k=5)
    assert len(result.folds) == 2 and result.checks_passed == 2
    for fold in result.folds:
        assert set(accuracy.METHODS) <= set(fold.accuracy)
        assert all(0.0 <= a <= 1.0 for a in fold.accuracy.values())
