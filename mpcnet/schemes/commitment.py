"""Layer: schemes. active3's commitments and its coin: what fixes a party's messages before any
randomness that tests them exists.

- Commitment. A party sends its terms (of the AND check's triples, of D' = D x T) to the
  previous party and, in the same round, a digest of them to the next, which relays it in the
  coin's round to the terms' receiver; that receiver compares (``check_commitment``). An
  honest party sends its coin word only once it holds both neighbours' first-round messages,
  so a cheater's terms are fixed before any coin word it lacks leaves an honest party: without
  this, a cheater that held back its terms until it had read one could make them cancel its
  errors under the coin (found by review, docs/cheating.md). The digest is salted by the key
  the terms' sender shares with their receiver: the relayer lacks that key, and once the
  check's openings are public the terms are a function of secret inputs, so an unsalted
  digest would let it test guesses of them (found by review).
- Coin. The XOR of one PRF output under each pairwise key; each party learns the output of
  the key it lacks from both its holders, who must agree (``CheatingDetected("coin")``). The
  key the two honest parties share makes it unpredictable to the third until it is sent.
"""

from __future__ import annotations

import numpy as np

from mpcnet.errors import CheatingDetected
from mpcnet.schemes.replicated import RunningHash, digest_words


def commitment(salt: bytes, terms: np.ndarray) -> np.ndarray:
    """The digest binding ``terms`` under ``salt`` (the key of their sender and receiver)."""
    h = RunningHash(salt)
    h.update(np.ascontiguousarray(terms))
    return digest_words(h)


def check_commitment(terms: np.ndarray, relayed: np.ndarray, salt: bytes, check: str,
                     what: str, parties: tuple[int, int, int]) -> None:
    """The terms the next party sent must be those whose digest the previous party relayed;
    ``parties`` = (this party, the next, the previous), for the message of the abort."""
    me, sender, relayer = parties
    if not np.array_equal(relayed, commitment(salt, terms)):
        raise CheatingDetected(check, f"party {me}: the {what} of party {sender} do not "
                                      f"match their digest relayed by party {relayer}")


def coin_seed(mine: tuple[np.ndarray, np.ndarray], third: tuple[np.ndarray, np.ndarray],
              party: int) -> bytes:
    """The coin: this party's outputs under its two keys and, from both holders of the key it
    lacks, that key's output, which must agree."""
    if not np.array_equal(*third):
        raise CheatingDetected("coin", f"party {party}: the two holders of a key sent "
                                       "different coin contributions")
    return (mine[0] ^ mine[1] ^ third[0]).tobytes()
