"""Layer: schemes. Active 3PC, SPDZ-wise: replicated sharing with MACs over Z_2^(64+64).

Security with abort against one malicious server of three. [DEK20] Dalskov, Escudero, Keller,
"Secure Evaluation of Quantized Neural Networks", PoPETs 2020 (SPDZ-wise replicated 3PC over
Z_2^(k+s)); [SPDZ2k] Cramer, Damgard, Escudero, Scholl, Xing, CRYPTO 2018. ``Spdz3`` composes
the sharing and its operations (on ``rep3_wide``) with the checks, each a module of its own:
``mac_check`` (the MAC check and its folding), ``and_check`` (the AND check and its plan;
or ``dzkp``, each party's proof of its AND messages, when ``proves_ands`` is set),
``freivalds`` (the output test of D'), ``commitment`` (commitments and the coin) and
``zero_tests`` (the claims the zero tests and the input check compare by digest).

Sharing. Every value is a rep3 sharing (party i holds components i and i+1) of x in Z_2^128
and of its MAC alpha x, alpha a replicated random key no party knows. Data layout:
``data[limb, slot, v]``: limb 0/1 the low/high 64 bits (``ring128``), slot 0/1 the two
components held, v = 0 the value and v = 1 its MAC, then the logical shape (lead 3). Only
x mod 2^64 (k = 64 bits) carries data; the upper s = 64 bits let a MAC catch errors there.

Every check's randomness is fixed after every value and error it tests, and nothing a cheater
sends after that can make the outcome depend on a secret: whether a job aborts never depends
on secret data (docs/cheating.md has the table and the attacks).

- Products (``mul``, ``matmul``; [DEK20, Pi_mult]): x y and (alpha x) y in one round (x (alpha
  y) when x is value-only); a cheater can only add errors to its messages. Product outputs,
  input MACs, authenticated bits and random values are queued for the MAC check, the
  circuits' bit-sliced ANDs for the AND check; ``output_matmul`` (D' = D x T) sends the value
  alone, tested by Freivalds.
- Bits between the two worlds. ``arith_components`` hands the circuits the low limbs of the
  value components, each held by two servers, so the binary input is the honest holder's copy;
  ``bit_components`` authenticates a bit's XOR components (MACs made by their two holders,
  queued like a product's) before ``bit_to_arith`` folds them, so a non-bit cannot enter.
- Openings: ``verify`` first; then each party gets its missing component from one holder and
  its digest from the other. Only the low 64 bits are opened: the upper bits never leak.
- Inputs (``rep3.share``): the two holders of each component compare its digest in a round of
  their own (``verify_inputs``) before anything is computed on it, else an owner colluding with
  the cheater could give two honest holders different copies and the digests they later send
  would carry the difference; then one product with alpha makes the MACs. Value-only inputs
  (``input(authenticate=False)``: the data of the mean-split scores and of D') are fixed by
  that agreement and need no MAC until they are a product's factor, whose MAC then comes from
  the other factor (``mac_check`` has why the argument holds); their v axis has one entry.

``verify`` runs every pending check (``pending_checks``) in four rounds: triples with the MAC
sums, coin with alpha w, the AND check's openings, the zero tests' digests (with the proofs,
``proves_alone``: the commitment to the AND messages instead of the triples, then the
proofs' rounds instead of the openings: two per level, 7 levels for a million AND words, and
a closing one; by default only a ``checkpoint_later`` proves, in parts beside other
rounds); an
honest party sends its coin word only once it holds both neighbours' round-1 messages, whose
triple terms (or AND messages) are committed. ``checkpoint`` (a job too large to keep every
record) checks the ANDs and folds the MAC records, so the MAC check stays one zero test over
the job (docs/active3.md).

A subclass of ``Rep3``, not a wrapper around it (as MP-SPDZ's ``SpdzWise`` wraps a passive
protocol): the binary world is rep3's, inherited (each AND is only queued); the arithmetic
world has another layout (Z_2^128, value and MAC), overridden on ``rep3_wide``'s helpers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import numpy as np

from mpcnet import ring128
from mpcnet.errors import CheatingDetected
from mpcnet.net.engine import RoundEngine
from mpcnet.prf import PRF
from mpcnet.ring import to_ring
from mpcnet.schemes.and_check import SIGMA, And, Triples, and_openings, and_words, check_plan
from mpcnet.schemes.base import Public, Rounds, Shared, all_rounds, broadcast_data
from mpcnet.schemes.commitment import check_commitment, coin_seed, commitment
from mpcnet.schemes.dzkp import Prover, Verifier, grouped, level_weights, proof_plan
from mpcnet.schemes.faults import FaultInjector
from mpcnet.schemes.freivalds import freivalds_vector, residual
from mpcnet.schemes.keys import pairwise_prfs
from mpcnet.schemes.mac_check import MacRecords, local_terms
from mpcnet.schemes.rep3_wide import (
    Part,
    Rep3Wide,
    lift,
    replicated_factors,
    replicated_left,
    replicated_right,
)
from mpcnet.schemes.replicated import DIGEST_WORDS, RunningHash, digest_words
from mpcnet.schemes.zero_tests import Claims, zero_claim

__all__ = ["SIGMA", "Spdz3", "check_plan"]

U64 = np.uint64
VALUE, MAC = 0, 1
CHECKS = ("AND", "MAC")  # zero tests compared by digest in the last round of ``verify``
INPUTS = "input consistency"  # compared in a round of its own, before inputs are used
_HASH_KIND = {"AND": "and-hash", "MAC": "mac-hash"}
_CLAIM_KIND = {"AND": "and-claim", "MAC": "mac-claim"}
ProvedAnd = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""An AND queued for the proof (``dzkp``): x, y, z words (slot, n), the triples' record
(``And``: the checks that run alone take it so), e_A = x_{i+1} y_{i+1} ^ z_{i+1} ^ F_{i,i+1}
(this party as A of the next party's proof) and F_{i-1,i} (as B of the previous party's),
(n,) each."""
PART_ROUNDS = 9
"""The most rounds a checkpoint's AND proof runs beside one computation before it hands the
rest to the next (``checkpoint_later``): a block's sign tests take 12 rounds, the fractions
10, so a part beside each fits whatever else runs there."""


@dataclass(frozen=True)
class Proofs:
    """One check's AND proof records and the running digests of the AND messages they cover
    (sent to the next party, received from the previous)."""

    records: list[ProvedAnd]
    sent: RunningHash
    got: RunningHash


async def _run(steps: AsyncIterator[int]) -> None:
    """Every step of a check (``Spdz3._check``), one after another."""
    async for _ in steps:
        pass


def _authenticated(x: Shared) -> bool:
    """Whether x carries MACs: a value-only sharing (``input(authenticate=False)`` and what
    is computed from it locally) has a v axis of one, so that reading its MAC fails."""
    return x.data.shape[2] == 2


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


class Spdz3(Rep3Wide):
    """SPDZ-wise replicated 3-party sharing over Z_2^128, malicious security with abort."""

    name = "active3"
    n_parties = 3
    lead = 3
    deals = False  # a party that dealt a mask could deal a wrong one (Rep3.truncate, bit_mul)

    def __init__(self, engine: RoundEngine, next_prf: PRF, prev_prf: PRF,
                 fault: FaultInjector | None = None) -> None:
        super().__init__(engine, next_prf, prev_prf, fault)
        self._alpha = self._random128(())  # (limb, slot): the MAC key
        self._macs = MacRecords()  # the MAC check's records (mac_check)
        self._ands: list[And] = []  # the AND check's (x, y, z) words (and_check)
        self._proved: list[ProvedAnd] = []  # the AND proof's words (dzkp)
        self._sent_and, self._got_and = RunningHash(b"and"), RunningHash(b"and")
        self._claims = Claims((*CHECKS, INPUTS))  # the zero tests' and inputs' digests
        self._deferred = 0  # checkpoints whose rounds (checkpoint_later) have not run yet
        self._held: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id -> (data, left)

    @classmethod
    async def setup(cls, engine: RoundEngine, fault: FaultInjector | None = None) -> Spdz3:
        prfs = await pairwise_prfs(engine)
        i = engine.party
        return cls(engine, prfs[(i + 1) % 3], prfs[(i - 1) % 3], fault)

    # -- plumbing (rep3_wide) ----------------------------------------------------------
    async def _authenticate(self, values: np.ndarray) -> np.ndarray:
        """MACs of replicated Z_2^128 values (limb, slot, ...): one product with alpha,
        queued for the MAC check; returns the full (limb, slot, v, ...) data."""
        alpha = self._alpha.reshape((2, 2) + (1,) * (values.ndim - 2))
        data = np.stack([values, await self._product(alpha, values)], axis=2)
        self._macs.queue(data.reshape(2, 2, 2, -1))
        return data

    # -- inputs and outputs ----------------------------------------------------------------
    async def input(self, *shares: np.ndarray, authenticate: bool = True) -> list[Shared]:
        """Client shares (rep3 layout, uint64), checked for consistency in a round of their
        own before anything is computed on them, then lifted to Z_2^128 and authenticated
        together (one product with alpha), or left value-only (``_authenticated``)."""
        arrays = [np.asarray(d, dtype=U64) for d in shares]
        if not arrays:
            return []
        self._refuse_earlier_inputs()
        for a in arrays:
            self._note_input_words(a)
        await self._input_check()
        flat = np.concatenate([a.reshape(2, -1) for a in arrays], axis=1)
        data = await self._authenticate(lift(flat)) if authenticate else lift(flat)[:, :, None]
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

    async def _permute(self, x: Shared, perms: tuple[np.ndarray | None, ...]) -> Shared:
        """``Rep3._permute`` on the value and its MAC together (one permutation, masks uniform
        in Z_2^128). A cheater can only add errors to the words it sends, or permute its own
        components otherwise than its partner, which is the same: an error of its choice
        on values and MACs, a function of its own view. Every output is queued for the MAC
        check like a product's, so d = alpha e_x - e_m is tested with secret coefficients
        after the shuffle's words are fixed, and passes with probability about 2^-57 unless
        the error is zero in the low 64 bits; the argument of ``mac_check`` applies
        unchanged. A value-only sharing has no MAC to carry the check, so it is refused."""
        return await super()._permute(_require_mac(x), perms)

    def _shuffled(self, x: Shared) -> Shared:
        self._macs.queue(x.data)
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
        self._macs.queue(z.reshape(2, 2, 2, -1))
        return Shared(z, 3)

    async def matmul(self, x: Shared, y: Shared) -> Shared:
        """[x0 | x1] @ [y0 + y1; y0] for the value and the MAC (alpha x) y, then reshare; for a
        value-only x, the MAC as x (alpha y). Either way the record's d = alpha z - MAC is
        the cheater's errors on this product plus an earlier record's d times a secret, which
        is what the MAC check's argument needs (``mac_check``)."""
        if _authenticated(x):
            left, right = self._left(x), replicated_right(y.data[:, :, VALUE])  # (limb, v, m, 2n)
            pairs = [(left[:, v], right) for v in (VALUE, MAC)]
        else:
            left, right = self._left(x), replicated_right(_require_mac(y).data)
            pairs = [(left, right[:, v]) for v in (VALUE, MAC)]
        # value and MAC apart: an input's value components have no high limb (fewer pieces)
        term = np.stack([ring128.matmul(a, b) for a, b in pairs], axis=1)
        z = await self._reshare128(ring128.add(term, self._zero128(term.shape[1:])), "product")
        self._macs.queue(z.reshape(2, 2, 2, -1))
        return Shared(z, 3)

    def _left(self, x: Shared) -> np.ndarray:
        """``replicated_left`` of x's data (its value and MAC, or its value alone), the copy
        kept by ``hold_factor`` if x is held."""
        kept = self._held.get(id(x.data))
        if kept is not None and kept[0] is x.data:
            return kept[1]
        return replicated_left(x.data if _authenticated(x) else x.data[:, :, VALUE])

    def hold_factor(self, x: Shared) -> None:
        """Keep x's ``replicated_left`` (a copy of all of x) for its next products: making
        it was most of an epoch's product time in training (docs/performance.md,
        "Training"). The entry holds x's array, so its id names no other array meanwhile."""
        self._held[id(x.data)] = (x.data, self._left(x))

    def drop_factors(self) -> None:
        self._held.clear()

    async def output_matmul(self, x: Shared, y: Shared) -> Shared:
        """z = x y for output only (D' = D x T), its value without a MAC, tested by Freivalds
        (``freivalds``: the argument). Round 1: each party's term of z to the previous party
        and its salted digest to the next (``commitment``); round 2: the coin words and the
        digest relayed to the terms' receiver, which checks it, so the cheater's errors on z
        are fixed before r exists; round 3: w = x (y r), MAC'd. u = z r - w joins the MAC
        zero test. z is value-only (``_authenticated``). Refused inside
        ``RoundEngine.together`` (``alone``): its coin is check randomness."""
        self.engine.alone("output_matmul (its Freivalds coin)")
        if not _authenticated(x):  # refused now, not after the commitment and the coin
            _require_mac(y)
        term = ring128.matmul(*replicated_factors(x.data[:, :, VALUE], y.data[:, :, VALUE]))
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
        r = freivalds_vector(seed, y.shape[-1])
        self._observe("freivalds", r)
        values = np.stack([term, got[0]], axis=1)  # (limb, slot, m, k)
        y_r = Shared(ring128.matmul(y.data, r), 3)  # (limb, slot, v, p, 1): local
        w = await self.matmul(x, y_r)
        self._note_zero("MAC", residual(values, r, w.data[:, :, VALUE]), binary=False)
        return Shared(values[:, :, None], 3)

    async def random(self, shape: tuple[int, ...]) -> Shared:
        return Shared(await self._authenticate(self._random128(shape)), 3)

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

    async def open_of(self, x: Shared, inputs: Sequence[Shared], binary: bool = False
                      ) -> np.ndarray:
        """x once the pending ANDs and the MACs of ``inputs`` pass a check of their own
        (``Scheme.open_of``), in the four rounds of ``verify``, with coefficients drawn now
        for the inputs' records alone; every MAC record stays queued, so the job's one MAC
        zero test still weighs them all, these included, with coefficients of its own.
        ``inputs`` must carry no product: inputs, shuffles of them and their local
        combinations, whose MAC errors are the cheater's own, so this test's outcome depends
        on those errors and alpha only (a product's record would carry an earlier error
        times a secret). And as the job's test keeps every record at which an error first
        appears, the argument of ``mac_check`` holds for it unchanged, whatever passed here:
        nothing is checked in parts (docs/cheating.md, "The best-split Gini's sort")."""
        self.engine.alone("open_of")
        if self._deferred:
            raise RuntimeError("open_of before the rounds of a checkpoint_later ran")
        await self.verify_inputs()
        records = [np.ascontiguousarray(_require_mac(v).data).reshape(2, 2, 2, -1)
                   for v in inputs]
        ands, proofs = self._take_ands(self.proves_alone)
        if ands or proofs is not None or records:
            await _run(self._check(ands, self._mac_sums(records) if records else None, proofs))
        return await self._open_words(x.data if binary else x.data[0, :, VALUE], binary=binary)

    # -- binary ----------------------------------------------------------------------------
    proves_ands = True
    """Check the ANDs of a checkpoint whose rounds run beside other computations
    (``checkpoint_later``) by each party's proof of its messages (``dzkp``) rather than by
    triples with cut-and-choose (``and_check``); the checks that run alone (``verify``,
    ``checkpoint``) keep the triples, whose 4 rounds are fewer than the proof's 2 a level
    (docs/active3.md, "The AND proof")."""

    proves_alone = False
    """With ``proves_ands``, prove the ANDs in the checks that run alone too (tests)."""

    async def and_(self, x: Shared, y: Shared) -> Shared:
        a, b = np.broadcast_arrays(x.data, y.data)
        if not self.proves_ands:
            z = await self._reshare(self._and_terms(a, b), True, "and")
            self._ands.append((a.reshape(2, -1), b.reshape(2, -1), z.data.reshape(2, -1)))
            return z
        # Rep3._and_terms with its zero words kept: the proofs' verifiers need them
        shape = a.shape[1:]
        f_next, f_prev = self._next.words(shape), self._prev.words(shape)
        out = self._terms(shape)
        term = out[0] if out.ndim > 1 else out[0:1]
        np.bitwise_xor(b[0], b[1], out=term)
        term &= a[0]
        term ^= a[1] & b[0]
        term ^= f_next
        term ^= f_prev
        z = await self._reshare(out, True, "and")
        xs, ys, zs = a.reshape(2, -1), b.reshape(2, -1), z.data.reshape(2, -1)
        self._sent_and.update(np.ascontiguousarray(zs[0]))
        self._got_and.update(np.ascontiguousarray(zs[1]))
        e_a = xs[1] & ys[1]
        e_a ^= zs[1]
        e_a ^= f_next.reshape(-1)
        self._proved.append((xs, ys, zs, e_a, f_prev.reshape(-1)))
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
        self._macs.queue(data.reshape(2, 2, 2, -1))
        return [Shared(data[:, :, :, j].reshape((2, 2, 2) + shape), 3) for j in range(3)]

    # -- checks ----------------------------------------------------------------------------
    def note_input(self, x: Shared) -> None:
        """Queue the check that the client gave both holders of each component the same
        words (of the value's low limbs)."""
        self._note_input_words(x.data[0, :, VALUE])

    def _note_input_words(self, words: np.ndarray) -> None:
        """Slot 1 of this party is the next party's slot 0, and slot 0 the previous one's
        slot 1: a digest of each goes to the other holder."""
        self._claims.note(INPUTS, words[1], words[0])

    def _inputs_pending(self) -> bool:
        return INPUTS in self._claims.pending

    async def _input_check(self) -> None:
        """One round: the digest of each input component this party holds goes to its other
        holder, so both holders of every component compare before anything is computed on
        it. The digests are taken before the round (``Scheme._input_check``)."""
        claims, expected = self._claims.take((INPUTS,))
        of_slot1, of_slot0 = claims[INPUTS], expected[INPUTS]
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
        mine, third = zero_claim(t, binary)
        mine = self._outgoing(_CLAIM_KIND[check], self.next_party, np.ascontiguousarray(mine))
        self._claims.note(check, mine, third)

    async def checkpoint(self) -> None:
        """The inputs and ANDs queued so far are checked now (their outcomes depend on the
        cheater's errors and the coins only); the MAC records are folded, not checked in
        parts (``mac_check``: why), into the one MAC zero test of the next ``verify``."""
        await self.verify_inputs()
        await all_rounds(self._checkpoint_rounds(self.proves_alone))

    def checkpoint_later(self) -> Rounds:
        """``checkpoint``'s records fixed now and its rounds returned (``Scheme``): the MAC
        records are folded at once (their coefficients drawn now, after every record they
        weigh; nothing is sent) and the ANDs queued so far taken, so the returned rounds
        check exactly those ANDs, whatever the job queues meanwhile. They are ``verify``'s
        rounds 1-4 for the ANDs alone (triples, coin, openings, digests); their coin is drawn
        after every AND and triple they test is fixed, which is all the AND check needs, so
        they may travel beside the next block's rounds (docs/active3.md, "Checks beside the
        next block"). Refused while inputs are pending (``verify_inputs`` first): the next
        block could compute on them before their check.

        Under ``proves_ands`` the ANDs are proved (``dzkp``): rounds 1-2 (commitment to the AND
        messages, coin), two per level, one closing round, and no digests (a proof notes no
        zero test). They run in parts of at most ``PART_ROUNDS``, each returning the rest
        (``Scheme.checkpoint_later``), so that a block's proof spreads over the groups of the
        blocks that follow instead of lengthening one: what it tests was fixed before its
        first part, and each coin is drawn after the message it tests whatever runs between
        the parts."""
        return self._checkpoint_rounds(self.proves_ands)

    def _checkpoint_rounds(self, prove: bool) -> Rounds:
        """``checkpoint_later``, the ANDs proved if ``prove``, else by triples."""
        self.engine.alone("checkpoint")
        if self._inputs_pending():
            raise RuntimeError("checkpoint_later with inputs pending: run verify_inputs first")
        self._macs.fold(self._mac_sums)
        ands, proofs = self._take_ands(prove)
        self._deferred += 1
        digests = bool(ands) or proofs is None  # the triples' zero claims compared at once
        return self._part(self._check(ands, None, proofs, digests), 0)

    async def _part(self, steps: AsyncIterator[int], rounds: int) -> Rounds | None:
        """Run ``steps`` (a check announcing the rounds of each step before it: ``_check``)
        for at most ``PART_ROUNDS`` rounds, ``rounds`` the announced step to start with (0:
        none yet); return the rest, or None once all have run."""
        used = 0
        while True:
            if rounds and used and used + rounds > PART_ROUNDS:
                return self._part(steps, rounds)
            used += rounds
            try:
                rounds = await anext(steps)
            except StopAsyncIteration:
                self._deferred -= 1
                return None

    def _take_ands(self, prove: bool) -> tuple[list[And], Proofs | None]:
        """The ANDs queued so far, taken: as triples' records and, if ``prove``, the proof's
        records (``_take_proofs``); without ``prove`` the proof's records join the triples'."""
        ands, self._ands = self._ands, []
        if not prove and self._proved:
            ands += [(x, y, z) for x, y, z, _, _ in self._proved]
            self._proved = []
            self._sent_and, self._got_and = RunningHash(b"and"), RunningHash(b"and")
        return ands, self._take_proofs()

    def _take_proofs(self) -> Proofs | None:
        """The AND proof's records queued so far and the running digests of the AND messages
        they cover, taken (fresh ones begin), so that a check whose rounds run later proves
        exactly these messages; None when nothing is to be proved."""
        if not self._proved:
            return None
        proofs = Proofs(self._proved, self._sent_and, self._got_and)
        self._proved = []
        self._sent_and, self._got_and = RunningHash(b"and"), RunningHash(b"and")
        return proofs

    def pending_checks(self) -> list[str]:
        """Every check with something queued: the inputs' digests, ANDs (to check by triples
        or to prove), MAC records (or folded terms), zero tests' claims (Freivalds' among the
        MAC ones) and the ANDs of a ``checkpoint_later`` whose rounds have not run. ``verify``
        runs whenever any is pending, so no queued claim waits for a check that never comes;
        the last one it cannot run (those ANDs were handed to the rounds), so it refuses."""
        queued = {INPUTS: INPUTS in self._claims.pending,
                  "AND": bool(self._ands or self._proved),
                  "MAC": self._macs.pending,
                  "zero tests": bool(self._claims.pending & set(CHECKS)),
                  "checkpoint rounds not run": self._deferred > 0}
        return [check for check, pending in queued.items() if pending]

    async def verify(self) -> None:
        """Run every pending check (``pending_checks``): four rounds (three without ANDs,
        one with only inputs or only zero tests' claims, two with both); nothing when nothing
        is pending.
        A check this method does not run would be left pending, which is refused before any
        round (the ANDs of a ``checkpoint_later`` whose rounds have not all run), and so is a
        verify inside ``RoundEngine.together`` (``alone``)."""
        self.engine.alone("verify")
        if self._deferred:
            raise RuntimeError("verify left checks pending: ['checkpoint rounds not run']")
        if self._inputs_pending():
            await self._input_check()
        if not self.pending_checks():
            return
        ands, proofs = self._take_ands(self.proves_alone)
        await _run(self._check(ands, self._macs.take(self._mac_sums), proofs))
        if self.pending_checks():
            raise RuntimeError(f"verify left checks pending: {self.pending_checks()}")

    async def _check(self, ands: list[And], sums: np.ndarray | None, proofs: Proofs | None,
                     digests: bool = True) -> AsyncIterator[int]:
        """The AND check of ``ands`` and the proof of ``proofs`` and the MAC check of this
        party's terms ``sums`` of w and u (any may be absent), in the four rounds of
        ``verify`` (the proofs' rounds in place of the third); the last compares every zero
        test's claims, those queued earlier included (Freivalds'), unless ``digests`` is
        false (the claims then wait for the next check that compares them). Before each step
        it announces the step's rounds (yields them), so that it may run in parts
        (``_part``); nothing is drawn or sent before the first step runs."""
        yield 2
        triples = self._triple_terms(ands)
        proved = [] if proofs is None else proofs.records
        # round 1: the triples' AND terms and the terms of w and u to the previous party, a
        # digest of the terms to the next party (the commitment, relayed in round 2)
        back: list[Part] = [] if triples is None else [("triple", triples[2][0])]
        forward: list[Part] = []
        if proved:  # the proofs' keys; the AND messages to A, committed to B (``dzkp``)
            keys = self._proof_keys()
            assert proofs is not None
            forward.append(("and-commit", commitment(keys[0].words(4).tobytes(),
                                                     digest_words(proofs.sent))))
        if triples is not None:
            # salted with the key shared with the terms' receiver (``commitment``: why)
            salt_out, salt_in = self._prev.words(4).tobytes(), self._next.words(4).tobytes()
            self._observe("triple-salt", salt_out)
            triple_hash = len(forward)  # after the proofs' commitment, if any
            forward.append(("triple-hash", self._commitment(salt_out, triples[2][0])))
        if sums is not None:
            back.append(("mac-sum", sums))
        if back or forward:
            got, committed = await self._ring_round(
                back, forward, "AND" if triples is not None or proved else "MAC")
        # round 2: the coin (it fixes the AND matching), the relayed commitment and alpha w
        back, forward = [], []
        if triples is not None:
            triples[2][1] = got[0]
        if triples is not None or proved:
            back.append(("coin", self._next.words(2)))
            forward.append(("coin", self._prev.words(2)))
        if triples is not None:
            forward.append(("triple-relay", committed[triple_hash]))
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
            yield 1
            self._check_commitment(got[0], from_prev[1], salt_in)
            seed = self._seed((back[0][1], forward[0][1]), (from_next[0], from_prev[0]))
            await self._check_ands(ands, triples, seed)
        if proved:
            seed = self._seed((back[0][1], forward[0][1]), (from_next[0], from_prev[0]))
            assert proofs is not None
            async for rounds in self._prove_ands(proved, seed, keys, committed[0], proofs.got):
                yield rounds
        # round 4: the digests of the zero tests
        if digests:
            yield 1
            await self._compare_digests(CHECKS)

    def _proof_keys(self) -> tuple[PRF, PRF, PRF, PRF, PRF, PRF]:
        """Fresh keys for one check's proofs, three from each pairwise key in the same order
        at both ends (for the proof of its first holder, of its second, and the coins of the
        third party's): (as prover: with A, with B; as A of the next party's proof: with its
        prover, coins; as B of the previous party's: with its prover, coins)."""
        nxt = [PRF(self._next.words(2).tobytes()) for _ in range(3)]
        prv = [PRF(self._prev.words(2).tobytes()) for _ in range(3)]
        return prv[1], nxt[0], nxt[1], prv[2], prv[0], nxt[2]

    async def _prove_ands(self, proved: list[ProvedAnd], seed: bytes,
                          keys: tuple[PRF, PRF, PRF, PRF, PRF, PRF],
                          commit_in: np.ndarray, got: RunningHash) -> AsyncIterator[int]:
        """Each party proves its AND messages to the other two (``dzkp``), the three proofs in
        the same rounds: per level its share of Q to A (the previous party) and the commitment
        to it to B (the next), then both verifiers' coins; last, each verifier's closing to the
        other, B's with the commitments it holds (the prover's to the AND messages ``commit_in``
        from round 1 among them), which A compares with what it received."""
        plan = proof_plan(sum(r[4].size for r in proved))
        weights = level_weights(plan, seed)
        # x_i, x_{i+1}, y_i, y_{i+1}, e_A, e_B in the proof's layout, each held once for the
        # three roles
        x0, x1, y0, y1 = (grouped([r[j][slot] for r in proved], plan)
                          for j, slot in ((0, 0), (0, 1), (1, 0), (1, 1)))
        e_a, e_b = (grouped([r[j] for r in proved], plan) for j in (3, 4))
        del proved[:]  # the records go: the layout above is all the proofs read
        prover = Prover((x0, y0), (y1, x1), plan, weights, keys[0], keys[1])
        salt_in = keys[2].words(4).tobytes()  # as A: the salt of the AND messages' commitment
        as_a = Verifier(True, (x1, y1), e_a, plan, weights, keys[2], keys[3])
        as_b = Verifier(False, (y0, x0), e_b, plan, weights, keys[4], keys[5])
        del x0, x1, y0, y1, e_a, e_b
        for _ in range(len(plan.radices) + 2):
            yield 2
            share, commit = prover.message()
            self._observe("and-proof-salt", prover.salt)
            from_next, from_prev = await self._ring_round(
                [("and-proof", share)], [("and-proof-hash", commit)], "AND")
            as_a.receive(from_next[0])
            as_b.receive(from_prev[0])
            from_next, from_prev = await self._ring_round(
                [("and-coin", np.asarray([as_b.coin()], dtype=U64))],
                [("and-coin", np.asarray([as_a.coin()], dtype=U64))], "AND")
            prover.advance(int(from_prev[0][0]), int(from_next[0][0]))
            as_a.advance()
            as_b.advance()
        yield 1
        from_next, from_prev = await self._ring_round(
            [("and-close", as_a.closing())],
            [("and-close", np.concatenate([as_b.closing(), commit_in.reshape(-1)]))], "AND")
        as_b.check(from_next[0], self.party)
        closing = from_prev[0]
        as_a.check(closing[:-DIGEST_WORDS], self.party)
        sent = commitment(salt_in, digest_words(got))
        if not np.array_equal(closing[-DIGEST_WORDS:], sent):
            raise CheatingDetected("AND", f"party {self.party}: party {self.next_party}'s AND "
                                          "messages do not match their commitment")

    def _triple_terms(self, ands: list[And]) -> Triples | None:
        """The AND check's random triples: a, b (slot, pool, P) and c with this party's
        3-out-of-3 terms of a AND b in c[0] (c[1] arrives in round 1); None without ANDs."""
        if not ands:
            return None
        pools, size = check_plan(and_words(ands))
        a, b = self._random_words((pools, size)), self._random_words((pools, size))
        return a, b, self._and_terms(a, b)

    def _mac_sums(self, macs: list[np.ndarray]) -> np.ndarray:
        """This party's 3-out-of-3 terms of w and u over the records ``macs``, as (limb, v):
        local dot products with secret coefficients (``mac_check.local_terms``) plus a share
        of zero."""
        total = local_terms(macs, self._coefficients, self._observe)
        return ring128.add(total, self._zero128((2,)))

    def _coefficients(self, count: int) -> np.ndarray:
        """Coefficients of the MAC check, (limb, slot, count): replicated random Z_2^128 values
        from the pairwise PRFs, so the component the other two parties share is one this
        party never learns."""
        return self._random128((count,))

    _commitment = staticmethod(commitment)

    def _check_commitment(self, terms: np.ndarray, relayed: np.ndarray, salt: bytes,
                          check: str = "AND", what: str = "triple terms") -> None:
        """The next party's terms must match the digest the previous party relayed in the
        coin's round (``commitment``: so they were fixed before the coin)."""
        check_commitment(terms, relayed, salt, check, what,
                         (self.party, self.next_party, self.prev_party))

    def _seed(self, mine: tuple[np.ndarray, np.ndarray],
              third: tuple[np.ndarray, np.ndarray]) -> bytes:
        """The coin (``commitment.coin_seed``), which the fault hook observes."""
        seed = coin_seed(mine, third, self.party)
        self._observe("coin", seed)
        return seed

    async def _check_ands(self, ands: list[And], triples: Triples, seed: bytes) -> None:
        """Round 3: open the cut triples and x ^ a, y ^ b of every match, each component
        vouched for by its other holder in the same round before it is used (a zero test's
        claim computed from an unvouched word would tell the cheater triple bits through its
        digest), then queue the zero tests (``and_check.and_openings``)."""
        to_open, finish = and_openings(ands, triples, seed, self.party)
        finish(await self._open_words(to_open, binary=True, kind="check-open"),
               lambda t: self._note_zero("AND", t, binary=True))

    async def _compare_digests(self, checks: tuple[str, ...]) -> None:
        """One round: the claim digest of every check in ``checks`` to the next party,
        compared with what this party expects."""
        claims, expected = self._claims.take(checks)
        sends = np.concatenate([self._outgoing(_HASH_KIND[c], self.next_party, claims[c])
                                for c in checks])
        got = await self.engine.exchange({self.next_party: sends}, [self.prev_party])
        buf = self._received(got, self.prev_party, sends.size, checks[-1])
        self._observe("received", ("digests", self.prev_party, buf))
        for i, check in enumerate(checks):
            if not np.array_equal(buf[i * DIGEST_WORDS:(i + 1) * DIGEST_WORDS], expected[check]):
                raise CheatingDetected(check, f"party {self.party}: party {self.prev_party}'s "
                                              f"{check} digest differs from this party's")
