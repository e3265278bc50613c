"""Layer: tests. The alignment's value blocks under a cheating server (``mpcnet.ops.join``).

active3: the value blocks are shuffled after the flags are opened and their MAC records are
only folded (``Scheme.checkpoint``), then the kept rows' MACs are made again from their values
(``Scheme.refresh``). Without a full check after the last block, a value error a cheater adds
in a block's shuffle gets a valid MAC, and the best-split Gini's early test (``Spdz3.open_of``
on its own shuffle's records alone) passes it: a cheater adding 2^(62 - shift) - t to every
joined value would learn from the opened range signs how many values are at least t, the job
aborting with ``InputError`` exactly when one is. Under any score the one-hot check opens
x (1 - x) of every joined label before the job's check: a label error E from a value block's
shuffle would make the entry E (1 - 2 x) - E^2 and show every joined row's label. These tests
(an adversarial review's, failing before ``join._joined_values`` ran ``Scheme.verify`` after
its last block) show both caught before anything is opened, and the blocks masked apart.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import outcomes

from mpcnet.errors import CheatingDetected
from mpcnet.featsel.gini import sorted_columns
from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET
from mpcnet.net.engine import RoundEngine
from mpcnet.ops.join import inner_join
from mpcnet.recordids import hashed
from mpcnet.schemes import registry
from mpcnet.schemes.faults import FaultInjector

U64 = np.uint64
KEY = bytes(range(32))
ROWS = 12  # joined rows: the Gini key is x 2^4 + r
SHIFT = 4
THRESHOLD = 50


class _AddToShuffle(FaultInjector):
    """Party 0 adds ``delta`` at ``where`` of its ``nth`` shuffle message, in place (its own
    copy agrees), and records the shapes of its shuffle messages."""

    def __init__(self, nth: int, delta: int, where: tuple[Any, ...] = (0, 0)) -> None:
        super().__init__(0, "shuffle", delta=delta)
        self.nth, self.where, self.count = nth, where, -1
        self.shapes: list[tuple[int, ...]] = []

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if party == self.party and kind == "shuffle":
            self.count += 1
            self.shapes.append(payload.shape)
            if self.count == self.nth:
                payload[self.where] += np.uint64(self.delta % (1 << 64))
        return payload


def _parts(values: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Owner 0: the feature column ``values`` of records 0..ROWS-1; owner 1: a 0/1 label of
    the same records and a few others, in another order."""
    ids0 = [f"id-{r}" for r in range(ROWS)]
    rng = np.random.default_rng(5)
    records1 = rng.permutation(ROWS + 4)
    ids1 = [f"id-{r}" for r in records1]
    labels = (records1 % 2).astype(np.uint64).reshape(-1, 1)
    return [(hashed(ids0, KEY), values.astype(np.uint64).reshape(-1, 1)),
            (hashed(ids1, KEY), labels)]


def _job(values: np.ndarray, fault: FaultInjector | None) -> list[object]:
    """The join, then the best-split Gini's sort of the joined feature column, then the job's
    MAC zero test, under active3 with ``fault``."""
    info = registry.get("active3")
    parts = _parts(values)
    shares = [info.share(a) for part in parts for a in part]

    async def party(engine: RoundEngine) -> Any:
        s = await info.scheme.setup(engine, fault=fault)  # type: ignore[call-arg]
        mine = await s.input(*(sh[engine.party] for sh in shares))
        joined = await inner_join(s, [(mine[0], mine[1]), (mine[2], mine[3])],
                                  DEFAULT_MEMORY_BUDGET)
        data, labels = joined.values[:, :1], joined.values[:, 1:]
        await sorted_columns(s, data, labels, joined.rows)
        await s.verify()
        return joined.rows

    return outcomes(info.n_parties, party, round_timeout=60.0)


def _value_block_message() -> int:
    """Which of party 0's shuffle messages is the value block's second shuffle (the last
    before the refresh): the one whose rows are the candidates' and columns the joined two."""
    spy = _AddToShuffle(-1, 0)
    results = _job(np.arange(ROWS), spy)
    assert all(r == ROWS for r in results), results
    candidates = [i for i, shape in enumerate(spy.shapes) if shape[-1] == 2]
    assert candidates, spy.shapes
    return candidates[0]


def test_an_error_in_a_value_blocks_shuffle_is_caught_before_anything_from_it_is_opened(
        ) -> None:
    nth = _value_block_message()
    delta = (1 << (62 - SHIFT)) - THRESHOLD
    low = np.arange(ROWS)  # every value below the threshold: keys + error stay in range
    high = low.copy()
    high[3] = THRESHOLD + 7  # one value at or above it: its key + error leaves the range
    seen = {}
    for name, values in (("all below t", low), ("one at or above t", high)):
        results = _job(values, _AddToShuffle(nth, delta))
        seen[name] = sorted({f"{type(r).__name__}: {r}" for r in results
                             if isinstance(r, Exception)})
    # both must be caught as cheating, by the same check, before anything is opened from
    # the wrong values; on the reviewed code the second is an InputError from the range
    # check, whose count (1 of 12) is that of the secret values >= t
    for name, errors in seen.items():
        assert errors and all(e.startswith("CheatingDetected") for e in errors), (
            f"{name}: a wrong value block shuffle reached an opening unchecked: {seen}")


_LABELS = (0, 0, slice(None), -1)
"""Where a shuffle message holds the label column (the last) of every row's value words
(column 0, the first: owner 0's first feature)."""


def _keyed_job(labels: np.ndarray, fault: FaultInjector | None,
               monkeypatch: pytest.MonkeyPatch) -> tuple[list[object], list[np.ndarray]]:
    """``select_keyed`` (MS-GINI, k = 1) under active3 on two contributions: owner 0 two
    features, owner 1 a feature and the 0/1 labels of the same records; what party 0 sees
    opened by the one-hot check."""
    from mpcnet.featsel import gini_fs

    seen: list[np.ndarray] = []
    original = gini_fs.open_one_hot

    async def spy(s: Any, products: Any) -> np.ndarray:
        out = await original(s, products)
        if s.party == 0:
            seen.append(np.asarray(out).copy())
        return out

    monkeypatch.setattr(gini_fs, "open_one_hot", spy)
    info = registry.get("active3")
    rng = np.random.default_rng(3)
    ids = [f"id-{r}" for r in range(ROWS)]
    owner0 = rng.integers(0, 1 << 20, (ROWS, 2)).astype(np.uint64)
    owner1 = np.concatenate([rng.integers(0, 1 << 20, (ROWS, 1)),
                             labels.reshape(-1, 1)], axis=1).astype(np.uint64)
    plain = [(hashed(ids, KEY), owner0), (hashed(ids[::-1], KEY), owner1[::-1].copy())]
    shares = [[info.share(a) for a in part] for part in plain]

    async def party(engine: RoundEngine) -> Any:
        s = await info.scheme.setup(engine, fault=fault)  # type: ignore[call-arg]
        mine = [(h[engine.party], c[engine.party]) for h, c in shares]
        result, rows = await gini_fs.select_keyed(s, mine, 1, 2, 1, np.zeros(3, np.int64))
        return rows

    return outcomes(info.n_parties, party, round_timeout=60.0), seen


def test_a_cheater_does_not_read_the_labels_from_the_one_hot_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _AddToShuffle(-1, 0, _LABELS)
    results, _ = _keyed_job(np.zeros(ROWS, np.int64), spy, monkeypatch)
    assert all(r == ROWS for r in results), results
    nth = [i for i, shape in enumerate(spy.shapes) if shape[-1] == 4][0]  # the value block's
    few = np.zeros(ROWS, np.int64)
    few[:2] = 1
    many = np.ones(ROWS, np.int64)
    many[:2] = 0
    views = []
    for labels in (few, many):
        results, seen = _keyed_job(labels, _AddToShuffle(nth, 1 << 40, _LABELS), monkeypatch)
        assert any(isinstance(r, CheatingDetected) for r in results), results
        views.append(np.sort(seen[0].reshape(-1)) if seen else np.zeros(0, U64))
    # what the cheater sees opened (nothing, if the job stops first) must not depend on the
    # labels (on the reviewed code the entry x (1 - x) is E - E^2 for x = 0 and -E - E^2
    # for x = 1: every label, read off)
    np.testing.assert_array_equal(views[0], views[1])


@pytest.mark.parametrize("scheme_name", ["passive3", "active3", "active4"])
def test_two_blocks_of_one_shuffle_are_masked_apart(scheme_name: str) -> None:
    """The same block moved twice by one ``Shuffler``: the outputs agree row for row, and no
    word a party receives in the second application equals the first's (fresh masks; equal
    messages would tell a server that two blocks' columns agree, and their difference the
    difference of the data)."""
    info = registry.get(scheme_name)
    block = np.arange(40 * 3, dtype=np.uint64).reshape(40, 3) * np.uint64(0x9E3779B97F4A7C15)
    shares = info.share(block)
    received: dict[int, list[list[np.ndarray]]] = {}

    async def party(engine: RoundEngine) -> Any:
        s = await info.scheme.setup(engine)
        exchange = engine.exchange
        mine: list[list[np.ndarray]] = []
        received[engine.party] = mine

        async def spy(sends: Any, peers: Any) -> Any:
            got = await exchange(sends, peers)
            if mine:
                mine[-1].extend(np.asarray(v).reshape(-1) for v in got.values())
            return got

        engine.exchange = spy  # type: ignore[method-assign]
        (x,) = await s.input(shares[engine.party])
        shuffle = s.shuffler(40)
        out = []
        for _ in range(2):
            mine.append([])
            out.append(await s.output(await shuffle.apply(x)))
        return out

    outs = outcomes(info.n_parties, party, round_timeout=60.0)
    first = info.reconstruct({i: o[0] for i, o in enumerate(outs)})  # type: ignore[index]
    second = info.reconstruct({i: o[1] for i, o in enumerate(outs)})  # type: ignore[index]
    np.testing.assert_array_equal(first, second)
    assert sorted(map(tuple, first.tolist())) == sorted(map(tuple, block.tolist()))
    for one, two in received.values():
        a, b = np.concatenate(one), np.concatenate(two)
        assert a.size == b.size and a.size > 0
        assert np.mean(a == b) < 0.01


def test_the_best_split_gini_job_does_not_abort_on_whether_a_secret_passes_a_threshold(
        ) -> None:
    """The first finding through ``select_keyed`` with ``--score gini`` (the value block is
    party 0's fourth shuffle message: key columns, flags, the block's two shuffles)."""
    info = registry.get("active3")
    ids = [f"id-{r}" for r in range(ROWS)]

    def run(feature: np.ndarray) -> list[str]:
        owner0 = np.stack([feature, np.arange(ROWS)], 1).astype(np.uint64)
        owner1 = np.stack([np.arange(ROWS) * 3, np.arange(ROWS) % 2], 1).astype(np.uint64)
        shares = [[info.share(a) for a in part]
                  for part in [(hashed(ids, KEY), owner0), (hashed(ids, KEY), owner1)]]
        fault = _AddToShuffle(3, (1 << (62 - SHIFT)) - THRESHOLD, (0, 0, slice(None), 0))

        async def party(engine: RoundEngine) -> Any:
            from mpcnet.featsel.gini_fs import select_keyed
            s = await info.scheme.setup(engine, fault=fault)  # type: ignore[call-arg]
            mine = [(h[engine.party], c[engine.party]) for h, c in shares]
            _, rows = await select_keyed(s, mine, 1, 2, 1, np.zeros(3, np.int64),
                                         score_name="gini")
            return rows

        results = outcomes(info.n_parties, party, round_timeout=60.0)
        return sorted({type(r).__name__ for r in results if isinstance(r, Exception)})

    low = np.arange(ROWS)
    high = low.copy()
    high[3] = THRESHOLD + 7
    assert run(low) == run(high) == ["CheatingDetected"]
