"""Layer: schemes. rep3 over Z_2^128, the plumbing of active3 (``spdz3``): its products and
reshares on the wider words, checked openings, and the message rounds of its checks.

Not a security setting of its own: ``Spdz3`` adds the MACs and the checks that make these
products and openings safe against a deviating server. Data are ``ring128`` elements, two
uint64 limbs (limb, slot, ...), slot 0/1 the two components a party holds (as in ``rep3``).
"""

from __future__ import annotations

import numpy as np

from mpcnet import ring128
from mpcnet.errors import CheatingDetected
from mpcnet.schemes.rep3 import Rep3
from mpcnet.schemes.replicated import DIGEST_WORDS, RunningHash, checked_words, digest_words

Part = tuple[str, np.ndarray]  # (message kind, array) in a message of several parts
# the check a malformed message of a kind fails
_CHECK_OF = {"product": "MAC", "and": "AND", "shuffle": "MAC"}


def lift(words: np.ndarray) -> np.ndarray:
    """uint64 component words (slot, ...) as Z_2^128 elements (limb, slot, ...)."""
    return np.stack([words, np.zeros_like(words)])


def replicated_factors(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[a0 | a1] and [b0 + b1; b0] for Z_2^128 sharings (limb, slot, ..., m, n) and
    (limb, slot, ..., n, k): their matrix product is this party's term of a b, without its
    share of zero (the replicated product of ``Rep3Wide._product_term``, as one matmul)."""
    return replicated_left(a), replicated_right(b)


def replicated_left(a: np.ndarray) -> np.ndarray:
    """[a0 | a1] of ``replicated_factors``, C-contiguous whatever the layout of ``a``:
    np.concatenate keeps a transposed input's column-major order, and the compiled product
    reads rows (a transposed D', the training gradient's [X~ 1]^T, took 14 times as long)."""
    n = a.shape[-1]
    left = np.empty(a.shape[:1] + a.shape[2:-1] + (2 * n,), dtype=a.dtype)
    left[..., :n], left[..., n:] = a[:, 0], a[:, 1]
    return left


def replicated_right(b: np.ndarray) -> np.ndarray:
    """[b0 + b1; b0] of ``replicated_factors``."""
    return np.concatenate([ring128.add(b[:, 0], b[:, 1]), b[:, 0]], axis=-2)


class Rep3Wide(Rep3):
    """rep3's reshare and PRF helpers on Z_2^128 words, with active3's checked openings and
    check rounds; every message passes the fault hook, and what a party receives in them is
    shown to it (``FaultInjector.observe``)."""

    def _observe(self, event: str, value: object) -> None:
        if self._fault is not None:
            self._fault.observe(self.party, event, value)

    async def _ring_round(self, backward: list[Part], forward: list[Part], check: str
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

