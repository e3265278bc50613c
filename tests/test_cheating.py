"""Active 4PC under a deliberately cheating party: pi_GINI-FS never outputs a wrong D'.

For each of the four parties as the cheater, each message kind the scheme sends and several
positions in the run (first, middle and last message of that kind), the cheater adds an error
to one message. Every run must end with the honest parties raising ``CheatingDetected`` naming
a check, and no honest party may return a D' that differs from the plaintext one.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from mpcnet.errors import CheatingDetected
from mpcnet.featsel.gini_fs import gini_fs
from mpcnet.net.engine import RoundEngine
from mpcnet.net.loopback import loopback_mesh
from mpcnet.schemes import rep4
from mpcnet.schemes.faults import FaultInjector

M, P, K = 24, 5, 2


def _dataset() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 2, M)
    values = rng.integers(-100, 100, (M, P)) + codes[:, None] * np.arange(P) * 20
    return values, (codes == 0).astype(np.uint64).reshape(M, 1)


async def _run(fault: FaultInjector | None, bad_input: int | None = None) -> list[object]:
    """Each party's outcome: its opened D', or the exception it raised. ``bad_input`` names a
    party that uses a wrong share of one input value instead of what the client sent."""
    values, labels = _dataset()
    data, lab = rep4.share(values.view(np.uint64)), rep4.share(labels)
    if bad_input is not None:
        data[bad_input] = data[bad_input].copy()
        data[bad_input][0, 3, 1] += np.uint64(1)

    async def party(engine: RoundEngine) -> np.ndarray:
        s = await rep4.Rep4.setup(engine, fault=fault)
        mine_data, mine_labels = await s.input(data[engine.party], lab[engine.party])
        result = await gini_fs(s, mine_data, mine_labels, 2, K, np.zeros(P, np.int64))
        return await s.open(result.reduced)

    engines = [RoundEngine(ch, round_timeout=5) for ch in loopback_mesh(4)]
    tasks = [asyncio.create_task(party(e)) for e in engines]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for task in tasks:  # an abort ends the job for everyone (the servers relay it)
        task.cancel()
    outcomes: list[object] = []
    for task in tasks:
        try:
            outcomes.append(await task)
        except asyncio.CancelledError:
            outcomes.append(None)
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcomes.append(exc)
    return outcomes


def _messages_of_each_kind() -> dict[tuple[int, str], int]:
    """How many messages of each kind each party sends in an honest run."""
    counts: dict[tuple[int, str], int] = {}

    class Counter(FaultInjector):
        def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
            counts[(party, kind)] = counts.get((party, kind), 0) + 1
            return payload

    outcomes = asyncio.run(_run(Counter(0, "jmp-value", times=0)))
    assert all(isinstance(o, np.ndarray) for o in outcomes)
    return counts


def test_honest_run_is_correct() -> None:
    outcomes = asyncio.run(_run(None))
    values, labels = _dataset()
    from mpcnet.plain.scores import msgini_fraction
    from mpcnet.plain.select import topk_fraction
    q, d = msgini_fraction(values, (labels[:, 0] == 0).astype(int), 2)
    for out in outcomes:
        np.testing.assert_array_equal(np.asarray(out).view(np.int64),
                                      values[:, topk_fraction(q, d, K)])


@pytest.mark.parametrize("cheater", range(4))
def test_every_message_kind_and_position_is_detected(cheater: int) -> None:
    counts = _messages_of_each_kind()
    values, labels = _dataset()
    from mpcnet.plain.scores import msgini_fraction
    from mpcnet.plain.select import topk_fraction
    q, d = msgini_fraction(values, (labels[:, 0] == 0).astype(int), 2)
    expected = values[:, topk_fraction(q, d, K)]
    cases = detected = 0
    checks: set[str] = set()
    for (party, kind), n in sorted(counts.items()):
        if party != cheater or kind == "key-confirm":
            continue
        for position in sorted({0, n // 2, n - 1}):
            fault = FaultInjector(cheater, kind, after=position, delta=1 << 20)
            outcomes = asyncio.run(_run(fault))
            cases += 1
            honest = [o for i, o in enumerate(outcomes) if i != cheater]
            caught = [o for o in honest if isinstance(o, CheatingDetected)]
            outputs = [o for o in honest if isinstance(o, np.ndarray)]
            assert fault.fired == 1, (kind, position)
            assert caught, f"cheater {cheater}, {kind} message {position}: not detected"
            # a party that finished before the abort reached it may hold D', never a wrong one
            for out in outputs:
                np.testing.assert_array_equal(out.view(np.int64), expected)
            detected += 1
            checks |= {o.check for o in caught}
    print(f"cheater {cheater}: {detected}/{cases} cases detected, checks: {sorted(checks)}")
    assert cases >= 6 and detected == cases


@pytest.mark.parametrize("cheater", range(4))
def test_wrong_input_share_is_detected(cheater: int) -> None:
    outcomes = asyncio.run(_run(None, bad_input=cheater))
    honest = [o for i, o in enumerate(outcomes) if i != cheater]
    # caught by the first check the wrong share reaches (a product's joint-message hash, or
    # the input consistency check at the first verify)
    assert any(isinstance(o, CheatingDetected) for o in honest)
    assert not any(isinstance(o, np.ndarray) for o in honest)
