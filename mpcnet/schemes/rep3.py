"""Layer: schemes. Passive 3PC: replicated secret sharing over Z_2^64 and bit-sliced Z_2.

Araki, Furukawa, Lindell, Nof, Ohara, "High-throughput semi-honest secure three-party
computation with an honest majority", CCS 2016. A value x = x0 + x1 + x2; party i holds
(x_i, x_{i+1}) (indices mod 3), so any two parties can reconstruct and one learns nothing.
Products: party i computes x_i y_i + x_i y_{i+1} + x_{i+1} y_i plus a zero-sharing term and sends
it to party i-1 (section 3 of the paper): one round, one ring element per product per party.
Matrix products reshare only the result (ABY3, Mohassel and Rindal, CCS 2018, section 5.1).
"""

from __future__ import annotations

import numpy as np

from mpcnet import ring
from mpcnet.net.engine import RoundEngine
from mpcnet.prf import PRF, stacked_words
from mpcnet.ring import to_ring
from mpcnet.schemes.base import Public, Scheme, Shared
from mpcnet.schemes.faults import FaultInjector
from mpcnet.schemes.keys import pairwise_prfs
from mpcnet.schemes.replicated import combine, permutation, random_words

U64 = np.uint64
_LOW63 = U64((1 << 63) - 1)


def share(values: np.ndarray, binary: bool = False) -> list[np.ndarray]:
    """Client side: replicated shares of a uint64 array (additive, or XOR when ``binary``),
    one (2, *shape) array per party."""
    values = np.asarray(values, dtype=U64)
    x0 = random_words(values.shape)
    x1 = random_words(values.shape)
    comps = [x0, x1, values ^ x0 ^ x1 if binary else values - x0 - x1]
    return [np.stack([comps[i], comps[(i + 1) % 3]]) for i in range(3)]


def reconstruct(shares: dict[int, np.ndarray], binary: bool = False) -> np.ndarray:
    """Client side: the value behind the parties' shares, checking that every component, held
    by two parties, was reported identically by both (so all three servers must answer)."""
    return combine(shares, lambda party: (party, (party + 1) % 3), 3, binary)


def _packed_bits(bits: np.ndarray) -> np.ndarray:
    """0/1 words as a byte array, eight bits a byte."""
    return np.packbits(bits.astype(np.uint8))


def _unpacked_bits(packed: np.ndarray, count: int) -> np.ndarray:
    return np.unpackbits(np.asarray(packed, dtype=np.uint8), count=count).astype(U64)


def _bit_words(bits: np.ndarray) -> np.ndarray:
    """0/1 words packed 64 to a uint64 word (to travel with other words in one message)."""
    packed = _packed_bits(bits.reshape(-1))
    out = np.zeros(-(-packed.size // 8) * 8, dtype=np.uint8)
    out[:packed.size] = packed
    return out.view(U64)


def _word_bits(words: np.ndarray, count: int) -> np.ndarray:
    return _unpacked_bits(np.ascontiguousarray(words, dtype=U64).view(np.uint8), count)


class Rep3(Scheme):
    """Replicated 3-party sharing, semi-honest security."""

    name = "passive3"
    n_parties = 3
    lead = 1  # data[0] = x_i, data[1] = x_{i+1}
    deals = True
    """Party 2 may make correlated randomness for parties 0 and 1 (``truncate``, ``bit_mul``):
    with one passive party, the one that knows a mask never sees what it masks."""

    @property
    def truncates(self) -> bool:
        return self.deals

    def __init__(self, engine: RoundEngine, next_prf: PRF, prev_prf: PRF,
                 fault: FaultInjector | None = None) -> None:
        self.engine = engine
        self._next = next_prf  # key shared with party i+1
        self._prev = prev_prf  # key shared with party i-1
        self._fault = fault

    @classmethod
    async def setup(cls, engine: RoundEngine, fault: FaultInjector | None = None) -> Rep3:
        prfs = await pairwise_prfs(engine)
        i = engine.party
        return cls(engine, prfs[(i + 1) % 3], prfs[(i - 1) % 3], fault)

    @property
    def next_party(self) -> int:
        return (self.party + 1) % 3

    @property
    def prev_party(self) -> int:
        return (self.party - 1) % 3

    _ZERO_WORDS = 1 << 16  # words of each key drawn at a time by ``_add_zero``

    def _add_zero(self, z: np.ndarray, binary: bool) -> None:
        """Add (XOR, if ``binary``) this party's term of a 3-out-of-3 sharing of zero (Araki
        et al., section 2.2) to the C-contiguous z in place: the words of its key with the
        next party less those of its key with the previous one, drawn a block at a time into
        one small buffer (each key's stream is read in the same order as in one piece)."""
        if not z.flags.c_contiguous:
            raise ValueError("_add_zero needs a C-contiguous array")
        flat = z.reshape(-1)
        if flat.size == 0:
            return
        plus, minus = (np.bitwise_xor, np.bitwise_xor) if binary else (np.add, np.subtract)
        buf = np.empty(min(flat.size, self._ZERO_WORDS), dtype=U64)
        for start in range(0, flat.size, buf.size):
            part = flat[start:start + buf.size]
            words = buf[:part.size]
            self._next.fill(words)
            plus(part, words, out=part)
            self._prev.fill(words)
            minus(part, words, out=part)

    def _terms(self, shape: tuple[int, ...]) -> np.ndarray:
        """Room for a reshared result; row 0 takes this party's 3-out-of-3 term in place."""
        return np.empty((2,) + shape, dtype=U64)

    def _incoming(self, kind: str, payload: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """A received product message as an array of ``shape`` (an active subclass checks it)."""
        return np.asarray(payload).reshape(shape)

    async def _reshare(self, out: np.ndarray, binary: bool, kind: str = "product") -> Shared:
        """From 3-out-of-3 terms z_i (in out[0]) to replicated (z_i, z_{i+1}): send z_i to
        party i-1, receive z_{i+1} from party i+1 into out[1]."""
        got = await self.engine.exchange(
            {self.prev_party: self._outgoing(kind, self.prev_party, out[0])}, [self.next_party])
        out[1] = self._incoming(kind, got[self.next_party], out[0].shape)
        return Shared(out, 1, binary)

    # -- arithmetic ------------------------------------------------------------------------
    def add_public(self, x: Shared, c: Public) -> Shared:
        c = to_ring(c)
        data = np.array(np.broadcast_to(x.data, x.data.shape), copy=True)
        if self.party == 0:
            data[0] = data[0] + c  # component 0 is held by parties 0 and 2
        elif self.party == 2:
            data[1] = data[1] + c
        return Shared(data, 1)

    def public(self, values: np.ndarray) -> Shared:
        return self.add_public(Shared(np.zeros((2,) + np.shape(values), dtype=U64), 1), values)

    async def mul(self, x: Shared, y: Shared) -> Shared:
        a, b = np.broadcast_arrays(x.data, y.data)
        out = self._terms(a.shape[1:])
        z = out[0] if out.ndim > 1 else out[0:1]  # a view, also for a scalar (for out=)
        np.add(b[0], b[1], out=z)
        z *= a[0]
        z += a[1] * b[0]
        self._add_zero(z, binary=False)
        return await self._reshare(out, False)

    async def matmul(self, x: Shared, y: Shared) -> Shared:
        z = ring.matmul(x.data[0], y.data[0] + y.data[1])
        z += ring.matmul(x.data[1], y.data[0])
        out = self._terms(z.shape)
        out[0] = z  # C-contiguous (einsum's result may not be), for ``_add_zero``
        del z
        self._add_zero(out[0] if out.ndim > 1 else out[0:1], binary=False)
        return await self._reshare(out, False)

    async def open(self, x: Shared) -> np.ndarray:
        got = await self.engine.exchange({self.prev_party: x.data[1]}, [self.next_party])
        return x.data[0] + x.data[1] + got[self.next_party]

    def _random_words(self, shape: tuple[int, ...]) -> np.ndarray:
        """Components x_i (key with party i-1) and x_{i+1} (key with party i+1) of a random
        value: each is derived by both its holders and unknown to the third party."""
        return stacked_words((self._prev, self._next), shape)

    async def random(self, shape: tuple[int, ...]) -> Shared:
        return Shared(self._random_words(shape), 1)

    def random_binary(self, shape: tuple[int, ...]) -> Shared:
        return Shared(self._random_words(shape), 1, True)

    async def truncate(self, x: Shared, shifts: np.ndarray) -> Shared | None:
        """Probabilistic truncation with a mask that party 2 deals to parties 0 and 1 (``Scheme.
        truncate``): 2 rounds, 2 words per value and party, where a mask of 64 shared random
        bits costs 128 products.

        The mask is ``mpcnet.ops.truncate``'s (Catrina and Saxena, FC 2010, in Z_2^64): r
        uniform, c = x + 2^62 + r opened, floor(x / 2^t) + e = (c mod 2^63) >> t - 2^(62 - t)
        + 2^(63 - t) (c_63 XOR r_63) - (r mod 2^63) >> t. Here r = r_a + r_b with r_a from the
        key of parties 0 and 2, r_b from that of parties 1 and 2, so party 2 knows r and the
        others one half each; one party making correlated randomness for the other two is the
        preprocessing of honest-majority 3PC (ASTRA, Chaudhari, Choudhury, Patra, Suresh,
        CCSW 2019). Round 1: parties 0 and 1 exchange x_0 + x_1 + r_a and x_2 + r_b, so both
        hold c and party 2 sees nothing; party 2 sends party 1 its halves of -(r mod 2^63) >> t
        and of r_63 (the other halves come from the key it shares with party 0). Each of 0
        and 1 now holds an additive half of the result (the public part of c and the c_63
        coefficient applied to its halves). Round 2: the halves become replicated shares:
        components 0 and 2 are fresh words of the keys with party 2, and parties 0 and 1
        exchange their halves less those words, which make up component 1. Every word a party
        receives is masked by a key word it lacks, so it learns nothing (one party passive)."""
        if not self.deals:
            return None
        n = x.size
        t = np.asarray(shifts, dtype=np.int64).reshape(n).astype(U64)
        words = np.ascontiguousarray(np.broadcast_to(x.data, x.data.shape).reshape(2, n))
        if self.party == 2:
            r_a, neg_a, top_a, zero_0 = (self._next.words(n) for _ in range(4))  # with party 0
            r_b, zero_2 = self._prev.words(n), self._prev.words(n)             # with party 1
            r = r_a + r_b
            deal = np.concatenate([U64(0) - ((r & _LOW63) >> t) - neg_a, (r >> U64(63)) - top_a])
            await self.engine.exchange({1: deal}, [])
            await self.engine.exchange({}, [])
            return Shared(np.stack([zero_2, zero_0]).reshape((2,) + x.shape), 1)
        if self.party == 0:
            r_a, neg_a, top_a, zero_0 = (self._prev.words(n) for _ in range(4))
            mine = words[0] + words[1] + r_a
            got = (await self.engine.exchange({1: mine}, [1]))[1]
            half = neg_a, top_a
        else:
            r_b, zero_2 = self._next.words(n), self._next.words(n)
            mine = words[1] + r_b
            both = await self.engine.exchange({0: mine}, [0, 2])
            got, deal = both[0], np.asarray(both[2])
            half = deal[:n], deal[n:]
        c = mine + np.asarray(got).reshape(n) + U64(1 << 62)
        low, top = c & _LOW63, c >> U64(63)
        coefficient = (U64(1) - U64(2) * top) << (U64(63) - t)   # r_63's: 2^(63-t) (1 - 2 c_63)
        part = half[0] + coefficient * half[1]
        if self.party == 0:
            part += (top << (U64(63) - t)) + (low >> t) - (U64(1) << (U64(62) - t))
        part -= zero_0 if self.party == 0 else zero_2
        peer = 1 - self.party
        middle = part + np.asarray((await self.engine.exchange({peer: part}, [peer]))[peer])
        pair = [zero_0, middle] if self.party == 0 else [middle, zero_2]
        return Shared(np.stack(pair).reshape((2,) + x.shape), 1)

    async def bit_mul(self, bits: Shared, values: Shared) -> Shared | None:
        """b v with a random bit rho that party 2 deals (``Scheme.bit_mul``): 2 rounds; parties
        0 and 1 send a bit and a word per value, party 2 a word per bit and per value, where
        ``bit_to_arith`` and a product take 3 rounds and 3 words per value and party.

        rho = rho_a XOR rho_b, with rho_a from the key of parties 0 and 2 and rho_b from that
        of 1 and 2: party 2 knows rho, parties 0 and 1 one half each. Round 1: parties 0 and 1
        open e = b XOR rho to each other (b_0 ^ b_1 ^ rho_a and b_2 ^ rho_b, packed); party 2
        sends party 1 its half rho - rho'_a of rho as a ring element (rho'_a from the key with
        party 0) and rho (v_2 + v_0) - delta (delta likewise). Then b v = e v + (1 - 2e) rho v
        with rho v = rho (v_0 + v_2) + rho'_a v_1 + (rho - rho'_a) v_1, so parties 0 and 1 hold
        an additive half each, made replicated in round 2 as in ``truncate``. Every word a
        party receives is masked by a key word it lacks (one party passive)."""
        if not self.deals:
            return None
        vshape, bshape = values.shape, bits.shape
        nb, nv = bits.size, values.size
        b = np.ascontiguousarray(np.broadcast_to(bits.data, bits.data.shape))
        v = np.ascontiguousarray(np.broadcast_to(values.data, values.data.shape))

        def wide(x: np.ndarray) -> np.ndarray:  # a per-bit array broadcast to the values
            return np.broadcast_to(x.reshape(bshape), vshape)

        if self.party == 2:
            rho_a = self._next.words(nb) & U64(1)                 # key with party 0
            rho_a_ring, delta, zero_0 = (self._next.words(nb), self._next.words(nv),
                                         self._next.words(nv))
            rho_b, zero_2 = self._prev.words(nb) & U64(1), self._prev.words(nv)  # with 1
            rho = rho_a ^ rho_b
            deal = np.concatenate([rho - rho_a_ring,
                                   (wide(rho) * (v[0] + v[1]) - delta.reshape(vshape)).ravel()])
            await self.engine.exchange({1: deal}, [])
            await self.engine.exchange({}, [])
            return Shared(np.stack([zero_2.reshape(vshape), zero_0.reshape(vshape)]), 1)
        if self.party == 0:
            rho_a = self._prev.words(nb) & U64(1)
            rho_a_ring, delta, zero = (self._prev.words(nb), self._prev.words(nv),
                                       self._prev.words(nv))
            mine = (b[0] ^ b[1]).reshape(nb) & U64(1) ^ rho_a
            got = (await self.engine.exchange({1: _packed_bits(mine)}, [1]))[1]
            e = wide(mine ^ _unpacked_bits(got, nb))
            own, common = v[0] + v[1], v[1]
            rho_half, offset = wide(rho_a_ring), delta.reshape(vshape)
        else:
            rho_b, zero = self._next.words(nb) & U64(1), self._next.words(nv)
            mine = b[1].reshape(nb) & U64(1) ^ rho_b
            both = await self.engine.exchange({0: _packed_bits(mine)}, [0, 2])
            e = wide(mine ^ _unpacked_bits(both[0], nb))
            deal = np.asarray(both[2])
            own, common = v[1], v[0]
            rho_half, offset = wide(deal[:nb]), deal[nb:].reshape(vshape)
        part = e * own + (U64(1) - U64(2) * e) * (rho_half * common + offset) - zero.reshape(vshape)
        peer = 1 - self.party
        middle = part + np.asarray((await self.engine.exchange({peer: part}, [peer]))[peer]
                                   ).reshape(vshape)
        pair = [zero.reshape(vshape), middle] if self.party == 0 else [middle, zero.reshape(vshape)]
        return Shared(np.stack(pair), 1)

    async def bit_counts(self, bits: Shared, weights: Shared) -> tuple[Shared, Shared] | None:
        """sum_i b_ij and sum_i b_ij w_ic with a dealt random bit per (i, j) (``Scheme.
        bit_counts``): 2 rounds; the dealer of a block of columns sends 1 + c words per row
        and column, the other two a bit each, where ``bit_to_arith`` and the matrix product
        take 3 rounds and 2 words per row and column from every party.

        The columns are cut into three blocks; block d has dealer d and online parties
        a = d+1, b = d+2. rho = rho_a XOR rho_b with rho_a from the key of d and a, rho_b from
        that of d and b. Round 1: a and b open e = b_ij XOR rho to each other (a sends
        c_a ^ c_b ^ rho_a, b sends c_d ^ rho_b, packed); the dealer sends b the words
        rho - R and rho (w_d + w_a) - Delta (R and Delta from its key with a). With
        s = 1 - 2e, b_ij = e + s rho and b_ij w = e w + s rho w, where e w = e (w_a + w_b) + e w_d
        and rho w = (Delta + R w_b) + ((rho (w_d + w_a) - Delta) + (rho - R) w_b): a and b hold
        an additive half each of every sum. Round 2 makes them replicated as in ``truncate``
        (components d and a fresh words of the dealer's keys). Every word a party receives is
        masked by a key word it lacks, so it learns nothing (one party passive)."""
        if not self.deals:
            return None
        m, p = bits.shape
        c = weights.shape[1]
        b_data = np.broadcast_to(bits.data, bits.data.shape)
        w_data = np.ascontiguousarray(np.broadcast_to(weights.data, weights.data.shape))
        me = self.party
        cuts = [d * p // 3 for d in range(4)]
        own, as_a, as_b = (cuts[d + 1] - cuts[d] for d in (me, (me - 1) % 3, (me + 1) % 3))
        a_cols, b_cols = (slice(cuts[d], cuts[d + 1]) for d in ((me - 1) % 3, (me + 1) % 3))
        # Each key, read in one order by both its holders: the block it deals for (rho_a,
        # R, Delta), then the next block's rho_b; in round 2 the c_a, then the c_d.
        rho_a, share_r, delta = (self._next.words((m, own)), self._next.words((m, own)),
                                 self._next.words((m, own, c)))
        rho_b_of_b = self._next.words((m, as_b)) & U64(1)
        rho_a_of_a, r_a, delta_a = (self._prev.words((m, as_a)) & U64(1),
                                    self._prev.words((m, as_a)), self._prev.words((m, as_a, c)))
        rho = (rho_a ^ self._prev.words((m, own))) & U64(1)
        deal = np.concatenate([(rho - share_r).reshape(-1),
                               (rho[:, :, None] * (w_data[0] + w_data[1])[:, None, :]
                                - delta).reshape(-1)])
        sent_a = (b_data[0][:, a_cols] ^ b_data[1][:, a_cols]) & U64(1) ^ rho_a_of_a
        sent_b = b_data[1][:, b_cols] & U64(1) ^ rho_b_of_b  # c_a ^ c_b ^ rho_a, c_d ^ rho_b
        got = await self.engine.exchange(
            {self.prev_party: np.concatenate([deal, _bit_words(sent_b)]),
             self.next_party: _bit_words(sent_a)}, [self.prev_party, self.next_party])
        from_next = np.asarray(got[self.next_party])
        dealt = m * as_b * (1 + c)
        e_a = sent_a ^ _word_bits(from_next[dealt:], m * as_a).reshape(m, as_a)
        e_b = sent_b ^ _word_bits(got[self.prev_party], m * as_b).reshape(m, as_b)
        half_a = self._halves(e_a, r_a, delta_a, w_data[0] + w_data[1], w_data[1], True)
        half_b = self._halves(e_b, from_next[:m * as_b].reshape(m, as_b),
                              from_next[m * as_b:dealt].reshape(m, as_b, c), w_data[1],
                              w_data[0], False)
        # round 2: component b = (half_a - c_a) + (half_b - c_d), c_a and c_d key words
        mine = np.empty((2, own * (1 + c)), dtype=U64)
        self._next.fill(mine[1])                              # c_a of my block
        k_b = self._next.words(half_b.shape)                  # c_d of block me+1
        k_a = self._prev.words(half_a.shape)                  # c_a of block me-1
        self._prev.fill(mine[0])                              # c_d of my block
        sent = {self.next_party: half_a - k_a, self.prev_party: half_b - k_b}
        back = await self.engine.exchange(sent, [self.next_party, self.prev_party])
        blocks = {me: mine,
                  (me - 1) % 3: np.stack([k_a, sent[self.next_party]
                                          + np.asarray(back[self.next_party])]),
                  (me + 1) % 3: np.stack([sent[self.prev_party]
                                          + np.asarray(back[self.prev_party]), k_b])}
        out = np.concatenate([blocks[d].reshape(2, -1, 1 + c) for d in range(3)], axis=1)
        return Shared(out[:, :, 0], 1), Shared(out[:, :, 1:], 1)

    @staticmethod
    def _halves(e: np.ndarray, share_r: np.ndarray, delta: np.ndarray, e_weights: np.ndarray,
                r_weights: np.ndarray, with_e: bool) -> np.ndarray:
        """An online party's additive half of (sum_i b_ij, sum_i b_ij w_ic) for a block, as
        (columns, 1 + c): sum_i e w' + s (delta + R w_b) (``bit_counts``), plus sum_i e for a."""
        s = U64(1) - U64(2) * e
        counts = (s * share_r).sum(axis=0, dtype=U64)
        weighted = ring.matmul((s * share_r).T, r_weights) + (s[:, :, None] * delta).sum(
            axis=0, dtype=U64) + ring.matmul(e.T, e_weights)
        if with_e:
            counts = counts + e.sum(axis=0, dtype=U64)
        return np.concatenate([counts[:, None], weighted], axis=1).reshape(-1)

    # -- shuffle ---------------------------------------------------------------------------
    _row_axis = 0  # the rows' axis in one component array (x.data[slot])

    @staticmethod
    def _pair_of(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """This party's two component arrays (x_i, x_{i+1}) of a sharing's data."""
        return data[0], data[1]

    @staticmethod
    def _paired(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        return np.stack([first, second])

    @staticmethod
    def _plus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """a + b, written into a (a fresh array of the shuffle's own)."""
        return np.add(a, b, out=a)

    @staticmethod
    def _minus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """a - b, written into a (a fresh array of the shuffle's own)."""
        return np.subtract(a, b, out=a)

    def _shuffled(self, x: Shared) -> Shared:
        """A shuffle's output, as the scheme keeps it (an active subclass queues its check)."""
        return x

    def _permutations(self, rows: int) -> tuple[np.ndarray | None, ...]:
        """Round e's permutation from the key of parties e+1 and e+2 (``_permute``)."""
        return tuple(None if self.party == e else permutation(
            self._next if self.party == (e + 1) % 3 else self._prev, rows) for e in range(3))

    async def _permute(self, x: Shared, perms: tuple[np.ndarray | None, ...]) -> Shared:
        """Three resharing rounds, one per party e that is left out: parties e+1 and e+2
        permute their components by a permutation drawn from their common key, and
        component e+2 (the one party e lacks) is made again from the permuted sum, the
        other two fresh from the keys that party e shares (the resharing shuffle of Laur,
        Willemson and Zhang, ISC 2011, in the replicated form of Mohassel, Rindal and
        Rosulek, CCS 2020, section 4.2). Each party lacks one of the three permutations, so
        their composition is unknown to every single party. Party e+1 is the one left out
        of the next round, which replaces its components, so only the last round sends to
        it: four messages of one word per value in three rounds."""
        if x.binary:
            raise TypeError("shuffle takes arithmetic sharings")
        first, second = self._pair_of(np.ascontiguousarray(x.data))
        for excluded, perm in enumerate(perms):
            first, second = await self._shuffle_round(first, second, excluded, perm,
                                                      excluded == 2)
        return self._shuffled(Shared(self._paired(first, second), self.lead))

    async def _shuffle_round(self, first: np.ndarray, second: np.ndarray, excluded: int,
                             perm: np.ndarray | None, last: bool
                             ) -> tuple[np.ndarray, np.ndarray]:
        """One round of ``_permute``: party e (``excluded``) holds (c_e, c_{e+1}) and takes
        both fresh from its keys; e+1 holds (c_{e+1}, c_{e+2}), e+2 holds (c_{e+2}, c_e);
        they permute by ``perm``, take c_{e+1} respectively c_e fresh from the key with e,
        and e+1 sends e+2 its other component less that word (e+2 sends e+1 its own only in
        the ``last`` round): c_{e+2} becomes the permuted sum less the two fresh ones. What a
        party receives is masked by a key word it lacks."""
        shape = first.shape
        if perm is None:
            await self.engine.exchange({}, [])
            return self._prev.words(shape), self._next.words(shape)
        leading = self.party == (excluded + 1) % 3
        first, second = (np.take(c, perm, axis=self._row_axis) for c in (first, second))
        fresh = (self._prev if leading else self._next).words(shape)
        kept, sent = (second, first) if leading else (first, second)
        message = self._minus(sent, fresh)
        peer = self.next_party if leading else self.prev_party
        got = await self.engine.exchange(
            {peer: self._outgoing("shuffle", peer, message)} if leading or last else {},
            [peer] if last or not leading else [])
        if leading and not last:  # it is left out of the next round, which replaces both
            return fresh, kept
        middle = self._plus(self._plus(kept, message),  # kept: a permuted copy, not sent
                            self._incoming("shuffle", got[peer], shape))
        return (fresh, middle) if leading else (middle, fresh)

    # -- binary ----------------------------------------------------------------------------
    def xor_public(self, x: Shared, c: Public) -> Shared:
        c = to_ring(c)
        data = np.array(x.data, copy=True)
        if self.party == 0:
            data[0] ^= c
        elif self.party == 2:
            data[1] ^= c
        return Shared(data, 1, True)

    def _and_terms(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """This party's 3-out-of-3 term of a AND b (in row 0 of a fresh result array)."""
        out = self._terms(a.shape[1:])
        z = out[0] if out.ndim > 1 else out[0:1]  # a view, also for a scalar (for out=)
        np.bitwise_xor(b[0], b[1], out=z)
        z &= a[0]
        z ^= a[1] & b[0]
        self._add_zero(z, binary=True)
        return out

    async def and_(self, x: Shared, y: Shared) -> Shared:
        a, b = np.broadcast_arrays(x.data, y.data)
        return await self._reshare(self._and_terms(a, b), True, "and")

    async def open_binary(self, x: Shared) -> np.ndarray:
        got = await self.engine.exchange({self.prev_party: x.data[1]}, [self.next_party])
        return x.data[0] ^ x.data[1] ^ got[self.next_party]

    # -- conversions -----------------------------------------------------------------------
    def _components(self, data: np.ndarray, binary: bool) -> list[Shared]:
        """Component j as a sharing whose only non-zero component is j (held by j-1 and j)."""
        out = []
        for j in range(3):
            comp = np.zeros(data.shape, dtype=data.dtype)  # calloc: untouched halves are free
            if j == self.party:
                comp[0] = data[0]
            elif j == self.next_party:
                comp[1] = data[1]
            out.append(Shared(comp, 1, binary))
        return out

    def arith_components(self, x: Shared) -> list[Shared]:
        return self._components(x.data, True)

    async def addends(self, x: Shared) -> list[Shared]:
        """Binary sharings of two words whose ring sum is x (``Scheme.addends``): one round
        of a third of a word per value and party, where reducing the three components takes a
        carry-save round of a word per value and party.

        The values are cut into three blocks; in block k, party k knows y = x_k + x_{k+1}
        and shares it in binary as y0 ^ y1: y0 a word of its key with party k-1 (component
        k), y1 = y ^ y0 sent to party k+1 (component k+1). The other addend is component
        x_{k+2} as it is. What party k+1 receives is masked by a key word it lacks, so it
        learns nothing (one party passive; an active scheme cannot trust one party's y)."""
        if not self.deals:
            return await super().addends(x)
        data = np.ascontiguousarray(np.broadcast_to(x.data, x.data.shape)).reshape(2, -1)
        n, me = data.shape[1], self.party
        cuts = [k * n // 3 for k in range(4)]
        own, after, before = (slice(cuts[k], cuts[k + 1]) for k in (me, (me + 1) % 3,
                                                                     (me - 1) % 3))
        u, v = np.zeros((2, n), dtype=U64), np.zeros((2, n), dtype=U64)
        # my block: (component me, component me+1) = (y0, y1)
        u[0, own] = self._prev.words(own.stop - own.start)
        np.add(data[0, own], data[1, own], out=u[1, own])
        u[1, own] ^= u[0, own]
        # block me+1: party me+1's y0 is my component me+1 (our key); its x_{k+2} is mine
        u[1, after] = self._next.words(after.stop - after.start)
        v[0, after] = data[0, after]
        # block me-1: party me-1 sends my component me (its y1); its x_{k+2} is my me+1
        v[1, before] = data[1, before]
        got = await self.engine.exchange(
            {self.next_party: self._outgoing("and", self.next_party, u[1, own])},
            [self.prev_party])
        u[0, before] = self._incoming("and", got[self.prev_party], (before.stop - before.start,))
        return [Shared(u.reshape((2,) + x.shape), 1, True),
                Shared(v.reshape((2,) + x.shape), 1, True)]

    async def bit_components(self, b: Shared) -> list[Shared]:
        return self._components(b.data & U64(1), False)
