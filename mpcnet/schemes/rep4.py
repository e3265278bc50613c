"""Layer: schemes. Active 4PC "Fantastic Four": replicated sharing with joint message passing.

[F4] Dalskov, Escudero, Keller, "Fantastic Four: Honest-Majority Four-Party Secure Computation
With Malicious Security", USENIX Security 2021 (ePrint 2020/1330). Security with abort against
one malicious server out of four, over Z_2^64 (uint64) and bit-sliced Z_2 (uint64 words).
Protocol names in brackets are the paper's.

Sharing [F4: replicated sharing]. x = x_0 + x_1 + x_2 + x_3; party p holds every component
except x_p, as ``data[k] = x_{(p+1+k) mod 4}`` for k = 0, 1, 2 (lead axis of size 3). Any value
known to two parties is also known to a third, so every message a protocol needs can be sent
by one holder and vouched for by another.

Joint message passing [F4: Pi_jmp]. When parties i and j both know m and k must learn it, i
sends m and j only feeds m into a running BLAKE3 state for the link j -> k; k feeds what it
received into its copy of that state. The voucher appends the 32-byte digest to its message of
the same round, so k compares before it sends anything else: a tampered value never reaches a
later message, a digest or an opening, at no extra round and 32 bytes per link per round. A
mismatch raises ``CheatingDetected("joint-message hash")``. (Comparing the digests only once,
before the first opening, would be cheaper but is not private: a digest an honest party sends
over values that a tampered message has already changed can tell the cheater secret bits, by
brute force over the few candidates its change allows.)

Joint sharing [F4: Pi_inp with two input parties]. Parties i and j share a value m they both
know with the other two, g and h: component x_g is r from the PRF key of {i, j, h} (everyone
but g), component x_h is m - r, sent to g by joint message passing, the others are zero.

Multiplication [F4: Pi_mult]. xy = sum_c x_c y_c + sum_{g<h} (x_g y_h + x_h y_g). The cross term
of components {g, h} is known exactly to the other two parties, who jointly share it: six joint
messages in one round. The diagonal term x_c y_c is known to every holder of component c, so
also to the knowers of the pair {0, 1} (c = 0, 1) or {2, 3} (c = 2, 3), whose term then is
(x_g + x_h)(y_g + y_h): a party computes five products, not nine, and adds nothing locally
(``_cross``; the paper adds the diagonals to their components instead, the same sum in other
terms). The "diagonal" sender pairs {0, 2} and {1, 3} swap roles between the two
halves of the batch, so every party sends and receives exactly 1.5 ring elements per product
(12 bytes), plus at most two digests per round. Matrix products reshare only the result
(communication ~ result size), five matrix products per party in the same way (``matmul``).

Pair sums [F4: Pi_inp with two input parties]. x_0 + x_1 is known to parties 2 and 3 and
x_2 + x_3 to 0 and 1, so a comparison's binary addends (``addends``) and a bit's arithmetic
XOR terms c_0 ^ c_1, c_2 ^ c_3 (``xor_terms``) are joint sharings, one round of ``_ADDENDS``,
checked by the same joint-message hash: the four components would need two rounds of
carry-save ANDs, or three products, instead. The two sums have components {0, 1} and {2, 3}
only, so a product of one with the other has four non-zero cross terms (``term_product``:
one joint message sent and one received per party instead of 1.5 each).

Opening [F4: reconstruction]. Party p gets its missing component x_p as a value from party p+1
and as a BLAKE3 digest from party p+2; a mismatch raises ``CheatingDetected("open
consistency")``.

Correlated randomness comes from the four triple keys K_c known to every party but c, agreed at
setup from contributions of all three members and confirmed pairwise, so a member that sends
different contributions is caught (``CheatingDetected("key agreement")``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mpcnet import ring
from mpcnet.errors import CheatingDetected
from mpcnet.net.engine import RoundEngine
from mpcnet.prf import KEY_BYTES, PRF, random_key, stacked_words
from mpcnet.schemes.base import Public, Scheme, Shared, broadcast_data
from mpcnet.schemes.faults import KINDS, FaultInjector
from mpcnet.schemes.replicated import (
    DIGEST_WORDS,
    RunningHash,
    checked_words,
    combine,
    digest_words,
    permutation,
    random_words,
)

U64 = np.uint64
_LOW63 = U64((1 << 63) - 1)
N_PARTIES = 4
FAULT_KINDS = KINDS["active4"]


def _dot(u: np.ndarray, v: np.ndarray, rows: int = 2048) -> np.ndarray:
    """sum_i u_i v_i over the first axis, mod 2^64: products of ``rows`` rows at a time into
    one buffer, summed (in one pass over memory; 1.6x faster than ``einsum`` here)."""
    out = np.zeros(u.shape[1:], dtype=U64)
    buf = np.empty((min(rows, u.shape[0]),) + u.shape[1:], dtype=U64)
    for start in range(0, u.shape[0], rows):
        part = buf[:min(rows, u.shape[0] - start)]
        np.multiply(u[start:start + rows], v[start:start + rows], out=part)
        out += part.sum(axis=0, dtype=U64)
    return out


# -- layout --------------------------------------------------------------------------------
def held(party: int) -> tuple[int, int, int]:
    """The components party ``party`` holds, in data order: all but its own index."""
    return ((party + 1) % 4, (party + 2) % 4, (party + 3) % 4)


def slot(party: int, component: int) -> int:
    """Index of ``component`` in ``party``'s data (the party must hold it)."""
    k = (component - party - 1) % 4
    if k == 3:
        raise ValueError(f"party {party} does not hold component {component}")
    return k


@dataclass(frozen=True)
class _Jmp:
    """One joint sharing of a cross term in a multiplication ([F4: Pi_mult]).

    ``sender`` and ``hasher`` know the cross term of components {receiver, other}; ``receiver``
    gets component ``other``'s new value, ``other`` derives component ``receiver``'s from the
    PRF key of everyone but ``receiver``. It covers part ``part`` of ``parts`` equal parts of
    the batch. A ``silent`` one is computed by all but ``receiver`` and never sent: the
    receiver does not need it (``shuffle``: it is left out of the next round).
    """

    sender: int
    hasher: int
    receiver: int
    other: int
    part: int = 0
    parts: int = 1
    silent: bool = False

    def span(self, n: int) -> slice:
        return slice(self.part * n // self.parts, (self.part + 1) * n // self.parts)


# Adjacent sender pairs {i, i+1} send to i+2 over the whole batch; the diagonal pairs swap
# sender and receiver between the two halves so that the load is equal for all four parties.
_JMPS: tuple[_Jmp, ...] = tuple(
    [_Jmp(i, (i + 1) % 4, (i + 2) % 4, (i + 3) % 4) for i in range(4)]
    + [_Jmp(0, 2, 3, 1, 0, 2), _Jmp(1, 3, 2, 0, 0, 2), _Jmp(2, 0, 1, 3, 1, 2),
       _Jmp(3, 1, 0, 2, 1, 2)])

# ``addends``: x_0 + x_1 is known to parties 2 and 3, x_2 + x_3 to 0 and 1. A batch holds the
# first sums, then the second; each knower sends one half of its sums and vouches for the other.
_ADDENDS: tuple[_Jmp, ...] = (_Jmp(2, 3, 0, 1, 0, 4), _Jmp(3, 2, 1, 0, 1, 4),
                              _Jmp(0, 1, 2, 3, 2, 4), _Jmp(1, 0, 3, 2, 3, 4))
_PAIRS = (frozenset((0, 1)), frozenset((2, 3)))
# ``term_product``: the cross terms of {0, 2}, {0, 3}, {1, 2}, {1, 3}, one sent by each party
# and one received by each.
_TERMS: tuple[_Jmp, ...] = (_Jmp(1, 3, 2, 0), _Jmp(2, 1, 0, 3), _Jmp(3, 0, 1, 2),
                            _Jmp(0, 2, 3, 1))
# ``truncate``, round 1: party 0 gets -(x_0 + a) from party 1 (vouched for by party 2), party 1
# gets -(x_1 + b) from party 0 (vouched for by 3), a and b being the words of K_0 and K_1 that
# the joint sharing draws to mask them.
_TRUNC_OPEN: tuple[_Jmp, ...] = (_Jmp(1, 2, 0, 3), _Jmp(0, 3, 1, 2))

# ``shuffle``, the round that leaves party e out: the other three permute by a permutation of
# K_e and jointly share component j's permuted words towards each of them, j, from the two
# others (a sender and a voucher), with e as the party that draws j's new component from K_j.
# Party e+1 is left out of the next round, which replaces its components, so the sharing
# towards it is silent except in the last round.
def _shuffle_jmps(excluded: int) -> tuple[_Jmp, ...]:
    a, b, c = (p for p in range(4) if p != excluded)
    return tuple(_Jmp(s, h, r, excluded, silent=excluded < 3 and r == (excluded + 1) % 4)
                 for s, h, r in ((b, c, a), (c, a, b), (a, b, c)))


_SHUFFLE: tuple[tuple[_Jmp, ...], ...] = tuple(_shuffle_jmps(e) for e in range(4))


@dataclass(frozen=True)
class _Roles:
    """One party's static part in a round of joint sharings: the sharings it receives, whom it
    gets values and digests from, whom it sends values and digests to."""

    incoming: tuple[_Jmp, ...]
    value_from: tuple[int, ...]
    vouch_from: tuple[int, ...]
    value_to: tuple[int, ...]
    vouch_to: tuple[int, ...]

    @classmethod
    def of(cls, party: int, jmps: tuple[_Jmp, ...]) -> _Roles:
        sent = [j for j in jmps if not j.silent]
        incoming = tuple(j for j in sent if j.receiver == party)
        return cls(incoming, tuple(sorted({j.sender for j in incoming})),
                   tuple(sorted({j.hasher for j in incoming})),
                   tuple(sorted({j.receiver for j in sent if j.sender == party})),
                   tuple(sorted({j.receiver for j in sent if j.hasher == party})))

# Opening: party p receives its missing component from p+1 and a digest of it from p+2.
_OPEN_SENDER = 1
_OPEN_HASHER = 2


# -- client side ---------------------------------------------------------------------------
def share(values: np.ndarray, binary: bool = False) -> list[np.ndarray]:
    """Client side: Fantastic Four shares of a uint64 array, one (3, *shape) array per party.

    Three components are uniformly random (OS CSPRNG); the fourth completes the sum (or XOR)."""
    values = np.asarray(values, dtype=U64)
    comps = [random_words(values.shape) for _ in range(3)]
    if binary:
        comps.append(values ^ comps[0] ^ comps[1] ^ comps[2])
    else:
        comps.append(values - comps[0] - comps[1] - comps[2])
    return [np.stack([comps[c] for c in held(p)]) for p in range(4)]


def reconstruct(shares: dict[int, np.ndarray], binary: bool = False) -> np.ndarray:
    """Client side: the value behind the parties' shares, every component checked between
    two servers (so at least three of the four servers must answer)."""
    return combine(shares, held, 4, binary)




# -- key agreement -------------------------------------------------------------------------
async def triple_prfs(engine: RoundEngine,
                      fault: FaultInjector | None = None) -> dict[int, PRF]:
    """The PRFs of the triple keys K_c (c != this party), known to every party except c.

    Round 1: every member of each triple sends a fresh contribution to the two other members;
    K_c is a hash of the three contributions in party order. Round 2: every pair of parties
    compares a digest of the two triple keys they should share (key confirmation), so a member
    that sent different contributions to the others is caught here."""
    me = engine.party
    mine = {c: random_key() for c in held(me)}

    def common(peer: int) -> list[int]:
        return [c for c in range(4) if c not in (me, peer)]

    sends = {q: np.frombuffer(b"".join(mine[c] for c in common(q)), dtype=np.uint8)
             for q in engine.peers}
    got = await engine.exchange(sends, engine.peers)
    contrib: dict[int, dict[int, bytes]] = {c: {me: mine[c]} for c in held(me)}
    for q, buf in got.items():
        raw = buf.tobytes()
        if len(raw) != 2 * KEY_BYTES:
            raise CheatingDetected("key agreement", f"party {q} sent {len(raw)} key bytes")
        for n, c in enumerate(common(q)):
            contrib[c][q] = raw[n * KEY_BYTES:(n + 1) * KEY_BYTES]
    keys = {}
    for c, parts in contrib.items():
        h = hashlib.sha256(b"mpcnet-rep4-triple" + bytes([c]))
        for party in sorted(parts):
            h.update(parts[party])
        keys[c] = h.digest()[:KEY_BYTES]
    confirm = {q: np.frombuffer(_confirm_digest(me, q, [keys[c] for c in common(q)]), U64)
               for q in engine.peers}
    if fault is not None:
        confirm = {q: fault.apply(me, "key-confirm", q, v) for q, v in confirm.items()}
    echoed = await engine.exchange(confirm, engine.peers)
    for q, buf in echoed.items():
        buf = checked_words(buf, DIGEST_WORDS, "key agreement", me, q)
        want = np.frombuffer(_confirm_digest(q, me, [keys[c] for c in common(q)]), U64)
        if not np.array_equal(buf, want):
            raise CheatingDetected("key agreement",
                                   f"party {me}: triple keys shared with party {q} differ")
    return {c: PRF(k) for c, k in keys.items()}


def _confirm_digest(a: int, b: int, keys: Sequence[bytes]) -> bytes:
    low, high = min(a, b), max(a, b)
    return hashlib.sha256(b"mpcnet-rep4-confirm" + bytes([low, high]) + b"".join(keys)).digest()


# -- the scheme ----------------------------------------------------------------------------
class Rep4(Scheme):
    """Fantastic Four: replicated 4-party sharing, malicious security with abort."""

    name = "active4"
    n_parties = 4
    lead = 1  # data[k] = x_{(p+1+k) mod 4}, k = 0, 1, 2
    truncates = True  # a mask that two parties know (``truncate``)

    def __init__(self, engine: RoundEngine, prfs: dict[int, PRF],
                 fault: FaultInjector | None = None) -> None:
        if engine.n_parties != N_PARTIES:
            raise ValueError(f"active4 needs exactly 4 parties, the engine has {engine.n_parties}")
        self.engine = engine
        self._prf = prfs  # component c -> PRF of K_c (everyone but c)
        self._fault = fault
        me = engine.party
        # Running hash states of joint messages per link: out (me -> q, I vouch), in (q -> me).
        self._out = {q: self._link_hash(me, q) for q in engine.peers}
        self._in = {q: self._link_hash(q, me) for q in engine.peers}
        # Symmetric per-pair states over the input components both parties hold.
        self._inputs = {q: self._pair_hash(me, q) for q in engine.peers}
        self._held: dict[int, tuple[np.ndarray, list[np.ndarray]]] = {}  # hold_factor
        self._pending_input = False
        # Static roles of this party in a multiplication round and in ``addends``.
        self._roles = {jmps: _Roles.of(me, jmps)
                       for jmps in (_JMPS, _ADDENDS, _TERMS, _TRUNC_OPEN, *_SHUFFLE)}

    @classmethod
    async def setup(cls, engine: RoundEngine, fault: FaultInjector | None = None) -> Rep4:
        """Agree the triple keys (two rounds) and build the scheme for this party."""
        return cls(engine, await triple_prfs(engine, fault), fault)

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _link_hash(hasher: int, receiver: int) -> RunningHash:
        return RunningHash(b"mpcnet-rep4-jmp" + bytes([hasher, receiver]))

    @staticmethod
    def _pair_hash(a: int, b: int) -> RunningHash:
        return RunningHash(b"mpcnet-rep4-input" + bytes([min(a, b), max(a, b)]))

    def _widened(self, x: Shared, c: Public) -> np.ndarray:
        """A writable copy of x's data broadcast against the public value c (same at every
        party, so the shares keep one logical shape)."""
        shape = np.broadcast_shapes(x.data.shape[1:], np.shape(c))  # c: int or array
        return np.array(broadcast_data(x.data, 1, shape), copy=True)

    def _aligned(self, x: Shared, y: Shared) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        """Both operands broadcast to their common logical shape, flattened to (3, n)."""
        shape = np.broadcast_shapes(x.data.shape[1:], y.data.shape[1:])
        a = broadcast_data(x.data, 1, shape).reshape(3, -1)
        b = broadcast_data(y.data, 1, shape).reshape(3, -1)
        return a, b, shape

    def _slot(self, component: int) -> int:
        return slot(self.party, component)

    @staticmethod
    def _ops(binary: bool) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]:
        if binary:
            return np.bitwise_xor, np.bitwise_xor
        return np.add, np.subtract

    # -- joint sharing of cross terms [F4: Pi_inp, Pi_mult] ----------------------------------
    async def _reshare(self, diag: np.ndarray, cross: dict[frozenset[int], np.ndarray],
                       binary: bool, jmps: tuple[_Jmp, ...] = _JMPS) -> np.ndarray:
        """New shares z (3, n) from the local diagonal terms (a fresh (3, n) array, updated in
        place) and the cross terms this party knows (keyed by their component pair, flat of
        length n): one round of the joint sharings ``jmps``, by default the six of
        [F4: Pi_mult].

        For a joint sharing (sender, hasher -> receiver g; other h): the three parties other
        than g draw r from K_g and add it to component g; sender and hasher add w = v - r to
        component h; the sender writes w straight into its message to g, the hasher feeds it
        into the hash state of link hasher -> g, and g adds what it received to component h."""
        me = self.party
        roles = self._roles[jmps]
        plus, minus = self._ops(binary)
        z = diag
        n = z.shape[1]

        def size(jmp: _Jmp) -> int:
            return len(range(n)[jmp.span(n)])

        out_sizes = {q: sum(size(j) for j in jmps
                            if j.sender == me and j.receiver == q and not j.silent)
                     + (DIGEST_WORDS if q in roles.vouch_to else 0)
                     for q in self.engine.peers}
        # Static message pattern (the same for every n, so an empty batch still matches).
        targets = set(roles.value_to) | set(roles.vouch_to)
        sends = {q: np.empty(out_sizes[q], dtype=U64) for q in sorted(targets)}
        filled = dict.fromkeys(sends, 0)
        for jmp in jmps:
            span, k = jmp.span(n), size(jmp)
            g, h = jmp.receiver, jmp.other
            if me in (jmp.sender, jmp.hasher):
                r = self._prf[g].words(k)
                zg = z[self._slot(g), span]
                plus(zg, r, out=zg)
                if me == jmp.sender and not jmp.silent:
                    w = sends[g][filled[g]:filled[g] + k]
                    filled[g] += k
                    minus(cross[frozenset((g, h))][span], r, out=w)
                else:
                    w = minus(cross[frozenset((g, h))][span], r)
                    if not jmp.silent:
                        self._out[g].update(w.data)
                zh = z[self._slot(h), span]
                plus(zh, w, out=zh)
            elif me == h:
                zg = z[self._slot(g), span]
                plus(zg, self._prf[g].words(k), out=zg)
        for q, buf in sends.items():
            if filled[q]:
                buf[:filled[q]] = self._outgoing("jmp-value", q, buf[:filled[q]])
            if q in roles.vouch_to:
                buf[filled[q]:] = self._outgoing("jmp-hash", q, digest_words(self._out[q]))
                self._out[q] = self._link_hash(me, q)
        # What each source owes me: the values it sends, then its digest.
        expected = dict.fromkeys(roles.value_from, 0)
        for jmp in roles.incoming:
            expected[jmp.sender] += size(jmp)
        for q in roles.vouch_from:
            expected[q] = expected.get(q, 0) + DIGEST_WORDS
        got = await self.engine.exchange(sends, sorted(expected))
        got = {q: checked_words(got[q], k, "joint-message hash", me, q)
               for q, k in expected.items()}
        offsets = dict.fromkeys(expected, 0)
        for jmp in roles.incoming:
            span, k = jmp.span(n), size(jmp)
            w = got[jmp.sender][offsets[jmp.sender]:offsets[jmp.sender] + k]
            offsets[jmp.sender] += k
            zh = z[self._slot(jmp.other), span]
            plus(zh, w, out=zh)
            self._in[jmp.hasher].update(np.ascontiguousarray(w).data)
        for q in roles.vouch_from:
            if not np.array_equal(got[q][offsets[q]:], digest_words(self._in[q])):
                raise CheatingDetected("joint-message hash",
                                       f"party {me}: a message vouched for by party {q} "
                                       "differs from what its co-sender sent")
            self._in[q] = self._link_hash(q, me)
        return z

    def _cross(self, a: np.ndarray, b: np.ndarray, times: Callable[..., np.ndarray],
               plus: Callable[..., np.ndarray]) -> dict[frozenset[int], np.ndarray]:
        """The terms of ab of every pair of held components {g, h} [F4: Pi_mult]: the cross
        terms a_g b_h + a_h b_g, and for the pairs {0, 1} and {2, 3} also both diagonal terms,
        (a_g + a_h)(b_g + b_h) in one product (as ``matmul``): five products instead of the
        three diagonals and six cross products, and nothing is added locally (the reshare's
        diagonal is zero)."""
        held_here = held(self.party)
        cross = {}
        for k, m in ((0, 1), (0, 2), (1, 2)):
            pair = frozenset((held_here[k], held_here[m]))
            if pair in _PAIRS:
                v = plus(a[k], a[m])
                times(v, plus(b[k], b[m]), out=v)
            else:
                v = times(a[k], b[m])
                plus(v, times(a[m], b[k]), out=v)
            cross[pair] = v
        return cross

    def _split_pairs(self) -> list[tuple[int, int, frozenset[int]]]:
        """The slots (k, m) of the components g in {0, 1} and h in {2, 3} held here, with the
        pair {g, h}: the cross terms x_g y_h of x with components {0, 1} only and y with
        {2, 3} only, the only terms of xy that are not zero (``_TERMS``: two per party)."""
        components = held(self.party)
        return [(k, m, frozenset((g, h))) for k, g in enumerate(components) if g in (0, 1)
                for m, h in enumerate(components) if h in (2, 3)]

    # -- arithmetic ------------------------------------------------------------------------
    def add_public(self, x: Shared, c: Public) -> Shared:
        """Add c to component 0 (held by parties 1, 2, 3)."""
        data = self._widened(x, c)
        if self.party != 0:
            data[self._slot(0)] += ring.to_ring(c)
        return Shared(data, 1)

    def public(self, values: np.ndarray) -> Shared:
        return self.add_public(Shared(np.zeros((3,) + np.shape(values), dtype=U64), 1), values)

    async def mul(self, x: Shared, y: Shared) -> Shared:
        a, b, shape = self._aligned(x, y)
        cross = self._cross(a, b, np.multiply, np.add)
        z = await self._reshare(np.zeros(a.shape, dtype=U64), cross, binary=False)
        return Shared(z.reshape((3,) + shape), 1)

    split_terms = True  # ``addends``, ``xor_terms``: components {0, 1} and {2, 3}

    async def term_product(self, x: Shared, y: Shared) -> Shared:
        """x y (or AND) for x with components {0, 1} only and y with {2, 3} only (made from
        the two terms of ``addends`` or ``xor_terms``): every diagonal term and the cross
        terms of {0, 1} and {2, 3} are zero, so four joint messages (``_TERMS``), one sent
        and one received by each party, instead of six, and two products per party
        (``_split_pairs``) [F4: Pi_mult]."""
        a, b, shape = self._aligned(x, y)
        times = np.bitwise_and if x.binary else np.multiply
        cross = {pair: times(a[k], b[m]) for k, m, pair in self._split_pairs()}
        z = await self._reshare(np.zeros(a.shape, dtype=U64), cross, x.binary, _TERMS)
        return Shared(z.reshape((3,) + shape), 1, x.binary)

    async def term_inner(self, x: Shared, y: Shared) -> Shared:
        """sum over the first logical axis of x * y for x with components {0, 1} only and y
        with {2, 3} only (``term_product``'s operands), with one reshare of the sums, as
        ``matmul``: the diagonal terms and the cross terms inside {0, 1} and {2, 3} are zero,
        so a party computes only the two dot products x_g . y_h (g in {0, 1}, h in {2, 3}) it
        holds, and the four joint messages of ``_TERMS`` reshare them [F4: Pi_mult on the
        summed cross terms, a dot product]."""
        shape = np.broadcast_shapes(x.data.shape[1:], y.data.shape[1:])
        a, b = broadcast_data(x.data, 1, shape), broadcast_data(y.data, 1, shape)
        cross = {pair: _dot(a[k], b[m]).reshape(-1) for k, m, pair in self._split_pairs()}
        diag = np.zeros((3, int(np.prod(shape[1:], dtype=np.int64))), dtype=U64)
        z = await self._reshare(diag, cross, False, _TERMS)
        return Shared(z.reshape((3,) + shape[1:]), 1)

    def hold_factor(self, x: Shared) -> None:
        """Keep x's components (C-contiguous) and the sum of the pair of them that ``matmul``
        multiplies as one, for its next products: made anew by every product otherwise, the
        sums of all of x were a third of an epoch's product time in training."""
        a = x.data
        components = held(self.party)
        self._held[id(a)] = (a, [np.ascontiguousarray(c) for c in a] + [
            a[k] + a[m] for k, m in ((0, 1), (0, 2), (1, 2))
            if frozenset((components[k], components[m])) in _PAIRS])

    def drop_factors(self) -> None:
        self._held.clear()

    async def matmul(self, x: Shared, y: Shared) -> Shared:
        """X Y with one reshare of the result [F4: Pi_mult on matrices]. XY is the sum of the
        terms of the six pairs of components {g, h}, each known to the two parties other than
        g and h and jointly shared by them; the four diagonal terms X_c Y_c go into the terms
        of the pairs {0, 1} and {2, 3}, whose knowers hold both of their components, which
        then are (X_g + X_h)(Y_g + Y_h): one matrix product each. So a party computes five
        products (that pair's, and X_g Y_h and X_h Y_g of its other two pairs) instead of
        three diagonals and three pairs, and adds nothing locally."""
        kept = self._held.get(id(x.data))
        kept_factors = kept[1] if kept is not None and kept[0] is x.data else None
        a, b = x.data, y.data
        components = held(self.party)
        cross = {}
        for k, m in ((0, 1), (0, 2), (1, 2)):
            pair = frozenset((components[k], components[m]))
            if pair in _PAIRS:  # X_g Y_h + X_h Y_g and both diagonals
                left = a[k] + a[m] if kept_factors is None else kept_factors[3]
                term = ring.matmul(left, b[k] + b[m])
            else:
                left_k, left_m = ((a[k], a[m]) if kept_factors is None
                                  else (kept_factors[k], kept_factors[m]))
                term = ring.matmul(left_k, b[m])
                term += ring.matmul(left_m, b[k])
            shape = term.shape
            cross[pair] = term.reshape(-1)
        z = await self._reshare(np.zeros((3, cross[pair].size), dtype=U64), cross, binary=False)
        return Shared(z.reshape((3,) + shape), 1)

    async def _open(self, x: Shared, binary: bool) -> np.ndarray:
        """[F4: reconstruction]: x_p from party p+1, its digest from party p+2; checks first."""
        await self.verify()
        me = self.party
        data = np.ascontiguousarray(x.data, dtype=U64)
        to_value = (me - _OPEN_SENDER) % 4  # I send my copy of its missing component
        to_hash = (me - _OPEN_HASHER) % 4
        value = self._outgoing("open-value", to_value, data[self._slot(to_value)].reshape(-1))
        digest = self._outgoing("open-hash", to_hash,
                              np.frombuffer(self._open_digest(data[self._slot(to_hash)]), U64))
        src_value = (me + _OPEN_SENDER) % 4
        src_hash = (me + _OPEN_HASHER) % 4
        got = await self.engine.exchange({to_value: value, to_hash: digest},
                                         [src_value, src_hash])
        size = int(np.prod(data.shape[1:], dtype=np.int64))
        missing = checked_words(got[src_value], size, "open consistency", me, src_value)
        missing = missing.reshape(data.shape[1:])
        digest = checked_words(got[src_hash], DIGEST_WORDS, "open consistency", me, src_hash)
        if not np.array_equal(digest, np.frombuffer(self._open_digest(missing), U64)):
            raise CheatingDetected("open consistency",
                                   f"party {me}: the value from party {src_value} does not "
                                   f"match the digest from party {src_hash}")
        if binary:
            return data[0] ^ data[1] ^ data[2] ^ missing
        return data[0] + data[1] + data[2] + missing

    @staticmethod
    def _open_digest(component: np.ndarray) -> bytes:
        h = RunningHash(b"mpcnet-rep4-open")
        h.update(np.ascontiguousarray(component).data)
        return h.digest()

    async def open(self, x: Shared) -> np.ndarray:
        self.engine.alone("open")
        return await self._open(x, binary=False)

    async def open_masked(self, x: Shared, binary: bool = False) -> np.ndarray:
        """x, uniformly masked (``Scheme.open_masked``): the one opening allowed inside
        ``RoundEngine.together`` (``RoundEngine.alone``)."""
        return await self._open(x, binary)

    def _random_words(self, shape: tuple[int, ...]) -> np.ndarray:
        """Component c from K_c: every holder derives it, party c never sees it."""
        return stacked_words([self._prf[c] for c in held(self.party)], shape)

    async def random(self, shape: tuple[int, ...]) -> Shared:
        return Shared(self._random_words(shape), 1)

    def random_binary(self, shape: tuple[int, ...]) -> Shared:
        return Shared(self._random_words(shape), 1, True)

    # -- shuffle ---------------------------------------------------------------------------
    def _permutations(self, rows: int) -> tuple[np.ndarray | None, ...]:
        """Round e's permutation from K_e, which every party but e holds (``_permute``)."""
        return tuple(None if self.party == e else permutation(self._prf[e], rows)
                     for e in range(4))

    async def _permute(self, x: Shared, perms: tuple[np.ndarray | None, ...]) -> Shared:
        """Four rounds, one per party e left out. The other three hold every component and
        permute them by a permutation of K_e (which e lacks); component e, which all three
        hold, stays as permuted; each other component j is made again: K_j's next words for
        its holders (e among them, who draws them without learning the permutation), and the
        permuted words less them, known to the two holders of j other than e and j, jointly
        shared towards j into component e [F4: Pi_jmp, as in ``_reshare``]. So every party
        lacks one of the four permutations and nothing links an input row to an output row.
        A cheater can change only what it sends, and its voucher's digest catches any change
        in the round it is sent, whatever the data (the resharing shuffle of Laur, Willemson
        and Zhang, ISC 2011, with joint messages). Party e+1 is left out of the next round,
        which replaces its components, so the sharing towards it is silent but in the last
        round: nine joint messages of one word per value in four rounds, plus digests."""
        if x.binary:
            raise TypeError("shuffle takes arithmetic sharings")
        data = np.ascontiguousarray(x.data)
        for excluded, perm in enumerate(perms):
            data = await self._shuffle_round(data, excluded, perm)
        return Shared(data, 1)

    async def _shuffle_round(self, data: np.ndarray, excluded: int, perm: np.ndarray | None
                             ) -> np.ndarray:
        me = self.party
        size = data[0].size
        diag = np.zeros((3, size), dtype=U64)
        cross = {}
        if perm is not None:
            moved = np.take(data, perm, axis=1).reshape(3, size)
            diag[self._slot(excluded)] = moved[self._slot(excluded)]
            for j in held(me):
                if j != excluded:
                    cross[frozenset((j, excluded))] = moved[self._slot(j)]
        z = await self._reshare(diag, cross, False, _SHUFFLE[excluded])
        return z.reshape(data.shape)

    # -- binary ----------------------------------------------------------------------------
    def xor_public(self, x: Shared, c: Public) -> Shared:
        data = self._widened(x, c)
        if self.party != 0:
            data[self._slot(0)] ^= ring.to_ring(c)
        return Shared(data, 1, True)

    async def and_(self, x: Shared, y: Shared) -> Shared:
        a, b, shape = self._aligned(x, y)
        cross = self._cross(a, b, np.bitwise_and, np.bitwise_xor)
        z = await self._reshare(np.zeros(a.shape, dtype=U64), cross, binary=True)
        return Shared(z.reshape((3,) + shape), 1, True)

    async def open_binary(self, x: Shared) -> np.ndarray:
        self.engine.alone("open_binary")
        return await self._open(x, binary=True)

    # -- conversions -----------------------------------------------------------------------
    def _components(self, data: np.ndarray, binary: bool) -> list[Shared]:
        """Component c as a sharing whose only non-zero component is c (held by all but c)."""
        out = []
        for c in range(4):
            comp = np.zeros(data.shape, dtype=U64)  # calloc: the zero slots cost nothing
            for k in range(3):
                if held(self.party)[k] == c:
                    comp[k] = data[k]
            out.append(Shared(comp, 1, binary))
        return out

    def arith_components(self, x: Shared) -> list[Shared]:
        return self._components(np.asarray(x.data, dtype=U64), True)

    async def addends(self, x: Shared) -> list[Shared]:
        """Binary sharings of x_0 + x_1 and x_2 + x_3, each jointly shared by the two parties
        that know both its components [F4: Pi_inp with two input parties]: one round, about
        half a word per value and party, where reducing the four components by carry-save
        adders takes two AND rounds of 1.5 words each."""
        return await self._pair_sums(np.asarray(x.data, dtype=U64), np.add, binary=True)

    async def xor_terms(self, b: Shared) -> list[Shared]:
        """Bit 0 of b as the XOR of two arithmetic 0/1 sharings, c_0 ^ c_1 and c_2 ^ c_3,
        jointly shared as in ``addends``: one round, after which ``bit_to_arith`` folds them
        with one product, where the four components take three products in two rounds."""
        def low_bits(x: np.ndarray, y: np.ndarray) -> np.ndarray:  # (x ^ y) & 1, in place
            out = np.bitwise_xor(x, y)
            out &= U64(1)
            return out

        return await self._pair_sums(np.asarray(b.data, dtype=U64), low_bits, binary=False)

    async def _pair_sums(self, data: np.ndarray, combine: Callable[..., np.ndarray],
                         binary: bool) -> list[Shared]:
        """combine(x_0, x_1) and combine(x_2, x_3) of the components in ``data`` (3, ...),
        as new sharings (binary or arithmetic), jointly shared in one round (``_ADDENDS``)."""
        flat = data.reshape(3, -1)
        known = {}
        for pair in _PAIRS:
            if self.party not in pair:  # both components are held here
                g, h = sorted(pair)
                known[pair] = combine(flat[self._slot(g)], flat[self._slot(h)])
        z = await self._share_known(known, flat.shape[1], binary)
        return [Shared(half.reshape(data.shape), 1, binary) for half in z]

    async def _share_known(self, known: dict[frozenset[int], np.ndarray], n: int,
                           binary: bool = False) -> list[np.ndarray]:
        """Sharings (3, n) of values that parties 2 and 3 know (``known[{0, 1}]``, (n,)) and
        of values that parties 0 and 1 know (``known[{2, 3}]``), jointly shared in one round
        of ``_ADDENDS`` [F4: Pi_inp with two input parties]; a party passes the values it
        knows."""
        cross = {}
        for half, pair in enumerate(_PAIRS):
            if pair in known:  # the joint sharings of this pair read only its half
                values = np.empty(2 * n, dtype=U64)
                values[half * n:(half + 1) * n] = known.pop(pair)
                cross[pair] = values
        z = await self._reshare(np.zeros((3, 2 * n), dtype=U64), cross, binary, _ADDENDS)
        return [z[:, :n], z[:, n:]]

    # -- truncation ------------------------------------------------------------------------
    async def truncate(self, x: Shared, shifts: np.ndarray) -> Shared | None:
        """Probabilistic truncation with a mask r that parties 2 and 3 know and parties 0 and
        1 see added to x (``Scheme.truncate``): 3 rounds, about 3.5 words per value and party,
        every message a joint message, where 64 shared random bits cost 1 KB.

        The mask is ``mpcnet.ops.truncate``'s (Catrina and Saxena, FC 2010, in Z_2^64): r
        uniform, c = x + 2^62 + r, floor(x / 2^t) + e = (c mod 2^63) >> t - 2^(62 - t) +
        2^(63 - t) (c_63 XOR r_63) - (r mod 2^63) >> t. Here r = a + b for words a of K_0
        and b of K_1, so parties 2 and 3 know r, party 0 only b and party 1 only a.
        Round 1 (``_TRUNC_OPEN``): the joint sharing of -x_0 towards party 0 hands it
        -(x_0 + a), that of -x_1 towards party 1 hands it -(x_1 + b): both now hold c, while
        2 and 3, who know r, receive nothing of it. Round 2 (one ``_share_known``): 2 and 3
        share N = -(r mod 2^63) >> t and r_63; 0 and 1 share P = (c mod 2^63) >> t -
        2^(62 - t) + 2^(63 - t) c_63 and c_63. Round 3: the product c_63 r_63, so that
        c_63 XOR r_63 = c_63 + r_63 - 2 c_63 r_63 [F4: Pi_mult]. Every value a party receives
        is masked by a key word it lacks; every one is sent by one knower and vouched for by
        another (joint message passing), so a cheater's change is caught in the round it is
        sent, whatever the data."""
        n = x.size
        t = np.asarray(shifts, dtype=np.int64).reshape(n).astype(U64)
        data = np.ascontiguousarray(np.broadcast_to(x.data, x.data.shape).reshape(3, n))
        me = self.party
        cross = {}
        if me in (1, 2):
            cross[frozenset((0, 3))] = U64(0) - data[self._slot(0)]
        if me in (0, 3):
            cross[frozenset((1, 2))] = U64(0) - data[self._slot(1)]
        z = await self._reshare(np.zeros((3, n), dtype=U64), cross, False, _TRUNC_OPEN)
        known: dict[frozenset[int], np.ndarray] = {}
        if me in (2, 3):
            r = z[self._slot(0)] + z[self._slot(1)]  # a + b
            known[_PAIRS[0]] = np.concatenate([U64(0) - ((r & _LOW63) >> t), r >> U64(63)])
        else:
            # party 0: the received -(x_0 + a) landed in component 3, b in component 1;
            # party 1: -(x_1 + b) in component 2, a in component 0
            got, mask = (3, 1) if me == 0 else (2, 0)
            c = (data.sum(axis=0, dtype=U64) + z[self._slot(mask)] - z[self._slot(got)]
                 + U64(1 << 62))
            low, top = c & _LOW63, c >> U64(63)
            part = (low >> t) - (U64(1) << (U64(62) - t)) + (top << (U64(63) - t))
            known[_PAIRS[1]] = np.concatenate([part, top])
        dealt, opened = await self._share_known(known, 2 * n)
        negated, wrap = Shared(dealt[:, :n], 1), Shared(dealt[:, n:], 1)
        public, top_bit = Shared(opened[:, :n], 1), Shared(opened[:, n:], 1)
        both = await self.mul(top_bit, wrap)
        weight = U64(1) << (U64(63) - t)
        out = self.add(self.add(public, negated),
                       self.sub(self.mul_public(wrap, weight),
                                self.mul_public(both, weight * U64(2))))
        return out.reshape(x.shape)

    async def bit_components(self, b: Shared) -> list[Shared]:
        return self._components(np.asarray(b.data, dtype=U64) & U64(1), False)

    # -- checks ----------------------------------------------------------------------------
    def note_input(self, x: Shared) -> None:
        """Queue a consistency check of client-provided shares (no communication now).

        Each pair of parties feeds the two components they both hold into a shared hash
        state; ``verify_inputs`` (run by ``input`` at once, and by ``verify``) compares them,
        so a client that gave the holders of one component different values is caught:
        ``CheatingDetected("input consistency")``."""
        data = np.asarray(x.data, dtype=U64)
        for q in self.engine.peers:
            for c in range(4):
                if c not in (self.party, q):
                    self._inputs[q].update(np.ascontiguousarray(data[self._slot(c)]).data)
        self._pending_input = True

    def _inputs_pending(self) -> bool:
        return self._pending_input

    async def _input_check(self) -> None:
        """Compare the input digest with each peer (one round, 32 bytes per peer). The digests
        are taken, and the hashes started afresh, before the round (``Scheme._input_check``)."""
        me = self.party
        mine = {q: digest_words(self._inputs[q]) for q in self.engine.peers}
        self._inputs = {q: self._pair_hash(me, q) for q in self.engine.peers}
        self._pending_input = False
        sends = {q: self._outgoing("input-hash", q, mine[q]) for q in self.engine.peers}
        got = await self.engine.exchange(sends, self.engine.peers)
        for q in self.engine.peers:
            buf = checked_words(got[q], DIGEST_WORDS, "input consistency", me, q)
            if not np.array_equal(buf, mine[q]):
                raise CheatingDetected("input consistency",
                                       f"party {me}: input shares held with party {q} differ")

    async def verify(self) -> None:
        """Every pending check: the inputs noted since the last one (joint messages need
        nothing here: each one was compared in its own round)."""
        await self.verify_inputs()
