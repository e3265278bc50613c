"""The active schemes under a deliberately cheating party: nothing wrong is ever output.

For each active setting (active3: SPDZ-wise 3PC; active4: Fantastic Four), each party as the
cheater, each message kind the scheme sends and several positions in the run (first, middle
and last message of that kind), the cheater adds an error to one message. Every run must end
with the honest parties raising ``CheatingDetected`` naming a check, and no honest party may
return a D' that differs from the plaintext one. The same holds for a wrong input share, and
(active3) for truncation and random-bit generation, whose products and ANDs are checked by the
same batched checks before the opening that follows them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
from conftest import outcomes

from mpcnet.errors import CheatingDetected
from mpcnet.featsel.gini_fs import gini_fs
from mpcnet.net.engine import RoundEngine
from mpcnet.ops.truncate import trunc
from mpcnet.plain.scores import msgini_fraction
from mpcnet.plain.select import topk_fraction
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
                             correct: Callable[[np.ndarray], bool], value_only: bool = False
                             ) -> tuple[int, set[str]]:
    """Run one cheating case per message kind and position; return (cases, checks named)."""
    counts = _messages_of_each_kind(scheme, body, value_only)
    cases = 0
    checks: set[str] = set()
    for (party, kind), n in sorted(counts.items()):
        if party != cheater or kind == "key-confirm":
            continue
        for position in sorted({0, n // 2, n - 1}):
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
