"""The private choice of k: its integers (features, weights) equal the plaintext emulation's
bit for bit under every scheme, so the chosen k does; ties go to the smaller k; bad
candidates are refused."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.errors import InputError
from mpcnet.ops.truncate import trunc_floor
from mpcnet.plain.logreg import Training
from mpcnet.schemes.base import join
from mpcnet.train import reference
from mpcnet.train.choose import check_candidates, choose_k, first_max, holdout_split, trained_mask
from mpcnet.train.logreg import PROB_BITS, descend, training_layout
from mpcnet.train.standardise import FEATURE_BITS, standardise

CANDIDATES = (1, 2, 4)
TRAINING = Training(epochs=12)


def _dataset(m: int = 64, n_classes: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """m rows of 4 encoded columns in rank order, of very different magnitudes (one constant
    on the fitted rows but not on the held-out ones), classes that depend on two of them."""
    rng = np.random.default_rng(7)
    codes = rng.integers(0, n_classes, m)
    z = np.stack([(rng.normal(0, 1, m) + codes) * 2**30, rng.integers(-3, 4, m),
                  (rng.normal(0, 1, m) + 0.5 * (codes == 1)) * 2**12, np.full(m, 5000)],
                 1).round().astype(np.int64)
    z[holdout_split(m).order[-1], 3] = 7000
    return z, codes


def _labels(codes: np.ndarray, n_classes: int = 2) -> np.ndarray:
    """One-hot without the last class."""
    return (codes[:, None] == np.arange(n_classes - 1)[None, :]).astype(np.int64)


def test_features_and_weights_equal_the_emulation_bit_for_bit(scheme: str) -> None:
    z, codes = _dataset()
    split = holdout_split(len(codes))
    order = split.order
    truth = (codes[order] == 1).astype(np.int64)[:, None]

    async def body(s, z, y):  # type: ignore[no-untyped-def]
        columns = await standardise(s, z[order], None, split.fit, trunc_floor)
        ones = s.public(np.full((len(order), 1), 1 << FEATURE_BITS, dtype=np.uint64))
        rows = join([columns.features, ones], 1)[:split.fit]
        cut = training_layout(s.name, split.fit, 4, 3, 2**30)
        weights = await descend(s, rows, s.mul_public(y[:split.fit], np.uint64(1 << PROB_BITS))
                                .broadcast_to((split.fit, 3)), TRAINING, cut, trunc_floor,
                                trained_mask(CANDIDATES))
        return await s.open(columns.features), await s.open(weights)

    features, weights = opened(run_protocol(scheme, {"z": z, "y": truth}, body))
    x = reference.standardised(z[order], split.fit)
    np.testing.assert_array_equal(features.view(np.int64), x)
    rows = np.hstack([x, np.full((len(order), 1), 1 << FEATURE_BITS)])[:split.fit]
    expected = reference.descend(rows, np.repeat(truth[:split.fit] << PROB_BITS, 3, 1),
                                 TRAINING, trained_mask(CANDIDATES))
    np.testing.assert_array_equal(weights.view(np.int64), expected)
    assert (expected[1:4, 0] == 0).all() and (expected[2:4, 1] == 0).all()  # untrained stay 0
    assert np.abs(expected[:, -1]).max() > 2**10  # the full model learnt something
    assert len(np.unique(x[:split.fit, 3])) == 1 and x[-1, 3] == 0  # constant when fitted


@pytest.mark.parametrize("n_classes", [2, 3])
def test_the_private_choice_is_the_emulated_choice(scheme: str, n_classes: int) -> None:
    z, codes = _dataset(n_classes=n_classes)

    async def body(s, z, labels):  # type: ignore[no-untyped-def]
        return (await choose_k(s, z, labels, CANDIDATES, TRAINING))[0]

    chosen = opened(run_protocol(scheme, {"z": z, "labels": _labels(codes, n_classes)}, body))
    counts = reference.held_out_correct(z, codes, n_classes, CANDIDATES, TRAINING)
    assert chosen == reference.choose_k(z, codes, n_classes, CANDIDATES, TRAINING)
    assert counts.max() > counts.min()  # the candidates differ: the choice is not trivial


@pytest.mark.parametrize("rows,winners", [
    ([[5, 7, 7, 3], [4, 4, 4, 4], [1, 2, 3, 9], [9, 0, 9, 9], [-3, -1, -2, -1]],
     [1, 0, 3, 0, 1]),
    ([[2, 3], [3, 3], [3, 2]], [1, 0, 0]), ([[3, 3, 2], [0, 1, 1], [2**40, -(2**40), 0]],
                                            [0, 1, 0])])
def test_the_first_largest_wins_ties_to_the_lower_index(scheme: str, rows: list[list[int]],
                                                          winners: list[int]) -> None:
    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await first_max(s, x))

    got = opened(run_protocol(scheme, {"x": np.array(rows)}, body))
    expected = np.eye(len(rows[0]), dtype=np.uint64)[np.argmax(rows, axis=1)]
    assert list(np.argmax(rows, axis=1)) == winners
    np.testing.assert_array_equal(got, expected)


def test_the_split_is_public_and_fixed() -> None:
    split = holdout_split(126)
    assert sorted(split.order) == list(range(126)) and split.fit == 126 - 31
    assert (split.order != np.arange(126)).any()
    np.testing.assert_array_equal(split.order, holdout_split(126).order)


@pytest.mark.parametrize("candidates,words", [((5,), "2 to 16"), ((5, 3), "increase"),
                                              ((5, 5), "increase"), ((0, 3), "increase"),
                                              ((3, 10), "1 to 9")])
def test_bad_candidates_are_refused(candidates: tuple[int, ...], words: str) -> None:
    with pytest.raises(InputError, match=words):
        check_candidates(candidates, 10, 100)
    with pytest.raises(InputError, match="at least 16 rows"):
        check_candidates((1, 2), 10, 15)
