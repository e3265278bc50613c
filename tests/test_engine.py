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


def _ring_job(engine: RoundEngine, tag: int, rounds: int):  # type: ignore[no-untyped-def]
    """``rounds`` rounds of sending (tag, round, me) to the next party and receiving from the
    previous one; returns what came in."""
    async def job() -> list[tuple[int, ...]]:
        nxt, prev = (engine.party + 1) % 3, (engine.party - 1) % 3
        seen = []
        for r in range(rounds):
            got = await engine.exchange({nxt: np.array([tag, r, engine.party], np.uint64)},
                                        [prev])
            seen.append(tuple(int(v) for v in got[prev]))
        return seen
    return job()


def test_together_sends_every_members_round_in_one_message_per_peer() -> None:
    async def party(engine: RoundEngine):  # type: ignore[no-untyped-def]
        results = await engine.together(*(_ring_job(engine, tag, n)
                                          for tag, n in ((7, 2), (8, 5), (9, 3))))
        return results, engine.report()

    for me, (results, report) in enumerate(run_local_sync(3, party)):
        prev = (me - 1) % 3
        assert results == [[(tag, r, prev) for r in range(n)]
                           for tag, n in ((7, 2), (8, 5), (9, 3))]
        assert report["rounds"] == 5  # the longest member's, not 2 + 5 + 3


def test_together_members_may_talk_to_different_peers_in_one_round() -> None:
    async def party(engine: RoundEngine):  # type: ignore[no-untyped-def]
        async def to_all() -> dict[int, int]:
            got = await engine.broadcast(np.full(4, 10 + engine.party, np.uint64))
            return {p: int(v[0]) for p, v in got.items()}

        async def dealer() -> dict[int, int]:  # party 0 sends to the others, nobody answers
            if engine.party == 0:
                await engine.exchange({1: np.array([1], np.uint8), 2: np.array([2], np.uint8)},
                                      [])
                return {}
            got = await engine.exchange({}, [0])
            return {0: int(got[0][0])}

        return await engine.together(to_all(), dealer()), engine.report()

    for me, ((everyone, dealt), report) in enumerate(run_local_sync(3, party)):
        assert everyone == {p: 10 + p for p in range(3) if p != me}
        assert dealt == ({} if me == 0 else {0: me})
        assert report["rounds"] == 1


def test_together_nests_and_a_lone_member_is_not_bundled() -> None:
    async def party(engine: RoundEngine):  # type: ignore[no-untyped-def]
        async def inner() -> list[list[tuple[int, ...]]]:
            return await engine.together(_ring_job(engine, 1, 3), _ring_job(engine, 2, 1))

        results = await engine.together(inner(), _ring_job(engine, 3, 2))
        lone = engine.bytes_sent
        await engine.together(_ring_job(engine, 4, 1))
        return results, engine.report(), engine.bytes_sent - lone

    for me, (results, report, lone_bytes) in enumerate(run_local_sync(3, party)):
        prev = (me - 1) % 3
        assert results == [[[(1, r, prev) for r in range(3)], [(2, 0, prev)]],
                           [(3, r, prev) for r in range(2)]]
        assert report["rounds"] == 4
        assert lone_bytes == 24  # the array itself, no bundle index


def test_staggered_members_start_a_round_apart_and_cost_n_minus_one_plus_their_rounds() -> None:
    """Member i starts i rounds after member 0: 4 members of 3 rounds cost 3 + 3 rounds, not
    12 (one after another) nor 3 (all at once), and in every round at most 3 are in flight."""
    async def party(engine: RoundEngine):  # type: ignore[no-untyped-def]
        live: list[int] = []
        started: list[int] = []

        async def member(tag: int) -> list[tuple[int, ...]]:
            started.append(engine.rounds)
            live.append(tag)
            try:
                return await _ring_job(engine, tag, 3)
            finally:
                live.remove(tag)

        async def watch() -> int:  # the most members in flight at a round
            most = 0
            for _ in range(6):
                most = max(most, len(live))
                await engine.idle()
            return most

        results, most = await engine.together(
            engine.staggered(*(member(t) for t in range(4))), watch())
        return results, started, most, engine.report()

    for me, (results, started, most, report) in enumerate(run_local_sync(3, party)):
        prev = (me - 1) % 3
        assert results == [[(t, r, prev) for r in range(3)] for t in range(4)]
        assert started == [0, 1, 2, 3] and most == 3
        assert report["rounds"] == 6


def test_idle_outside_a_group_and_a_round_of_idle_members_cost_nothing() -> None:
    async def party(engine: RoundEngine):  # type: ignore[no-untyped-def]
        await engine.idle()

        async def idle_twice() -> None:
            await engine.idle()
            await engine.idle()

        await engine.together(idle_twice())
        await engine.together(idle_twice(), idle_twice())
        return engine.rounds

    assert run_local_sync(3, party) == [0, 0, 0]


def test_together_a_failing_member_stops_the_others() -> None:
    async def party(engine: RoundEngine):  # type: ignore[no-untyped-def]
        async def fails() -> None:
            await engine.broadcast(np.zeros(1, np.uint64))
            raise ValueError(f"party {engine.party} gives up")

        with pytest.raises(ValueError, match="gives up"):
            await engine.together(_ring_job(engine, 1, 50), fails())
        return engine.rounds

    assert run_local_sync(3, party) == [1, 1, 1]  # not 50: the other member stopped too


def test_together_refuses_a_peer_whose_members_differ() -> None:
    async def party(engine: RoundEngine):  # type: ignore[no-untyped-def]
        jobs = [_ring_job(engine, 1, 1), _ring_job(engine, 2, 1)]
        if engine.party == 1:  # runs its second computation first
            jobs.reverse()
            jobs.append(_ring_job(engine, 3, 1))
        try:
            await engine.together(*jobs)
        except PeerError as exc:
            return str(exc)
        return None

    messages = run_local_sync(3, party, round_timeout=2.0)
    assert "party 1 sent arrays of computations [0, 1, 2]" in str(messages[2])


def test_a_check_inside_together_is_refused() -> None:
    async def party(engine: RoundEngine):  # type: ignore[no-untyped-def]
        async def checks() -> None:
            engine.alone("verify")

        engine.alone("verify")  # outside a group: fine
        with pytest.raises(RuntimeError, match="verify inside RoundEngine.together"):
            await engine.together(checks(), _ring_job(engine, 1, 1))

    run_local_sync(3, party)
