"""Layer: schemes. active3's AND check: the plan of its triple pools and the matching of every
queued AND with a triple [FLNW17; ABF+17].

[FLNW17] Furukawa, Lindell, Nof, Weinstein, Eurocrypt 2017 and [ABF+17] Araki et al., IEEE
S&P 2017: binary triples by cut-and-choose, and the verification of an AND with a triple.

The circuits' ANDs are bit-sliced rep3 ANDs (one word per party per 64 ANDs), queued with
their inputs. ``Spdz3.verify`` makes r pools of P random triples (a, b, c = a AND b; one
passive round for all; P > n prime), tosses a coin, and in each pool matches AND word j with
triple (j + s) mod P for a random shift s, opens the P - n others (cut-and-choose), and checks
each match with its triple. Items are whole words: an error is a 64-bit pattern and a match
passes only if the AND and its triple carry the same one. A cheater passes a pool with
probability at most 1/P (``check_plan`` has the argument), all r pools with P^-r <= 2^-SIGMA.
An AND's error is what the cheater XORs into its message, whatever the inputs are, so the
outcome depends on its errors and the coin only. A rotation moves memory in order, where a
general permutation would gather at random.

The openings (cut triples, x ^ a, y ^ b) are checked openings, each component vouched for by
its other holder in the same round before anything uses it: a zero test's claim computed from
a word the cheater changed would otherwise tell it, through the claim's digest, bits of a
triple it lacks (and so of the AND's secret inputs), by brute force over the few candidates
its change allows.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import numpy as np

from mpcnet.errors import CheatingDetected

U64 = np.uint64
SIGMA = 40  # statistical security (bits) of the AND check
And = tuple[np.ndarray, np.ndarray, np.ndarray]  # a queued AND: x, y, z words (slot, n)
Triples = tuple[np.ndarray, np.ndarray, np.ndarray]  # a, b, c words (slot, pool, P)
_Pieces = list[tuple[slice, slice]]  # (AND words, triples) matched contiguously


def _is_prime(n: int) -> bool:
    if n < 2 or n % 2 == 0:
        return n == 2
    return all(n % d for d in range(3, math.isqrt(n) + 1, 2))


def _next_prime(n: int) -> int:
    while not _is_prime(n):
        n += 1
    return n


def check_plan(n_words: int) -> tuple[int, int]:
    """(pools r, pool size P) for checking ``n_words`` AND words with error at most 2^-SIGMA.

    Each pool holds a prime number P > n of triples. After the coin, AND word j is matched with
    triple (j + s) mod P for a random shift s, and the P - n triples left over are opened
    (cut-and-choose). Extend the ANDs' error words to length P with zeros (positions n..P-1):
    a cheater passes the pool only if the triples' error words are exactly that vector rotated
    by s. Two shifts s != s' that both work would make the vector invariant under rotation by
    s - s', hence (P prime) constant, hence zero: a cheater who changed any AND passes with
    probability at most 1/P. The r pools use independent shifts: P^-r. Among the plans that
    reach 2^-SIGMA, the one sending the fewest words (r pools of P triples, 2 n opened words per
    pool, 3 (P - n) for the cut)."""
    plans = []
    for pools in range(2, SIGMA + 1):
        size = _next_prime(max(n_words + 1, math.ceil(2 ** (SIGMA / pools))))
        plans.append((pools * (size + 2 * n_words + 3 * (size - n_words)), pools, size))
    _, pools, size = min(plans)
    return pools, size


def and_words(ands: list[And]) -> int:
    """How many AND words ``ands`` hold (the n of ``check_plan``)."""
    return sum(x.shape[1] for x, _, _ in ands)


def rotation(start: int, count: int, size: int, shift: int) -> _Pieces:
    """The matching j <-> (j + shift) mod size for the AND words start..start+count-1 as
    contiguous pieces (positions among these words, triples): one, or two where it wraps."""
    first_triple = (start + shift) % size
    first = min(count, size - first_triple)
    pieces = [(slice(0, first), slice(first_triple, first_triple + first))]
    if first < count:
        pieces.append((slice(first, count), slice(0, count - first)))
    return pieces


def and_openings(ands: list[And], triples: Triples, seed: bytes, party: int
                 ) -> tuple[np.ndarray, Callable[[np.ndarray, Callable[[np.ndarray], None]],
                                                 None]]:
    """The words to open as (slot, L) for the coin ``seed``, and ``finish(opened, note)``,
    which checks the opened cut triples and passes ``note`` each pool's shared t (slot, n),
    zero exactly when every match is right (``note`` must consume t before the next pool).

    Matching a queued AND (x, y, z) with a triple (a, b, c) opens rho = x ^ a and
    sigma = y ^ b; then z ^ c ^ (a & sigma) ^ (rho & b) ^ (rho & sigma) is zero exactly when
    the errors of z and c are equal [FLNW17, verification with a triple]."""
    n, (pools, size) = and_words(ands), triples[0].shape[1:]
    starts = np.cumsum([0] + [x.shape[1] for x, _, _ in ands[:-1]])
    cut = size - n
    # to open: per pool its cut (a, b, c: 3 C words), then rho and sigma (2 n words)
    width = 3 * cut + 2 * n
    to_open = np.empty((2, pools * width), dtype=U64)
    pools_of: list[tuple[np.ndarray, np.ndarray, np.ndarray, list[_Pieces]]] = []
    for pool in range(pools):
        digest = hashlib.sha256(b"match" + bytes([pool]) + seed).digest()
        shift = int.from_bytes(digest, "little") % size  # AND j <-> triple (j + shift) % P
        a, b, c = (w[:, pool] for w in triples)  # (slot, P) each
        row = to_open[:, pool * width:(pool + 1) * width]
        for words, at in rotation(n, cut, size, shift):  # the triples left unmatched
            for i, w in enumerate((a, b, c)):
                row[:, i * cut + words.start:i * cut + words.stop] = w[:, at]
        rho, sigma = row[:, 3 * cut:3 * cut + n], row[:, 3 * cut + n:]
        matches = []  # per queued AND: its words' pieces matched with contiguous triples
        for (x, y, _), start in zip(ands, starts, strict=True):
            pieces = rotation(int(start), x.shape[1], size, shift)
            for words, at in pieces:
                out = slice(start + words.start, start + words.stop)
                np.bitwise_xor(x[:, words], a[:, at], out=rho[:, out])
                np.bitwise_xor(y[:, words], b[:, at], out=sigma[:, out])
            matches.append(pieces)
        pools_of.append((a, b, c, matches))

    def finish(opened: np.ndarray, note: Callable[[np.ndarray], None]) -> None:
        t = np.empty((2, n), dtype=U64)
        public = np.empty(n, dtype=U64)
        for pool, (a, b, c, matches) in enumerate(pools_of):
            row = opened[pool * width:(pool + 1) * width]
            ca, cb, cc = (row[i * cut:(i + 1) * cut] for i in range(3))
            if not np.array_equal(cc, ca & cb):
                raise CheatingDetected("AND", f"party {party}: an opened triple of the "
                                              "cut-and-choose is wrong")
            rho, sigma = row[3 * cut:3 * cut + n], row[3 * cut + n:]
            for (_, _, z), start, pieces in zip(ands, starts, matches, strict=True):
                for words, at in pieces:
                    out = slice(start + words.start, start + words.stop)
                    np.bitwise_xor(z[:, words], c[:, at], out=t[:, out])
                    t[:, out] ^= a[:, at] & sigma[out]
                    t[:, out] ^= b[:, at] & rho[out]
            slot = {0: 0, 2: 1}.get(party)  # who holds component 0 (as xor_public)
            if slot is not None:
                t[slot] ^= np.bitwise_and(rho, sigma, out=public)
            note(t)

    return to_open, finish
