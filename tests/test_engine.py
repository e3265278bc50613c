"""The round engine: one exchange per round, metrics per phase and peer, bounded waits."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from mpcnet.errors import PeerError
from mpcnet.net.engine import RoundEngine
from mpcnet.net.local import run_local_sync
from mpcnet.net.loopback import loopback_mesh


def test_exchange_counts_rounds_and_bytes_per_phase_and_peer() -> None:
    async def party(engine: RoundEngine):  # type: ignore[no-untyped-def]
        with engine.phase("a"):
            got = await engine.broadcast(np.full(10, engine.party, dtype=np.uint64))
        with engine.phase("b"):
            nxt = (engine.party + 1) % 3
            await engine.exchange({nxt: np.zeros(3, dtype=np.uint8)}, [(engine.party - 1) % 3])
        return got, engine.report()

    outs = run_local_sync(3, party)
    for me, (got, report) in enumerate(outs):
        assert {p: int(v[0]) for p, v in got.items()} == {p: p for p in range(3) if p != me}
        assert report["rounds"] == 2
        assert report["phases"]["a"]["bytes_sent"] == 160
        assert report["phases"]["b"]["bytes_sent"] == 3
        assert report["phases"]["a"]["bytes_sent_per_peer"] == {
            str(p): 80 for p in range(3) if p != me}


def test_time_in_a_nested_phase_counts_once_for_the_inner_phase() -> None:
    async def party(engine: RoundEngine):  # type: ignore[no-untyped-def]
        with engine.phase("outer"):
            await asyncio.sleep(0.05)
            with engine.phase("inner"):
                await asyncio.sleep(0.1)
            with engine.phase("outer"):  # re-entered: not counted twice
                await asyncio.sleep(0.05)
        return engine.report()

    for report in run_local_sync(3, party):
        outer = report["phases"]["outer"]["seconds"]
        inner = report["phases"]["inner"]["seconds"]
        assert 0.1 <= inner < 0.15
        assert 0.1 <= outer < 0.15  # 0.2 if the re-entered phase or the inner one counted twice


def test_silent_peer_times_out_naming_the_phase() -> None:
    async def main() -> None:
        engine = RoundEngine(loopback_mesh(3)[0], round_timeout=0.2)
        with engine.phase("scoring"), pytest.raises(PeerError, match="scoring"):
            await engine.exchange({}, [1])

    asyncio.run(main())
