"""Layer: schemes. active3's ledger of claims compared by digest: the zero tests of the AND
and MAC checks (Freivalds' test of D' joins the MAC check's) and the input consistency check.

Zero test of a replicated t (party i holds t_i, t_{i+1}): each party claims the sum of its two
components to the next party, which holds the third, so the two honest parties compare their
own copies and a cheater's claim cannot make a non-zero t pass; the claims reveal only t,
which is zero or independent of the data (docs/active3.md). Only a digest of the claims
travels, in the last round of ``Spdz3.verify``. Input consistency: each holder of an input
component sends a digest of it to the component's other holder, in a round of its own.

A check is pending from its first claim until its digests are taken, so ``Spdz3.verify``
can list every pending check and skip none (a Freivalds claim queued with no MAC record left
to check would otherwise wait for a check that never comes).
"""

from __future__ import annotations

import numpy as np

from mpcnet import ring128
from mpcnet.schemes.replicated import RunningHash, digest_words


def zero_claim(t: np.ndarray, binary: bool) -> tuple[np.ndarray, np.ndarray]:
    """(my claim to the next party, the component it lacks that I also hold, as it will claim
    it): t_i + t_{i+1} and -t_{i+1} for Z_2^128 t (limb, slot, ...), XORs for words (slot, ...)."""
    if binary:
        return t[0] ^ t[1], t[1]
    return ring128.add(t[:, 0], t[:, 1]), ring128.neg(t[:, 1])


class Claims:
    """Per check: the running digest of what this party claims to the next party and of what
    it expects the previous party to claim, and which checks have claims not yet compared."""

    def __init__(self, checks: tuple[str, ...]) -> None:
        self._claim: dict[str, RunningHash] = {}
        self._expect: dict[str, RunningHash] = {}
        self.pending: set[str] = set()
        self._reset(checks)

    def _reset(self, checks: tuple[str, ...]) -> None:
        for c in checks:
            self._claim[c] = RunningHash(c.encode())
            self._expect[c] = RunningHash(c.encode())
            self.pending.discard(c)

    def note(self, check: str, claim: np.ndarray, expected: np.ndarray) -> None:
        """Add a claim this party makes and the one it expects from the previous party."""
        self._claim[check].update(np.ascontiguousarray(claim).data)
        self._expect[check].update(np.ascontiguousarray(expected).data)
        self.pending.add(check)

    def take(self, checks: tuple[str, ...]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The digests of this party's claims of ``checks`` (to send) and of what it expects,
        by check; the checks start afresh."""
        claims = {c: digest_words(self._claim[c]) for c in checks}
        expected = {c: digest_words(self._expect[c]) for c in checks}
        self._reset(checks)
        return claims, expected
