"""Layer: schemes. Test-only fault injection for the active schemes' cheating-server tests.

An active scheme passes every outgoing message through its injector (when one is given) under a
named message kind, and tells it what the party learns that a cheater could adapt to (the
coins of the checks, its own components of their secret coefficients). ``FaultInjector`` adds
an error to the chosen messages; adaptive strategies (tests/test_adaptive.py) subclass it,
change a message in place (so the cheater's own copy agrees with what it sent) and compute
their errors from what they observed. Only tests construct one: a normal configuration never
passes it to a scheme, and nothing in the product reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

U64 = np.uint64

KINDS: dict[str, tuple[str, ...]] = {
    # [F4] joint message passing, openings, the input check and key confirmation
    "active4": ("jmp-value", "jmp-hash", "open-value", "open-hash", "input-hash",
                "key-confirm"),
    # SPDZ-wise 3PC: products (value and MAC), shuffles, the products that are only output
    # (the value tested by Freivalds: its terms, their digest and its relay), circuit ANDs,
    # triple generation (the terms, their digest and its relay), the MAC check's sums and its
    # alpha w product, the coins, openings inside the checks, the values the zero tests claim
    # (before hashing), user openings and the final digests
    "active3": ("product", "shuffle", "output-product", "output-hash", "output-relay", "and",
                "triple", "triple-hash", "triple-relay", "mac-sum", "coin", "mac-product",
                "check-open", "check-open-hash", "and-claim", "mac-claim", "open-value",
                "open-hash", "and-hash", "mac-hash", "input-hash",
                # the AND proofs (dzkp): the commitment to the AND messages, each level's
                # share and its commitment, the verifiers' coins and their closing messages
                "and-commit", "and-proof", "and-proof-hash", "and-coin", "and-close"),
}


@dataclass
class FaultInjector:
    """Makes party ``party`` deviate by adding ``delta`` to a word of its outgoing messages of
    kind ``kind`` (to ``peer``, or to any peer if None): the first, middle or last (``word``
    0, 1, 2; a message may hold several sharings one after the other), skipping the first
    ``after`` such messages and then tampering with the next ``times``."""

    party: int
    kind: str
    peer: int | None = None
    delta: int = 1
    times: int = 1
    after: int = 0
    word: int = 0
    seen: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        known = sorted({k for kinds in KINDS.values() for k in kinds})
        if self.kind not in known:
            raise ValueError(f"unknown fault kind {self.kind!r}; one of {known}")

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if (party != self.party or kind != self.kind or self.fired >= self.times
                or (self.peer is not None and peer != self.peer) or payload.size == 0):
            return payload
        self.seen += 1
        if self.seen <= self.after:
            return payload
        self.fired += 1
        out = np.array(payload, dtype=U64, copy=True).reshape(-1)
        at = (0, out.size // 2, out.size - 1)[self.word]
        out[at] = out[at] + U64(self.delta % (1 << 64))
        return out.reshape(payload.shape)

    def observe(self, party: int, event: str, value: object) -> None:
        """What party ``party`` learns during a check: ``"coin"`` (the seed),
        ``"mac-coefficients"`` ((entry, start, its components)), ``"received"`` ((kind, peer,
        payload) of every message of the checks' rounds and of openings), the salts of its
        commitments (``"triple-salt"``, ``"output-salt"``) and Freivalds' public vector
        (``"freivalds"``, (limb, k, 1)); fixed faults ignore it."""
