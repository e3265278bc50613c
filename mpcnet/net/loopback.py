"""Layer: network. In-process channels for tests: one asyncio queue per ordered pair of parties.

Arrays are copied on send so that no party can alias another's memory, as over a real socket.
"""

from __future__ import annotations

import asyncio

import numpy as np

from mpcnet.net.channel import Channel


class LoopbackChannel(Channel):
    """One party's end of an in-process mesh."""

    def __init__(self, party: int, queues: dict[tuple[int, int], asyncio.Queue[np.ndarray]],
                 n_parties: int) -> None:
        self.party = party
        self.n_parties = n_parties
        self._queues = queues

    async def send(self, peer: int, payload: np.ndarray) -> None:
        self._queues[(self.party, peer)].put_nowait(np.array(payload, copy=True))

    async def recv(self, peer: int) -> np.ndarray:
        return await self._queues[(peer, self.party)].get()


def loopback_mesh(n_parties: int) -> list[LoopbackChannel]:
    """Channels for ``n_parties`` parties running in one event loop."""
    queues: dict[tuple[int, int], asyncio.Queue[np.ndarray]] = {
        (a, b): asyncio.Queue() for a in range(n_parties) for b in range(n_parties) if a != b
    }
    return [LoopbackChannel(i, queues, n_parties) for i in range(n_parties)]
