"""active3's AND proof (mpcnet.schemes.dzkp) on its own: the three parties' proofs run in memory
over real rep3 shares and PRF keys; honest proofs pass, every single-bit error in any party's
AND message is caught, an adaptive prover that repairs each level's sum after seeing every
coin so far is caught at the last product, and the same prover passes when it may see a
level's coin before its message, as one that knows the weights before its AND messages passes
a wrong AND (so the coins' order is what the soundness rests on)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mpcnet import gf64
from mpcnet.errors import CheatingDetected
from mpcnet.prf import PRF
from mpcnet.schemes import rep3
from mpcnet.schemes.dzkp import (
    FIRST_GROUPS,
    Plan,
    Prover,
    Verifier,
    grouped,
    level_weights,
    proof_plan,
)

U64 = np.uint64


def _words(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**63, n, dtype=np.int64).view(U64) ^ (
        rng.integers(0, 2, n, dtype=np.int64).view(U64) << U64(63))


class _Ands:
    """n AND words computed by the three parties as Rep3._and_terms does, with the zero
    words F[j] of the key of parties j and j+1; ``sent[i]`` is what party i sends to i-1."""

    def __init__(self, n: int, seed: int = 1) -> None:
        rng = np.random.default_rng(seed)
        self.x, self.y = rep3.share(_words(rng, n), True), rep3.share(_words(rng, n), True)
        self.f = [_words(rng, n) for _ in range(3)]
        self.sent = []
        for i in range(3):
            (x0, x1), (y0, y1) = self.x[i], self.y[i]
            self.sent.append(x0 & (y0 ^ y1) ^ x1 & y0 ^ self.f[i] ^ self.f[(i - 1) % 3])

    def value(self) -> np.ndarray:
        """The AND behind the sent words (x AND y when nobody cheated)."""
        return self.sent[0] ^ self.sent[1] ^ self.sent[2]


def _prfs(i: int) -> dict[str, PRF]:
    """Both ends' streams of the keys of proof i: the prover's with A and with B, and the
    coins' key of A and B (which the prover lacks); ``peek`` a third copy of the coins' key,
    for the cheater of the broken order only."""
    key = {name: bytes([i, k]) * 8 for k, name in enumerate(("a", "b", "ab"))}
    return {"pa": PRF(key["a"]), "pb": PRF(key["b"]), "ap": PRF(key["a"]),
            "bp": PRF(key["b"]), "ac": PRF(key["ab"]), "bc": PRF(key["ab"]),
            "peek": PRF(key["ab"])}


class _Repair:
    """A cheating prover that, at every level, shifts its Q so that the verifiers' sum
    check d holds (it knows everything they hold, hence c); with ``early`` it also sees the
    level's coin r first and shifts by a multiple of (X + r), so that Q(r) stays the true
    value and every later claim is true again."""

    def __init__(self, early: bool) -> None:
        self.early = early

    def __call__(self, final: bool, q_true: np.ndarray, c: int, weights: list[int],
                 r: int | None) -> np.ndarray:
        points = range(1, 3) if final else range(len(weights))
        coeff = [1, 1] if final else weights
        residual = c
        for w, j in zip(coeff, points, strict=True):
            residual ^= gf64.smul(w, int(q_true[j]))
        if r is None:  # shift Q(first point) alone
            shift = np.zeros(q_true.size, dtype=U64)
            shift[points[0]] = gf64.smul(residual, gf64.inverse(coeff[0]))
            return q_true ^ shift
        base = 0  # sum of the weights times (j + r)
        for w, j in zip(coeff, points, strict=True):
            base ^= gf64.smul(w, j ^ r)
        kappa = gf64.smul(residual, gf64.inverse(base))
        shift = np.asarray([gf64.smul(kappa, j ^ r) for j in range(q_true.size)], dtype=U64)
        return q_true ^ shift


def _prove(ands: _Ands, i: int, seed: bytes = b"coin", cheat: _Repair | None = None) -> None:
    """Party i's proof to parties i-1 (A) and i+1 (B), as spdz3 runs it, with the prover
    honest or ``cheat``ing; raises what the check raises."""
    prev, nxt = (i - 1) % 3, (i + 1) % 3
    plan = proof_plan(ands.x[0].shape[1])
    weights = level_weights(plan, seed)
    k = _prfs(i)

    def g(words: np.ndarray) -> np.ndarray:
        return grouped([words], plan)

    prover = Prover((g(ands.x[i][0]), g(ands.y[i][0])), (g(ands.y[i][1]), g(ands.x[i][1])),
                    plan, weights, k["pa"], k["pb"])
    a_x, a_y = ands.x[prev][1], ands.y[prev][1]  # A's copies of x_i, y_i
    a = Verifier(True, (g(a_x), g(a_y)), g(a_x & a_y ^ ands.sent[i] ^ ands.f[prev]), plan,
                 weights, k["ap"], k["ac"])
    b = Verifier(False, (g(ands.y[nxt][0]), g(ands.x[nxt][0])), g(ands.f[i]), plan, weights,
                 k["bp"], k["bc"])
    for level in range(len(plan.radices) + 2):
        final = prover.final
        peeked = int(k["peek"].words(1)[0])
        q = prover.polynomial()
        if cheat is not None:
            r = (peeked + 3 if final and peeked < 3 else peeked) if cheat.early else None
            q = cheat(final, q, a._c ^ b._c, [] if final else weights[level], r)
        share = prover.share(q)
        a.receive(share)
        b.receive(prover.commit(share))
        prover.advance(a.coin(), b.coin())
        a.advance()
        b.advance()
    b.check(a.closing(), nxt)
    a.check(b.closing(), prev)


@pytest.mark.parametrize("n", [1, 3, 17, 300])
def test_honest_proofs_pass(n: int) -> None:
    ands = _Ands(n, seed=n)
    for i in range(3):
        _prove(ands, i)


def test_the_plan_folds_every_word() -> None:
    for n in (1, 15, 16, 17, 1000, 900_000):
        plan = proof_plan(n)
        assert FIRST_GROUPS * plan.columns >= n
        assert int(np.prod(plan.radices)) == 64 * plan.columns
        assert plan.radices[:2] == (8, 8)
        assert max(plan.radices) <= 64
        assert plan.columns < 1.1 * max(1, -(-n // FIRST_GROUPS)) + 2


@pytest.mark.parametrize("party", [0, 1, 2])
def test_every_single_bit_error_in_a_message_is_caught(party: int) -> None:
    n = 3
    ands = _Ands(n, seed=5)
    honest = ands.sent[party].copy()
    for word in range(n):
        for bit in range(64):
            ands.sent[party] = honest.copy()
            ands.sent[party][word] ^= U64(1) << U64(bit)
            with pytest.raises(CheatingDetected):
                _prove(ands, party)
    ands.sent[party] = honest
    _prove(ands, party)


@pytest.mark.parametrize("party", [0, 1, 2])
def test_a_prover_repairing_every_sum_is_caught(party: int) -> None:
    ands = _Ands(40, seed=9)
    ands.sent[party][7] ^= U64(1 << 20)
    with pytest.raises(CheatingDetected, match="last product"):
        _prove(ands, party, cheat=_Repair(early=False))


@pytest.mark.parametrize("party", [0, 1, 2])
def test_the_same_prover_passes_if_it_sees_each_coin_before_its_message(party: int) -> None:
    """The positive control: the coins' order is what catches the repair above."""
    ands = _Ands(40, seed=9)
    ands.sent[party][7] ^= U64(1 << 20)
    _prove(ands, party, cheat=_Repair(early=True))
    x, y = (s[0][0] ^ s[1][0] ^ s[2][0] for s in (ands.x, ands.y))
    assert (ands.value() != x & y).any()  # the AND is wrong, and it passed


def _cancelling_bits(weights: list[int]) -> list[int]:
    """Indices of a non-empty set of ``weights`` summing to zero (more than 64 of them are
    dependent over GF(2)): Gaussian elimination on the words as bit vectors."""
    basis: dict[int, tuple[int, int]] = {}  # leading bit -> (vector, set of indices as mask)
    for i, w in enumerate(weights):
        vec, used = w, 1 << i
        while vec:
            top = vec.bit_length() - 1
            if top not in basis:
                basis[top] = (vec, used)
                break
            vec ^= basis[top][0]
            used ^= basis[top][1]
        else:
            return [j for j in range(len(weights)) if used >> j & 1]
    raise AssertionError("no dependency")


def test_a_prover_that_knows_the_weights_first_passes_a_wrong_and() -> None:
    """Why the weights come from a coin drawn after the AND messages are fixed (in spdz3 the
    prover's commitment to them comes first): knowing the weights, a prover flips a set of
    bits whose weights cancel, and its honest proof of the rest passes; with other weights
    the same flips are caught."""
    n, party = 2, 1
    ands = _Ands(n, seed=11)
    plan = proof_plan(n)
    weights = level_weights(plan, b"coin")
    eps = gf64.tensor(weights[3:])
    gamma = gf64.tensor(weights[1:3])
    theta = [gf64.smul(weights[0][w // plan.columns],
                       gf64.smul(int(eps[w % plan.columns]), int(gamma[b])))
             for w in range(n) for b in range(64)]
    flips = _cancelling_bits(theta)
    for j in flips:
        ands.sent[party][j // 64] ^= U64(1) << U64(j % 64)
    _prove(ands, party, seed=b"coin")  # passes: the claim did not change
    x, y = (s[0][0] ^ s[1][0] ^ s[2][0] for s in (ands.x, ands.y))
    assert (ands.value() != x & y).any()
    with pytest.raises(CheatingDetected):
        _prove(ands, party, seed=b"another coin")


def _verifiers(n: int = 5) -> tuple[Verifier, Verifier, Plan]:
    """A and B of party 0's proof of n AND words (as ``_prove`` builds them)."""
    ands, i, prev, nxt = _Ands(n), 0, 2, 1
    plan = proof_plan(n)
    weights = level_weights(plan, b"coin")
    k = _prfs(i)

    def g(words: np.ndarray) -> np.ndarray:
        return grouped([words], plan)

    a_x, a_y = ands.x[prev][1], ands.y[prev][1]
    a = Verifier(True, (g(a_x), g(a_y)), g(a_x & a_y ^ ands.sent[i] ^ ands.f[prev]),
                 plan, weights, k["ap"], k["ac"])
    b = Verifier(False, (g(ands.y[nxt][0]), g(ands.x[nxt][0])), g(ands.f[i]), plan,
                 weights, k["bp"], k["bc"])
    return a, b, plan


def test_b_refuses_a_commitment_of_the_wrong_size() -> None:
    """B keeps a commitment of any other size (it would shift every later commitment's
    boundary in its closing): refused as cheating, as A refuses a share of the wrong size
    (an adversarial review; spdz3's ring round also refuses a message of the wrong size)."""
    _, b, _ = _verifiers()
    with pytest.raises(CheatingDetected):
        b.receive(np.zeros(3, dtype=U64))


def test_a_closing_of_the_wrong_size_is_cheating_not_a_crash() -> None:
    """A closing of the wrong size is cheating, not a crash (an adversarial review)."""
    a, b, plan = _verifiers()
    for _ in range(len(plan.radices) + 2):
        a.receive(np.zeros(a._size(), dtype=U64))
        b.receive(np.zeros(4, dtype=U64))
        a.coin(), b.coin()
        a.advance(), b.advance()
    with pytest.raises(CheatingDetected):
        a.check(b.closing()[:-1], 0)


def test_the_stated_soundness_for_a_million_words_follows_from_the_stated_bound() -> None:
    """The module docstring's bound, (2 S + sum over levels of 2L - 2 + 4) / 2^64, is about
    2^-55.7 for the plan of a million AND words, as it says."""
    plan = proof_plan(10**6)
    levels = (FIRST_GROUPS, *plan.radices)
    bound = 2 * len(plan.weight_sizes) + sum(2 * size - 2 for size in levels) + 4
    assert round(math.log2(bound) - 64, 1) == -55.7, (plan.radices, bound)
