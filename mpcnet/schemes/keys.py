"""Layer: schemes. Pairwise PRF keys agreed once per session over the (confidential) channels.

Each party sends every peer a fresh random contribution; the key of a pair is a hash of both
contributions in party order, so neither side alone chooses it.
"""

from __future__ import annotations

import hashlib

import numpy as np

from mpcnet.net.engine import RoundEngine
from mpcnet.prf import KEY_BYTES, PRF, random_key


async def pairwise_prfs(engine: RoundEngine) -> dict[int, PRF]:
    """One PRF per peer, identical at both ends of each pair (one round)."""
    mine = {peer: np.frombuffer(random_key(), dtype=np.uint8) for peer in engine.peers}
    theirs = await engine.exchange(mine, engine.peers)
    prfs = {}
    for peer in engine.peers:
        ours = (mine[peer], theirs[peer])
        low, high = ours if engine.party < peer else ours[::-1]
        key = hashlib.sha256(b"mpcnet-pair" + low.tobytes() + high.tobytes()).digest()[:KEY_BYTES]
        prfs[peer] = PRF(key)
    return prfs
