"""Layer: schemes. The interface every secret-sharing scheme implements, and the share type.

Protocols in ``ops`` and ``featsel`` are written once against ``Scheme`` and run unchanged under
passive 3PC (rep3) and the active schemes. A scheme owns the layout of a party's local share
array: ``Shared.data`` has ``scheme.lead`` leading axes (components held, MAC, limbs...) followed
by the logical shape, so shape operations below are scheme-independent.

Arithmetic shares live in Z_2^64 (uint64). Binary shares are bit-sliced: one uint64 word holds
the 64 bits of one value, and XOR/AND act on whole words.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpcnet.net.engine import RoundEngine
from mpcnet.ring import to_ring
from mpcnet.schemes.faults import FaultInjector

Public = np.ndarray | int | np.integer
"""A public operand: an array or a scalar, read in Z_2^64 (negative values wrap)."""


@dataclass(frozen=True, eq=False)
class Shared:
    """One party's share of a secret array (arithmetic, or binary when ``binary``)."""

    data: np.ndarray
    lead: int
    binary: bool = False

    def __bool__(self) -> bool:
        raise TypeError("a secret-shared value has no truth value: open it, or compare it "
                        "securely with mpcnet.ops")

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("a secret-shared value cannot be mixed with public arrays implicitly: "
                        "use the scheme's add_public / mul_public")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape[self.lead:])

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def _with(self, data: np.ndarray) -> Shared:
        return Shared(data, self.lead, self.binary)

    def __getitem__(self, index: Any) -> Shared:
        if isinstance(index, np.ndarray) and index.dtype.kind in "iu":
            # a gather of rows: np.take, several times faster than the advanced index
            return self._with(np.take(self.data, index, axis=self.lead))
        if not isinstance(index, tuple):
            index = (index,)
        return self._with(self.data[(slice(None),) * self.lead + index])

    def reshape(self, *shape: int | tuple[int, ...]) -> Shared:
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        return self._with(self.data.reshape(self.data.shape[:self.lead] + tuple(dims)))

    @property
    def T(self) -> Shared:  # noqa: N802 - mirrors numpy
        axes = list(range(self.lead)) + list(range(self.data.ndim - 1, self.lead - 1, -1))
        return self._with(self.data.transpose(axes))

    def broadcast_to(self, shape: tuple[int, ...]) -> Shared:
        return self._with(np.broadcast_to(self.data, self.data.shape[:self.lead] + shape))


def broadcast_data(data: np.ndarray, lead: int, shape: tuple[int, ...]) -> np.ndarray:
    """Share data with ``lead`` leading axes broadcast to the logical ``shape`` (numpy rules on
    the logical axes only: missing logical axes are added after the leading ones)."""
    pad = len(shape) - (data.ndim - lead)
    data = data.reshape(data.shape[:lead] + (1,) * pad + data.shape[lead:])
    return np.broadcast_to(data, data.shape[:lead] + shape)


def same_layout(parts: Sequence[Shared]) -> None:
    """Sharings put into one array must have the same leading axes: an active scheme's
    value-only sharing (``Scheme.input``) has no MAC axis entry to join with a MAC."""
    leads = {p.data.shape[:p.lead] for p in parts}
    if len(leads) > 1:
        raise TypeError(f"cannot join sharings of different layouts {sorted(leads)}: "
                        "value-only and authenticated ones do not mix in one array")


def concat(parts: Sequence[Shared]) -> Shared:
    """Flatten and join shares of the same kind, for one batched round."""
    same_layout(parts)
    first = parts[0]
    if len(parts) == 1:
        return first.reshape(first.size)
    flat = [p.data.reshape(p.data.shape[:p.lead] + (-1,)) for p in parts]
    return Shared(np.concatenate(flat, axis=first.lead), first.lead, first.binary)


def join(parts: Sequence[Shared], axis: int) -> Shared:
    """Sharings joined along a logical ``axis`` (row tiles, column blocks); local."""
    same_layout(parts)
    first = parts[0]
    if len(parts) == 1:
        return first
    return Shared(np.concatenate([p.data for p in parts], axis=first.lead + axis), first.lead,
                  first.binary)


def split(whole: Shared, shapes: Sequence[tuple[int, ...]]) -> list[Shared]:
    """Undo ``concat``: cut a flat share into pieces of the given shapes."""
    out, start = [], 0
    for shape in shapes:
        size = int(np.prod(shape, dtype=np.int64))
        out.append(whole[start:start + size].reshape(shape))
        start += size
    return out


Rounds = Awaitable["Rounds | None"]
"""A checkpoint's rounds (``Scheme.checkpoint_later``): awaited, they run a part of them and
return the rest, or None once all have run."""


async def _nothing_after(rounds: Awaitable[None]) -> Rounds | None:
    await rounds
    return None


async def all_rounds(rounds: Rounds | None) -> None:
    """Every part of a checkpoint's rounds, one after the other."""
    while rounds is not None:
        rounds = await rounds


class Shuffler:
    """One shuffle's permutations (``Scheme.shuffler``), applied to blocks of columns of the
    same rows. Every block is masked afresh and checked as a whole shuffle is (active3: its
    outputs queued for the MAC check; active4: every message vouched for), so blocks of one
    table, shuffled one after the other, are the table shuffled once: the same permutations,
    independent masks, one message per block and round."""

    def __init__(self, scheme: Scheme, rows: int, perms: tuple[np.ndarray | None, ...]) -> None:
        self._scheme, self.rows, self._perms = scheme, rows, perms

    async def apply(self, x: Shared) -> Shared:
        """The rows of x (``rows`` of them) in this shuffle's order."""
        if x.shape[:1] != (self.rows,):
            raise ValueError(f"this shuffle moves {self.rows} rows, not {x.shape[:1]}")
        return await self._scheme._permute(x, self._perms)


class Scheme(ABC):
    """What a protocol may do with shares. Local methods are plain, interactive ones async.

    The scheme owns its checks' life cycle: ``input`` checks that the clients gave every holder
    of a component the same words before anything is computed on them, every opening and
    ``output`` run the pending checks first, so a protocol cannot forget them. ``fault``
    (tests only, ``mpcnet.schemes.faults``) sees every message the party sends
    (``_outgoing``)."""

    name: str
    n_parties: int
    lead: int
    engine: RoundEngine
    _fault: FaultInjector | None = None

    @classmethod
    @abstractmethod
    async def setup(cls, engine: RoundEngine, fault: FaultInjector | None = None) -> Scheme:
        """Agree this session's correlated-randomness keys with the peers and build the scheme."""

    @property
    def party(self) -> int:
        return self.engine.party

    def _outgoing(self, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        """Every message this party sends passes here under its kind (the test-only fault
        hook may change it; without one it is sent as it is)."""
        if self._fault is None:
            return payload
        return self._fault.apply(self.party, kind, peer, payload)

    # -- inputs and outputs ----------------------------------------------------------------
    async def input(self, *shares: np.ndarray, authenticate: bool = True) -> list[Shared]:
        """This party's shares of client inputs (as made by the registry's ``share``) as
        sharings of this scheme, checked for consistency first (``verify_inputs``); active
        schemes add what the client cannot make (MACs). With ``authenticate=False`` they may
        skip the MACs: for inputs that are only added, compared, opened or output, or a
        factor of products whose other factor is authenticated (``mul``, ``matmul``,
        ``output_matmul``)."""
        self._refuse_earlier_inputs()
        out = [Shared(np.asarray(d), self.lead) for d in shares]
        for x in out:
            self.note_input(x)
        if self._inputs_pending():
            await self._input_check()
        return out

    async def output(self, x: Shared) -> np.ndarray:
        """The share array this party hands to the analyst (the registry's ``reconstruct``
        combines them), once every pending check has passed."""
        await self.verify()
        return x.data

    # -- local arithmetic ------------------------------------------------------------------
    def add(self, x: Shared, y: Shared) -> Shared:
        return Shared(x.data + y.data, self.lead)

    def sub(self, x: Shared, y: Shared) -> Shared:
        return Shared(x.data - y.data, self.lead)

    def neg(self, x: Shared) -> Shared:
        return Shared(np.uint64(0) - x.data, self.lead)

    def sum(self, x: Shared, axis: int) -> Shared:
        """Sum over a logical axis (arithmetic shares; local)."""
        assert not x.binary, "sum of binary shares is not a ring sum"
        ax = axis + x.lead if axis >= 0 else axis
        return Shared(x.data.sum(axis=ax, dtype=np.uint64), x.lead)

    def mul_public(self, x: Shared, c: Public) -> Shared:
        """x * c for a public integer array c (broadcast over the logical shape)."""
        return Shared(x.data * to_ring(c), self.lead)

    def matmul_public(self, c: np.ndarray, x: Shared) -> Shared:
        """c @ x for a public uint64 matrix c (local)."""
        return Shared(np.matmul(to_ring(c), x.data), self.lead)

    @abstractmethod
    def add_public(self, x: Shared, c: Public) -> Shared:
        """x + c for a public value c."""

    @abstractmethod
    def public(self, values: np.ndarray) -> Shared:
        """A sharing of public values (no communication)."""

    # -- interactive arithmetic ------------------------------------------------------------
    @abstractmethod
    async def mul(self, x: Shared, y: Shared) -> Shared:
        """Elementwise product, one round."""

    @abstractmethod
    async def matmul(self, x: Shared, y: Shared) -> Shared:
        """Matrix product with one reshare of the result (communication ~ result size)."""

    async def output_matmul(self, x: Shared, y: Shared) -> Shared:
        """A matrix product that is only output, never computed on (D' = D x T): ``matmul``,
        unless the scheme can check such a product more cheaply than it authenticates one."""
        return await self.matmul(x, y)

    def hold_factor(self, x: Shared) -> None:  # noqa: B027 - most schemes use x as it is
        """Note that x (this very object, unchanged) will be the left factor of many
        ``matmul`` calls (training's [X~ 1] and its transpose, every epoch): a scheme that
        rearranges a left factor for its product may keep the rearranged copy until
        ``drop_factors``. A local choice of layout: nothing is sent or checked differently."""

    def drop_factors(self) -> None:  # noqa: B027 - see hold_factor
        """Forget the factors kept by ``hold_factor``."""

    @abstractmethod
    async def open(self, x: Shared) -> np.ndarray:
        """Reveal x to every party (after the scheme's checks)."""

    async def open_masked(self, x: Shared, binary: bool = False) -> np.ndarray:
        """Reveal x, a value masked by fresh randomness uniform over the whole ring (a perfect
        truncation's x + r, ``b2a_masked``'s w - r): what it shows is uniform whatever errors
        a cheater put into it, so a scheme may defer the checks that draw randomness to the
        job's next ``verify`` instead of running them in parts (spdz3). Also for a value
        that is zero for well-formed inputs, whatever the data, and whose other values are
        revealed anyway, acted on only after ``verify`` (the one-hot products of the labels:
        ``featsel.labels.open_one_hot``). Here: ``open``."""
        return await (self.open_binary(x) if binary else self.open(x))

    async def open_of(self, x: Shared, inputs: Sequence[Shared], binary: bool = False
                      ) -> np.ndarray:
        """Reveal x, computed from the authenticated ``inputs`` by local steps and binary
        circuits alone (a shuffle's output, comparisons of it), once what x depends on is
        checked: the pending ANDs and the MACs of ``inputs``. A scheme may leave every other
        check queued for the job's next ``checkpoint`` or ``verify`` (spdz3: no MAC record is
        weighed in a part, docs/active3.md). Here: ``open`` (every check first)."""
        del inputs
        return await (self.open_binary(x) if binary else self.open(x))

    async def truncate(self, x: Shared, shifts: np.ndarray) -> Shared | None:
        """floor(x / 2^t) + e for every value of x and its shift t in ``shifts`` (int64, x's
        size, 0..62), with |x| < 2^62 and e in {0, 1}, P[e = 1] = (x mod 2^t) / 2^t, by a
        protocol of the scheme's own; None where it has none (``mpcnet.ops.truncate.trunc``
        then masks with shared random bits, which every scheme can make)."""
        return None

    async def bit_mul(self, bits: Shared, values: Shared) -> Shared | None:
        """b v for the bit b in position 0 of every word of the binary sharing ``bits``
        (broadcast to the shape of the arithmetic ``values``) by a protocol of the scheme's
        own; None where it has none (``mpcnet.ops.convert.bits_times`` then converts the bits
        and multiplies)."""
        return None

    async def bit_counts(self, bits: Shared, weights: Shared) -> tuple[Shared, Shared] | None:
        """sum_i b_ij (shape (p,)) and sum_i b_ij w_ic (shape (p, c)) for the bits b in
        position 0 of the words of the binary sharing ``bits`` (m, p) and the arithmetic
        ``weights`` (m, c), by a protocol of the scheme's own; None where it has none
        (``mpcnet.ops.count.bit_counts`` then converts the bits)."""
        return None

    @property
    def truncates(self) -> bool:
        """Whether ``truncate`` is a protocol of the scheme's own (it returns no None): where
        it is not, a large truncation is a binary circuit (``mpcnet.ops.truncate``), and a
        step that has the binary form of its values anyway may shift them there instead
        (``mpcnet.train.standardise``)."""
        return False

    split_terms = False
    """Whether ``addends`` and ``xor_terms`` make two terms whose components do not overlap:
    their products need fewer cross terms (``term_product``), and a sum of converted bits
    only a ``term_inner`` product of them (``mpcnet.ops.count``)."""

    async def term_product(self, x: Shared, y: Shared) -> Shared:
        """x y (x AND y for binary sharings) for x made from the first and y from the second
        of the two terms of ``addends`` or ``xor_terms`` by local maps (shifts, masks,
        packing); a ``split_terms`` scheme reshares only the cross terms that are not zero.
        Here: ``and_`` or ``mul``."""
        return await (self.and_(x, y) if x.binary else self.mul(x, y))

    async def term_inner(self, x: Shared, y: Shared) -> Shared:
        """sum over the first logical axis of x * y, for x and y made as for ``term_product``
        (arithmetic); a scheme may reshare only the sums, as a matrix product does. Here:
        ``term_product``, then the sum."""
        return self.sum(await self.term_product(x, y), 0)

    async def shuffle(self, x: Shared) -> Shared:
        """The rows of x (its first logical axis) in an order that no single party knows: a
        composition of permutations, each drawn from a key that one party lacks (every party
        lacks one of them), with every component refreshed so that nothing links an input row
        to an output row. The active schemes check it as they check products
        (``mpcnet.ops.join`` aligns record IDs with it). One ``shuffler`` applied once."""
        return await self.shuffler(x.shape[0]).apply(x)

    def shuffler(self, rows: int) -> Shuffler:
        """A shuffle of ``rows`` rows whose permutations are drawn now, once, to be applied
        to column blocks of one table one after the other (``Shuffler.apply``): the rows stay
        together across the blocks, and the peak is one block's copies, not the table's."""
        return Shuffler(self, rows, self._permutations(rows))

    @abstractmethod
    def _permutations(self, rows: int) -> tuple[np.ndarray | None, ...]:
        """This party's permutation of ``rows`` rows for every round of a shuffle (None in
        a round it is left out of), drawn from the keys it shares with that round's other
        permuting parties: every holder of a key draws from it at the same point."""

    @abstractmethod
    async def _permute(self, x: Shared, perms: tuple[np.ndarray | None, ...]) -> Shared:
        """The shuffle's rounds on x by the permutations ``perms`` (``_permutations``), with
        fresh masks: a block of a table moved as the whole table would be."""

    async def refresh(self, x: Shared) -> Shared:
        """x with check data of its own (active3: its MACs made again from its value, so no
        error that survived an earlier check enters later ones; docs/active3.md says why
        checks in parts leak otherwise). Here: x."""
        return x

    @abstractmethod
    async def random(self, shape: tuple[int, ...]) -> Shared:
        """A sharing of a uniformly random ring element nobody knows."""

    @abstractmethod
    def random_binary(self, shape: tuple[int, ...]) -> Shared:
        """A binary sharing of uniformly random words nobody knows (no communication)."""

    # -- binary (bit-sliced) ---------------------------------------------------------------
    def xor(self, x: Shared, y: Shared) -> Shared:
        return Shared(x.data ^ y.data, x.lead, True)

    def and_public(self, x: Shared, mask: Public) -> Shared:
        return Shared(x.data & to_ring(mask), x.lead, True)

    def shift(self, x: Shared, bits: int) -> Shared:
        """Logical shift of every word: left for positive ``bits``, right for negative."""
        if bits >= 0:
            return Shared(x.data << np.uint64(bits), x.lead, True)
        return Shared(x.data >> np.uint64(-bits), x.lead, True)

    @abstractmethod
    def xor_public(self, x: Shared, c: Public) -> Shared:
        """x XOR c for a public word c."""

    @abstractmethod
    async def and_(self, x: Shared, y: Shared) -> Shared:
        """Bitwise AND of binary shares, one round."""

    @abstractmethod
    async def open_binary(self, x: Shared) -> np.ndarray:
        """Reveal binary shares to every party."""

    # -- conversions -----------------------------------------------------------------------
    @abstractmethod
    def arith_components(self, x: Shared) -> list[Shared]:
        """Binary sharings of the additive components of x (their ring sum is x); local."""

    async def addends(self, x: Shared) -> list[Shared]:
        """Binary sharings of words whose ring sum is x, as few as the scheme makes cheaply:
        by default the additive components themselves (local)."""
        return self.arith_components(x)

    @abstractmethod
    async def bit_components(self, b: Shared) -> list[Shared]:
        """Arithmetic sharings of the XOR components of the bit in position 0 of b (local for
        passive schemes; an active scheme may need a round to authenticate them)."""

    async def xor_terms(self, b: Shared) -> list[Shared]:
        """Arithmetic 0/1 sharings whose XOR is the bit in position 0 of b, as few as the
        scheme makes cheaply: by default its XOR components (``bit_components``)."""
        return await self.bit_components(b)

    # -- checks ----------------------------------------------------------------------------
    def note_input(self, x: Shared) -> None:  # noqa: B027 - passive schemes trust inputs
        """Queue a check that a client gave every holder of a component the same value."""

    async def verify_inputs(self) -> None:
        """Run the queued input checks now, in a round of their own: an honest server that
        computed on copies a client (perhaps one colluding with a cheating server) gave it
        inconsistently could send digests that tell the cheater other owners' data. Refused
        inside ``RoundEngine.together`` when inputs are pending: another member could compute
        on them before their check."""
        if self._inputs_pending():
            self.engine.alone("the input check")
            await self._input_check()

    def _inputs_pending(self) -> bool:
        """Whether inputs noted (``note_input``) wait for their check (passive: never)."""
        return False

    async def _input_check(self) -> None:  # noqa: B027 - passive schemes trust inputs
        """The input check's one round over every input noted so far; what it compares is
        taken before the round, so a later note waits for the next check."""

    def _refuse_earlier_inputs(self) -> None:
        """``input`` checks the arrays it is given before it returns them, so inside
        ``RoundEngine.together`` it may run beside other members (nobody else holds those
        sharings yet: a job's next block is input while this one is scored), but not while
        inputs noted elsewhere are pending, which the other members might be computing on."""
        if self._inputs_pending():
            self.engine.alone("an input check of inputs noted before")

    async def verify(self) -> None:  # noqa: B027 - passive schemes have nothing to check
        """Run every pending batched check; active schemes raise ``CheatingDetected``."""

    async def checkpoint(self) -> None:
        """Free the records of the pending checks, for a job too large to keep them all until
        its end (a block at a time): run now what may run before the end, and fold the rest
        into the next ``verify``. A batched check whose outcome would depend on data if run
        in parts (active3's MAC check: an error that passed one part reaches the next only
        multiplied by secrets) must be folded, not run (docs/active3.md)."""
        await self.verify()

    def checkpoint_later(self) -> Rounds:
        """``checkpoint`` in two steps, so that its rounds need no latency of their own: the
        records it tests are taken now (nothing queued later joins them), and the awaitable
        returned runs its rounds, alone or as a member of ``RoundEngine.together`` beside an
        independent computation (a job's next block: docs/active3.md, "Checks beside the next
        block"). It may run only a part of them and return the rest, an awaitable of the same
        kind, to run beside a later computation (active3's AND proof: its rounds spread over
        the groups that follow); the caller runs every part (``all_rounds`` when nothing is
        left to run beside). Call it outside a group. Here (passive3, active4: a checkpoint is
        at most the input check, which ``input`` has run already) the returned awaitable
        checks nothing that draws randomness: it runs ``verify`` when awaited."""
        self.engine.alone("checkpoint")
        return _nothing_after(self.verify())
