"""Adaptive cheaters: whether a job aborts never depends on a secret (active3 and active4).

The cheater here is clever (docs/cheating.md, "Adaptive cheaters"). It changes a message early,
so that the checks see an error whose size depends on a secret; then, after the check's
randomness is fixed and with everything its party learns (its shares, its components of the
check's coefficients, the coin), it sends a compensating error computed for a guess of that
secret. If the compensation reached the tested value, the job would complete exactly when the
guess is right: abort-or-not would tell the cheater the secret. It changes its messages in
place, so that its own copy of every value agrees with what it sent (a careless cheater whose
copies disagree is caught by the zero tests whatever the secret).

Every strategy runs on two datasets that differ only in the secret, H0 (the cheater's guess)
and H1, and must end the same way on both (an abort on every honest server, no D' output).
Secrets, on a 24 x 5 dataset with k = 2 and feature J = 0:

- ``selected``: whether feature J is among the k selected (H0: no; H1: yes);
- ``label``: the class of row 0;
- ``rank``: the private top-k comparison [rank_J < 1], whether J ranks first (H0) or second.

A positive control runs the same strategies against ``KnownCoefficients``, active3 with MAC
check coefficients the cheater knows (as they were when they came from the coin): there the
job completes on H0 and aborts on H1, so the strategies are exact and the suite can fail.
The parity strategy needs no compensation at all: 2^127 on one MAC makes the check pass exactly
when a combination of coefficients and secret bits is even, which a cheater that knows the
coefficients evaluates for each guess.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from conftest import outcomes

from mpcnet import gf64
from mpcnet.errors import CheatingDetected
from mpcnet.featsel.gini_fs import gini_fs
from mpcnet.net.engine import RoundEngine
from mpcnet.plain.scores import msgini_fraction
from mpcnet.plain.select import topk_fraction
from mpcnet.prf import KEY_BYTES, PRF
from mpcnet.schemes import dzkp, keys, rep3, rep4
from mpcnet.schemes.base import Scheme
from mpcnet.schemes.commitment import commitment
from mpcnet.schemes.faults import FaultInjector
from mpcnet.schemes.rep4 import Rep4
from mpcnet.schemes.spdz3 import Spdz3, check_plan

M, P, K, J = 24, 5, 2, 0
MOD, MASK64 = 1 << 128, (1 << 64) - 1
Data = tuple[np.ndarray, np.ndarray]  # feature values (m x p), class codes (m)


# -- the secrets --------------------------------------------------------------------------
@dataclass(frozen=True)
class Secret:
    name: str
    h0: Data  # the cheater's guess
    h1: Data


def _secrets() -> dict[str, Secret]:
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 2, M)
    base = rng.integers(-100, 100, (M, P)) + codes[:, None] * np.arange(P) * 20
    first = base.copy()  # J informative: ranked first
    first[:, J] = codes * 60 + np.random.default_rng(1).integers(-50, 50, M)
    second = first.copy()  # a perfect feature pushes J to the second rank
    second[:, 1] = codes * 1000
    flipped = codes.copy()
    flipped[0] ^= 1
    return {"selected": Secret("selected", (base, codes), (first, codes)),
            "label": Secret("label", (base, codes), (base, flipped)),
            "rank": Secret("rank", (first, codes), (second, codes))}


SECRETS = _secrets()


def _selection(data: Data) -> np.ndarray:
    """The plaintext selection: feature indices in rank order."""
    q, d = msgini_fraction(data[0], data[1], 2)
    return topk_fraction(q, d, K)


def _t(data: Data) -> np.ndarray:
    """The selection matrix T (p x k): T[j, r] = [feature j has rank r]."""
    t = np.zeros((P, K), dtype=np.int64)
    t[_selection(data), np.arange(K)] = 1
    return t


def _below(data: Data) -> np.ndarray:
    """Per feature, the rows at or below its mean of class 0 and of class 1 (2 x p)."""
    values, codes = data
    below = ~(M * values > values.sum(0))
    return np.stack([(below & (codes == 0)[:, None]).sum(0),
                     (below & (codes != 0)[:, None]).sum(0)])


def test_the_datasets_differ_in_their_secret_only_as_described() -> None:
    s = SECRETS
    assert J not in _selection(s["selected"].h0) and J in _selection(s["selected"].h1)
    assert s["label"].h0[1][0] != s["label"].h1[1][0]
    np.testing.assert_array_equal(s["label"].h0[0], s["label"].h1[0])
    assert list(_selection(s["rank"].h0)).index(J) == 0
    assert list(_selection(s["rank"].h1)).index(J) == 1


# -- running a job with a cheater ---------------------------------------------------------
class KnownCoefficients(Spdz3):
    """active3 whose MAC check uses coefficients every party knows in advance (a public
    stream, as a coin tossed before the check would give): the flaw the suite guards against."""

    public_key = bytes(KEY_BYTES)  # the stream's key, the same at every party

    def _coefficients(self, count: int) -> np.ndarray:
        if not hasattr(self, "_public"):
            self._public = PRF(self.public_key)
        r = self._public.words((2, count))
        out = np.zeros((2, 2, count), dtype=np.uint64)  # r is component 0: slot 0 of party 0,
        slot = {0: 0, 2: 1}.get(self.party)  # slot 1 of party 2
        if slot is not None:
            out[:, slot] = r
        return out


def _job(cls: type[Scheme], data: Data, cheater: FaultInjector | None = None,
         deviant: tuple[int, type[Scheme]] | None = None, value_only: bool = False,
         **options: Any) -> list[object]:
    """Every party's outcome of pi_GINI-FS on ``data`` followed by opening D'. ``cheater``
    sees the messages; ``deviant`` = (party, scheme class) runs another class at one party;
    ``value_only`` inputs D without MACs, as ``select_stored`` does for MS-GINI."""
    values, codes = data
    share = rep3.share if cls.n_parties == 3 else rep4.share
    shares = share(values.astype(np.int64).view(np.uint64))
    labels = share((codes == 0).astype(np.uint64).reshape(M, 1))

    async def party(engine: RoundEngine) -> np.ndarray:
        if isinstance(cheater, Adaptive) and engine.party == cheater.party:
            cheater.engine = engine
        own = deviant[1] if deviant and deviant[0] == engine.party else cls
        s = await own.setup(engine, fault=cheater, **options)  # type: ignore[call-arg]
        if value_only:
            (d,) = await s.input(shares[engine.party], authenticate=False)
            (lab,) = await s.input(labels[engine.party])
        else:
            d, lab = await s.input(shares[engine.party], labels[engine.party])
        result = await gini_fs(s, d, lab, 2, K, np.zeros(P, np.int64))
        return (await s.open(result.reduced)).view(np.int64)

    return outcomes(cls.n_parties, party)


def _verdict(ran: list[object], cheater: int, data: Data) -> tuple[str, set[str]]:
    """("completed", {}) if every honest party opened the right D', ("aborted", checks named)
    if none opened anything and one named a failed check; anything else (a wrong D', an honest
    party done while another aborted) fails the test."""
    honest = [o for i, o in enumerate(ran) if i != cheater]
    expected = data[0][:, _selection(data)]
    outputs = [o for o in honest if isinstance(o, np.ndarray)]
    for out in outputs:
        np.testing.assert_array_equal(out, expected)
    caught = {o.check for o in honest if isinstance(o, CheatingDetected)}
    if len(outputs) == len(honest):
        return "completed", set()
    assert not outputs and caught, honest
    return "aborted", caught


# -- the cheater ----------------------------------------------------------------------------
def _add128(words: np.ndarray, index: int, value: int) -> None:
    """Add ``value`` (mod 2^128) to element ``index`` (flat) of limbs ``words`` (2, ...), in
    place."""
    lo, hi = words[0].reshape(-1), words[1].reshape(-1)
    x = (int(lo[index]) + (int(hi[index]) << 64) + value) % MOD
    lo[index], hi[index] = x & MASK64, x >> 64


class Adaptive(FaultInjector):
    """A cheater that sees every message its party sends (kind, phase, how many of that kind
    in the phase so far) and what it learns in the checks, and changes messages in place."""

    def __init__(self, party: int) -> None:
        super().__init__(party, "product")
        self.engine: RoundEngine | None = None
        self.sent: dict[tuple[str, str], int] = {}
        self.products = 0  # product messages so far: the MAC-check entry the next one makes
        self.coefficients: dict[int, list[tuple[int, np.ndarray]]] = {}
        self.seed: bytes | None = None
        self.freivalds: list[int] = []

    def observe(self, party: int, event: str, value: object) -> None:
        if party != self.party:
            return
        if event == "coin":
            self.seed = value  # type: ignore[assignment]
        elif event == "freivalds":  # (limb, k, 1)
            r = np.asarray(value)
            self.freivalds = [int(r[0, c, 0]) + (int(r[1, c, 0]) << 64) for c in range(K)]
        elif event == "mac-coefficients":
            entry, start, r = value  # type: ignore[misc]
            self.coefficients.setdefault(entry, []).append((start, np.array(r)))

    def known(self, entry: int, position: int) -> int:
        """The sum of this party's two components of the coefficient of one MAC-check item."""
        for start, r in self.coefficients[entry]:
            if start <= position < start + r.shape[-1]:
                i = position - start
                return sum(int(r[0, slot, i]) + (int(r[1, slot, i]) << 64)
                           for slot in (0, 1)) % MOD
        raise KeyError((entry, position))

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if party != self.party or payload.size == 0:
            return payload
        assert self.engine is not None
        phase = self.engine.current_phase
        n = self.sent.get((phase, kind), 0)
        self.sent[(phase, kind)] = n + 1
        self.deviate(phase, kind, n, payload)
        if kind == "product":
            self.products += 1
        return payload

    def deviate(self, phase: str, kind: str, n: int, payload: np.ndarray) -> None:
        """Change ``payload`` in place (the n-th message of ``kind`` in ``phase``)."""


class MacCompensation(Adaptive):
    """``epsilon`` on one input MAC (of D[0, J], or of the label of row 0); after the
    coefficients are fixed, through ``channel``, minus the tested value t0 that the error
    leaves if the secret is as in ``guess``, computed with the coefficients this party knows
    (t = u - alpha w = -sum_j r_j d_j over the items' discrepancies d_j = alpha z_j - m_j)."""

    def __init__(self, party: int, secret: str, guess: Data, channel: str | None,
                 epsilon: int = 1 << 64) -> None:
        super().__init__(party)
        self.secret, self.guess, self.channel, self.epsilon = secret, guess, channel, epsilon
        self.entries: dict[str, int] = {}

    def deviate(self, phase: str, kind: str, n: int, payload: np.ndarray) -> None:
        if kind == "product":
            if phase == "setup" and n == 0:  # the input MACs: (limb, data then labels)
                self.entries["input"] = self.products
                _add128(payload, M * P if self.secret == "label" else J, self.epsilon)
            elif phase == "scoring" and payload.shape == (2, 2, 4 * P):  # squared counts
                self.entries["squares"] = self.products
            elif phase == "scoring" and payload.shape == (2, 2, 2 * M):  # one-hot check
                self.entries["one-hot"] = self.products
            elif phase == "product" and n == 0:  # w = D (T r), Freivalds' test of D' = D x T
                self.entries["w"] = self.products
        elif kind == self.channel and not (kind == "mac-claim" and phase == "product"):
            # (a claim of the product phase is Freivalds' zero test, before the coefficients)
            t0 = self.tested(self.guess)
            if kind == "mac-product":  # alpha w + t0: t - t0
                _add128(payload, 0, t0)
            elif kind == "mac-sum":  # u - t0
                _add128(payload[:, 1:], 0, -t0)
            else:  # mac-claim: what the honest next party expects if t = t0
                _add128(payload, 0, -t0)
            self.fired += 1

    def discrepancies(self, data: Data) -> list[tuple[str, int, int]]:
        """(item, position, d) of every MAC-check item the early error changes if the data
        are ``data``: the input itself, then where its MAC is multiplied by a secret."""
        e = self.epsilon
        if self.secret == "label":  # MAC(L[0,0]) + e: below counts of class 0 -e, class 1 +e
            below = _below(data)
            # the one-hot check multiplies L[0,0] and its row sum (the same, with two classes)
            # by 1 - L[0,0]: MAC(x) y gets e (1 - L[0,0]) twice
            rest = 1 - int(data[1][0] == 0)
            return ([("input", M * P, -e), ("one-hot", 0, -e * rest), ("one-hot", M, -e * rest)]
                    + [("squares", j, -e * int(below[0, j])) for j in range(P)]
                    + [("squares", P + j, e * int(below[1, j])) for j in range(P)])
        # MAC(D[0,J]) + e: MAC(w[0]) = MAC(D[0]) . (T r) gets e (T r)[J], r Freivalds' public
        # vector (D' itself has no MAC)
        t_r = sum(int(t) * r for t, r in zip(_t(data)[J], self.freivalds, strict=True))
        return [("input", J, -e), ("w", 0, -e * t_r)]

    def tested(self, data: Data) -> int:
        return -sum(self.known(self.entries[item], pos) * d
                    for item, pos, d in self.discrepancies(data)) % MOD


# -- active3: compensated MAC errors --------------------------------------------------------
CHANNELS = ("mac-product", "mac-sum", "mac-claim")


@pytest.mark.parametrize("secret", sorted(SECRETS))
@pytest.mark.parametrize("channel", CHANNELS)
def test_a_compensated_mac_error_aborts_whatever_the_secret(secret: str, channel: str) -> None:
    s = SECRETS[secret]
    for cheater in range(3):
        for data in (s.h0, s.h1):
            attack = MacCompensation(cheater, secret, s.h0, channel)
            verdict, checks = _verdict(_job(Spdz3, data, attack), cheater, data)
            assert attack.fired == 1, (secret, channel, cheater)
            assert (verdict, checks) == ("aborted", {"MAC"}), (secret, channel, cheater)


@pytest.mark.parametrize("secret", sorted(SECRETS))
@pytest.mark.parametrize("channel", ("mac-product", "mac-sum"))
def test_known_coefficients_let_the_same_strategy_read_the_secret(secret: str,
                                                                   channel: str) -> None:
    """Positive control: with coefficients the cheater knows, the compensation is exact."""
    s = SECRETS[secret]
    seen = {}
    for hypothesis, data in (("h0", s.h0), ("h1", s.h1)):
        attack = MacCompensation(0, secret, s.h0, channel)
        seen[hypothesis] = _verdict(_job(KnownCoefficients, data, attack), 0, data)[0]
    assert seen == {"h0": "completed", "h1": "aborted"}


def test_the_zero_test_claim_cannot_carry_a_compensation_even_with_known_coefficients() -> None:
    """The honest pair compares its own copies: the cheater's claim decides nothing."""
    s = SECRETS["selected"]
    for data in (s.h0, s.h1):
        attack = MacCompensation(0, "selected", s.h0, "mac-claim")
        assert _verdict(_job(KnownCoefficients, data, attack), 0, data) == ("aborted", {"MAC"})


# -- active3: the parity of a high error ----------------------------------------------------
def _seeded_keys(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Reproducible key agreement (so the trials below are the same on every run)."""
    counter = itertools.count()
    monkeypatch.setattr(keys, "random_key", lambda: hashlib.sha256(
        f"{seed}:{next(counter)}".encode()).digest()[:KEY_BYTES])
    # and a public stream of its own per trial for KnownCoefficients
    monkeypatch.setattr(KnownCoefficients, "public_key",
                        hashlib.sha256(f"public:{seed}".encode()).digest()[:KEY_BYTES])


def _parity_guesses(cls: type[Scheme], wanted: int, most: int,
                    monkeypatch: pytest.MonkeyPatch,
                    attack_of: Callable[[], MacCompensation] | None = None) -> int:
    """2^127 on MAC(D[0, J]), no compensation; the cheater predicts for each hypothesis
    whether the check passes (t = 2^127 (r_in + r_w (T r)[J]) = 0 iff that sum is even, r
    Freivalds' public vector and r_in, r_w the coefficients,
    with the coefficients it knows) and, where the predictions differ, guesses the secret
    from the outcome; ``attack_of`` gives another such strategy, on value-only data.
    Trials (seeds 0, 1, ...) run on H0 until ``wanted`` of them tell the hypotheses apart,
    at most ``most`` (fewer fails the test); those also run on H1, with the same coin (it
    does not depend on the data). Returns how many of the 2 ``wanted`` guesses were right.
    A fixed number of guesses, not of trials: a trial tells the hypotheses apart with
    probability 1/8 to 1/4 only, so that a count of trials left the guesses too few."""
    s = SECRETS["selected"]
    made = correct = 0
    for trial in range(most):
        if made == 2 * wanted:
            break
        predicted: list[bool] | None = None
        for truth in (0, 1):
            data = (s.h0, s.h1)[truth]
            _seeded_keys(monkeypatch, trial)
            attack = (MacCompensation(0, "selected", s.h0, None, epsilon=1 << 127)
                      if attack_of is None else attack_of())
            ran = _job(cls, data, attack, value_only=attack_of is not None)
            completed = _verdict(ran, 0, data)[0] == "completed"
            seen = [attack.tested(h) == 0 for h in (s.h0, s.h1)]
            assert predicted in (None, seen)
            predicted = seen
            if predicted[0] == predicted[1]:  # the outcome would not tell them apart
                break
            made += 1
            correct += predicted[truth] == completed
    assert made == 2 * wanted, f"{made // 2} of {most} trials tell the hypotheses apart"
    return correct


def _coin(correct: int, made: int) -> bool:
    """Whether ``correct`` of ``made`` guesses could come from a fair coin: at most 3/4 (40
    guesses: p < 0.001). A cheater that reads the secret is right every time."""
    return correct <= 0.75 * made


def test_a_high_mac_error_does_not_reveal_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    # the hypotheses differ in t when r_w and r_c (the rank of J in H1) are odd: 1 in 4 (60
    # of 277 trials on three other seed sets): 20 of at most 400 is 8 standard deviations
    # below the 87 expected
    correct = _parity_guesses(Spdz3, 20, 400, monkeypatch)
    assert _coin(correct, 40), f"{correct} of 40 guesses right"
    known = _parity_guesses(KnownCoefficients, 6, 200, monkeypatch)
    assert known == 12 and not _coin(known, 12)  # positive control: the test can fail


class SelectionMacError(MacCompensation):
    """With D value-only (no MAC to err on), the MAC error reaches D through T instead:
    ``epsilon`` on the MAC of the last product of the selection, the fold of T[J, 0]'s sign
    bit (``bit_to_arith``), makes d = -epsilon there, 2 epsilon on T[J, 0] and -2 epsilon on
    T[J, 1]; w = D (T r) is MAC'd as D (alpha T r) (``Spdz3.matmul``), so its record i gets
    D[i, J] (2 epsilon r_0 - 2 epsilon r_1), r Freivalds' public vector: data times an error."""

    def __init__(self, party: int, last: int, epsilon: int) -> None:
        super().__init__(party, "selected", SECRETS["selected"].h0, None, epsilon)
        self.last = last  # how many product messages the selection sends before its last

    def deviate(self, phase: str, kind: str, n: int, payload: np.ndarray) -> None:
        if kind == "product" and phase == "selection" and n == self.last:
            assert payload.shape == (2, 2, P * K)  # (limb, value/MAC, p x k)
            self.entries["fold"] = self.products
            _add128(payload[:, 1], J * K, self.epsilon)
            self.fired += 1
        elif kind == "product" and phase == "product" and n == 0:
            self.entries["w"] = self.products

    def discrepancies(self, data: Data) -> list[tuple[str, int, int]]:
        e, (r0, r1) = self.epsilon, self.freivalds
        t_r = 2 * e * (r0 - r1)
        return [("fold", J * K, -e)] + [("w", i, int(v) * t_r)
                                        for i, v in enumerate(data[0][:, J])]


def _selection_products() -> int:
    """How many product messages party 0 sends in the selection phase (an honest run)."""
    counter = Adaptive(0)
    _job(Spdz3, SECRETS["selected"].h0, counter, value_only=True)
    return counter.sent[("selection", "product")]


def test_a_high_mac_error_reaching_value_only_data_does_not_reveal_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The swapped MAC of a product with value-only data keeps the MAC check's argument:
    the error's lowest valuation is the cheater's own (on the fold), so the outcome is a fair
    coin for the cheater, while with known coefficients it predicts every outcome. (2^126:
    the fold doubles it to 2^127 on T, which D then multiplies; 2^127 would vanish there.)"""
    last = _selection_products() - 1

    def attack() -> MacCompensation:
        return SelectionMacError(0, last, 1 << 126)

    # a trial tells the hypotheses apart with probability about 1/8 (80 of 656 trials on
    # four other seed sets): 20 of at most 600 is 6 standard deviations below the 73 expected
    correct = _parity_guesses(Spdz3, 20, 600, monkeypatch, attack)
    assert _coin(correct, 40), f"{correct} of 40 guesses right"
    known = _parity_guesses(KnownCoefficients, 6, 300, monkeypatch, attack)
    assert known == 12 and not _coin(known, 12)  # positive control: the test can fail


# -- active3: compensated AND errors -------------------------------------------------------
class AndCompensation(Adaptive):
    """XOR 1 into the first AND word of value (0, J) (the first comparison of the scoring);
    after the coin, the same bit through ``channel``: in the zero-test claim of that word, or
    in the opened y ^ b of its match in every pool (so the receiver's test of it flips)."""

    def __init__(self, party: int, channel: str) -> None:
        super().__init__(party)
        self.channel = channel
        self.and_words = 0

    def deviate(self, phase: str, kind: str, n: int, payload: np.ndarray) -> None:
        flat = payload.reshape(-1)
        if kind == "and":
            if self.and_words == 0:
                flat[J] ^= np.uint64(1)
            self.and_words += flat.size
        elif kind == self.channel == "and-claim":
            flat[J] ^= np.uint64(1)
            self.fired += 1
        elif kind == self.channel == "check-open":
            pools, size = check_plan(self.and_words)
            cut = size - self.and_words
            width = 3 * cut + 2 * self.and_words
            for pool in range(pools):  # layout per pool: cut a, b, c, then rho, sigma
                flat[pool * width + 3 * cut + self.and_words + J] ^= np.uint64(1)
            self.fired += 1


@pytest.mark.parametrize("secret", sorted(SECRETS))
@pytest.mark.parametrize("channel", ("and-claim", "check-open"))
def test_a_compensated_and_error_aborts_whatever_the_secret(secret: str, channel: str) -> None:
    s = SECRETS[secret]
    for cheater in range(3):
        for data in (s.h0, s.h1):
            attack = AndCompensation(cheater, channel)
            verdict, checks = _verdict(_job(Spdz3, data, attack), cheater, data)
            assert attack.fired >= 1
            assert verdict == "aborted" and checks <= {"AND", "open consistency"}, checks


class OpeningLiar(Adaptive):
    """Flips low bits of the words y ^ b it opens in the AND check (the components its
    previous party lacks; the cut triples untouched) and records what it receives afterwards.
    If that party used the words before their other holder vouched for them, its zero-test
    digest, which it sends to this cheater in the next round, would differ from the honest
    one by a function of triple bits the cheater lacks: a few flipped bits, a brute force
    over the candidates, and the cheater reads secret AND inputs (an adversarial review found
    exactly this; docs/cheating.md)."""

    def __init__(self, party: int) -> None:
        super().__init__(party)
        self.lied = False
        self.heard_after: list[tuple[str, int]] = []
        self.and_words = 0

    def deviate(self, phase: str, kind: str, n: int, payload: np.ndarray) -> None:
        if kind == "and":
            self.and_words += payload.size
        elif kind == "check-open":
            pools, size = check_plan(self.and_words)
            cut = size - self.and_words
            width = 3 * cut + 2 * self.and_words
            for pool in range(pools):  # layout per pool: cut a, b, c, then rho, sigma
                start = pool * width + 3 * cut + self.and_words
                payload[start:start + self.and_words] ^= np.uint64(7)
            self.lied = True
            self.fired += 1

    def observe(self, party: int, event: str, value: object) -> None:
        super().observe(party, event, value)
        if party == self.party and event == "received" and self.lied:
            kind, peer, _ = value  # type: ignore[misc]
            self.heard_after.append((kind, peer))


@pytest.mark.parametrize("secret", ("selected", "rank"))
def test_a_cheater_that_lies_in_an_and_check_opening_hears_no_digest(secret: str) -> None:
    s = SECRETS[secret]
    for cheater in range(3):
        for data in (s.h0, s.h1):
            attack = OpeningLiar(cheater)
            verdict, checks = _verdict(_job(Spdz3, data, attack), cheater, data)
            assert attack.fired == 1 and verdict == "aborted", (cheater, verdict)
            assert "open consistency" in checks <= {"open consistency", "AND"}, checks
            lied_to = (cheater - 1) % 3  # it stopped in the round of the opening
            assert ("digests", lied_to) not in attack.heard_after, attack.heard_after


class AndProofRepair(Adaptive):
    """XOR 1 into bit 0 of the first AND word of value (0, J), then, after the coin, repair
    every level's sum of its proof (``dzkp``): at the first level, add to its share of Q at
    that word's group the weight the bit has below it, so that A's and B's d agree; at each
    later level, add at point 0 what the last change moved Q(r) by (the level's coin read as
    it arrives), divided by that point's weight; each commitment to B recomputed for the
    changed share. The error then reaches the last product, which fails except with
    probability about 2^-60, whatever the data."""

    def __init__(self, party: int) -> None:
        super().__init__(party)
        self.and_words = 0
        self.level = 0
        self.coins: list[int] = []
        self.moved: tuple[int, int, int] | None = None  # (points, point, change)
        self.share: np.ndarray | None = None

    def observe(self, party: int, event: str, value: object) -> None:
        super().observe(party, event, value)
        if party != self.party:
            return
        if event == "and-proof-salt":
            self.salt = value
        elif event == "received" and value[0] == "and-coin" and (  # type: ignore[index]
                value[1] == (self.party - 1) % 3):  # type: ignore[index]
            self.coins.append(int(np.asarray(value[2]).reshape(-1)[0]))  # type: ignore[index]

    def deviate(self, phase: str, kind: str, n: int, payload: np.ndarray) -> None:
        flat = payload.reshape(-1)
        if kind == "and":
            if self.and_words == 0:
                flat[J] ^= np.uint64(1)
            self.and_words += flat.size
        elif kind == "and-proof" and self.seed is not None:
            plan = dzkp.proof_plan(self.and_words)
            weights = dzkp.level_weights(plan, self.seed)
            if self.level == 0:
                eps = gf64.tensor(weights[3:])
                point = J // plan.columns
                change = gf64.smul(int(eps[J % plan.columns]),
                                   gf64.smul(weights[1][0], weights[2][0]))
            else:
                points, moved_at, moved = self.moved  # type: ignore[misc]
                shift = gf64.smul(moved, gf64.lagrange(points, self.coins[-1])[moved_at])
                final = self.level == len(plan.radices) + 1
                point = 1 if final else 0
                change = shift if final else gf64.smul(shift, gf64.inverse(
                    weights[self.level][0]))
            flat[point] ^= np.uint64(change)
            self.moved = (flat.size, point, change)
            self.share = flat.copy()
            self.level += 1
            self.fired += 1
        elif kind == "and-proof-hash" and self.share is not None:
            flat[:] = commitment(self.salt, self.share)
            self.share = None


@pytest.mark.parametrize("secret", sorted(SECRETS))
def test_a_repaired_and_proof_aborts_at_its_last_product_whatever_the_secret(
        secret: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Spdz3, "proves_ands", True)
    monkeypatch.setattr(Spdz3, "proves_alone", True)  # the job's one check is its verify
    s = SECRETS[secret]
    for cheater in range(3):
        for data in (s.h0, s.h1):
            attack = AndProofRepair(cheater)
            outcomes = _job(Spdz3, data, attack)
            verdict, checks = _verdict(outcomes, cheater, data)
            assert attack.fired == attack.level > 2
            assert verdict == "aborted" and checks == {"AND"}, checks
            assert all("last product" in str(o) for o in outcomes
                       if isinstance(o, CheatingDetected)), outcomes


# -- both schemes: a wrong copy of a secret input, with a faithful input hash --------------
def _faithful(cls: type[Scheme]) -> type[Scheme]:
    """``cls`` for a cheater that computes with a wrong copy of one input value, after the
    input check compared what the client sent (``input`` checks first)."""

    class Faithful(cls):  # type: ignore[valid-type, misc]
        async def input(self, *shares: np.ndarray) -> list[Any]:
            mine = await super().input(*shares)
            data = mine[0].data
            lead = (0, slice(None), 0) if self.lead == 3 else (slice(None),)
            data[lead + (0, J)] += np.uint64(1 << 40)  # this party's copy of D[0, J]
            return mine

    return Faithful


@pytest.mark.parametrize("secret", ("selected", "rank"))
@pytest.mark.parametrize(("setting", "cheater"), [("active3", c) for c in range(3)]
                         + [("active4", c) for c in range(4)])
def test_a_wrong_copy_of_a_secret_input_aborts_whatever_the_secret(secret: str, setting: str,
                                                                   cheater: int) -> None:
    """Its effect on D' is 2^40 T[J, .] (selective); every message it changes is caught."""
    honest_cls: type[Scheme] = Spdz3 if setting == "active3" else Rep4
    cheating_cls = _faithful(honest_cls)
    s = SECRETS[secret]
    for data in (s.h0, s.h1):
        ran = _job(honest_cls, data, deviant=(cheater, cheating_cls))
        verdict, checks = _verdict(ran, cheater, data)
        assert verdict == "aborted", (setting, cheater)
        assert checks <= ({"MAC", "AND", "open consistency"} if setting == "active3"
                          else {"joint-message hash"}), checks


@pytest.mark.parametrize("setting", ("active3", "active4"))
def test_inconsistent_client_shares_stop_the_job_before_anything_is_computed(setting: str
                                                                              ) -> None:
    """A data owner colluding with a cheating server gives the two holders of one component
    different copies: had an honest server computed on its copy, its digests could tell the
    cheater other owners' data (a review found this). The input check is its own round, the
    first after the keys, and every holder of a component checks it there."""
    cls: type[Scheme] = Spdz3 if setting == "active3" else Rep4
    share = rep3.share if cls.n_parties == 3 else rep4.share
    values, codes = SECRETS["selected"].h0
    shares = share(values.astype(np.int64).view(np.uint64))
    labels = share((codes == 0).astype(np.uint64).reshape(M, 1))
    shares[1] = shares[1].copy()
    shares[1][0, 0, 0] += np.uint64(1)  # party 1's copy of one component differs
    rounds: dict[int, int] = {}

    async def party(engine: RoundEngine) -> np.ndarray:
        s = await cls.setup(engine)
        before = engine.rounds
        try:
            d, lab = await s.input(shares[engine.party], labels[engine.party])
        finally:
            rounds[engine.party] = engine.rounds - before
        result = await gini_fs(s, d, lab, 2, K, np.zeros(P, np.int64))
        return (await s.open(result.reduced)).view(np.int64)

    ran = outcomes(cls.n_parties, party)
    caught = [o for o in ran if isinstance(o, CheatingDetected)]
    assert caught and all(o.check == "input consistency" for o in caught), ran
    assert not any(isinstance(o, np.ndarray) for o in ran)
    # party 1's slot 0 is component 1 (active3: held by 0 and 1) or 2 (active4: all but 2);
    # every holder stops in the input check's round, before computing on its copy
    holders = (0, 1) if setting == "active3" else (0, 1, 3)
    assert all(rounds[h] == 1 for h in holders), rounds


# -- active4: errors that keep every sum -----------------------------------------------------
class SumPreserving(Adaptive):
    """+e on the first word and -e on the last of every joint message of ``phase``: a linear
    check would see nothing; the joint-message digests see every changed word."""

    def __init__(self, party: int, phase: str) -> None:
        super().__init__(party)
        self.phase = phase

    def deviate(self, phase: str, kind: str, n: int, payload: np.ndarray) -> None:
        flat = payload.reshape(-1)
        if kind == "jmp-value" and phase == self.phase and flat.size > 1:
            flat[0] += np.uint64(1 << 40)
            flat[-1] -= np.uint64(1 << 40)
            self.fired += 1


@pytest.mark.parametrize("secret", sorted(SECRETS))
def test_active4_aborts_whatever_the_secret(secret: str) -> None:
    s = SECRETS[secret]
    phase = "scoring" if secret == "label" else "product"  # where the secret is computed on
    for cheater in range(4):
        for data in (s.h0, s.h1):
            attack = SumPreserving(cheater, phase)
            verdict, checks = _verdict(_job(Rep4, data, attack), cheater, data)
            assert attack.fired >= 1
            assert (verdict, checks) == ("aborted", {"joint-message hash"}), cheater


# -- a job checked a block at a time --------------------------------------------------------
class _AddToProduct(FaultInjector):
    """Adds 2^127 to the given elements of the cheater's ``nth`` product message (in place, so
    its own copy agrees). Message 0 carries the labels' MACs, 2 the first block's (in tiles of 4
    rows, the first tile's) flag bits' MACs: the data are input without MACs."""

    def __init__(self, party: int, nth: int, indices: tuple[int, ...]) -> None:
        super().__init__(party, "product")
        self.nth, self.indices, self.seen = nth, indices, -1

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        if party == self.party and kind == "product":
            self.seen += 1
            if self.seen == self.nth:
                low, high = payload[0].reshape(-1), payload[1].reshape(-1)
                for i in self.indices:
                    x = (int(low[i]) + (int(high[i]) << 64) + (1 << 127)) % (1 << 128)
                    low[i], high[i] = x & (2**64 - 1), x >> 64
        return payload


class _CountedChecks(Spdz3):
    async def verify(self) -> None:
        self.checks = getattr(self, "checks", 0) + 1
        try:
            await super().verify()
        except CheatingDetected as exc:
            exc.args = (f"check {self.checks}",)
            raise


def _blockwise_outcome(values: np.ndarray, codes: np.ndarray, fault: FaultInjector,
                       tile_rows: int | None) -> str:
    from mpcnet.featsel.gini_fs import select_stored
    from mpcnet.featsel.layout import SCORING_BYTES_PER_CELL, held_bytes
    from mpcnet.featsel.source import ArraySource

    m, p = values.shape
    shares = rep3.share(values.astype(np.int64).view(np.uint64))
    labels = rep3.share((codes == 0).astype(np.uint64).reshape(m, 1))
    budget = held_bytes("active3", m, 2, 1) + (tile_rows or m) * SCORING_BYTES_PER_CELL["active3"]

    async def party(engine: RoundEngine) -> str:
        s = await _CountedChecks.setup(engine, fault=fault)
        result = await select_stored(s, ArraySource(shares[engine.party]),
                                     labels[engine.party], 2, 1, np.zeros(p, np.int64), budget)
        assert result.plan["blocks"] == p and result.plan["tile_rows"] == (tile_rows or m)
        await s.open(result.reduced)
        return "completed"

    honest = outcomes(3, party)[:2]
    caught = sorted({str(o) for o in honest if isinstance(o, CheatingDetected)})
    return "completed" if all(o == "completed" for o in honest) else caught[0]


_CODES = np.array([0, 1, 0, 1, 0, 1, 0, 1])
_DATA = np.stack([np.array([1, 9, 2, 8, 3, 7, 4, 6]), np.array([0, 0, 0, 0, 10, 10, 10, 10])],
                 1)


def _changed(row: int, column: int, value: int) -> np.ndarray:
    out = _DATA.copy()
    out[row, column] = value
    return out


@pytest.mark.parametrize(("nth", "indices", "tile_rows", "other"), [
    (0, (0,), None, (_changed(4, 1, 0), _CODES)),  # labels' MAC; feature 1's counts odd
    (2, (0,), None, (_changed(0, 0, 7), _CODES)),  # a flag's MAC; feature 0's counts odd
    (2, (0, 1), 4, (_DATA, np.array([0, 0, 0, 1, 0, 1, 0, 1]))),  # two flags; rows 0, 1 alike
], ids=["label-mac", "flag-mac", "tile-flag-macs"])
def test_blockwise_checks_do_not_make_the_abort_depend_on_data(
        nth: int, indices: tuple[int, ...], tile_rows: int | None,
        other: tuple[np.ndarray, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    """A job scored a block (or a tile) at a time frees its check records after each block.
    Checking the MACs in parts leaked (found by review): an error of 2^127 that passed one
    part (probability 1/2, whatever the data) reached the next only multiplied by secret
    counts, so the abort at a later part told their parity (whether rows 0 and 1 share a
    class, in tiles); rechecking the values that outlive a part did not help, since their
    errors are already such products. The MAC records are now folded into one check at the
    end: the outcomes are the same on both datasets, each about half the time."""
    from mpcnet.featsel import layout

    monkeypatch.setattr(layout, "MIN_TILE_CELLS", 4)
    runs = [[_blockwise_outcome(values, codes, _AddToProduct(2, nth, indices), tile_rows)
             for _ in range(40)] for values, codes in ((_DATA, _CODES), other)]
    for outcomes_of_one in runs:  # only the final check may stop it, half of the time
        assert set(outcomes_of_one) <= {"completed", "check 1"}, outcomes_of_one
        assert 8 <= outcomes_of_one.count("completed") <= 32  # outside: p < 2^-12 at 1/2
