"""The job runner's own round: the servers agree on one memory budget before laying out a job."""

from __future__ import annotations

import numpy as np
from conftest import outcomes

from mpcnet.errors import PeerError
from mpcnet.parties.runner import agreed_budget


def test_every_server_takes_the_smallest_budget() -> None:
    """Servers whose deployment files set different budgets would cut the job into different
    blocks and stop mid-way; after this round they all use the smallest."""
    budgets = [3 << 30, 1 << 30, 2 << 30]

    async def party(engine):  # type: ignore[no-untyped-def]
        return await agreed_budget(engine, budgets[engine.party])

    assert outcomes(3, party) == [1 << 30] * 3


def test_a_server_telling_each_a_different_budget_is_caught() -> None:
    from mpcnet.errors import CheatingDetected

    async def party(engine):  # type: ignore[no-untyped-def]
        if engine.party == 2:  # tells party 0 a small budget and party 1 a large one
            await engine.exchange({0: np.array([1 << 20], np.uint64),
                                   1: np.array([1 << 40], np.uint64)}, [0, 1])
            await engine.broadcast(np.array([1 << 20], np.uint64))
            return None
        return await agreed_budget(engine, 1 << 30)

    got = outcomes(3, party)
    assert any(isinstance(o, CheatingDetected) and o.check == "memory budget" for o in got), got


def test_a_malformed_budget_is_named() -> None:
    async def party(engine):  # type: ignore[no-untyped-def]
        if engine.party == 1:
            await engine.broadcast(np.zeros(3, dtype=np.uint64))
            return None
        return await agreed_budget(engine, 1 << 30)

    got = outcomes(3, party)
    assert any(isinstance(o, PeerError) and "party 1 sent a malformed memory budget" in str(o)
               for o in got), got
