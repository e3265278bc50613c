"""Layer: network. Run one coroutine per party in this process over loopback channels.

Used by unit tests and by the in-process selection; the networked servers use TLS channels
instead and run the very same protocol code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mpcnet.net.engine import RoundEngine
from mpcnet.net.loopback import loopback_mesh

T = TypeVar("T")


async def run_local(n_parties: int, party_main: Callable[[RoundEngine], Awaitable[T]],
                    round_timeout: float | None = 60.0) -> list[T]:
    """Run ``party_main(engine)`` for every party concurrently; results in party order."""
    engines = [RoundEngine(ch, round_timeout) for ch in loopback_mesh(n_parties)]
    return list(await asyncio.gather(*(party_main(e) for e in engines)))


def run_local_sync(n_parties: int, party_main: Callable[[RoundEngine], Awaitable[Any]],
                   round_timeout: float | None = 60.0) -> list[Any]:
    """``run_local`` from synchronous code (tests, scripts)."""
    return asyncio.run(run_local(n_parties, party_main, round_timeout))
