"""Benchmark: logistic-regression accuracy after top-k feature selection (the paper's Table I).

Reproduces the accuracy half of Table I of Li, Dowsley, De Cock, "Privacy-Preserving Feature
Selection with Secure Multiparty Computation" (2021, Section V): cross-validated accuracy of a
logistic regression trained on all p features (RAW) and on the top k features by MS-GINI, GI
(best-split Gini impurity), PCC (|Pearson correlation|) and MI (mutual information), for LSVT
(k = 103), CogLoad (k = 12) and SpeedDating (k = 67).

Protocol of the experiment (every choice is also written into the report):

- Folds: RepeatedStratifiedKFold(n_splits=--folds, n_repeats=--repeats, random_state=--seed),
  by default 5 folds, 1 repeat, seed 0 (shuffled, stratified by class).
- Extra rows (skip with --main-only): CogLoad holds about 35 rows per participant and random
  folds put rows of one person in both training and test, so CogLoad is also run
  leave-one-subject-out (LeaveOneGroupOut on the CSV's user_id column); SpeedDating's label
  `match` equals `decision` AND `decision_o` in every row, so it is also run without those two.
- Selection happens inside each training fold only; the test fold is never scored.
- MS-GINI comes from the private protocol: the training rows, fixed-point encoded, are
  secret-shared, pi_GINI-FS (Protocol 3) runs in this process with all parties over loopback
  channels (--security, passive3 by default), and D' and the selected columns' exponents are
  reconstructed as the analyst would. D' does not say which columns it holds, so the column
  indices needed to cut the test fold are found by matching each D' column to the identical
  column of the encoded training matrix (equal columns have equal scores, so the protocol takes
  the lower index first, and so does the matching). Every fold checks that D' and those indices
  equal the plaintext MS-GINI selection (score_fraction + topk_fraction) on the same rows.
- Encoding: per-column exponents from auto_exponents on the whole file's values (public
  metadata that any owner could announce), then the training rows of that encoding; this is
  what encode_table(training rows, exponents=whole-file exponents) gives.
- GI, PCC and MI are scored in float64 on the training rows (mpcnet.plain.scores, MI with 10
  equal-width bins); ties go to the lower index (mpcnet.plain.select.topk_scores).
- GI (private), PCC (private), MI (private) and χ² (private) are the other private scores
  (``select --score gini|pcc|mi|chi2``), run by the protocol in process on the same training
  rows and checked in every fold against their exact references (``score_fraction``), as
  MS-GINI is: the best-split Gini impurity, the squared correlation with the class (the
  correlation ratio for 3+ classes), and the mutual information and chi-square of the mean
  split. GI (private) ranks the encoded values, GI their floats: the same thresholds unless
  the encoding makes values equal that differ below its resolution (CogLoad). The plaintext
  PCC is |r| with the class code and the plaintext MI uses 10 equal-width bins, so those
  columns differ by design.
- Model: StandardScaler fitted on the training fold, then LogisticRegression(solver="lbfgs",
  C=1.0 (--C), penalty L2, max_iter=10000), scikit-learn defaults otherwise. RAW, GI, PCC and MI
  train on the float values; MS-GINI trains on D' decoded with the reconstructed exponents
  (it differs from the float values by the encoding's rounding, below 2**-30 of a column's
  largest value) and tests on the float values of the matched columns.

    python -m bench.accuracy [--datasets lsvt cogload speeddating] [--folds 5] [--seed 0]
                             [--out bench/results/accuracy.md]

scikit-learn is an optional extra: pip install -e '.[bench]'.
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import math
import os
import platform
import shlex
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.dataset import BUNDLED, Table, bundled, one_hot, read_bundled
from mpcnet.encoded import EncodedDataset, encode_table
from mpcnet.featsel.local import select_in_process
from mpcnet.fixedpoint import decode
from mpcnet.plain.logreg import Training
from mpcnet.plain.scores import gini_best_split, mutual_information, pearson, score_fraction
from mpcnet.plain.select import topk_fraction, topk_scores
from mpcnet.schemes import registry
from mpcnet.train.local import train_in_process

INSTALL_HINT = "pip install -e '.[bench]'"
SKLEARN_MISSING = (
    "bench.accuracy needs scikit-learn, which is in the optional 'bench' extra; install it "
    f"from the repository root with: {INSTALL_HINT}"
)

try:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import LeaveOneGroupOut, RepeatedStratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    _SKLEARN_ERROR: ModuleNotFoundError | None = None
except ModuleNotFoundError as _exc:  # the CLI and run_dataset report it with the remedy
    _SKLEARN_ERROR = _exc

PRIVATE_LR = "MS-GINI + private LR"
SAME_FORM = "scikit-learn, the private model's form"  # not a column: beside PRIVATE_LR
PRIVATE_SCORES = {"GI (private)": "gini", "PCC (private)": "pcc", "MI (private)": "mi",
                  "χ² (private)": "chi2"}
"""The other private scores (``select --score``), each run by the protocol in every fold."""
METHODS = ("RAW", "MS-GINI", PRIVATE_LR, "GI", "PCC", "MI", *PRIVATE_SCORES)
"""Columns of the accuracy table, in the paper's order."""

SELECTORS = ("GI", "PCC", "MI")
"""The usual plaintext scores MS-GINI is compared with."""

LR_SETTINGS = {"solver": "lbfgs", "C": 1.0, "max_iter": 10_000}
"""Logistic regression settings (L2 penalty, scikit-learn defaults otherwise); --C changes C."""

LEAKY = {"speeddating": ("decision", "decision_o")}
"""Columns that give the label away: SpeedDating's match == decision AND decision_o in every
row (see data/PROVENANCE.md), so an extra row is run without them."""

DEFAULT_OUT = Path("bench/results/accuracy.md")
SIGNIFICANCE = 0.05
"""Two-sided level of the paired t-test that separates 'on par' from 'higher'/'lower'."""


def require_sklearn() -> None:
    """Raise ModuleNotFoundError with the install command if scikit-learn is missing."""
    if _SKLEARN_ERROR is not None:
        raise ModuleNotFoundError(SKLEARN_MISSING) from _SKLEARN_ERROR


@dataclass
class FoldResult:
    """One training/test split: accuracy per method and the private selection's check."""

    accuracy: dict[str, float]
    private_equals_plain: bool
    private_seconds: float
    overlap: dict[str, int]  # |MS-GINI selection and the method's selection| per selector
    converged: bool
    training_seconds: float = 0.0  # the private logistic regression, in process
    coef_gap: float = 0.0  # max |private coef - scikit-learn coef| on the same standardised D'


@dataclass
class DatasetResult:
    """All folds of one dataset under one cross-validation scheme."""

    name: str
    cv: str
    m: int
    p: int
    k: int
    variant: str = ""  # "", "by subject" or "without <columns>"
    folds: list[FoldResult] = field(default_factory=list)
    seconds: float = 0.0

    def accuracies(self, method: str) -> np.ndarray:
        return np.array([f.accuracy[method] for f in self.folds])

    @property
    def checks_passed(self) -> int:
        return sum(f.private_equals_plain for f in self.folds)


@dataclass
class PrivateSelection:
    """What the analyst gets from one private run, plus the plaintext check."""

    indices: list[int]  # matched from D' to the training columns
    reduced: np.ndarray  # D' decoded to float64
    equals_plain: bool
    seconds: float


def match_columns(reduced: np.ndarray, X: np.ndarray) -> list[int]:
    """Index in X of each column of D' = `reduced`: the lowest not yet used identical column.

    Identical columns have identical MS-GINI scores, and the protocol breaks ties by the lower
    index, so taking the lowest unused match reproduces its choice.
    """
    used: set[int] = set()
    indices = []
    for r in range(reduced.shape[1]):
        same = np.flatnonzero((X == reduced[:, r : r + 1]).all(axis=0))
        free = [int(j) for j in same if int(j) not in used]
        if not free:
            raise RuntimeError(f"column {r} of the private D' equals no unused column of the "
                               "training matrix: the private selection is wrong")
        used.add(free[0])
        indices.append(free[0])
    return indices


def private_selection(values: np.ndarray, exponents: np.ndarray, codes: np.ndarray,
                      n_classes: int, k: int, security: str, score: str = "ms-gini"
                      ) -> PrivateSelection:
    """Run pi_GINI-FS with ``score`` on the encoded rows `values` in process; reconstruct D'
    and check it against the score's exact plaintext reference."""
    run = select_in_process(security, values, one_hot(codes, n_classes), n_classes, k,
                            exponents, score=score)
    reduced, chosen_exps, seconds = run.reduced, run.exponents, run.seconds
    indices = match_columns(reduced, values)
    q, d = score_fraction(score, values, codes, n_classes)
    plain = topk_fraction(q, d, k)
    equal = (indices == plain and np.array_equal(reduced, values[:, plain])
             and np.array_equal(chosen_exps, exponents[plain]))
    return PrivateSelection(indices, decode(reduced, chosen_exps), equal, seconds)


def select_plain(method: str, X: np.ndarray, codes: np.ndarray, n_classes: int,
                 k: int) -> list[int]:
    """Top-k column indices of float matrix X by GI (lowest), PCC or MI (highest)."""
    if method == "GI":
        return topk_scores(gini_best_split(X, codes, n_classes), k, largest=False)
    if method == "PCC":
        return topk_scores(pearson(X, codes), k, largest=True)
    if method == "MI":
        return topk_scores(mutual_information(X, codes), k, largest=True)
    raise ValueError(f"unknown selector {method!r}; choose one of {', '.join(SELECTORS)}")


def _fit_score(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray,
               y_test: np.ndarray, C: float) -> tuple[float, bool]:
    """Test accuracy of scaler + logistic regression fitted on the training fold; converged?"""
    settings = {**LR_SETTINGS, "C": C}
    model = make_pipeline(StandardScaler(), LogisticRegression(**settings))  # type: ignore[arg-type]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(X_train, y_train)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return float((model.predict(X_test) == y_test).mean()), converged


def evaluate_fold(floats: np.ndarray, ds: EncodedDataset, train: np.ndarray, test: np.ndarray,
                  k: int, security: str, C: float = 1.0) -> FoldResult:
    """Select on the training rows with every method, fit, and score on the test rows."""
    y = ds.codes
    y_train, y_test = y[train], y[test]
    private = private_selection(ds.values[train], ds.exponents, y_train, ds.n_classes, k,
                                security)
    majority = np.bincount(y_train, minlength=ds.n_classes).argmax()
    acc, converged = {"majority": float((y_test == majority).mean())}, True
    acc["RAW"], ok = _fit_score(floats[train], y_train, floats[test], y_test, C)
    converged &= ok
    acc["MS-GINI"], ok = _fit_score(private.reduced, y_train,
                                    floats[test][:, private.indices], y_test, C)
    converged &= ok
    acc[PRIVATE_LR], acc[SAME_FORM], gap, trained_s = private_lr(ds, train, test, private,
                                                                 security, C)
    overlap = {}
    for method in SELECTORS:
        cols = select_plain(method, floats[train], y_train, ds.n_classes, k)
        acc[method], ok = _fit_score(floats[train][:, cols], y_train,
                                     floats[test][:, cols], y_test, C)
        converged &= ok
        overlap[method] = len(set(cols) & set(private.indices))
    equal = private.equals_plain
    for column, score in PRIVATE_SCORES.items():
        other = private_selection(ds.values[train], ds.exponents, y_train, ds.n_classes, k,
                                  security, score)
        acc[column], ok = _fit_score(other.reduced, y_train, floats[test][:, other.indices],
                                     y_test, C)
        converged &= ok
        equal &= other.equals_plain
    return FoldResult(acc, equal, private.seconds, overlap, converged, trained_s, gap)


def private_lr(ds: EncodedDataset, train: np.ndarray, test: np.ndarray,
               private: PrivateSelection, security: str, C: float
               ) -> tuple[float, float, float, float]:
    """Test accuracy of the private logistic regression (``mpcnet.train``, l2 = 1 / C, its
    default epochs) trained in process on the fold's encoded D' and applied to the test rows
    as its owner would; that of scikit-learn's model of the same form (one against the rest
    for several classes) on the same standardised D'; the largest gap between their
    coefficients; the private training's seconds."""
    cols = private.indices
    classes = [str(c) for c in range(ds.n_classes)]
    run = train_in_process(security, ds.values[train][:, cols], ds.exponents[cols],
                           ds.codes[train], classes, [str(c) for c in cols],
                           Training(l2=1.0 / C))
    test_rows = decode(ds.values[test][:, cols], ds.exponents[cols])
    predicted = np.array(run.model.predict(test_rows)).astype(int)
    scaler = StandardScaler().fit(private.reduced)
    scaled = scaler.transform(private.reduced)
    settings = {**LR_SETTINGS, "C": C}
    if ds.n_classes == 2:
        ref: Any = LogisticRegression(**settings).fit(scaled, ds.codes[train])  # type: ignore[arg-type]
        reference = ref.coef_
    else:  # the same one-against-the-rest models
        from sklearn.multiclass import OneVsRestClassifier

        ref = OneVsRestClassifier(LogisticRegression(**settings)).fit(  # type: ignore[arg-type]
            scaled, ds.codes[train])
        reference = np.vstack([e.coef_ for e in ref.estimators_])
    gap = float(np.abs(run.model.coef - reference).max())
    same_form = float((ref.predict(scaler.transform(test_rows)) == ds.codes[test]).mean())
    return float((predicted == ds.codes[test]).mean()), same_form, gap, run.seconds


def user_ids(name: str, m: int) -> np.ndarray:
    """The user_id column of a bundled dataset (CogLoad), for leave-one-subject-out folds."""
    with bundled(name).open(newline="", encoding="utf-8") as fh:
        ids = np.array([row["user_id"].strip() for row in csv.DictReader(fh)], dtype=object)
    if ids.shape != (m,):
        raise ValueError(f"{name}: {ids.shape[0]} user ids for {m} rows")
    return ids


WINE_K = 6


def wine_table() -> Table:
    """scikit-learn's own copy of the UCI Wine data (178 x 13, three classes; in its wheel, no
    download): the three-class dataset of the comparison with the private model."""
    from sklearn.datasets import load_wine

    data = load_wine()
    return Table([str(c) for c in data.feature_names], np.asarray(data.data, dtype=np.float64),
                 np.array([str(c) for c in data.target]), {})


def without(table: Table, drop: Sequence[str]) -> Table:
    """The table without the feature columns named in `drop`."""
    missing = [c for c in drop if c not in table.columns]
    if missing:
        raise ValueError(f"columns {missing} are not features of the table")
    keep = [j for j, c in enumerate(table.columns) if c not in drop]
    return Table([table.columns[j] for j in keep], table.values[:, keep], table.labels,
                 {c: v for c, v in table.categories.items() if c not in drop})


def _splits(y: np.ndarray, folds: int, repeats: int, seed: int,
            groups: np.ndarray | None) -> tuple[str, Iterator[tuple[np.ndarray, np.ndarray]]]:
    """Description and (train, test) index pairs of the cross-validation scheme."""
    dummy = np.zeros((y.shape[0], 1))
    if groups is not None:
        n = len(set(groups))
        return (f"leave-one-subject-out ({n} folds, by user_id)",
                LeaveOneGroupOut().split(dummy, y, groups))
    rep = f" x {repeats} repeats" if repeats > 1 else ""
    cv = RepeatedStratifiedKFold(n_splits=folds, n_repeats=repeats, random_state=seed)
    return f"{folds}-fold stratified{rep}, seed {seed}", cv.split(dummy, y)


def run_dataset(name: str, folds: int = 5, repeats: int = 1, seed: int = 0,
                k: int | None = None, security: str = "passive3", by_subject: bool = False,
                drop: Sequence[str] = (), C: float = 1.0) -> DatasetResult:
    """Cross-validate RAW and the four selections on the bundled dataset `name`.

    k defaults to the paper's k for the dataset; by_subject uses leave-one-subject-out folds
    (CogLoad); drop removes feature columns before anything else.
    """
    require_sklearn()
    start = time.perf_counter()
    table = wine_table() if name == "wine" else read_bundled(name)
    if drop:
        table = without(table, drop)
    ds = encode_table(table)  # exponents from the whole file (public metadata)
    m, p = ds.values.shape
    k = (WINE_K if name == "wine" else BUNDLED[name].k) if k is None else k
    groups = user_ids(name, m) if by_subject else None
    cv, splits = _splits(ds.codes, folds, repeats, seed, groups)
    variant = "by subject" if by_subject else (f"without {', '.join(drop)}" if drop else "")
    result = DatasetResult(name, cv, m, p, k, variant)
    for train, test in splits:
        result.folds.append(evaluate_fold(table.values, ds, train, test, k, security, C))
    result.seconds = time.perf_counter() - start
    return result


# ---------------------------------------------------------------- report


def _paired(a: np.ndarray, b: np.ndarray) -> tuple[float, str]:
    """Mean of a - b over folds and the verdict of a two-sided paired t-test."""
    from scipy.stats import t as student_t  # scipy comes with scikit-learn

    diff = a - b
    mean = float(diff.mean())
    if diff.size < 2:
        return mean, "n/a"
    se = float(diff.std(ddof=1)) / math.sqrt(diff.size)
    if se == 0.0:
        return mean, "on par" if mean == 0.0 else ("higher" if mean > 0 else "lower")
    crit = float(student_t.ppf(1 - SIGNIFICANCE / 2, diff.size - 1))
    if abs(mean) <= crit * se:
        return mean, "on par"
    return mean, "higher" if mean > 0 else "lower"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _title(r: DatasetResult) -> str:
    return f"{r.name} ({r.variant})" if r.variant else r.name


def accuracy_table(results: Sequence[DatasetResult]) -> str:
    """Markdown table: mean ± std accuracy (%) over folds per dataset and method."""
    head = ("| dataset | m | p | k | folds | majority | " + " | ".join(METHODS)
            + " | private = plain |")
    rule = "|---|---:|---:|---:|---|---:|" + "---:|" * len(METHODS) + "---|"
    lines = [head, rule]
    for r in results:
        cells = [_pct(r.accuracies("majority").mean())]
        best = max(r.accuracies(m).mean() for m in METHODS)
        for method in METHODS:
            acc = r.accuracies(method)
            cell = f"{_pct(acc.mean())} ± {_pct(acc.std(ddof=1) if acc.size > 1 else 0.0)}"
            cells.append(f"**{cell}**" if acc.mean() == best else cell)
        lines.append(f"| {_title(r)} | {r.m} | {r.p} | {r.k} | {r.cv} | " + " | ".join(cells)
                     + f" | {r.checks_passed}/{len(r.folds)} folds |")
    return "\n".join(lines)


def comparison_table(results: Sequence[DatasetResult]) -> str:
    """Markdown table: MS-GINI minus each other method, mean over folds, with the verdict."""
    others = ("RAW", *SELECTORS)
    lines = ["| dataset | " + " | ".join(f"MS-GINI − {o}" for o in others)
             + " | overlap with " + ", ".join(SELECTORS) + " |",
             "|---|" + "---|" * len(others) + "---|"]
    for r in results:
        ms = r.accuracies("MS-GINI")
        cells = []
        for other in others:
            mean, verdict = _paired(ms, r.accuracies(other))
            cells.append(f"{100 * mean:+.1f} ({verdict})")
        overlap = ", ".join(
            f"{np.mean([f.overlap[s] for f in r.folds]):.1f}" for s in SELECTORS)
        lines.append(f"| {_title(r)} | " + " | ".join(cells) + f" | {overlap} of {r.k} |")
    return "\n".join(lines)


def findings(results: Sequence[DatasetResult]) -> list[str]:
    """One plain sentence per dataset on the paper's two claims."""
    out = []
    for r in results:
        ms = r.accuracies("MS-GINI")
        par = {o: _paired(ms, r.accuracies(o))[1] for o in SELECTORS}
        raw_mean, raw_verdict = _paired(ms, r.accuracies("RAW"))
        lower = [o for o, v in par.items() if v == "lower"]
        higher = [o for o, v in par.items() if v == "higher"]
        on_par = ("no, lower than " + ", ".join(lower) if lower else
                  "yes, and higher than " + ", ".join(higher) if higher else "yes")
        above_raw = {"higher": "yes", "on par": "no, on par with RAW",
                     "lower": "no, worse than RAW"}.get(raw_verdict, raw_verdict)
        out.append(f"- **{_title(r)}**: MS-GINI on par with GI, PCC and MI: {on_par}. "
                   f"Better than RAW: {above_raw} ({100 * raw_mean:+.1f} points).")
    return out


def versions() -> str:
    """Python, library and machine versions for the report."""
    libs = []
    for dist in ("mpcnet", "numpy", "scipy", "scikit-learn"):
        try:
            libs.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            libs.append(f"{dist} (not installed)")
    return (f"Python {platform.python_version()}, {', '.join(libs)}; "
            f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs")


def per_fold(results: Sequence[DatasetResult]) -> str:
    """Per-fold accuracies (%), so that the paired comparisons can be checked."""
    lines = ["| dataset | fold | " + " | ".join(METHODS) + " | private s | private = plain |",
             "|---|---:|" + "---:|" * len(METHODS) + "---:|---|"]
    for r in results:
        for i, f in enumerate(r.folds, 1):
            lines.append(f"| {_title(r)} | {i} | "
                         + " | ".join(_pct(f.accuracy[m]) for m in METHODS)
                         + f" | {f.private_seconds:.2f} | {f.private_equals_plain} |")
    return "\n".join(lines)


def report(results: Sequence[DatasetResult], command: str, seconds: float,
           security: str, C: float = 1.0) -> str:
    """The whole Markdown report."""
    unconverged = sum(not f.converged for r in results for f in r.folds)
    timing = "; ".join(
        f"{_title(r)} {r.seconds:.1f} s (private selection "
        f"{sum(f.private_seconds for f in r.folds):.1f} s over {len(r.folds)} folds)"
        for r in results)
    return "\n".join([
        "# Accuracy of logistic regression after top-k feature selection (paper, Table I)",
        "",
        f"Command: `{command}`  ",
        f"Wall time: {seconds:.1f} s in total; {timing}.  ",
        f"Versions: {versions()}.",
        "",
        "Accuracy in %, mean ± standard deviation over the test folds; the best mean of a row "
        "is in bold; *majority*: always predicting the training fold's most frequent class "
        "(mean). *private = plain*: folds in which the private protocol's D' (and the "
        "column indices matched from it) equalled the plaintext MS-GINI top-k on the same "
        "training rows.",
        "",
        accuracy_table(results),
        "",
        "## MS-GINI against the other columns",
        "",
        "Mean per-fold difference in accuracy points; verdict of a two-sided paired t-test "
        f"over the folds at the {SIGNIFICANCE:.0%} level ('on par' = no significant "
        "difference). Fold-wise t-tests ignore that training sets overlap (Nadeau and Bengio, "
        "2003), so they call differences more readily than they should. Overlap: features "
        "MS-GINI shares with each selector, mean over folds.",
        "",
        comparison_table(results),
        "",
        *findings(results),
        "",
        "## How it was produced",
        "",
        "- Folds: `RepeatedStratifiedKFold(n_splits, n_repeats, random_state=seed)` as in the "
        "folds column (shuffled, stratified by class); the same folds for every method.",
        f"- Selection inside each training fold only. MS-GINI: pi_GINI-FS run under "
        f"`{security}` with all parties in this process over loopback channels, on the "
        "training rows secret-shared by the benchmark; D' and the selected exponents are "
        "reconstructed, and the column indices for the test fold are found by matching each "
        "D' column to the identical training column (lowest unused index first, as ties "
        "are broken).",
        "- Encoding: per-column power-of-two exponents chosen by `auto_exponents` on the whole "
        "file's values (public metadata), applied to the training rows; the label is one-hot "
        "(last class implicit). SpeedDating's text columns are ordinal codes and its missing "
        "cells zeros (`mpcnet.dataset.BUNDLED`); CogLoad's `user_id` is not a feature.",
        "- GI (best-threshold Gini impurity), PCC (|Pearson|) and MI (10 equal-width bins) "
        "scored in float64 on the training rows; ties to the lower index.",
        *(["- Extra rows: CogLoad leave-one-subject-out (each test fold is one participant, "
            "whose rows never appear in training), and SpeedDating without `decision` and "
            "`decision_o`, which give the label away (`match` = `decision` AND `decision_o` "
            "in all 8378 rows)."] if any(r.variant for r in results) else []),
        "- Model: `StandardScaler` fitted on the training fold, then `LogisticRegression("
        + ", ".join(f"{k}={v!r}" for k, v in {**LR_SETTINGS, "C": C}.items())
        + ")` (L2 penalty). RAW, GI, PCC, MI use the float values; MS-GINI trains on the "
        f"decoded D'. Fits that hit max_iter: {unconverged}.",
        f"- {PRIVATE_LR}: the same folds and the same private D', trained by the servers' "
        f"logistic regression (`mpcnet.train`, under `{security}` in this process: private "
        "standardisation, piecewise-linear sigmoid, 200 epochs of momentum gradient descent, "
        f"l2 = 1/C = {1 / C:g}, scikit-learn's penalty) without reconstructing D'; the model "
        "is reconstructed as its owner would and applied to the test rows. Largest gap "
        "between its coefficients and scikit-learn's on the same standardised D', per "
        "dataset (max over folds): " + "; ".join(
            f"{_title(r)} {max(f.coef_gap for f in r.folds):.3f}" for r in results)
        + ". Private LR minus scikit-learn's model of the same form (for three classes, "
        "one against the rest; the MS-GINI column is scikit-learn's multinomial) on the same "
        "standardised D', mean over folds, accuracy points: " + "; ".join(
            f"{_title(r)} {100 * (r.accuracies(PRIVATE_LR) - r.accuracies(SAME_FORM)).mean():+.2f}"
            for r in results)
        + ". Training time in process (all parties on one core), per fold: " + "; ".join(
            f"{_title(r)} {np.median([f.training_seconds for f in r.folds]):.1f} s"
            for r in results) + ".",
        "",
        "## Per fold",
        "",
        per_fold(results),
        "",
    ])


def _jobs(name: str, main_only: bool) -> list[dict[str, Any]]:
    """The rows to run for dataset `name`: the paper's setting, then the extra variants."""
    jobs: list[dict[str, Any]] = [{}]
    if not main_only and name == "cogload":
        jobs.append({"by_subject": True})
    if not main_only and name in LEAKY:
        jobs.append({"drop": LEAKY[name]})
    return jobs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.accuracy",
        description="Cross-validated logistic-regression accuracy on RAW and on the top k "
                    "features by MS-GINI (private protocol), GI, PCC and MI (paper, Table I).")
    names = [*BUNDLED, "wine"]
    parser.add_argument("--datasets", nargs="+", default=names, choices=names,
                        help="the bundled datasets and 'wine' (three classes, from "
                             "scikit-learn; default: all)")
    parser.add_argument("--folds", type=int, default=5, help="stratified folds (default 5)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="repeat the stratified K-fold with new shuffles (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="shuffle seed of the folds")
    parser.add_argument("--k", type=int, default=None,
                        help="features to select (default: the paper's k per dataset)")
    parser.add_argument("--C", type=float, default=LR_SETTINGS["C"],
                        help="inverse L2 regularisation strength of the logistic regression")
    parser.add_argument("--security", default="passive3", choices=sorted(registry.SCHEMES))
    parser.add_argument("--main-only", action="store_true",
                        help="skip the extra rows (CogLoad leave-one-subject-out, SpeedDating "
                             "without its label-revealing columns)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help=f"Markdown report (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if args.folds < 2 or args.repeats < 1 or args.C <= 0:
        parser.error("need --folds >= 2, --repeats >= 1 and --C > 0")
    try:
        require_sklearn()
    except ModuleNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    given = list(sys.argv[1:] if argv is None else argv)
    command = " ".join(["python -m bench.accuracy", *([shlex.join(given)] if given else [])])
    start = time.perf_counter()
    results = []
    for name in args.datasets:
        for job in _jobs(name, args.main_only):
            r = run_dataset(name, args.folds, args.repeats, args.seed, args.k, args.security,
                            C=args.C, **job)
            print(f"{_title(r)}: {len(r.folds)} folds in {r.seconds:.1f} s, private = plain "
                  f"in {r.checks_passed}/{len(r.folds)}", file=sys.stderr)
            results.append(r)
    text = report(results, command, time.perf_counter() - start, args.security, args.C)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    print(f"written to {args.out}", file=sys.stderr)
    return 0 if all(r.checks_passed == len(r.folds) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
