"""Counts of shared bits over rows (``mpcnet.ops.count``) against plaintext, for every scheme."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.ops.compare import msb
from mpcnet.ops.count import bit_counts


@pytest.mark.parametrize(("m", "p", "classes"), [(2, 1, 2), (70, 2, 2), (130, 7, 2),
                                                 (64, 3, 4), (65, 12, 3)])
def test_bit_counts_equal_the_plaintext_counts(scheme: str, m: int, p: int,
                                               classes: int) -> None:
    """Every column block (p below and above the three dealers' blocks), rows around the
    64-row words, one and several classes; the bits come from a sign test, as in MS-GINI."""
    rng = np.random.default_rng(m * p * classes)
    x = rng.integers(-(2**40), 2**40, (m, p), dtype=np.int64)
    x[0] = -1  # an all-ones row and, if there is one, an all-zeros row
    if m > 2:
        x[1] = 1
    codes = rng.integers(0, classes, m)
    labels = (codes[:, None] == np.arange(classes - 1)[None, :]).astype(np.int64)

    async def body(s, x, labels):  # type: ignore[no-untyped-def]
        counts, in_class = await bit_counts(s, await msb(s, x), labels)
        return await s.open(counts), await s.open(in_class)

    counts, in_class = opened(run_protocol(scheme, {"x": x, "labels": labels}, body))
    flags = (x < 0).astype(np.uint64)
    np.testing.assert_array_equal(counts, flags.sum(axis=0))
    np.testing.assert_array_equal(in_class, flags.T @ labels.astype(np.uint64))
    assert in_class.shape == (p, classes - 1)


def test_bit_counts_rounds_and_bytes(scheme: str) -> None:
    """Converting inside the sums costs at most the conversion's own rounds and bytes: 2
    rounds under passive3, 3 under active4; per row and column at most the 16 bytes a party
    sent for ``bit_to_arith`` alone (the flags of SpeedDating, 2 classes)."""
    m, p = 256, 12
    x = np.where(np.arange(m * p).reshape(m, p) % 3 == 0, -5, 5).astype(np.int64)
    labels = (np.arange(m) % 2).reshape(m, 1).astype(np.int64)

    async def body(s, x, labels):  # type: ignore[no-untyped-def]
        bits = await msb(s, x)
        rounds, sent = s.engine.rounds, s.engine.bytes_sent
        counts, _ = await bit_counts(s, bits, labels)
        return s.engine.rounds - rounds, s.engine.bytes_sent - sent, await s.open(counts)

    results = run_protocol(scheme, {"x": x, "labels": labels}, body)
    rounds = {r[0] for r in results}
    per_cell = max(r[1] for r in results) / (m * p)
    np.testing.assert_array_equal(results[0][2], (x < 0).sum(axis=0))
    if scheme == "passive3":
        assert rounds == {2} and per_cell < 6
    elif scheme == "active4":
        assert rounds == {3} and per_cell < 9
