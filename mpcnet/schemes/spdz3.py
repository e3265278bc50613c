"""Layer: schemes. Active 3PC, SPDZ-wise: replicated sharing with MACs over Z_2^(64+64).

Security with abort against one malicious server of three. Papers, named in brackets below:
[DEK20] Dalskov, Escudero, Keller, "Secure Evaluation of Quantized Neural Networks", PoPETs
2020 (SPDZ-wise replicated 3PC over Z_2^(k+s)); [SPDZ2k] Cramer, Damgard, Escudero, Scholl,
Xing, CRYPTO 2018 (MACs over Z_2^(k+s)); [CGHIKLN18] Chida et al., "Fast large-scale
honest-majority MPC for malicious adversaries", CRYPTO 2018 (checking all products at once);
[FLNW17] Furukawa, Lindell, Nof, Weinstein, Eurocrypt 2017 and [ABF+17] Araki et al.,
IEEE S&P 2017 (binary triples: cut-and-choose, verification of an AND with a triple).
MP-SPDZ's ``SpdzWise`` check (data61/MP-SPDZ, Protocols/SpdzWise.hpp) combines the products
with secret coefficients, as done here.

Sharing. Every value is a rep3 sharing (party i holds components i and i+1, as in ``rep3``)
of x in Z_2^128 and of its MAC alpha x, alpha a replicated random key no party knows. Data
layout: ``data[limb, slot, v]`` with limb 0/1 the low/high 64 bits (``ring128``), slot 0/1 the
two components held and v = 0 the value, v = 1 its MAC, then the logical shape (lead 3). Only
x mod 2^64 (k = 64 bits) carries data; the upper s = 64 bits let a MAC catch errors there.

The rule every check follows: its randomness is fixed after every value and error it tests,
and whatever a cheater sends after that cannot make the outcome depend on a secret. Whether a
job aborts must not depend on secret data (docs/cheating.md has the table and the attacks).

- Products (mul, matmul; [DEK20, Pi_mult]): two passive rep3 products in one round, x y and
  (alpha x) y (x (alpha y) when x is value-only: below). A cheater can only add errors to its
  messages. Every product output, every input's MAC, every authenticated bit and random value
  is queued (z_j, m_j); write d_j = alpha z_j - m_j. ``verify`` combines them with
  coefficients r_j that are themselves replicated random values nobody knows (uniform in
  Z_2^128, drawn from the pairwise PRFs):
  each party's 3-out-of-3 terms of w = sum r_j z_j and u = sum r_j m_j are local dot
  products, reshared in one round, then t = u - alpha w (one more product) must be zero
  [CGHIKLN18 over rings, as in MP-SPDZ's SpdzWise].
  Why the coefficients are secret. Errors reach later MACs multiplied by secrets: an error e
  on m_x becomes e y in the MAC of x y. With public coefficients the cheater knows every r_j,
  so with e = 2^127 the check passes exactly when r_x + r_z y is even, a parity it can
  evaluate for each guess of y: the abort itself reveals y, whatever happens after the coin;
  and any product it sends after the coin could cancel its error for a guessed y. With
  secret coefficients t = -sum r_j d_j + (errors added to w, u and alpha w); let V be the
  least 2-adic valuation among the d_j. V is fixed by the cheater's own additive errors and
  alpha, not by data (every d_j is its own error plus earlier d_i times secrets, so the first
  output reaching valuation V keeps it). The component of each r_j the cheater lacks is
  uniform, so sum r_j d_j is uniform over the multiples of 2^V whatever the secrets are, and
  t is uniform on a coset that depends on its errors and alpha only: both the outcome and
  the value t itself are independent of the data. A wrong low 64 bits (V < 64 unless the
  cheater guesses alpha) passes with probability about 2^-57 (s + 1 possible valuations,
  each passing with 2^-(128 - V) at most: the bound of [SPDZ2k] for s = 64); errors only in
  the upper 64 bits cannot change any output and pass with a probability that depends on
  nothing secret.
- ANDs: bit-sliced rep3 ANDs (one word per party per 64 ANDs), queued with their inputs.
  ``verify`` makes r pools of P random triples (a, b, c = a AND b; one passive round for all;
  P > n prime), tosses a coin, and in each pool matches AND word j with triple (j + s) mod P
  for a random shift s, opens the P - n others (cut-and-choose), and checks each match with
  its triple [FLNW17; ABF+17]. Items are whole words: an error is a 64-bit pattern and a match
  passes only if the AND and its triple carry the same one. A cheater passes a pool with
  probability at most 1/P (``check_plan`` has the argument), all r pools with P^-r <= 2^-40.
  An AND's error is what the cheater XORs into its message, whatever the inputs are, so the
  outcome depends on its errors and the coin only. A rotation moves memory in order, where a
  general permutation would gather at random.
- Bits between the two worlds. ``arith_components`` hands the circuits the low limbs of the
  value components: each component is held by two servers, so the binary input is the honest
  holder's copy and equals the value mod 2^64 (authenticated, or value-only and fixed by its
  holders' agreement: below); a cheater's deviation is an error in a product or an AND,
  caught above. ``bit_components`` authenticates the XOR components of a bit (their MACs
  computed by their two holders, queued like a product's) before ``bit_to_arith`` folds them
  with MAC'd products, so a non-bit cannot enter: the bit's value is fixed by the checked
  binary circuit.
- Products only output (``output_matmul``: D' = D x T): the value alone, tested by Freivalds
  with a public vector r tossed after the product's terms are committed (u = z r - x (y r) =
  0, one MAC'd product and a zero test with the MAC check's); the argument is in the method.
- Openings: ``verify`` first, so nothing derived from an unchecked value leaves; then one
  round in which each party gets its missing component from one holder and a digest of it
  from the other. Only the low 64 bits are opened, so the upper bits of Z_2^128 never leak.
  The openings inside the AND check (cut triples, x ^ a, y ^ b) are opened the same way, each
  component vouched for in its own round before anything uses it: a zero test's claim computed
  from a word the cheater changed would otherwise tell it, through the claim's digest, bits of
  a triple it lacks (and so of the AND's secret inputs), by brute force over the few
  candidates its change allows.
- Inputs: clients share 64-bit values as for passive3 (``rep3.share``). ``input`` first has
  the two holders of each component compare its digest, in a round of its own
  (``verify_inputs``), then computes the MACs with one product with alpha. Nothing is computed
  on a component before its holders agree: otherwise an owner colluding with the cheater could
  give two honest holders different copies, and the digests they later send would carry the
  difference, which depends on other owners' data.
- Value-only inputs (``input(authenticate=False)``: the data of the mean-split scores and of
  D' = D x T). A MAC guards a value that a cheater's messages produced; an input's components
  are fixed by its holders' agreement, and sums, scalings and ``arith_components`` of it are
  local, so it needs none until it is a factor of a product. There the other factor's MAC
  gives the product's: (alpha y) x in ``mul``, x (alpha y) in ``matmul``. The record's
  d = alpha z - m is then the cheater's errors on that product plus y's d times x, which is
  data: the MAC check's argument is unchanged, since the least valuation among the records
  is still reached first by the cheater's own error (y's record, at valuation V, is in the
  sum with a secret coefficient of its own), so the tested value stays uniform on a coset
  that the data do not move (``tests/test_adaptive.py`` runs a high error on T's MAC into
  D (T r)). A value-only sharing has a v axis of one, so reading its MAC fails.
- The coin: the XOR of one PRF output under each pairwise key; each party learns the output of
  the key it lacks from both its holders, who must agree (``CheatingDetected("coin")``). The
  key the two honest parties share makes it unpredictable to the third until it is sent.
- Zero tests (AND, MAC): each party claims the sum of its two components of t to the next
  party, which holds the third; a digest of each claim travels in the last round. The two
  honest parties compare their own copies, so a cheater's claim cannot make a non-zero t
  pass, and the claims reveal only t, which is zero or independent of the data (above): every
  value a claim is computed from was reshared, opened with its digest checked, or is local.

``verify`` takes four rounds: triples with the MAC sums, coin with alpha w, the openings of
the AND check, digests. "The coin after the triples" must hold for when honest parties send,
not only for what they compute: each party sends its triple terms to the previous party and
their digest, salted by the key it shares with that party, to the next, which relays it in
round 2 to the terms' receiver (``_check_commitment``), and sends its coin word only once it
holds both neighbours' round-1 messages; so the cheater's terms are fixed before any coin
word it lacks leaves an honest party (a cheater that held back its terms until it had read one
did pass any AND error before: found by review, docs/cheating.md).

A job too large to keep every record until its end calls ``checkpoint`` after each block:
the ANDs are checked then, and the MAC records are folded into each party's local terms of w
and u (coefficients drawn then, nothing sent), so the MAC check stays one zero test over
every record of the job (checking it in parts would leak:
docs/active3.md).

Why a subclass of ``Rep3`` rather than a wrapper around it (as MP-SPDZ's ``SpdzWise`` wraps a
passive protocol): the binary world is rep3's unchanged (bit-sliced ANDs, XORs, random bits,
the pairwise-PRF zero sharings and reshares, checked here only by queueing each AND), so it is
inherited; the arithmetic world is a different data layout (Z_2^128, value and MAC), so its
operations are overridden, each calling rep3's reshare and PRF helpers on the wider words. A
wrapper would have to forward the binary half method by method and expose those helpers anyway.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import numpy as np

from mpcnet import ring128
from mpcnet.errors import CheatingDetected
from mpcnet.net.engine import RoundEngine
from mpcnet.prf import PRF
from mpcnet.ring import to_ring
from mpcnet.schemes.base import Public, Shared, broadcast_data
from mpcnet.schemes.faults import FaultInjector
from mpcnet.schemes.keys import pairwise_prfs
from mpcnet.schemes.rep3 import Rep3
from mpcnet.schemes.replicated import DIGEST_WORDS, RunningHash, checked_words, digest_words

U64 = np.uint64
VALUE, MAC = 0, 1
SIGMA = 40  # statistical security (bits) of the AND check
_CHUNK = 1 << 13  # elements per piece of the MAC combination
CHECKS = ("AND", "MAC")  # zero tests compared by digest in the last round of ``verify``
INPUTS = "input consistency"  # compared in a round of its own, before inputs are used
_And = tuple[np.ndarray, np.ndarray, np.ndarray]  # a queued AND: x, y, z words (slot, n)
_Triples = tuple[np.ndarray, np.ndarray, np.ndarray]  # a, b, c words (slot, pool, P)
_Pieces = list[tuple[slice, slice]]  # (AND words, triples) matched contiguously
# the check a malformed message of a kind fails
_CHECK_OF = {"product": "MAC", "and": "AND", "shuffle": "MAC"}
_HASH_KIND = {"AND": "and-hash", "MAC": "mac-hash"}
_CLAIM_KIND = {"AND": "and-claim", "MAC": "mac-claim"}
_Part = tuple[str, np.ndarray]  # (message kind, array) in a message of several parts


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


def _rotation(start: int, count: int, size: int, shift: int) -> _Pieces:
    """The matching j <-> (j + shift) mod size for the AND words start..start+count-1 as
    contiguous pieces (positions among these words, triples): one, or two where it wraps."""
    first_triple = (start + shift) % size
    first = min(count, size - first_triple)
    pieces = [(slice(0, first), slice(first_triple, first_triple + first))]
    if first < count:
        pieces.append((slice(first, count), slice(0, count - first)))
    return pieces


def _replicated_factors(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[a0 | a1] and [b0 + b1; b0] for Z_2^128 sharings (limb, slot, ..., m, n) and
    (limb, slot, ..., n, k): their matrix product is this party's term of a b, without its
    share of zero (the replicated product of ``_product_term``, as one matmul)."""
    left = np.concatenate([a[:, 0], a[:, 1]], axis=-1)
    return left, np.concatenate([ring128.add(b[:, 0], b[:, 1]), b[:, 0]], axis=-2)


def _authenticated(x: Shared) -> bool:
    """Whether x carries MACs: a value-only sharing (``input(authenticate=False)`` and what
    is computed from it locally) has a v axis of one, so that reading its MAC fails."""
    return x.data.shape[2] == 2


def _lift(words: np.ndarray) -> np.ndarray:
    """uint64 component words (slot, ...) as Z_2^128 elements (limb, slot, ...)."""
    return np.stack([words, np.zeros_like(words)])


def _alike(x: Shared, y: Shared) -> tuple[np.ndarray, np.ndarray]:
    """The data of x and y for a local sum: their values only if either is value-only."""
    if _authenticated(x) == _authenticated(y):
        return x.data, y.data
    return x.data[:, :, VALUE:VALUE + 1], y.data[:, :, VALUE:VALUE + 1]


def _require_mac(x: Shared) -> Shared:
    """x, the factor a product's MAC comes from; refused if it is value-only."""
    if not _authenticated(x):
        raise TypeError("a product of two value-only sharings has no MAC: authenticate one "
                        "factor (Scheme.input's authenticate)")
    return x


class Spdz3(Rep3):
    """SPDZ-wise replicated 3-party sharing over Z_2^128, malicious security with abort."""

    name = "active3"
    n_parties = 3
    lead = 3
    deals = False  # a party that dealt a mask could deal a wrong one (Rep3.truncate, bit_mul)

    def __init__(self, engine: RoundEngine, next_prf: PRF, prev_prf: PRF,
                 fault: FaultInjector | None = None) -> None:
        super().__init__(engine, next_prf, prev_prf, fault)
        self._alpha = self._random128(())  # (limb, slot): the MAC key
        self._macs: list[np.ndarray] = []  # queued (limb, slot, v, n) value/MAC pairs
        self._ands: list[_And] = []  # (slot, n) words
        self._folded: np.ndarray | None = None  # MAC terms of w and u folded by checkpoint
        self._pending_input = False
        self._claim: dict[str, RunningHash] = {}
        self._expect: dict[str, RunningHash] = {}
        self._reset_digests()

    @classmethod
    async def setup(cls, engine: RoundEngine, fault: FaultInjector | None = None) -> Spdz3:
        prfs = await pairwise_prfs(engine)
        i = engine.party
        return cls(engine, prfs[(i + 1) % 3], prfs[(i - 1) % 3], fault)

    # -- plumbing --------------------------------------------------------------------------
    def _observe(self, event: str, value: object) -> None:
        if self._fault is not None:
            self._fault.observe(self.party, event, value)

    async def _ring_round(self, backward: list[_Part], forward: list[_Part], check: str
                          ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """One round of the checks: ``backward`` parts in one message to the previous party,
        ``forward`` parts to the next; each part passes the fault hook under its kind. The
        same parts come back from the next and the previous party (the ring is symmetric),
        split to the shapes sent; a message of another size fails ``check``."""
        sends, expect = {}, []
        for peer, parts, source in ((self.prev_party, backward, self.next_party),
                                    (self.next_party, forward, self.prev_party)):
            if parts:
                flat = [np.ascontiguousarray(self._outgoing(kind, peer, a)).reshape(-1)
                        for kind, a in parts]
                sends[peer] = flat[0] if len(flat) == 1 else np.concatenate(flat)
                expect.append((source, parts))
        got = await self.engine.exchange(sends, [source for source, _ in expect])
        out = []
        for source, parts in expect:
            buf = self._received(got, source, sum(a.size for _, a in parts), check)
            pieces, start = [], 0
            for kind, a in parts:
                pieces.append(buf[start:start + a.size].reshape(a.shape))
                self._observe("received", (kind, source, pieces[-1]))
                start += a.size
            out.append(pieces)
        by_source = dict(zip([source for source, _ in expect], out, strict=True))
        return by_source.get(self.next_party, []), by_source.get(self.prev_party, [])

    def _reset_digests(self, checks: tuple[str, ...] = (*CHECKS, INPUTS)) -> None:
        """Per check: what I claim to the next party, and what I expect the previous to claim."""
        for c in checks:
            self._claim[c] = RunningHash(c.encode())
            self._expect[c] = RunningHash(c.encode())

    def _received(self, got: dict[int, np.ndarray], peer: int, size: int,
                  check: str) -> np.ndarray:
        return checked_words(np.asarray(got[peer]).reshape(-1), size, check, self.party, peer)

    def _incoming(self, kind: str, payload: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        size = int(np.prod(shape, dtype=np.int64))
        return self._received({self.next_party: payload}, self.next_party, size,
                              _CHECK_OF[kind]).reshape(shape)

    def _random128(self, shape: tuple[int, ...]) -> np.ndarray:
        """Replicated random Z_2^128 elements (limb, slot, *shape), no communication."""
        return np.swapaxes(self._random_words((2,) + shape), 0, 1)

    def _zero128(self, shape: tuple[int, ...]) -> np.ndarray:
        """This party's term of a 3-out-of-3 sharing of zero in Z_2^128."""
        return ring128.sub(self._next.words((2,) + shape), self._prev.words((2,) + shape))

    def _product_term(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """This party's 3-out-of-3 term of the product of Z_2^128 sharings (limb, slot, ...):
        a_i (b_i + b_{i+1}) + a_{i+1} b_i plus its share of zero (Araki et al. 2016)."""
        term = ring128.dot2(a[:, 0], ring128.add(b[:, 0], b[:, 1]), a[:, 1], b[:, 0])
        return ring128.add(term, self._zero128(term.shape[1:]))

    async def _product(self, a: np.ndarray, b: np.ndarray, kind: str = "product") -> np.ndarray:
        """Replicated product of Z_2^128 sharings (limb, slot, ...), broadcast: one round."""
        return await self._reshare128(self._product_term(a, b), kind)

    async def _reshare128(self, term: np.ndarray, kind: str, out: np.ndarray | None = None
                          ) -> np.ndarray:
        """(limb, ...) 3-out-of-3 terms -> (limb, slot, ...) replicated shares (written into
        ``out`` when given)."""
        term = np.ascontiguousarray(term)
        got = await self.engine.exchange(
            {self.prev_party: self._outgoing(kind, self.prev_party, term)}, [self.next_party])
        incoming = self._incoming(kind, got[self.next_party], term.shape)
        if out is None:
            return np.stack([term, incoming], axis=1)
        out[:, 0], out[:, 1] = term, incoming
        return out

    async def _authenticate(self, values: np.ndarray) -> np.ndarray:
        """MACs of replicated Z_2^128 values (limb, slot, ...): one product with alpha,
        queued for the MAC check; returns the full (limb, slot, v, ...) data."""
        alpha = self._alpha.reshape((2, 2) + (1,) * (values.ndim - 2))
        data = np.stack([values, await self._product(alpha, values)], axis=2)
        self._macs.append(data.reshape(2, 2, 2, -1))
        return data

    # -- inputs and outputs ----------------------------------------------------------------
    async def input(self, *shares: np.ndarray, authenticate: bool = True) -> list[Shared]:
        """Client shares (rep3 layout, uint64), checked for consistency in a round of their
        own before anything is computed on them, then lifted to Z_2^128 and authenticated
        together (one product with alpha), or left value-only (``_authenticated``): such a
        value needs no MAC while it is only added, compared or opened, since every holder
        computes it locally from components both holders agreed on, and in a product the
        other factor's MAC gives the product's (``mul``, ``matmul``)."""
        arrays = [np.asarray(d, dtype=U64) for d in shares]
        if not arrays:
            return []
        for a in arrays:
            self._note_input_words(a)
        await self.verify_inputs()
        flat = np.concatenate([a.reshape(2, -1) for a in arrays], axis=1)
        data = await self._authenticate(_lift(flat)) if authenticate else _lift(flat)[:, :, None]
        out, start = [], 0
        for a in arrays:
            size = a[0].size
            out.append(Shared(data[..., start:start + size].reshape(data.shape[:3] + a.shape[1:]),
                              3))
            start += size
        return out

    async def output(self, x: Shared) -> np.ndarray:
        """The low limbs of the value components, a rep3 sharing of x mod 2^64, once every
        pending check has passed."""
        await self.verify()
        return np.ascontiguousarray(x.data[0, :, VALUE])

    # -- local arithmetic ------------------------------------------------------------------
    def add(self, x: Shared, y: Shared) -> Shared:
        return Shared(ring128.add(*_alike(x, y)), 3)

    def sub(self, x: Shared, y: Shared) -> Shared:
        return Shared(ring128.sub(*_alike(x, y)), 3)

    def neg(self, x: Shared) -> Shared:
        return Shared(ring128.neg(x.data), 3)

    def sum(self, x: Shared, axis: int) -> Shared:
        return Shared(ring128.sum_(x.data, axis + 2 if axis >= 0 else axis), 3)

    def mul_public(self, x: Shared, c: Public) -> Shared:
        return Shared(ring128.mul_u64(x.data, to_ring(c)), 3)

    def matmul_public(self, c: np.ndarray, x: Shared) -> Shared:
        return Shared(ring128.matmul(ring128.from_u64(to_ring(c)), x.data), 3)

    def add_public(self, x: Shared, c: Public) -> Shared:
        """c joins component 0 (slot 0 at party 0, slot 1 at party 2); alpha c joins the MAC."""
        c = to_ring(c)
        shape = np.broadcast_shapes(x.shape, np.shape(c))
        data = np.array(broadcast_data(x.data, 3, shape), copy=True)
        public = ring128.from_u64(np.broadcast_to(c, shape))
        slot = {0: 0, 2: 1}.get(self.party)
        if slot is not None:
            data[:, slot, VALUE] = ring128.add(data[:, slot, VALUE], public)
        if _authenticated(x):
            alpha = self._alpha.reshape((2, 2) + (1,) * len(shape))
            data[:, :, MAC] = ring128.add(data[:, :, MAC], ring128.mul(alpha, public[:, None]))
        return Shared(data, 3)

    def public(self, values: np.ndarray) -> Shared:
        return self.add_public(Shared(np.zeros((2, 2, 2) + np.shape(values), dtype=U64), 3),
                               values)

    # -- shuffle: rep3's rounds on (value, MAC) pairs in Z_2^128 ---------------------------
    _row_axis = 2  # a component array is (limb, v, rows, ...)

    @staticmethod
    def _pair_of(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return data[:, 0], data[:, 1]

    @staticmethod
    def _paired(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.stack([first, second], axis=1)

    @staticmethod
    def _plus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return ring128.add(a, b)

    @staticmethod
    def _minus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return ring128.sub(a, b)

    async def shuffle(self, x: Shared) -> Shared:
        """``Rep3.shuffle`` on the value and its MAC together (one permutation, masks uniform
        in Z_2^128). A cheater can only add errors to the words it sends, or permute its own
        components otherwise than its partner, which is the same: an error of its choice
        on values and MACs, a function of its own view. Every output is queued for the MAC
        check like a product's, so d = alpha e_x - e_m is tested with secret coefficients
        after the shuffle's words are fixed, and passes with probability about 2^-57 unless
        the error is zero in the low 64 bits; the argument of the module docstring applies
        unchanged. A value-only sharing has no MAC to carry the check, so it is refused."""
        return await super().shuffle(_require_mac(x))

    def _shuffled(self, x: Shared) -> Shared:
        self._macs.append(x.data.reshape(2, 2, 2, -1))
        return x

    async def refresh(self, x: Shared) -> Shared:
        """x's value with MACs made again (one product with alpha, queued): a job that opens
        values checked in parts (``mpcnet.ops.join``) hands on values whose old MACs, and
        any error on them that passed a part's check with probability 1/2, are dropped, so
        no such error reaches a later MAC check multiplied by secrets (docs/active3.md,
        "Checking the MACs in parts would leak"). A value error that passed a check lies in
        the upper 64 bits (below them it passes with about 2^-57) and stays there."""
        return Shared(await self._authenticate(np.ascontiguousarray(x.data[:, :, VALUE])), 3)

    # -- interactive arithmetic ------------------------------------------------------------
    async def mul(self, x: Shared, y: Shared) -> Shared:
        """x y and (alpha x) y in one round [DEK20, Pi_mult]; queued for the MAC check. y's
        MAC is not read: a value-only factor is taken as y."""
        if not _authenticated(x):
            x, y = _require_mac(y), x
        shape = np.broadcast_shapes(x.shape, y.shape)
        a = broadcast_data(x.data, 3, shape)
        b = broadcast_data(y.data[:, :, VALUE:VALUE + 1], 3, shape)
        z = await self._product(a, b)
        self._macs.append(z.reshape(2, 2, 2, -1))
        return Shared(z, 3)

    async def matmul(self, x: Shared, y: Shared) -> Shared:
        """[x0 | x1] @ [y0 + y1; y0] for the value and the MAC (alpha x) y, then reshare; for a
        value-only x, the MAC as x (alpha y). Either way the record's d = alpha z - MAC is
        the cheater's errors on this product plus an earlier record's d times a secret, which
        is what the MAC check's argument needs (module docstring)."""
        if _authenticated(x):
            left, right = _replicated_factors(x.data, y.data[:, :, VALUE])  # (limb, v, m, 2n)
            pairs = [(left[:, v], right) for v in (VALUE, MAC)]
        else:
            left, right = _replicated_factors(x.data[:, :, VALUE], _require_mac(y).data)
            pairs = [(left, right[:, v]) for v in (VALUE, MAC)]
        # value and MAC apart: an input's value components have no high limb (fewer pieces)
        term = np.stack([ring128.matmul(a, b) for a, b in pairs], axis=1)
        z = await self._reshare128(ring128.add(term, self._zero128(term.shape[1:])), "product")
        self._macs.append(z.reshape(2, 2, 2, -1))
        return Shared(z, 3)

    async def output_matmul(self, x: Shared, y: Shared) -> Shared:
        """z = x y for output only (D' = D x T): its value without a MAC, tested instead with
        Freivalds' check for a public random vector r drawn after z is fixed: z r - x (y r) = 0
        (z r and y r are local, x (y r) one MAC'd product; the zero test joins the MAC check's,
        decided by ``verify`` before z is output). Three rounds instead of one, and the
        product's MAC half is gone (three of its five word products, half its words sent).

        Round 1: each party sends its term of z to the previous party and a digest of it,
        salted by their key, to the next; round 2: the coin words, and the digest relayed to
        the terms' receiver, which checks it (as the AND check's triples: an honest party
        sends its coin word only once it holds both neighbours' round-1 messages, so the
        cheater's terms, hence its errors E on z, are fixed before r exists). Round 3:
        w = x (y r), whose errors the cheater picks knowing r.

        Why it holds. u = z r - w = E r - e_w for the value error e_w of w. E r is fixed by
        E and r, neither depending on the data, so a cheater passes the zero test only with
        e_w = E r, an error on a product, which the MAC check lets through with at most
        2^-(128 - v) for its 2-adic valuation v. A wrong low 64 bits of z (E of least
        valuation V < 64) gives an entry of E r of valuation v with probability at most
        2^-(v - V) over the public r, so it passes with at most about (129 - V) 2^-(128 - V),
        2^-57 at most, the MAC check's own bound. u itself, the outcome and what the zero
        test's claims show are functions of E, e_w and r: never of the data. (A first version
        drew r secret and computed y r as a product: its value errors of valuation 127 pass a
        MAC check half the time and reached u times x, so the abort and a digest depended on
        the data: found by review.) z is value-only (``_authenticated``), checked by the zero
        test as the inputs are by their holders' digests, so only a product with an
        authenticated factor or an output can use it."""
        if not _authenticated(x):  # refused now, not after the commitment and the coin
            _require_mac(y)
        term = ring128.matmul(*_replicated_factors(x.data[:, :, VALUE], y.data[:, :, VALUE]))
        term = ring128.add(term, self._zero128(term.shape[1:]))
        salt_out, salt_in = self._prev.words(4).tobytes(), self._next.words(4).tobytes()
        self._observe("output-salt", salt_out)
        got, committed = await self._ring_round(
            [("output-product", term)], [("output-hash", self._commitment(salt_out, term))],
            "MAC")
        mine = (self._next.words(2), self._prev.words(2))
        from_next, from_prev = await self._ring_round(
            [("coin", mine[0])], [("coin", mine[1]), ("output-relay", committed[0])], "coin")
        self._check_commitment(got[0], from_prev[1], salt_in, "MAC", "product terms")
        seed = self._seed(mine, (from_next[0], from_prev[0]))
        k = y.shape[-1]
        r = PRF(hashlib.sha256(b"freivalds" + seed).digest()[:16]).words((2, k, 1))
        self._observe("freivalds", r)
        values = np.stack([term, got[0]], axis=1)  # (limb, slot, m, k)
        y_r = Shared(ring128.matmul(y.data, r), 3)  # (limb, slot, v, p, 1): local
        w = await self.matmul(x, y_r)
        u = ring128.sub(ring128.matmul(values, r), w.data[:, :, VALUE])
        self._note_zero("MAC", u, binary=False)
        return Shared(values[:, :, None], 3)

    async def random(self, shape: tuple[int, ...]) -> Shared:
        return Shared(await self._authenticate(self._random128(shape)), 3)

    async def _open_words(self, data: np.ndarray, binary: bool, kind: str = "open-value"
                          ) -> np.ndarray:
        """Checked opening of a rep3 sharing of words (slot, ...): the missing component from
        the next party, its digest from the previous one, compared in the same round before
        anything uses it (the messages pass the fault hook as ``kind`` and ``kind``-hash)."""
        data = np.ascontiguousarray(data)
        vouch = digest_words(RunningHash(data[0]))
        hash_kind = "open-hash" if kind == "open-value" else f"{kind}-hash"
        got = await self.engine.exchange(
            {self.prev_party: self._outgoing(kind, self.prev_party, data[1]),
             self.next_party: self._outgoing(hash_kind, self.next_party, vouch)},
            [self.prev_party, self.next_party])
        missing = self._received(got, self.next_party, data[0].size, "open consistency")
        digest = self._received(got, self.prev_party, DIGEST_WORDS, "open consistency")
        self._observe("received", (kind, self.next_party, missing))
        self._observe("received", (hash_kind, self.prev_party, digest))
        if not np.array_equal(digest, digest_words(
                RunningHash(np.ascontiguousarray(missing)))):
            raise CheatingDetected("open consistency",
                                   f"party {self.party}: the value from party {self.next_party} "
                                   f"does not match the digest from party {self.prev_party}")
        missing = missing.reshape(data.shape[1:])
        if binary:
            opened = np.bitwise_xor(data[0], data[1])
            opened ^= missing
        else:
            opened = np.add(data[0], data[1])
            opened += missing
        return opened

    async def open(self, x: Shared) -> np.ndarray:
        """x mod 2^64 (as uint64), after every pending check."""
        await self.verify()
        return await self._open_words(x.data[0, :, VALUE], binary=False)

    async def open_masked(self, x: Shared, binary: bool = False) -> np.ndarray:
        """x, uniformly masked (``Scheme.open_masked``), with no MAC or AND test first: the
        MAC records and ANDs stay queued for the job's next ``checkpoint`` or ``verify``,
        whose randomness is drawn after this opening and everything before it. Testing the
        MACs at every such opening would run the MAC check in parts (a training job
        truncates a hundred times), and an error that passed one part would reach the next
        multiplied by secrets: an adversarial review made the abort of a training job depend
        on the parity of a data cell that way. What the opening shows is uniform whatever
        errors precede it (a second review checked the mask's bits stay a bijection of the
        bits a cheater lacks), and the other holder vouches for it (open consistency)."""
        await self.verify_inputs()
        return await self._open_words(x.data if binary else x.data[0, :, VALUE], binary=binary)

    # -- binary ----------------------------------------------------------------------------
    async def and_(self, x: Shared, y: Shared) -> Shared:
        a, b = np.broadcast_arrays(x.data, y.data)
        z = await self._reshare(self._and_terms(a, b), True, "and")
        self._ands.append((a.reshape(2, -1), b.reshape(2, -1), z.data.reshape(2, -1)))
        return z

    async def open_binary(self, x: Shared) -> np.ndarray:
        await self.verify()
        return await self._open_words(x.data, binary=True)

    # -- conversions -----------------------------------------------------------------------
    def arith_components(self, x: Shared) -> list[Shared]:
        return self._components(x.data[0, :, VALUE], True)

    async def bit_components(self, b: Shared) -> list[Shared]:
        """The XOR components of bit 0 of b as authenticated Z_2^128 sharings (one round, two
        words sent per component bit and party).

        Component c_j is known to parties j and j-1; its MAC alpha c_j is shared as
        t_j + t_{j+1} + t_{j-1}, party i holding (t_i, t_{i+1}) as for any value:
        - t_{j+1}, the term of party j+1 (which lacks c_j), is the next word of the PRF that
          parties j and j+1 share: both compute it, nobody sends it;
        - t_j = (alpha_j + alpha_{j+1}) c_j - t_{j+1} + r and t_{j-1} = alpha_{j-1} c_j - r,
          with r the next word of the PRF of parties j-1 and j; each goes to the other
          party that holds it (j to j-1, j-1 to j+1), as in a reshare.
        The multiplications by a 0/1 component are masks. Party j+1 sees t_{j+1} and t_{j-1},
        masked by r, which it lacks; party j-1 sees t_j, masked by the word it lacks. A
        cheater's words are additive errors on MACs, queued for the MAC check like every
        product's."""
        shape = b.data.shape[1:]
        bits = (b.data & U64(1)).reshape(2, -1)  # (slot, n): c_i, c_{i+1}
        n = bits.shape[1]
        own, nxt, lack = self.party, self.next_party, self.prev_party  # c_i, c_{i+1}, c_{i-1}
        # the shared streams, (limb, use, n): with party i+1, the free term of c_i and the
        # mask of c_{i+1}; with party i-1, the free term of c_{i-1} and the mask of c_i
        with_next, with_prev = self._next.words((2, 2, n)), self._prev.words((2, 2, n))
        alpha = self._alpha
        both = ring128.add(alpha[:, 0], alpha[:, 1])
        times = np.empty((2, 2, n), dtype=U64)  # (limb, [own, nxt], n): the products
        for limb in range(2):
            np.bitwise_and(U64(0) - bits[0], both[limb], out=times[limb, 0])
            np.bitwise_and(U64(0) - bits[1], alpha[limb, 0], out=times[limb, 1])
        term = ring128.sub(times, with_next)  # own: - free term; nxt: - its mask
        term[:, 0] = ring128.add(term[:, 0], with_prev[:, 1])  # own: + its mask
        data = np.zeros((2, 2, 2, 3, n), dtype=U64)  # (limb, slot, v, component, n)
        data[0, 0, VALUE, own], data[0, 1, VALUE, nxt] = bits[0], bits[1]
        macs = await self._reshare128(term, "product")  # (limb, slot, [own, nxt], n)
        data[:, 0, MAC, own], data[:, 1, MAC, own] = macs[:, 0, 0], with_next[:, 0]
        data[:, 0, MAC, nxt], data[:, 1, MAC, nxt] = macs[:, 0, 1], macs[:, 1, 0]
        data[:, 0, MAC, lack], data[:, 1, MAC, lack] = with_prev[:, 0], macs[:, 1, 1]
        self._macs.append(data.reshape(2, 2, 2, -1))
        return [Shared(data[:, :, :, j].reshape((2, 2, 2) + shape), 3) for j in range(3)]

    # -- checks ----------------------------------------------------------------------------
    def note_input(self, x: Shared) -> None:
        """Queue the check that the client gave both holders of each component the same
        words (of the value's low limbs)."""
        self._note_input_words(x.data[0, :, VALUE])

    def _note_input_words(self, words: np.ndarray) -> None:
        """Slot 1 of this party is the next party's slot 0, and slot 0 the previous one's
        slot 1: a digest of each goes to the other holder."""
        self._claim[INPUTS].update(np.ascontiguousarray(words[1]).data)
        self._expect[INPUTS].update(np.ascontiguousarray(words[0]).data)
        self._pending_input = True

    async def verify_inputs(self) -> None:
        """One round: the digest of each input component this party holds goes to its other
        holder, so both holders of every component compare before anything is computed on
        it (nothing when no input is pending)."""
        if not self._pending_input:
            return
        self._pending_input = False
        of_slot1 = digest_words(self._claim[INPUTS])
        of_slot0 = digest_words(self._expect[INPUTS])
        self._reset_digests((INPUTS,))
        got = await self.engine.exchange(
            {self.next_party: self._outgoing("input-hash", self.next_party, of_slot1),
             self.prev_party: self._outgoing("input-hash", self.prev_party, of_slot0)},
            [self.prev_party, self.next_party])
        for peer, mine in ((self.prev_party, of_slot0), (self.next_party, of_slot1)):
            theirs = self._received(got, peer, DIGEST_WORDS, INPUTS)
            if not np.array_equal(theirs, mine):
                raise CheatingDetected(INPUTS, f"party {self.party}: the input shares held with "
                                               f"party {peer} differ")

    def _note_zero(self, check: str, t: np.ndarray, binary: bool) -> None:
        """Queue the check that the shared t (slot, ...) is zero: I claim the sum of my two
        components to the next party, which holds the third (Z_2^128 t as (limb, slot, ...))."""
        if binary:
            mine, third = t[0] ^ t[1], t[1]
        else:
            mine, third = ring128.add(t[:, 0], t[:, 1]), ring128.neg(t[:, 1])
        mine = self._outgoing(_CLAIM_KIND[check], self.next_party, np.ascontiguousarray(mine))
        self._claim[check].update(np.ascontiguousarray(mine).data)
        self._expect[check].update(np.ascontiguousarray(third).data)

    async def checkpoint(self) -> None:
        """The inputs and ANDs queued so far are checked now (their outcomes depend on the
        cheater's errors and the coins only); the MAC records are folded into this party's
        running terms of w and u and freed: their coefficients are drawn now, after every
        record they weigh, and stay secret (nothing is sent), so the one MAC zero test at the
        next ``verify`` weighs every record of the job exactly as a single check would.
        Running the MAC check in parts instead would let an error that passed one part reach
        the next only multiplied by secrets (docs/active3.md)."""
        await self.verify_inputs()
        if self._macs:
            sums = self._mac_sums(self._macs)
            self._folded = sums if self._folded is None else ring128.add(self._folded, sums)
            self._macs = []
        if self._ands:
            ands, self._ands = self._ands, []
            await self._check(ands, None)

    async def verify(self) -> None:
        """Check every queued product (and those folded by ``checkpoint``), AND and input:
        four rounds (three without ANDs, one with only inputs); nothing when nothing is
        queued."""
        await self.verify_inputs()
        if not (self._macs or self._ands or self._folded is not None):
            return
        ands, self._ands = self._ands, []
        macs, self._macs = self._macs, []
        sums = self._mac_sums(macs) if macs else None
        if self._folded is not None:
            sums = self._folded if sums is None else ring128.add(sums, self._folded)
            self._folded = None
        await self._check(ands, sums)

    async def _check(self, ands: list[_And], sums: np.ndarray | None) -> None:
        """The AND check of ``ands`` and the MAC check of this party's terms ``sums`` of w
        and u (either may be absent), in the four rounds of ``verify``."""
        triples = self._triple_terms(ands)
        # round 1: the triples' AND terms and the terms of w and u to the previous party, a
        # digest of the terms to the next party (the commitment, relayed in round 2)
        back: list[_Part] = [] if triples is None else [("triple", triples[2][0])]
        forward: list[_Part] = []
        if triples is not None:
            # salted with the key shared with the terms' receiver: the relayer lacks that
            # component and its key, so the digest tells it nothing (unsalted, it tested
            # guesses of the ANDs' inputs once rho and sigma were open: review)
            salt_out, salt_in = self._prev.words(4).tobytes(), self._next.words(4).tobytes()
            self._observe("triple-salt", salt_out)
            forward.append(("triple-hash", self._commitment(salt_out, triples[2][0])))
        if sums is not None:
            back.append(("mac-sum", sums))
        got, committed = await self._ring_round(back, forward,
                                                "AND" if triples is not None else "MAC")
        # round 2: the coin (it fixes the AND matching), the relayed commitment and alpha w
        back, forward = [], []
        if triples is not None:
            triples[2][1] = got[0]
            back.append(("coin", self._next.words(2)))
            forward += [("coin", self._prev.words(2)), ("triple-relay", committed[0])]
        if sums is not None:
            w_u = np.stack([sums, got[-1]], axis=1)  # (limb, slot, v): replicated w and u
            alpha_w = self._product_term(self._alpha[..., None], w_u[:, :, VALUE:VALUE + 1])
            back.append(("mac-product", alpha_w))
        if back:
            from_next, from_prev = await self._ring_round(back, forward, "coin")
        if sums is not None:
            alpha_w = np.stack([alpha_w, from_next[-1]], axis=1)
            self._note_zero("MAC", ring128.sub(w_u[:, :, MAC:MAC + 1], alpha_w), binary=False)
        # round 3: the openings of the AND check
        if triples is not None:
            self._check_commitment(got[0], from_prev[1], salt_in)
            seed = self._seed((back[0][1], forward[0][1]), (from_next[0], from_prev[0]))
            await self._check_ands(ands, triples, seed)
        # round 4: the digests of the zero tests
        await self._compare_digests(CHECKS)

    def _triple_terms(self, ands: list[_And]) -> _Triples | None:
        """The AND check's random triples: a, b (slot, pool, P) and c with this party's
        3-out-of-3 terms of a AND b in c[0] (c[1] arrives in round 1); None without ANDs."""
        if not ands:
            return None
        pools, size = check_plan(sum(x.shape[1] for x, _, _ in ands))
        a, b = self._random_words((pools, size)), self._random_words((pools, size))
        return a, b, self._and_terms(a, b)

    def _mac_sums(self, macs: list[np.ndarray]) -> np.ndarray:
        """This party's 3-out-of-3 terms of w = sum_j r_j z_j and u = sum_j r_j (alpha z)_j
        over every queued (z, alpha z), as (limb, v): the coefficients r_j are replicated
        random Z_2^128 values nobody knows (see the module docstring for why), so each term is
        a local dot product, r_i (z_i + z_{i+1}) + r_{i+1} z_i, plus a share of zero."""
        total = ring128.zeros((2,))
        for entry, data in enumerate(macs):
            for start in range(0, data.shape[-1], _CHUNK):  # cache-sized pieces
                z = data[..., start:start + _CHUNK]  # (limb, slot, v, c)
                r = self._coefficients(z.shape[-1])  # (limb, slot, c)
                self._observe("mac-coefficients", (entry, start, r))
                total = ring128.add(total, ring128.replicated_dot(r[:, :, None], z))
        return ring128.add(total, self._zero128((2,)))

    def _coefficients(self, count: int) -> np.ndarray:
        """Coefficients of the MAC check, (limb, slot, count): replicated random Z_2^128 values
        from the pairwise PRFs, so the component the other two parties share is one this
        party never learns."""
        return self._random128((count,))

    @staticmethod
    def _commitment(salt: bytes, terms: np.ndarray) -> np.ndarray:
        """The digest binding the triple terms, salted by the key of their sender and
        receiver: once rho and sigma are open, the terms are a function of the ANDs' inputs,
        so an unsalted digest would let the relayer test guesses of them (found by review)."""
        h = RunningHash(salt)
        h.update(np.ascontiguousarray(terms))
        return digest_words(h)

    def _check_commitment(self, terms: np.ndarray, relayed: np.ndarray, salt: bytes,
                          check: str = "AND", what: str = "triple terms") -> None:
        """The terms the next party sent in a round must be those whose digest it sent to the
        previous party in the same round (relayed here in the coin's round). An honest party
        sends its coin only once it holds both its neighbours' messages of the first round, so
        the terms were fixed before any coin word the cheater lacks was sent: without this, a
        cheater could hold back its terms, read an honest coin word and make its terms cancel
        its AND errors under the coin's shifts (found by review)."""
        if not np.array_equal(relayed, self._commitment(salt, terms)):
            raise CheatingDetected(check, f"party {self.party}: the {what} of party "
                                          f"{self.next_party} do not match their digest "
                                          f"relayed by party {self.prev_party}")

    def _seed(self, mine: tuple[np.ndarray, np.ndarray],
              third: tuple[np.ndarray, np.ndarray]) -> bytes:
        """The coin: this party's outputs under its two keys and, from both holders of the key
        it lacks, that key's output, which must agree."""
        if not np.array_equal(*third):
            raise CheatingDetected("coin", f"party {self.party}: the two holders of a key "
                                           "sent different coin contributions")
        seed = (mine[0] ^ mine[1] ^ third[0]).tobytes()
        self._observe("coin", seed)
        return seed

    async def _check_ands(self, ands: list[_And], triples: _Triples, seed: bytes) -> None:
        """Round 3: open the cut triples and x ^ a, y ^ b of every match, each component
        vouched for by its other holder in the same round before it is used (a zero test's
        claim computed from an unvouched word would tell the cheater triple bits through its
        digest), then queue the zero tests."""
        to_open, finish = self._and_openings(ands, triples, seed)
        finish(await self._open_words(to_open, binary=True, kind="check-open"))

    def _and_openings(self, ands: list[_And], triples: _Triples, seed: bytes
                      ) -> tuple[np.ndarray, Callable[[np.ndarray], None]]:
        """Round 3 of the AND check: the words to open as (slot, L), and a function that
        checks the opened cut triples and queues the zero checks of every (AND, triple) match.

        Matching a queued AND (x, y, z) with a triple (a, b, c) opens rho = x ^ a and
        sigma = y ^ b; then z ^ c ^ (a & sigma) ^ (rho & b) ^ (rho & sigma) is zero exactly
        when the errors of z and c are equal [FLNW17, verification with a triple]."""
        n, (pools, size) = sum(x.shape[1] for x, _, _ in ands), triples[0].shape[1:]
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
            for words, at in _rotation(n, cut, size, shift):  # the triples left unmatched
                for i, w in enumerate((a, b, c)):
                    row[:, i * cut + words.start:i * cut + words.stop] = w[:, at]
            rho, sigma = row[:, 3 * cut:3 * cut + n], row[:, 3 * cut + n:]
            matches = []  # per queued AND: its words' pieces matched with contiguous triples
            for (x, y, _), start in zip(ands, starts, strict=True):
                pieces = _rotation(int(start), x.shape[1], size, shift)
                for words, at in pieces:
                    out = slice(start + words.start, start + words.stop)
                    np.bitwise_xor(x[:, words], a[:, at], out=rho[:, out])
                    np.bitwise_xor(y[:, words], b[:, at], out=sigma[:, out])
                matches.append(pieces)
            pools_of.append((a, b, c, matches))

        def finish(opened: np.ndarray) -> None:
            t = np.empty((2, n), dtype=U64)
            public = np.empty(n, dtype=U64)
            for pool, (a, b, c, matches) in enumerate(pools_of):
                row = opened[pool * width:(pool + 1) * width]
                ca, cb, cc = (row[i * cut:(i + 1) * cut] for i in range(3))
                if not np.array_equal(cc, ca & cb):
                    raise CheatingDetected("AND", f"party {self.party}: an opened triple of "
                                                  "the cut-and-choose is wrong")
                rho, sigma = row[3 * cut:3 * cut + n], row[3 * cut + n:]
                for (_, _, z), start, pieces in zip(ands, starts, matches, strict=True):
                    for words, at in pieces:
                        out = slice(start + words.start, start + words.stop)
                        np.bitwise_xor(z[:, words], c[:, at], out=t[:, out])
                        t[:, out] ^= a[:, at] & sigma[out]
                        t[:, out] ^= b[:, at] & rho[out]
                slot = {0: 0, 2: 1}.get(self.party)  # who holds component 0 (as xor_public)
                if slot is not None:
                    t[slot] ^= np.bitwise_and(rho, sigma, out=public)
                self._note_zero("AND", t, binary=True)

        return to_open, finish

    async def _compare_digests(self, checks: tuple[str, ...]) -> None:
        """One round: the claim digest of every check in ``checks`` to the next party,
        compared with what this party expects."""
        sends = np.concatenate([self._outgoing(_HASH_KIND[c], self.next_party,
                                               digest_words(self._claim[c])) for c in checks])
        got = await self.engine.exchange({self.next_party: sends}, [self.prev_party])
        buf = self._received(got, self.prev_party, sends.size, checks[-1])
        self._observe("received", ("digests", self.prev_party, buf))
        expected = {c: digest_words(self._expect[c]) for c in checks}
        self._reset_digests(checks)
        for i, check in enumerate(checks):
            if not np.array_equal(buf[i * DIGEST_WORDS:(i + 1) * DIGEST_WORDS], expected[check]):
                raise CheatingDetected(check, f"party {self.party}: party {self.prev_party}'s "
                                              f"{check} digest differs from this party's")
