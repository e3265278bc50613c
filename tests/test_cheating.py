"""The active schemes under a deliberately cheating party: nothing wrong is ever output.

For each active setting (active3: SPDZ-wise 3PC; active4: Fantastic Four), each party as the
cheater, each message kind the scheme sends and several positions in the run (first, middle
and last message of that kind), the cheater adds an error to one message. Every run must end
with the honest parties raising ``CheatingDetected`` naming a check, and no honest party may
return a D' that differs from the plaintext one. The same holds for a wrong input share, and
(active3) for truncation and random-bit generation, whose products and ANDs are checked by the
same batched checks before the opening that follows them, and for the alignment of record IDs
(``mpcnet.ops.join``: its shuffles, the opened comparisons of its sort, its flags) and for
the best-split Gini's sort (``mpcnet.featsel.gini``: its shuffle, the opened column numbers
and comparisons).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
from conftest import outcomes

from mpcnet.errors import CheatingDetected, InputError
from mpcnet.featsel.gini_fs import gini_fs, select_stored
from mpcnet.featsel.layout import (
    DEFAULT_MEMORY_BUDGET,
    SCORING_BYTES_PER_CELL,
    STAGGERED_BYTES_PER_CELL,
    held_bytes,
)
from mpcnet.featsel.source import ArraySource
from mpcnet.net.engine import RoundEngine
from mpcnet.ops.join import inner_join
from mpcnet.ops.truncate import trunc
from mpcnet.plain.scores import gini_fraction, msgini_fraction
from mpcnet.plain.select import topk_fraction
from mpcnet.recordids import hashed
from mpcnet.schemes import registry
from mpcnet.schemes.base import Scheme, Shared
from mpcnet.schemes.faults import KINDS, FaultInjector

M, P, K = 24, 5, 2
ACTIVE = ("active3", "active4")
CHEATERS = [(scheme, party) for scheme in ACTIVE
            for party in range(registry.get(scheme).n_parties)]


def _dataset() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 2, M)
    values = rng.integers(-100, 100, (M, P)) + codes[:, None] * np.arange(P) * 20
    return values, (codes == 0).astype(np.uint64).reshape(M, 1)


def _expected() -> np.ndarray:
    values, labels = _dataset()
    q, d = msgini_fraction(values, (labels[:, 0] == 0).astype(int), 2)
    return values[:, topk_fraction(q, d, K)]


async def _selection(s: Scheme, data: Shared, labels: Shared) -> np.ndarray:
    result = await gini_fs(s, data, labels, 2, K, np.zeros(P, np.int64))
    return (await s.open(result.reduced)).view(np.int64)


async def _truncation(s: Scheme, data: Shared, labels: Shared) -> np.ndarray:
    """Random bits, a truncation by 2^3 (it opens a masked value) and the result."""
    return (await s.open(await trunc(s, data, 3))).view(np.int64)


async def _alignment(s: Scheme, data: Shared, labels: Shared) -> np.ndarray:
    """Two owners keyed by record IDs: rows 0..15 of columns 0-2, and rows 23 down to 8 of
    columns 3-4 (public hashes: the test is about the servers' messages); the join opened."""
    ids = hashed([f"r{i}" for i in range(M)], bytes(32))
    theirs = np.arange(M - 1, 7, -1)
    joined = await inner_join(s, [(s.public(ids[:16]), data[:16, :3]),
                                  (s.public(ids[theirs]), data[theirs, 3:])],
                              DEFAULT_MEMORY_BUDGET)
    return (await s.open(joined.values)).view(np.int64)


async def _gini_selection(s: Scheme, data: Shared, labels: Shared) -> np.ndarray:
    result = await gini_fs(s, data, labels, 2, K, np.zeros(P, np.int64), score_name="gini")
    return (await s.open(result.reduced)).view(np.int64)


def _is_the_gini_selection(out: np.ndarray) -> bool:
    values, labels = _dataset()
    q, d = gini_fraction(values, (labels[:, 0] == 0).astype(int), 2)
    return np.array_equal(out, values[:, topk_fraction(q, d, K)])


def _is_the_join(out: np.ndarray) -> bool:
    return sorted(map(tuple, out.tolist())) == sorted(map(tuple, _dataset()[0][8:16].tolist()))


def _run(scheme: str, fault: FaultInjector | None, bad_input: int | None = None,
         body: Callable[..., Awaitable[np.ndarray]] = _selection, value_only: bool = False
         ) -> list[object]:
    """Each party's outcome: what ``body`` opened, or the exception it raised. ``bad_input``
    names a party that uses a wrong share of one input value instead of what the client sent;
    ``value_only`` inputs the data without MACs, as ``select_stored`` does for MS-GINI."""
    info = registry.get(scheme)
    values, labels = _dataset()
    data, lab = info.share(values.view(np.uint64)), info.share(labels)
    if bad_input is not None:
        data[bad_input] = data[bad_input].copy()
        data[bad_input][0, 3, 1] += np.uint64(1)

    async def party(engine: RoundEngine) -> np.ndarray:
        s = await info.scheme.setup(engine, fault=fault)  # type: ignore[call-arg]
        if value_only:
            (mine_data,) = await s.input(data[engine.party], authenticate=False)
            (mine_labels,) = await s.input(lab[engine.party])
        else:
            mine_data, mine_labels = await s.input(data[engine.party], lab[engine.party])
        return await body(s, mine_data, mine_labels)

    return outcomes(info.n_parties, party)


def _run_in_blocks(fault: FaultInjector | None, bad_input: int | None = None) -> list[object]:
    """Each party's outcome of pi_GINI-FS under active3 as the servers run it
    (``select_stored``) within a memory budget that scores the 5 columns in 3 blocks (2, 2
    and 1): each block's checkpoint runs beside the next block, whose input check runs
    beside this one (``gini_fs``). ``bad_input`` names a party that changes a share of a
    cell of the second block, column 3."""
    info = registry.get("active3")
    values, labels = _dataset()
    data, lab = info.share(values.view(np.uint64)), info.share(labels)
    if bad_input is not None:
        data[bad_input] = data[bad_input].copy()
        data[bad_input][0, 3, 3] += np.uint64(1)
    budget = held_bytes("active3", M, 2, K) + 2 * M * SCORING_BYTES_PER_CELL["active3"]

    async def party(engine: RoundEngine) -> np.ndarray:
        s = await info.scheme.setup(engine, fault=fault)
        result = await select_stored(s, ArraySource(data[engine.party]), lab[engine.party], 2,
                                     K, np.zeros(P, np.int64), budget)
        assert result.plan["blocks"] == 3, result.plan
        return (await s.open(result.reduced)).view(np.int64)

    return outcomes(info.n_parties, party)


def _messages_of_each_kind(scheme: str, run: Callable[[FaultInjector | None], list[object]]
                           ) -> dict[tuple[int, str], int]:
    """How many messages of each kind each party sends in an honest run."""
    counts: dict[tuple[int, str], int] = {}

    class Counter(FaultInjector):
        def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
            if payload.size:
                counts[(party, kind)] = counts.get((party, kind), 0) + 1
            return payload

    ran = run(Counter(0, KINDS[scheme][0], times=0))
    assert all(isinstance(o, np.ndarray) for o in ran)
    return counts


def _every_kind_and_position(scheme: str, cheater: int, body: Callable[..., Any],
                             correct: Callable[[np.ndarray], bool], value_only: bool = False,
                             last: bool = True,
                             run: Callable[[FaultInjector | None], list[object]] | None = None
                             ) -> tuple[int, set[str]]:
    """Run one cheating case per message kind and position; return (cases, checks named).
    Without ``last``, the positions are the first and the third of the honest run's count (a
    body whose rounds vary from run to run, as a quicksort after a shuffle does). ``run``
    replaces ``_run`` of ``body`` (``_run_in_blocks``)."""
    if run is None:
        def run(fault: FaultInjector | None) -> list[object]:
            return _run(scheme, fault, body=body, value_only=value_only)
    counts = _messages_of_each_kind(scheme, run)
    cases = 0
    checks: set[str] = set()
    for (party, kind), n in sorted(counts.items()):
        if party != cheater or kind == "key-confirm":
            continue
        for position in sorted({0, n // 2, n - 1} if last else {0, n // 3}):
            fault = FaultInjector(cheater, kind, after=position, delta=1 << 20)
            ran = run(fault)
            cases += 1
            honest = [o for i, o in enumerate(ran) if i != cheater]
            caught = [o for o in honest if isinstance(o, CheatingDetected)]
            outputs = [o for o in honest if isinstance(o, np.ndarray)]
            assert fault.fired == 1, (kind, position)
            assert caught, f"{scheme} cheater {cheater}, {kind} message {position}: not detected"
            # a party that finished before the abort reached it may hold a result, never a
            # wrong one
            assert all(correct(out) for out in outputs), (kind, position)
            checks |= {o.check for o in caught}
    return cases, checks


def test_honest_runs_are_correct() -> None:
    for scheme in ACTIVE:
        for value_only in (False, True):
            for out in _run(scheme, None, value_only=value_only):
                np.testing.assert_array_equal(np.asarray(out), _expected())


@pytest.mark.parametrize(("scheme", "cheater"), CHEATERS)
def test_every_message_kind_and_position_is_detected(scheme: str, cheater: int) -> None:
    expected = _expected()
    cases, checks = _every_kind_and_position(scheme, cheater, _selection,
                                             lambda out: np.array_equal(out, expected))
    print(f"{scheme} cheater {cheater}: {cases}/{cases} cases detected, "
          f"checks: {sorted(checks)}")
    assert cases >= 6


@pytest.mark.parametrize("cheater", range(3))
def test_every_message_kind_and_position_is_detected_with_value_only_data(cheater: int
                                                                          ) -> None:
    """active3 with the data input without MACs (``Scheme.input``), as MS-GINI runs."""
    expected = _expected()
    cases, checks = _every_kind_and_position("active3", cheater, _selection,
                                             lambda out: np.array_equal(out, expected), True)
    print(f"active3 value-only data, cheater {cheater}: {cases}/{cases} cases detected, "
          f"checks: {sorted(checks)}")
    assert cases >= 6


@pytest.mark.parametrize("cheater", range(3))
def test_cheating_in_blocks_is_detected_where_checks_run_beside_the_next_block(cheater: int
                                                                              ) -> None:
    """active3 scored in 3 blocks, each block's checkpoint (triples, coin, openings, digests)
    travelling with the next block's rounds and each block's input check with the previous
    block's: every message kind at its first, middle and last position, the bundled check
    messages included, is caught and nothing wrong is output."""
    expected = _expected()
    cases, checks = _every_kind_and_position("active3", cheater, _selection,
                                             lambda out: np.array_equal(out, expected),
                                             run=_run_in_blocks)
    print(f"active3 in blocks, cheater {cheater}: {cases}/{cases} cases detected, "
          f"checks: {sorted(checks)}")
    assert {"AND", "MAC"} <= checks and cases >= 20


def test_a_wrong_and_in_the_first_block_is_caught_by_its_checkpoint_beside_the_second() -> None:
    """An error on the first AND of block 1 is caught by block 1's checkpoint, whose rounds
    now travel with block 2's: the honest parties stop in the scoring (``AND``, or ``open
    consistency`` at that check's openings), well before the job's final check."""
    stopped: dict[int, int] = {}  # rounds run when the party stopped
    info = registry.get("active3")
    values, labels = _dataset()
    data, lab = info.share(values.view(np.uint64)), info.share(labels)
    budget = held_bytes("active3", M, 2, K) + 2 * M * SCORING_BYTES_PER_CELL["active3"]
    fault = FaultInjector(1, "and", delta=1 << 20)

    async def party(engine: RoundEngine) -> np.ndarray:
        s = await info.scheme.setup(engine, fault=fault)
        try:
            result = await select_stored(s, ArraySource(data[engine.party]), lab[engine.party],
                                         2, K, np.zeros(P, np.int64), budget)
        except CheatingDetected:
            stopped[engine.party] = engine.rounds
            raise
        return (await s.open(result.reduced)).view(np.int64)

    honest_rounds = _rounds_of_an_honest_run_in_blocks()
    ran = outcomes(3, party)
    assert fault.fired == 1
    caught = [i for i in (0, 2) if isinstance(ran[i], CheatingDetected)]
    assert caught and not any(isinstance(o, np.ndarray) for o in ran), ran  # the job stops
    for i in caught:  # an honest party that was still running when the abort came is None
        # by the block's AND check: its zero test, or its openings, where a component the
        # error made differ between its two holders mismatches its digest
        assert getattr(ran[i], "check", None) in ("AND", "open consistency"), ran[i]
        assert stopped[i] < honest_rounds["scoring_end"], (stopped[i], honest_rounds)


def _rounds_of_an_honest_run_in_blocks() -> dict[str, int]:
    """Rounds at the end of the scoring in an honest run."""
    info = registry.get("active3")
    values, labels = _dataset()
    data, lab = info.share(values.view(np.uint64)), info.share(labels)
    budget = held_bytes("active3", M, 2, K) + 2 * M * SCORING_BYTES_PER_CELL["active3"]

    async def party(engine: RoundEngine) -> dict[str, int]:
        s = await info.scheme.setup(engine)
        await select_stored(s, ArraySource(data[engine.party]), lab[engine.party], 2, K,
                            np.zeros(P, np.int64), budget)
        phases = engine.report()["phases"]
        assert isinstance(phases, dict)
        return {"scoring_end": sum(phases[ph]["rounds"] for ph in ("setup", "scoring"))}

    out = outcomes(3, party)
    assert isinstance(out[0], dict)
    return out[0]


@pytest.mark.parametrize("position", range(3))
def test_an_error_on_the_one_hot_products_opened_early_stops_the_job_as_cheating(
        position: int) -> None:
    """The one-hot products are opened beside the fractions, before the final ``verify``, and
    acted on only after it: an error on the labels' MAC product (position 0), the one-hot
    products (1) or the product after them makes the honest servers stop with
    ``CheatingDetected``, never with the ``InputError`` that would blame an owner."""
    fault = FaultInjector(1, "product", after=position, delta=1 << 20)
    ran = _run_in_blocks(fault)
    assert fault.fired == 1
    honest = [ran[0], ran[2]]
    assert any(isinstance(o, CheatingDetected) for o in honest), ran
    assert not any(isinstance(o, (InputError, np.ndarray)) for o in honest), ran


@pytest.mark.parametrize("cheater", range(3))
def test_a_wrong_input_share_of_a_later_block_is_detected(cheater: int) -> None:
    """Block 2's input check now travels with block 1's rounds: a party holding a wrong share
    of a block-2 cell is caught by it, before block 2 is computed on."""
    ran = _run_in_blocks(None, bad_input=cheater)
    caught = [o for o in ran if isinstance(o, CheatingDetected)]
    assert caught and all(o.check == "input consistency" for o in caught), ran
    assert not any(isinstance(o, np.ndarray) for o in ran)


@pytest.mark.parametrize(("scheme", "cheater"), CHEATERS)
def test_cheating_in_truncation_is_detected(scheme: str, cheater: int) -> None:
    """active3 masks with authenticated random bits (checked by the batched checks before the
    opening that follows), active4 with a mask two parties know, in joint messages."""
    floor = _dataset()[0] >> 3  # rounded down or up (probabilistic truncation)
    cases, checks = _every_kind_and_position(scheme, cheater, _truncation,
                                             lambda out: bool(np.isin(out - floor, (0, 1)).all()))
    print(f"{scheme} truncation, cheater {cheater}: {cases}/{cases} cases detected, "
          f"checks: {sorted(checks)}")
    assert cases >= (6 if scheme == "active3" else 2)


@pytest.mark.parametrize("cheater", range(3))
def test_cheating_in_truncation_by_conversion_is_detected(monkeypatch: pytest.MonkeyPatch,
                                                          cheater: int) -> None:
    """active3's truncation of a large batch (``CONVERSION_BATCH``, lowered here): binary
    adders and ``b2a_masked``, whose ANDs, products and openings the same checks cover."""
    from mpcnet.ops import truncate

    monkeypatch.setattr(truncate, "CONVERSION_BATCH", 1)
    floor = _dataset()[0] >> 3
    cases, checks = _every_kind_and_position("active3", cheater, _truncation,
                                             lambda out: bool(np.isin(out - floor, (0, 1)).all()))
    print(f"active3 truncation by conversion, cheater {cheater}: {cases}/{cases} cases "
          f"detected, checks: {sorted(checks)}")
    assert cases >= 6


@pytest.mark.parametrize(("scheme", "cheater"), CHEATERS)
@pytest.mark.parametrize("value_only", [False, True])
def test_wrong_input_share_is_detected(scheme: str, cheater: int, value_only: bool) -> None:
    ran = _run(scheme, None, bad_input=cheater, value_only=value_only)
    honest = [o for i, o in enumerate(ran) if i != cheater]
    # caught by the input check, the round before anything is computed on the shares
    caught = [o for o in honest if isinstance(o, CheatingDetected)]
    assert caught and {o.check for o in caught} == {"input consistency"}, honest
    assert not any(isinstance(o, np.ndarray) for o in honest)


@pytest.mark.parametrize(("scheme", "cheater"), CHEATERS)
def test_cheating_in_the_alignment_is_detected(scheme: str, cheater: int) -> None:
    """Every message kind of the alignment: active3's shuffle words (value or MAC) fail the
    MAC check before any comparison is opened, its comparisons' ANDs the AND check before
    their opening; active4's shuffles and comparisons are joint messages."""
    cases, checks = _every_kind_and_position(scheme, cheater, _alignment, _is_the_join,
                                             last=False)
    print(f"{scheme} alignment, cheater {cheater}: {cases}/{cases} cases detected, "
          f"checks: {sorted(checks)}")
    assert cases >= 6
    assert ("MAC" in checks) if scheme == "active3" else ("joint-message hash" in checks)


@pytest.mark.parametrize(("scheme", "cheater"), CHEATERS)
def test_cheating_in_the_best_split_gini_is_detected(scheme: str, cheater: int) -> None:
    """Every message kind of a best-split Gini selection, whose sort shuffles and opens: a
    wrong shuffle word (active3) fails the MAC check of ``open_of`` before the column numbers
    are opened, a wrong AND of a comparison the AND check before its opening; active4's are
    joint messages. Positions: first and a third of the honest run's count (the quicksort's
    rounds vary with the shuffle)."""
    cases, checks = _every_kind_and_position(scheme, cheater, _gini_selection,
                                             _is_the_gini_selection, last=False)
    print(f"{scheme} gini, cheater {cheater}: {cases}/{cases} cases detected, "
          f"checks: {sorted(checks)}")
    assert cases >= 6
    assert ("MAC" in checks) if scheme == "active3" else ("joint-message hash" in checks)


@pytest.mark.parametrize("cheater", range(3))
def test_a_wrong_value_block_shuffle_after_the_flags_is_detected(cheater: int) -> None:
    """active3: the value columns are shuffled after the flags are opened, and nothing of
    them is opened in the alignment: a wrong word in the cheater's last shuffle messages (the
    last block's candidates, shuffled with the flags' permutations) is caught by the MAC
    check before anything computed from them is opened (here the join itself)."""
    counts = _messages_of_each_kind("active3", lambda f: _run("active3", f, body=_alignment))
    n = counts[(cheater, "shuffle")]
    for position in (n - 1, n - 2):
        for word in (0, 2):
            fault = FaultInjector(cheater, "shuffle", after=position, delta=1 << 20, word=word)
            ran = _run("active3", fault, body=_alignment)
            honest = [o for i, o in enumerate(ran) if i != cheater]
            assert fault.fired == 1
            caught = [o for o in honest if isinstance(o, CheatingDetected)]
            assert caught and {o.check for o in caught} == {"MAC"}, (position, word, honest)
            assert not any(isinstance(o, np.ndarray) for o in honest)


class _OtherPermutation(FaultInjector):
    """A cheater that permutes its part of a shuffle otherwise than its partner: it swaps two
    rows of the words it sends (active3: value and MAC alike, so each row stays a consistent
    pair; active4: two words of a joint message), its first such message or a later one."""

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if party != self.party or kind != self.kind or self.fired >= self.times:
            return payload
        self.seen += 1
        if self.seen <= self.after:
            return payload
        self.fired += 1
        out = np.array(payload, copy=True)
        if out.ndim == 4:  # (limb, v, rows, columns)
            out[:, :, [0, 1]] = out[:, :, [1, 0]]
        else:
            flat = out.reshape(-1)
            flat[[0, 1]] = flat[[1, 0]]
        return out


@pytest.mark.parametrize(("scheme", "cheater"), CHEATERS)
@pytest.mark.parametrize("after", [0, 2])
def test_a_shuffle_permuted_otherwise_is_detected(scheme: str, cheater: int, after: int
                                                  ) -> None:
    kind = "shuffle" if scheme == "active3" else "jmp-value"
    fault = _OtherPermutation(cheater, kind, after=after)
    ran = _run(scheme, fault, body=_alignment)
    honest = [o for i, o in enumerate(ran) if i != cheater]
    if fault.fired == 0:  # this party sends no such message in the first shuffles
        assert all(isinstance(o, np.ndarray) and _is_the_join(o) for o in honest)
        return
    caught = [o for o in honest if isinstance(o, CheatingDetected)]
    # active3: by the first check after it, before any comparison is opened (its copies of
    # the components then differ from its partner's, so its ANDs or openings fail as well)
    assert caught, f"{scheme} cheater {cheater}: another permutation was not detected"
    assert not any(isinstance(o, np.ndarray) and not _is_the_join(o) for o in honest)


def _staggered_active4(fault: FaultInjector | None) -> list[object]:
    """pi_GINI-FS under active4 as the servers run it (``select_stored``), within a budget
    that scores the 5 columns in 5 staggered blocks of one column."""
    info = registry.get("active4")
    values, labels = _dataset()
    data, lab = info.share(values.view(np.uint64)), info.share(labels)
    budget = held_bytes("active4", M, 2, K) + M * STAGGERED_BYTES_PER_CELL["active4"]

    async def party(engine: RoundEngine) -> np.ndarray:
        s = await info.scheme.setup(engine, fault=fault)
        result = await select_stored(s, ArraySource(data[engine.party]), lab[engine.party], 2,
                                     K, np.zeros(P, np.int64), budget)
        assert result.plan["blocks"] == P and result.plan["blocks_staggered"] == 1, result.plan
        return (await s.open(result.reduced)).view(np.int64)

    return outcomes(4, party)


@pytest.mark.slow
def test_staggered_active4_blocks_are_correct_and_every_cheat_is_caught() -> None:
    """Honest staggered blocks select what the plaintext selects; a changed word in any
    party's message of any kind, at several positions over the staggered rounds (blocks
    overlapping), is caught and nothing wrong is output."""
    expected = _expected()
    honest = _staggered_active4(None)
    assert all(isinstance(o, np.ndarray) and np.array_equal(o, expected) for o in honest)
    counts = _messages_of_each_kind("active4", _staggered_active4)
    for (party, kind), n in sorted(counts.items()):
        if kind == "key-confirm":
            continue
        for position in sorted({0, n // 5, 2 * n // 5, 3 * n // 5, n - 1}):
            fault = FaultInjector(party, kind, after=position, delta=1 << 20)
            ran = _staggered_active4(fault)
            others = [o for i, o in enumerate(ran) if i != party]
            assert fault.fired == 1, (party, kind, position)
            assert any(isinstance(o, CheatingDetected) for o in others), (party, kind, position)
            assert all(np.array_equal(o, expected) for o in others if isinstance(o, np.ndarray))


class _Replay(FaultInjector):
    """Party ``party`` sends, in a joint message after its ``after``-th, the words of its
    previous message of the same size to that peer (with blocks a round apart, often another
    block's: a mix-up of blocks), keeping its own copy as sent."""

    def __init__(self, party: int, after: int) -> None:
        super().__init__(party, "jmp-value", after=after)
        self.last: dict[tuple[int, int], np.ndarray] = {}

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if party != self.party or kind != "jmp-value" or not payload.size:
            return payload
        key = (peer, payload.size)
        before = self.last.get(key)
        self.last[key] = payload.copy()
        self.seen += 1
        if (self.fired == 0 and self.seen > self.after and before is not None
                and not np.array_equal(before, payload)):
            payload[:] = before
            self.fired += 1
        return payload


@pytest.mark.slow
@pytest.mark.parametrize("cheater", range(4))
def test_a_staggered_block_given_another_blocks_joint_message_is_caught(cheater: int) -> None:
    expected = _expected()
    for after in (10, 60, 120):
        fault = _Replay(cheater, after)
        ran = _staggered_active4(fault)
        others = [o for i, o in enumerate(ran) if i != cheater]
        assert fault.fired == 1, after
        assert any(isinstance(o, CheatingDetected) for o in others), after
        assert all(np.array_equal(o, expected) for o in others if isinstance(o, np.ndarray))
