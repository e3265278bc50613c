"""The active schemes under a deliberately cheating party: nothing wrong is ever output.

For each active setting (active3: SPDZ-wise 3PC; active4: Fantastic Four), each party as the
cheater, each message kind the scheme sends and several positions in the run (first, middle
and last message of that kind), the cheater adds an error to one message. Every run must end
with the honest parties raising ``CheatingDetected`` naming a check, and no honest party may
return a D' that differs from the plaintext one. The same holds for a wrong input share, and
(active3) for truncation and random-bit generation, whose products and ANDs are checked by the
same batched checks before the opening that follows them, and for the alignment of record IDs
(``mpcnet.ops.join``: its shuffles, the opened comparisons of its sort, its flags).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
from conftest import outcomes

from mpcnet.errors import CheatingDetected
from mpcnet.featsel.gini_fs import gini_fs
from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET
from mpcnet.net.engine import RoundEngine
from mpcnet.ops.join import inner_join
from mpcnet.ops.truncate import trunc
from mpcnet.plain.scores import msgini_fraction
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


def _messages_of_each_kind(scheme: str, body: Callable[..., Any], value_only: bool = False
                           ) -> dict[tuple[int, str], int]:
    """How many messages of each kind each party sends in an honest run."""
    counts: dict[tuple[int, str], int] = {}

    class Counter(FaultInjector):
        def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
            if payload.size:
                counts[(party, kind)] = counts.get((party, kind), 0) + 1
            return payload

    ran = _run(scheme, Counter(0, KINDS[scheme][0], times=0), body=body, value_only=value_only)
    assert all(isinstance(o, np.ndarray) for o in ran)
    return counts


def _every_kind_and_position(scheme: str, cheater: int, body: Callable[..., Any],
                             correct: Callable[[np.ndarray], bool], value_only: bool = False,
                             last: bool = True) -> tuple[int, set[str]]:
    """Run one cheating case per message kind and position; return (cases, checks named).
    Without ``last``, the positions are the first and the third of the honest run's count (a
    body whose rounds vary from run to run, as a quicksort after a shuffle does)."""
    counts = _messages_of_each_kind(scheme, body, value_only)
    cases = 0
    checks: set[str] = set()
    for (party, kind), n in sorted(counts.items()):
        if party != cheater or kind == "key-confirm":
            continue
        for position in sorted({0, n // 2, n - 1} if last else {0, n // 3}):
            fault = FaultInjector(cheater, kind, after=position, delta=1 << 20)
            ran = _run(scheme, fault, body=body, value_only=value_only)
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
