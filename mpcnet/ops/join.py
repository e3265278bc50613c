"""Layer: ops. Vertical contributions keyed by record IDs, aligned obliviously (an inner join).

Each owner secret-shares its rows with their record ID's keyed hash as two words, hi < 2^57
and lo < 2^61 (``mpcnet.recordids``: the servers never see an ID, a hash or its key), in its
own order, holding records that others may lack. The servers make the rows of the records
that every contribution holds, in an order that depends on no owner's order, and learn only
each contribution's row count and the size of the intersection:

1. Every contribution's rows go into one table of N = sum n_o rows: the sort key
   hi' = 16 (hi mod 2^57) + o (o its contribution's number; the reduction mod 2^57, by a
   bit decomposition, keeps a dishonest owner's keys in range), lo, the c_o columns, padded
   with zeros (a sharing of zero under every scheme) to the widest contribution's (the
   table is max c_o wide, not sum c_o), and the row's index in this table, 0..N-1.
2. The table is shuffled (``Scheme.shuffler``, every party lacks one permutation): the
   index becomes a secret tie-breaker. Only the key columns (hi', lo, index) are shuffled
   now; the value columns wait (step 5), since nothing before needs them.
3. It is sorted by (hi', index) lexicographically with a comparison sort whose outcomes are
   opened (``mpcnet.ops.quicksort``, after Hamada et al., ICISC 2012). After the shuffle and
   with distinct keys, the outcomes of any comparison sort are a function of a uniformly
   random permutation alone, so opening them tells nothing; the rows are then moved by
   public indices (no cost). The pairs are distinct whatever the owners send: an honest
   client refuses two of its IDs whose hi agree (``recordids``), but the servers cannot
   check that, and equal keys of a dishonest owner compared by hi' alone would show as a
   chain of comparisons whose place tells how many honest keys lie below them
   (docs/cheating.md). A public tie-breaker would not help (it orders the tied rows as the
   owner chose); the secret index makes every tie an order as random as the rest. The
   sort compares binary forms of hi' and the index (one ``a2b`` of both columns after the
   shuffle): a comparison with its pivot is one carry tree (``compare.greater_pairs``:
   [hi'_p > hi'_r] and [hi'_p = hi'_r] from the hi' words, [i_p > i_r] from the indices,
   below 2^32, two to a word), one AND and an opening, 64 outcomes to a word: about 3.8 AND
   words where three arithmetic sign tests and an AND took 11.5 (docs/performance.md). A
   quicksort, with the median of a random sample of each large part as its pivot
   (``mpcnet.ops.quicksort``), needs about N log2 N comparisons (18.2 per row at 2 x 10^5
   rows, where the first row as pivot took 21.1) in about 2-3 log2 N rounds of one batch;
   Batcher's oblivious odd-even merge network needs N log2^2 N / 4 (3.3 times
   as many at 2 x 10^5 rows) in log2 N (log2 N + 1) / 2 stages, and would move every
   column at every comparator: the reason for this choice.
4. The rows of one record are now adjacent, in contribution order. Row s starts a record
   that all t contributions hold exactly when hi'_(s+j) - hi'_s = j and lo_(s+j) = lo_s for
   0 < j < t (the same hi and contributions 0..t-1 in a row: tags are below 16, so keys of
   two hi differ by more than 7; testing every j, not only t - 1, keeps a dishonest owner's
   repeated key from filling another contribution's place): one batch of sign tests, then
   ANDs. The joined row is row s + j's first c_j columns for j = 0..t-1 side by side,
   gathered from the shuffled table by the public order: local.
5. The candidate rows and their flags are shuffled again, the flags opened: their number
   is the size of the intersection, and their positions are uniformly random, so that is
   all they tell. The flagged rows are the dataset's rows. The flags are shuffled and
   opened first; then the table's value columns, a block at a time, are shuffled with step
   2's permutations, their candidate columns gathered by the public order and shuffled with
   the flags' permutations, and only the flagged rows (m of them) kept: each block is one
   application of the same two ``Shuffler``s, so the rows stay together, and the result is
   the whole table's shuffle, candidates and selection, with fresh masks per block.

Active settings. active4 checks every shuffle message, every block's, by its voucher
(``Rep4._permute``). active3 checks the shuffles with the MAC check (``Spdz3._permute``),
which runs before the first comparison is opened and again before the flags are
(``Scheme.open``); the comparisons themselves are AND circuits, checked before each opening;
the index column is shuffled with the key, so it carries MACs and vouchers like it. Because
those MAC checks are checks in parts, the joined rows' MACs are made again
(``Scheme.refresh``) before anything else is computed on them (docs/active3.md, "Checking
the MACs in parts would leak"). The value blocks, shuffled after the flags are opened, open
nothing: their shuffles' and refreshes' MAC records are folded after each block
(``Scheme.checkpoint``) and tested by a full check after the last block (``Scheme.verify``),
before the scoring opens anything computed from them (refreshed MACs would make a surviving
value error valid); their errors are the cheater's own plus the inputs' (a shuffle is
linear: nothing secret multiplies them), so that test too depends on errors, alpha and
coins only. Conversions and the adjacency test run in row pieces with a checkpoint after
each (AND checks in parts are safe, docs/active3.md, "Jobs in blocks"; MAC records are
folded, not tested). Whether a job aborts depends only on the cheater's errors and the
checks' coins.

Memory. A level of the sort, the bit decompositions and the adjacency test run in pieces
that fit ``memory_budget`` beside a job's fixed part (``planner.FIXED_BYTES``), the inputs
and the key columns (``_piece``), one after the other (more rounds, only where a level does
not fit). The value columns are moved as many at once as the budget leaves beside the fixed
part, the inputs and the joined rows (``_columns_at_once``; all or most of them at 10^5
records per owner, one at a time at 10^6 under passive3), so no N-row table
of them or of the candidates is ever held whole. What is held throughout: the inputs, the
joined rows (m x sum c_o) and the public orders (docs/performance.md has the peaks). Under
active4 and active3 (1.5 and 4 times passive3's bytes per word) the inputs and joined rows of
10^6 records per owner and 20 columns alone take about 2 and 5.5 GB; keeping them on disk is
not done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mpcnet.errors import CheatingDetected, InputError
from mpcnet.ops.compare import greater_pairs, msb, unpacked_bits
from mpcnet.ops.convert import a2b, b2a_masked, bit_to_arith
from mpcnet.ops.planner import COSTS, FIXED_BYTES, PIECE_OVERHEAD
from mpcnet.ops.quicksort import opened_quicksort
from mpcnet.recordids import HI_BITS
from mpcnet.schemes.base import Scheme, Shared, Shuffler, concat, same_layout, split
from mpcnet.schemes.base import join as stacked

MAX_CONTRIBUTIONS = 8
"""Contributions one keyed dataset may have: their numbers fill the low 4 bits of the sort key,
and the test of step 4 needs t <= 8."""
TAG_BITS = 4
SHUFFLE_COPIES = 5
"""Copies of a block a shuffle holds at once, counted by ``_columns_at_once``."""
CONVERSION_TESTS = 4
"""A conversion (``a2b``, ``b2a_masked``: about 13 and 15 AND words) counted as this many sign
tests (3.5) when rows are converted in pieces."""
MIN_PIECE = 1 << 16
"""Fewest comparisons (or sign tests) at once when the budget is short: below, rounds dominate."""


@dataclass(frozen=True, eq=False)
class Joined:
    """The rows of the records every contribution holds, each contribution's columns side by
    side in contribution order, in an order no party knows."""

    values: Shared  # m x sum(c_o)
    rows: int  # m, the size of the intersection (public)


async def _below_2_57(s: Scheme, hi: Shared, piece: int) -> Shared:
    """hi mod 2^57 (a2b, mask, ``b2a_masked``), ``piece`` // (2 CONVERSION_TESTS) rows at a
    time (``_by_rows``): an honest owner's hi is unchanged, and no owner can send a key that
    wraps the ring and makes the sort's comparisons depend on more than the order of its
    rows (lo needs no such bound: the equality test is exact for any words)."""
    async def reduced(rows: slice) -> Shared:
        return await b2a_masked(s, s.and_public(await a2b(s, hi[rows]), (1 << HI_BITS) - 1))

    return stacked(await _by_rows(s, hi.shape[0], piece // (2 * CONVERSION_TESTS), reduced), 0)


async def _by_rows(s: Scheme, rows: int, step: int,
                   work: Callable[[slice], Awaitable[Shared]]) -> list[Shared]:
    """``work`` on slices of ``rows`` rows, ``step`` at a time (at least one), one after
    the other; where there are several, the pending checks run after each
    (``Scheme.checkpoint``: active3's AND check of that piece's ANDs, its MAC records
    folded), so that no check weighs more than a piece's records. The pieces depend on
    public sizes only."""
    step = max(1, step)
    out = []
    for at in range(0, rows, step):
        out.append(await work(slice(at, min(rows, at + step))))
        if step < rows:
            await s.checkpoint()
    return out


def _key_table(s: Scheme, parts: Sequence[tuple[Shared, Shared]], hi: Shared) -> Shared:
    """Step 1's key columns, N x 3: every contribution's sort key hi' = 16 hi + o (``hi`` of
    every row, in contribution order), lo, and the row's index 0..N-1 (one array)."""
    rows = [values.shape[0] for _, values in parts]
    lead = parts[0][1].data.shape[:s.lead]
    same_layout([hi, *(p for part in parts for p in part)])
    data = np.empty(lead + (sum(rows), 3), dtype=np.uint64)
    at = (slice(None),) * s.lead
    data[at + (slice(None), 2)] = s.public(np.arange(sum(rows), dtype=np.uint64)).data
    for o, (keys, _) in enumerate(parts):
        span = slice(sum(rows[:o]), sum(rows[:o + 1]))
        data[at + (span, 0)] = s.add_public(s.mul_public(hi[span], 1 << TAG_BITS), o).data
        data[at + (span, 1)] = keys[:, 1].data
    return Shared(data, s.lead)


def _value_block(s: Scheme, parts: Sequence[tuple[Shared, Shared]], columns: range) -> Shared:
    """Step 1's value columns ``columns`` of the N-row table: each contribution's columns in
    its first c_o, padded with zeros (a sharing of zero under every scheme) to the widest
    contribution's, so the table is max c_o wide, not sum c_o."""
    rows = [values.shape[0] for _, values in parts]
    lead = parts[0][1].data.shape[:s.lead]
    data = np.zeros(lead + (sum(rows), len(columns)), dtype=np.uint64)
    at = (slice(None),) * s.lead
    for o, (_, values) in enumerate(parts):
        span = slice(sum(rows[:o]), sum(rows[:o + 1]))
        held = range(columns.start, min(columns.stop, values.shape[1]))
        data[at + (span, slice(0, len(held)))] = values.data[at + (slice(None),
                                                                    slice(held.start, held.stop))]
    return Shared(data, s.lead)


async def _opened_less(s: Scheme, keys: Shared, ties: Shared, rows: np.ndarray,
                       pivots: np.ndarray) -> np.ndarray:
    """Opened [(key, tie) of each row < that of its pivot], lexicographically, on binary
    sharings of the words (``greater_pairs``: the pivot's pair greater), 64 to a word."""
    less = await greater_pairs(s, keys[pivots], keys[rows], ties[pivots], ties[rows])
    return unpacked_bits(await s.open_binary(less), rows.size)


async def sort_order(s: Scheme, keys: Shared, ties: Shared, piece: int | None = None
                     ) -> np.ndarray:
    """The public order (sorted position -> row) of shuffled rows by (``keys``, ``ties``)
    lexicographically (arithmetic sharings of words, the ties below 2^32, the pairs
    distinct): step 3, ``opened_quicksort``, on their binary forms (``a2b``, once), a
    level's comparisons ``piece`` at a time (all at once without), the conversion
    ``piece`` // CONVERSION_TESTS rows at a time."""
    count = keys.shape[0]

    async def binary(rows: slice) -> Shared:
        return await a2b(s, stacked([keys[rows, None], ties[rows, None]], 1))

    step = count if piece is None else piece // CONVERSION_TESTS
    pairs = stacked(await _by_rows(s, count, step, binary), 0)
    keys, ties = pairs[:, 0], pairs[:, 1]

    async def less(rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
        step = piece or max(1, rows.size)
        return np.concatenate([
            await _opened_less(s, keys, ties, rows[at:at + step], pivots[at:at + step])
            for at in range(0, rows.size, step)])

    return await opened_quicksort(less, np.array([count]))


def _piece(s: Scheme, held: int, memory_budget: int) -> int:
    """Comparisons of the sort (or sign tests of the adjacency test) at once in what
    ``memory_budget`` leaves beside ``held`` bytes: each counted as one sign test in flight
    with its check records, times the transport's copies (``planner.COSTS``,
    ``PIECE_OVERHEAD``; measured in process per server and comparison of 5 AND words: 165,
    280 and 2,000 bytes under passive3, active4 and active3, against 260, 500 and 2,700 for
    a sign test),
    at least MIN_PIECE. Pieces of one level run one after the other, each in its own
    rounds (9, and active3's 4 of the AND check): more rounds only where a level does not
    fit the budget."""
    per = PIECE_OVERHEAD * COSTS[s.name].test_bytes
    return max(MIN_PIECE, (memory_budget - held) // per)


async def _all_zero(s: Scheme, diffs: Sequence[Shared]) -> Shared:
    """Binary [every d == 0] per row for the differences ``diffs`` (each |d| < 2^62): neither
    d nor -d is negative, one batch of sign tests and a tree of ANDs."""
    shapes = [d.shape for d in diffs]
    signs = await msb(s, concat([*diffs, *(s.neg(d) for d in diffs)]))
    terms = [s.xor_public(t, 1) for t in split(signs, shapes + shapes)]
    while len(terms) > 1:
        pairs = len(terms) // 2
        both = await s.and_(concat(terms[:pairs]), concat(terms[pairs:2 * pairs]))
        terms = split(both, [t.shape for t in terms[:pairs]]) + terms[2 * pairs:]
    return terms[0]


async def _held_by_all(s: Scheme, hi: Shared, lo: Shared, t: int, piece: int) -> Shared:
    """Step 4: arithmetic [rows s..s+t-1 are one record's, in contribution order] for every
    row s that can start one, from the sorted hi' and lo, in pieces of rows whose sign tests
    number about ``piece``."""
    async def flags(rows: slice) -> Shared:
        at, stop = rows.start, rows.stop
        diffs = [s.add_public(s.sub(hi[at + j:stop + j], hi[rows]), -j) for j in range(1, t)]
        diffs += [s.sub(lo[at + j:stop + j], lo[rows]) for j in range(1, t)]
        return await bit_to_arith(s, await _all_zero(s, diffs))

    return concat(await _by_rows(s, hi.shape[0] - t + 1, piece // (4 * (t - 1)), flags))


def _word_bytes(x: Shared) -> int:
    """Bytes one shared word takes in this party's share arrays (its leading axes' words)."""
    return 8 * int(np.prod(x.data.shape[:x.lead], dtype=np.int64))


def _columns_at_once(rows: int, t: int, word: int, held: int, memory_budget: int) -> int:
    """The table's value columns moved at once in what ``memory_budget`` leaves beside
    ``held`` bytes: a column is ``rows`` words in the table and about t candidate words
    per row (its place in each contribution), each counted SHUFFLE_COPIES times (the
    shuffle's input, permuted copy, fresh and received words and output), at least one."""
    return max(1, (memory_budget - held) // (SHUFFLE_COPIES * (1 + t) * rows * word))


async def inner_join(s: Scheme, parts: Sequence[tuple[Shared, Shared]],
                     memory_budget: int, columns: Sequence[int] | None = None) -> Joined:
    """The rows of the records that every contribution holds (module docstring). ``parts``
    holds per contribution, in contribution order, its n_o x 2 hashes (hi, lo) and its n_o x
    c_o columns, as input (authenticated under active3: the shuffles carry their MACs); the
    sort's levels and the adjacency test run in pieces, the value columns in blocks, that
    fit ``memory_budget`` beside what is held (``_piece``, ``_columns_at_once``). The joined
    columns come in contribution order, or in the order ``columns`` gives (a permutation of
    them: a caller that splits them, as into features and labels, then slices without a
    copy)."""
    t = len(parts)
    if not 2 <= t <= MAX_CONTRIBUTIONS:
        raise InputError(f"a dataset keyed by record IDs needs 2 to {MAX_CONTRIBUTIONS} "
                         f"contributions to join, not {t}")
    total = sum(values.shape[0] for _, values in parts)
    if total >= 1 << 32:
        raise InputError("a keyed dataset's contributions hold 2^32 rows or more: the sort's "
                         "secret tie-breaker, a row's index, takes 32 bits")
    held = FIXED_BYTES + sum(x.data.nbytes for part in parts for x in part)  # and the inputs
    with s.engine.phase("alignment"):
        piece = _piece(s, held + 2 * 3 * total * _word_bytes(parts[0][1]), memory_budget)
        hi = await _below_2_57(s, concat([keys[:, 0] for keys, _ in parts]), piece)
        mixing = s.shuffler(total)
        table = await mixing.apply(_key_table(s, parts, hi))
        del hi
        keys, ties = (Shared(np.ascontiguousarray(table[:, c].data), s.lead) for c in (0, 2))
        order = await sort_order(s, keys, ties, piece)
        del keys, ties
        held_by_all = await _held_by_all(s, table[order, 0], table[order, 1], t, piece)
        del table
        picking = s.shuffler(held_by_all.shape[0])
        flags = np.asarray(await s.open(await picking.apply(held_by_all)))
        del held_by_all
        if not np.isin(flags, (0, 1)).all():
            raise CheatingDetected("alignment", "a record's flag opened to neither 0 nor 1")
        kept = np.flatnonzero(flags == 1)
        width = sum(values.shape[1] for _, values in parts)
        if columns is not None and sorted(columns) != list(range(width)):
            raise ValueError(f"columns must order the {width} joined columns")
        place = np.empty(width, dtype=np.int64)
        place[np.arange(width) if columns is None else np.asarray(columns)] = np.arange(width)
        values = await _joined_values(s, parts, mixing, picking, order, kept, place,
                                      held, memory_budget)
    return Joined(values, int(kept.size))


async def _joined_values(s: Scheme, parts: Sequence[tuple[Shared, Shared]],
                         mixing: Shuffler, picking: Shuffler, order: np.ndarray,
                         kept: np.ndarray, place: np.ndarray, held: int,
                         memory_budget: int) -> Shared:
    """Steps 4-5 for the value columns, a block of the table's columns at a time: shuffled
    as the key columns were (``mixing``), the candidates' columns gathered from them by the
    public order, shuffled as the flags were (``picking``), and only the ``kept`` rows (the
    flagged ones, m) kept, joined column q at ``place[q]``, with MACs of their own
    (``Scheme.refresh``); the block's check records are then freed (``Scheme.checkpoint``:
    active3 folds its MAC records), and after the last block a full check (``Scheme.verify``)
    tests them all. The refreshed MACs would make a value error added in a block's shuffle
    valid, so the test must come before any opening of a value computed from the joined rows
    (the best-split Gini's range check, the one-hot check of the labels; the adversarial
    review's attacks in tests/test_join_cheating.py). Nothing is opened before it, so whether a job
    aborts does not depend on the blocks. ``held``: the bytes held beside
    them before the joined rows (the fixed part, the inputs)."""
    widths = [values.shape[1] for _, values in parts]
    offsets = np.cumsum([0, *widths])
    word = _word_bytes(parts[0][1])
    lead = parts[0][1].data.shape[:s.lead]
    at = (slice(None),) * s.lead
    out = np.empty(lead + (kept.size, int(offsets[-1])), dtype=np.uint64)
    if kept.size == 0:
        return Shared(out, s.lead)
    step = _columns_at_once(mixing.rows, len(parts), word,
                            held + out.nbytes + 8 * order.size, memory_budget)
    n = picking.rows
    for start in range(0, max(widths), step):
        columns = range(start, min(start + step, max(widths)))
        block = await mixing.apply(_value_block(s, parts, columns))
        places = [(j, c) for j, w in enumerate(widths) for c in columns if c < w]
        gathered = np.concatenate(  # row s + j's columns of contribution j, j = 0..t-1
            [np.take(block.data, order[j:j + n], axis=s.lead)[..., :max(0, w - start)]
             for j, w in enumerate(widths)], axis=-1)
        del block
        mixed = await picking.apply(Shared(gathered, s.lead))
        del gathered
        fresh = await s.refresh(Shared(np.take(mixed.data, kept, axis=s.lead), s.lead))
        del mixed
        out[at + (slice(None), place[[int(offsets[j]) + c for j, c in places]])] = fresh.data
        del fresh
        await s.checkpoint()
    await s.verify()  # the blocks' records, before anything computed from them is opened
    return Shared(out, s.lead)
