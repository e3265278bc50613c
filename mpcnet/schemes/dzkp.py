"""Layer: schemes. active3's AND check by a distributed zero-knowledge proof: each party proves to
the other two that every AND message it sent was computed correctly [BBCGI19; BGIN19].

[BBCGI19] Boneh, Boyle, Corrigan-Gibbs, Gilboa, Ishai, "Zero-knowledge proofs on secret-shared
data via fully linear PCPs", CRYPTO 2019 (the recursive proof of a sum of degree-2 terms).
[BGIN19] Boyle, Gilboa, Ishai, Nof, "Practical fully secure three-party computation via
sublinear distributed zero-knowledge proofs", CCS 2019 (its use for replicated 3PC: each party
proves its messages to the two that together hold its inputs).

The statement. Party i sent z_i = x_i (y_i ^ y_{i+1}) ^ x_{i+1} y_i ^ F_{i,i+1} ^ F_{i-1,i} to
party i-1 for each AND bit (``Rep3._and_terms``; F_{j,j+1} the zero-sharing word of the key of
parties j and j+1). Its verifiers are A = party i-1, holding x_i, y_i, z_i and F_{i-1,i}, and
B = party i+1, holding x_{i+1}, y_{i+1} and F_{i,i+1}. With p = (x_i, y_i) (A's), q = (y_{i+1},
x_{i+1}) (B's), e_A = x_i y_i ^ z_i ^ F_{i-1,i} and e_B = F_{i,i+1}, every bit j must satisfy
p0_j q0_j + p1_j q1_j = e_A_j + e_B_j, a degree-2 constraint whose two factors are each held
in the clear by one verifier: the prover knows all of it, and no verifier learns the other's.

The proof, over GF(2^64) (``mpcnet.gf64``), bits lifted as 0 and 1:
1. Weights. From the coin, drawn after the AND messages are fixed, one random vector delta_s
   per level s; bit j's weight theta_j is the product of delta_s at j's digits (a tensor).
   The claim is C: sum_j theta_j (p0 q0 + p1 q1)_j = c, c = sum_j theta_j e_j, which A and B
   hold additively (each weighs its own e). If any constraint fails, C fails except with
   probability (number of levels) / 2^64 (Schwartz-Zippel: a non-zero multilinear polynomial
   in the deltas).
2. Levels. A claim sum_{l<L, m} delta_l theta'_m sum_t u_t[l, m] v_t[l, m] = c over vectors
   of L n' entries (u held by A, v by B) is compressed: with U_{t,m}, V_{t,m} the polynomials
   of degree L-1 through u_t[l, m], v_t[l, m] at the points 0..L-1, the prover sends
   Q(X) = sum_m theta'_m sum_t U_{t,m}(X) V_{t,m}(X) (degree 2L-2, as its values at 0..2L-2),
   secret-shared between A and B; they keep their shares of d = sum_l delta_l Q(l) - c, draw
   a coin r, and continue with u_t[m] = U_{t,m}(r), v_t[m] = V_{t,m}(r) and c = Q(r): each
   a linear function of what each verifier holds, so each computes its part alone. If the
   claim was false, the new one holds only if Q(r) = Q*(r) for the true Q* != Q: probability
   at most (2L-2) / 2^64. The first level folds 16 groups of words into one field element
   per bit, the prover's sums there by words (``gf64.cross``); the next two fold the 64 bits
   of each word by 8 each, the rest the columns, by up to ``COLUMN_RADIX`` (a few levels, on
   vectors 1/16 as long as the words). Cost: the bits' first level is never held (4 field
   elements a word): the prover's cross sums for it are made from the bits a column at a
   time (``gf64.bits_cross``), and every party folds it at both of its coins at once, again
   from the bits (``gf64.fold_two``), so the longest field vector is 1/2 of a word a word.
3. Masking (zero knowledge). At length 1 the claim is u_0 v_0 + u_1 v_1 = c. The prover
   draws rho (known to A) and sigma (known to B) and sends, shared, P = U V for U of degree 2
   through (0: rho, 1: u_0, 2: u_1) and V through (sigma, v_0, v_1); d = P(1) + P(2) - c.
   After a coin r outside {0, 1, 2}, A sends U(r) to B and B sends V(r) to A, both uniform
   (rho, sigma unknown to the receiver, their Lagrange coefficients non-zero), and the
   verifiers exchange their shares of P(r) and of every level's d: they accept if every d is
   zero and U(r) V(r) = P(r) (probability of a false claim passing at most 4 / (2^64 - 3)).

Soundness: a cheating prover passes with at most (2 S + sum over levels of 2L - 2 + 4) / 2^64
for S levels, about 2^-55.7 for a million AND words (308 / 2^64 for its plan): its Q shares for
A are its choice, B's come from the key they share. Zero knowledge: an honest prover's shares
are masked by keys the receiving verifier lacks (B's share is a PRF word of prover and B; A's
is Q minus it), and what is opened is U(r), V(r) (uniform), P(r) = U(r) V(r) and the d, zero.
What a cheating prover's verifiers open is a function of its own view (it holds every value
they hold) and the coins, so whether the job aborts depends on its errors and the coins only.

Coins. The weights come from the scheme's coin (``commitment.coin_seed``), sent by an honest
party only once it holds its neighbours' first check messages; the prover's first message to
B is a commitment to the AND messages it sent A, so they are fixed before B releases its coin
word. Each level's r is a word of the key A and B share, which the prover lacks; both send it,
and only once they hold that level's message (A its share, B the prover's salted commitment to
it, forwarded to A at the end): the prover refuses coins that differ, so a cheating verifier
cannot make an honest prover open Q at a point the other verifier does not use.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mpcnet import gf64
from mpcnet.errors import CheatingDetected
from mpcnet.prf import PRF
from mpcnet.schemes.commitment import commitment
from mpcnet.schemes.replicated import DIGEST_WORDS

U64 = np.uint64
FIRST_GROUPS = 16  # groups of words the first level folds into one field element per bit
COLUMN_RADIX = 64  # the most a column level folds
BIT_RADICES = (8, 8)  # the first two field levels fold the 64 bits of a word
FINAL_POINTS = 3  # the masking level's polynomials: (random, u_0, u_1)
Factors = tuple[np.ndarray, np.ndarray]  # (p0, p1) or (q0, q1): flat uint64 words


def _column_radices(columns: int) -> tuple[int, ...]:
    """Radices of at most COLUMN_RADIX whose product is the least such at or above
    ``columns``, as few as can be (the column levels are small: a larger radix costs little
    and saves two rounds a level)."""
    levels = max(1, math.ceil(math.log(columns) / math.log(COLUMN_RADIX) - 1e-9))
    out, left = [], columns
    for i in range(levels, 0, -1):
        radix = min(COLUMN_RADIX, max(2, math.ceil(left ** (1 / i) - 1e-9)))
        out.append(radix)
        left = -(-left // radix)
    return tuple(out)


@dataclass(frozen=True)
class Plan:
    """The levels of a proof of ``words`` AND words: the first folds ``FIRST_GROUPS`` groups
    of ``columns`` words (zero-padded), the field levels fold by ``radices`` (the bits'
    digits, then the columns'), then the masking level."""

    words: int
    columns: int
    radices: tuple[int, ...]

    @property
    def weight_sizes(self) -> tuple[int, ...]:
        return (FIRST_GROUPS, *self.radices)


def proof_plan(words: int) -> Plan:
    radices = _column_radices(max(1, -(-words // FIRST_GROUPS)))
    return Plan(words, math.prod(radices), BIT_RADICES + radices)


def level_weights(plan: Plan, seed: bytes) -> list[list[int]]:
    """The deltas of every level (not the masking one) from the coin ``seed``."""
    sizes = plan.weight_sizes
    stream = hashlib.shake_256(b"dzkp weights" + seed).digest(8 * sum(sizes))
    flat = np.frombuffer(stream, dtype=U64).tolist()
    out, start = [], 0
    for size in sizes:
        out.append(flat[start:start + size])
        start += size
    return out


def grouped(pieces: Sequence[np.ndarray], plan: Plan) -> np.ndarray:
    """The words of ``pieces`` in order, zero-padded to (FIRST_GROUPS, columns): the first
    level's layout (zero words satisfy every constraint)."""
    out = np.zeros(FIRST_GROUPS * plan.columns, dtype=U64)
    at = 0
    for piece in pieces:
        out[at:at + piece.size] = piece.reshape(-1)
        at += piece.size
    return out.reshape(FIRST_GROUPS, plan.columns)


def _interpolate(values: np.ndarray, r: int) -> int:
    """The polynomial through ``values`` at 0..len-1, at r."""
    out = 0
    for c, v in zip(gf64.lagrange(values.size, r), values.tolist(), strict=True):
        out ^= gf64.smul(c, v)
    return out


def _from_cross(s: np.ndarray) -> np.ndarray:
    """The values at 0..2L-2 of Q(X) = sum_{l, m} lambda_l(X) lambda_m(X) S[l, m], the
    lambdas the Lagrange coefficients of 0..L-1: a level's polynomial from its cross sums."""
    groups = s.shape[0]
    rows = [int(s[j, j]) for j in range(groups)]
    for j in range(groups - 1):
        lam = gf64.lagrange(groups, groups + j)
        rows.append(gf64.dot(gf64.combine(lam, s), np.asarray(lam, dtype=U64)))
    return np.asarray(rows, dtype=U64)


def _final_coin(r: int) -> int:
    """A coin outside the masking level's points {0, 1, 2} (where a mask's weight is 0)."""
    return r + FINAL_POINTS if r < FINAL_POINTS else r


class _Levels:
    """What prover and verifiers share: the plan, the weights, the level reached, and the
    first field level, read from the bits (never held whole: it is 4 words a word).

    After the first level, bit b = 8 b_hi + b_lo of column k is entry (b_hi, b_lo, k); the
    field levels fold b_hi, then b_lo, then the columns' digits, and entry (b, k) weighs
    gamma_b epsilon_k (``gf64.cross`` and ``gf64.weigh`` take that form)."""

    def __init__(self, plan: Plan, weights: list[list[int]]) -> None:
        self.plan, self.weights, self.level = plan, weights, 0
        bits = 1 + len(BIT_RADICES)
        self._eps = gf64.tensor(weights[bits:])
        self._gamma = gf64.byte_tables(gf64.tensor(weights[1:bits]).tolist())
        self._lam1: list[int] = []

    @property
    def final(self) -> bool:
        return self.level == len(self.plan.radices) + 1

    def _fold_first(self, words: np.ndarray, r: int) -> np.ndarray:
        """The first field level folded at its coin and at r, straight from the bits:
        (b_lo, k), flat."""
        return gf64.fold_two(words, self._lam1, gf64.lagrange(8, r)).reshape(-1)

    def _fold(self, vectors: list[np.ndarray], r: int) -> list[np.ndarray]:
        radix = self.plan.radices[self.level - 1]
        lam = gf64.lagrange(radix, r)
        return [gf64.combine(lam, v.reshape(radix, -1)) for v in vectors]


class Prover(_Levels):
    """Party i's proof of its AND messages: p = (x_i, y_i), q = (y_{i+1}, x_{i+1}) as
    ``grouped`` words; ``with_a``, ``with_b`` the keys it shares with A (party i-1) and B
    (party i+1)."""

    def __init__(self, p: Factors, q: Factors, plan: Plan, weights: list[list[int]],
                 with_a: PRF, with_b: PRF) -> None:
        super().__init__(plan, weights)
        self._p, self._q = p, q
        self._u: list[np.ndarray] = []
        self._v: list[np.ndarray] = []
        self._a, self._b = with_a, with_b

    def message(self) -> tuple[np.ndarray, np.ndarray]:
        """This level's Q (at 0..2L-2) as (A's share, the salted commitment to it for B)."""
        a_share = self.share(self.polynomial())
        return a_share, self.commit(a_share)

    def share(self, q: np.ndarray) -> np.ndarray:
        """A's share of Q; B's is the next words of the key with B."""
        return q ^ self._b.words(q.size)

    def commit(self, a_share: np.ndarray) -> np.ndarray:
        """The commitment to A's share, salted by the key with A (B, which relays it, lacks
        that key, and A's share with its own would tell it Q)."""
        self.salt = self._a.words(4).tobytes()
        return np.array(commitment(self.salt, a_share))  # a message: writable, as every one

    def polynomial(self) -> np.ndarray:
        """This level's Q at the points 0..2L-2 (the masking level draws rho and sigma)."""
        if self.level == 0:
            return _from_cross(gf64.cross(self._p, self._q, self._eps, self._gamma))
        if self.level == 1:  # the field vectors made from the bits a column at a time
            return _from_cross(gf64.bits_cross(self._p, self._q, self._lam1, self.weights[2],
                                               self._eps))
        if self.final:
            self._rho, self._sigma = int(self._a.words(1)[0]), int(self._b.words(1)[0])
            through_u = np.asarray([self._rho, *(int(x[0]) for x in self._u)], dtype=U64)
            through_v = np.asarray([self._sigma, *(int(x[0]) for x in self._v)], dtype=U64)
            us = [_interpolate(through_u, j) for j in range(2 * FINAL_POINTS - 1)]
            vs = [_interpolate(through_v, j) for j in range(2 * FINAL_POINTS - 1)]
            return np.asarray([gf64.smul(a, b) for a, b in zip(us, vs, strict=True)], dtype=U64)
        out = np.zeros(2 * self.plan.radices[self.level - 1] - 1, dtype=U64)
        radix = self.plan.radices[self.level - 1]
        theta = gf64.tensor(self.weights[self.level + 1:])
        for u, v in zip(self._u, self._v, strict=True):
            out ^= gf64.level_values(u.reshape(radix, -1), v.reshape(radix, -1), theta)
        return out

    def advance(self, from_a: int, from_b: int) -> None:
        """The level's coin, from both verifiers (they must agree): fold u and v at it."""
        if from_a != from_b:
            raise CheatingDetected("AND", "the two verifiers of a proof sent different coins")
        if self.level == 0:
            self._lam1 = gf64.lagrange(FIRST_GROUPS, from_a)
        elif self.level == 1:
            self._u = [self._fold_first(w, from_a) for w in self._p]
            self._v = [self._fold_first(w, from_a) for w in self._q]
            self._p = self._q = ()  # type: ignore[assignment]
        elif not self.final:
            self._u, self._v = self._fold(self._u, from_a), self._fold(self._v, from_a)
        self.level += 1


class Verifier(_Levels):
    """A (``first`` True: holds p and e_A, receives the prover's shares) or B (holds q and
    e_B, its shares from the key with the prover) in one party's proof, all ``grouped``;
    ``coins`` the key of A and B."""

    def __init__(self, first: bool, factors: Factors, e: np.ndarray, plan: Plan,
                 weights: list[list[int]], with_prover: PRF, coins: PRF) -> None:
        super().__init__(plan, weights)
        self.first = first
        self._factors = factors
        self._vec: list[np.ndarray] = []
        self._prover, self._coins = with_prover, coins
        self._c = 0
        for delta, row in zip(weights[0], e, strict=True):
            self._c ^= gf64.smul(delta, gf64.weigh(row, self._eps, self._gamma))
        self._d: list[int] = []
        self._shares: list[np.ndarray] = []
        self._commitments: list[np.ndarray] = []
        self._salts: list[bytes] = []

    def receive(self, message: np.ndarray) -> None:
        """This level's message: A's share of Q (A), the commitment to it (B, whose share is
        drawn from the key with the prover); notes this verifier's share of d."""
        size = self._size()
        if self.final:  # the mask rho (A) or sigma (B), drawn by the prover before its share
            self._mask = int(self._prover.words(1)[0])
        if self.first:
            share = np.asarray(message, dtype=U64).reshape(-1)
            self._salts.append(self._prover.words(4).tobytes())
        else:
            share = self._prover.words(size)
            committed = np.asarray(message, dtype=U64).reshape(-1)
            if committed.size != DIGEST_WORDS:
                raise CheatingDetected("AND", "a proof's commitment of the wrong size")
            self._commitments.append(committed)
        if share.size != size:
            raise CheatingDetected("AND", "a proof message of the wrong size")
        self._shares.append(share)
        if self.final:
            d = int(share[1]) ^ int(share[2])
        else:
            d = 0
            weights = self.weights[self.level]
            for delta, value in zip(weights, share[:len(weights)].tolist(), strict=True):
                d ^= gf64.smul(delta, value)
        self._d.append(d ^ self._c)

    def _size(self) -> int:
        if self.final:
            return 2 * FINAL_POINTS - 1
        groups = FIRST_GROUPS if self.level == 0 else self.plan.radices[self.level - 1]
        return 2 * groups - 1

    def coin(self) -> int:
        """This level's coin (a word of the key of A and B), to send to the prover."""
        r = int(self._coins.words(1)[0])
        self._r = _final_coin(r) if self.final else r
        return r

    def advance(self) -> None:
        """Fold this verifier's vectors and its share of c at the level's coin."""
        r, share = self._r, self._shares[-1]
        if self.level == 0:
            self._lam1 = gf64.lagrange(FIRST_GROUPS, r)
        elif self.level == 1:
            self._vec = [self._fold_first(w, r) for w in self._factors]
            self._factors = ()  # type: ignore[assignment]
        elif not self.final:
            self._vec = self._fold(self._vec, r)
        if self.final:
            points = np.asarray([self._mask, *(int(v[0]) for v in self._vec)], dtype=U64)
            self._opened = _interpolate(points, r)
            self._product = _interpolate(share, r)
        else:
            self._c = _interpolate(share, r)
        self.level += 1

    def closing(self) -> np.ndarray:
        """To the other verifier: U(r) (A) or V(r) (B), the share of P(r), the shares of every
        d; B adds the commitments it received, which A compares with its shares."""
        words = [self._opened, self._product, *self._d]
        out = np.asarray(words, dtype=U64)
        if not self.first:
            out = np.concatenate([out, *self._commitments])
        return out

    def check(self, theirs: np.ndarray, party: int) -> None:
        """Accept the proof or raise: commitments (A), every d zero, U(r) V(r) = P(r)."""
        theirs = np.asarray(theirs, dtype=U64).reshape(-1)
        levels = len(self.plan.radices) + 2
        if theirs.size != 2 + levels + (DIGEST_WORDS * levels if self.first else 0):
            raise CheatingDetected("AND", f"party {party}: a proof's closing of the wrong size")
        if self.first:
            relayed = theirs[2 + levels:].reshape(levels, DIGEST_WORDS)
            for share, salt, got in zip(self._shares, self._salts, relayed, strict=True):
                if not np.array_equal(commitment(salt, share), got):
                    raise CheatingDetected("AND", f"party {party}: a proof message does not "
                                                  "match its commitment")
        if any(mine != int(t) for mine, t in zip(self._d, theirs[2:2 + levels].tolist(),
                                                 strict=True)):
            raise CheatingDetected("AND", f"party {party}: a proof's sum does not hold")
        product = gf64.smul(self._opened, int(theirs[0]))
        if product ^ self._product != int(theirs[1]):
            raise CheatingDetected("AND", f"party {party}: a proof's last product is wrong")
