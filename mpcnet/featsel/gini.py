"""Layer: featsel. The best-split Gini impurity of every feature (GI of the paper's Table I).

CART's score: the Gini impurity of the best binary split x <= t over every threshold t. With
the column sorted, the split after the i-th smallest value has a = i rows on the left and
b = m - i on the right, and with per-class counts A (left) and B (right) its impurity without
the 1/m factor is m - Q_i/D_i with MS-GINI's fraction (``mpcnet.featsel.msgini``):
Q_i = b'_i (A.A) + a_i (B.B), D_i = a_i b'_i, b' = max(b, 1). A split between two equal
values is not a split: it gets Q_i = 0 (below every real candidate). The candidate i = m (no
split, D = m) is always there, so a constant column scores the impurity of the whole set, and
every real split scores at least as well (Gini impurity is concave), which is the reference's
rule (``mpcnet.plain.scores.gini_fraction``). The score is max_i Q_i/D_i, exact.

Per block of whole columns (``Score.whole_columns``), following the sort-then-scan of Abspoel,
Escudero, Volgushev (PETS 2021) for decision trees:
1. sort every column with its labels by shuffle-then-sort (Hamada, Kikuchi, Ikarashi, Chida,
   Takahashi, ICISC 2012): a table of one row per cell (its column number j, the value x,
   the row's labels, its row number r) is shuffled once (``Scheme.shuffle``) and the column
   numbers are opened. After one uniform shuffle of all p m rows, where each column's rows
   lie is a uniformly random choice and the order within each column is uniform and
   independent of the others'; the column numbers say nothing more (every column has m
   rows). The rows are grouped by column publicly and every group is sorted by the key
   x 2^b + r (b the bits of m - 1) with the opened quicksort (``mpcnet.ops.wordsort``:
   one sign test per comparison, about 13.3 per cell at 8,378 rows with pivots from the
   medians of samples (15.0 with the first row as pivot), where the odd-even merge network
   took 45 and moved the labels at every comparator; one more per cell checks the keys'
   range first). The keys are distinct whatever the owners
   send (r fills the low b bits), so the outcomes are those of a uniformly random
   permutation; honest values (|x| < 2^VALUE_BITS, ``mpcnet.fixedpoint``; b <= 24) give
   keys below 2^62, ordered by (x, r): equal values by their secret row number, as a public
   tie-break would show a chain of ties (docs/cheating.md, the alignment); a key out of range
   aborts the job. The rows then move by public indices (no cost);
2. the class counts of every prefix, by a log-step prefix sum (local), and the other side by
   subtraction from the class sizes;
3. A.A and B.B of every split (a product round per class, so that two count rows are held,
   not 2n; with two classes one round, the other class's squares being local), zeroed
   where the next value is equal (one sign test per row: [x_{i+1} - x_i - 1 < 0], the
   values being sorted);
4. a tournament over the m candidates of every column (log2 m levels of exact fraction
   comparisons, ``mpcnet.ops.fraction``, a piece of at most PIECE sign tests at a time, the
   last one checked at the block's end), in a plan of its own without a tie range (whole
   while the cross products fit 63 bits, to 10,808 rows, else digits). a and b' are public
   at the first level, so its fractions are local once A.A and B.B are in digits; the
   winner's A.A, B.B, a and b' go along, and the ranking's fractions are formed from them
   as MS-GINI's.
Equal fractions are equal scores whichever candidate wins, so the ranking's ties stay exact.

Active settings (docs/cheating.md, "The best-split Gini's sort"): the shuffle is checked
before the column numbers are opened (active3: ``Scheme.open_of`` tests the shuffled table's
MACs alone and leaves every MAC record to the job's one zero test; active4: vouchers), the
comparisons' ANDs before each opening; whether a job aborts depends on the cheater's errors
and the checks' coins only.
"""

from __future__ import annotations

import numpy as np

from mpcnet.errors import CheatingDetected
from mpcnet.featsel import layout
from mpcnet.featsel.msgini import limb_plan, square_fractions
from mpcnet.ops.compare import ltz, msb
from mpcnet.ops.convert import bit_to_arith
from mpcnet.ops.fraction import Fractions, LimbPlan, cascade, cross_digits, digits, sign_tests
from mpcnet.ops.wordsort import word_order
from mpcnet.schemes.base import Scheme, Shared, concat, join, split

CELL_COST = 1
"""Bytes held per cell, in sign tests: a batch of the sort's comparisons (one per cell, and
the samples' pairs, about 0.1 per cell) with their check records; the keys' range test runs
before, the tie test after; what grows with the classes is ``feature_bytes``. (It was 2: the
active3 peak measured at 25 columns of SpeedDating, 0.82 GB per server against the 2.7 GB
the layout counted for them, docs/performance.md, allows blocks of 41, whose batches pass
2^20 AND words, where the AND check needs two pools instead of three.)"""

PIECE = 1 << 18
"""The most sign tests the tournament runs at once, and never more than a block's cells, so
that a piece costs at most what the layout counts for the block's sign tests."""

DIGIT_BYTES = {"passive3": 3_000, "active3": 14_500, "active4": 11_000}
"""Bytes one value takes while it is cut into digits (an A2B and up to 41 bits back to
arithmetic), per setting: measured in process at 16,384 rows (29 bits, 15-bit digits)."""


def feature_bytes(setting: str, m: int, n_classes: int) -> int:
    """Bytes per feature besides the sign tests: per cell the sort's table (n + 2 words) with
    its shuffled and sorted copies, the prefix counts, and the tournament's rows (limbs, A.A,
    B.B, a, b'): 6n + 16 words, from peaks traced in process with the sorting network (40
    classes, 1,024 rows: about 4n + 16 under passive3, 5.5n + 16 under active4), which held
    as many copies of the key and labels as the table's three."""
    return m * (6 * n_classes + 16) * layout.WORD_BYTES[setting]


def prefix_sums(s: Scheme, x: Shared) -> Shared:
    """Running sums along logical axis 1 of x (r, m, p), by log2 m shifted additions (local)."""
    m = x.shape[1]
    shift = 1
    while shift < m:
        x = join([x[:, :shift], s.add(x[:, shift:], x[:, :m - shift])], 1)
        shift *= 2
    return x


def _sides(m: int) -> tuple[np.ndarray, np.ndarray]:
    """a_i = i and b'_i = max(m - i, 1) of the candidates i = 1..m, as (m, 1) columns."""
    a = np.arange(1, m + 1, dtype=np.uint64)
    return a.reshape(m, 1), np.maximum(m - a, 1).astype(np.uint64).reshape(m, 1)


def _piece(cells: int) -> int:
    """Sign tests run at once for a block of ``cells`` (PIECE)."""
    return max(1, min(PIECE, cells))


class _Pieces:
    """Checkpoints once about a piece of sign tests has run since the last one, so that the
    small levels of the tournament share one check instead of one each, and at the end of a
    block's tournament (``flush``): a block's m - 1 comparisons per column never reach its
    piece of m per column, and unchecked, every block's ANDs and MAC records stayed queued
    until the job's last check (docs/performance.md, "The best-split Gini")."""

    def __init__(self, s: Scheme, piece: int) -> None:
        self.s, self.piece, self.since = s, piece, 0

    async def ran(self, tests: int) -> None:
        self.since += tests
        if self.since >= self.piece:
            await self.flush()

    async def flush(self) -> None:
        """Check what ran since the last checkpoint, if anything did."""
        if self.since:
            await self.s.checkpoint()
            self.since = 0


def _table(s: Scheme, data: Shared, labels: Shared, m: int) -> Shared:
    """Step 1's table: one row per cell of the block, column j's m cells at rows j m ..
    (j + 1) m - 1, each (j, the value, the row's labels, its row number 0..m-1)."""
    p, cells = data.shape[1], data.size
    columns = np.repeat(np.arange(p, dtype=np.uint64), m).reshape(cells, 1)
    rows = np.tile(np.arange(m), p)
    return join([s.public(columns), data.T.reshape(cells, 1), labels[rows],
                 s.public(rows.astype(np.uint64).reshape(cells, 1))], 1)


async def sorted_columns(s: Scheme, data: Shared, labels: Shared, m: int
                         ) -> tuple[Shared, Shared]:
    """Step 1: every column's values (m, p) in ascending order and the labels of their rows
    (n1, m, p), equal values in the order of their row numbers (module docstring)."""
    p, n1 = data.shape[1], labels.shape[1]
    mixed = await s.shuffle(_table(s, data, labels, m))
    columns = np.asarray(await s.open_of(mixed[:, 0], [mixed]))
    if columns.max() >= p or not (np.bincount(columns.astype(np.int64), minlength=p) == m).all():
        raise CheatingDetected("best-split Gini", "the shuffled column numbers are not the "
                               "block's")
    grouped = np.argsort(columns, kind="stable")
    shift = max(1, (m - 1).bit_length())
    keys = s.add(s.mul_public(mixed[:, 1], 1 << shift), mixed[:, 2 + n1])[grouped]
    ordered = mixed[grouped[await word_order(s, keys, np.full(p, m))]]
    values = ordered[:, 1].reshape(p, m).T
    return values, ordered[:, 2:2 + n1].reshape(p, m, n1).T


async def statistics(s: Scheme, data: Shared, labels: Shared, column_sums: Shared | None,
                     m: int) -> tuple[Shared, ...]:
    """A.A and B.B (m, p) of every candidate split of every column, 0 for those between equal
    values (steps 1-3 of the module docstring); ``data`` holds all m rows."""
    del column_sums
    rows, p = data.shape
    assert rows == m, "the best split needs whole columns (Score.whole_columns)"
    n1 = labels.shape[1]
    values, ordered = await sorted_columns(s, data, labels, m)
    below = prefix_sums(s, ordered)
    a, _ = _sides(m)
    sizes = s.sum(labels, 0)
    tied = await ltz(s, s.add_public(s.sub(values[1:], values[:-1]), -1))  # x_{i+1} == x_i
    valid = concat([s.add_public(s.neg(tied), 1), s.public(np.ones((1, p), np.uint64))])
    last = s.add_public(s.neg(s.sum(below, 0)), a)
    x = y = None
    # one class at a time: two count rows of products, not 2n; with two classes the second
    # class's squares are local: (a - l)^2 = a^2 - 2 a l + l^2, on the right side with m - a
    for c in range(n1 + 1 if n1 > 1 else 1):
        left = below[c] if c < n1 else last
        size = sizes[c] if c < n1 else s.add_public(s.neg(s.sum(sizes, 0)), m)
        right = s.sub(size.reshape(1, 1).broadcast_to((m, p)), left)
        both = concat([left, right])
        sq_left, sq_right = split(await s.mul(both, both), [(m, p), (m, p)])
        if n1 == 1:
            b = np.uint64(m) - a
            x = s.add_public(s.sub(s.mul_public(sq_left, 2), s.mul_public(left, 2 * a)), a * a)
            y = s.add_public(s.sub(s.mul_public(sq_right, 2), s.mul_public(right, 2 * b)),
                             b * b)
        else:
            x = sq_left if x is None else s.add(x, sq_left)
            y = sq_right if y is None else s.add(y, sq_right)
    assert x is not None and y is not None
    kept = await s.mul(concat([valid, valid]), concat([x, y]))
    x, y = split(kept, [(m, p), (m, p)])
    return x, y


async def _first_level(s: Scheme, x: Shared, y: Shared, m: int, plan: LimbPlan) -> Shared:
    """The candidates' rows (num limbs, den limbs, A.A, B.B, a, b'), shape (rows, m, p), laid
    out by ``plan``: a and b' are public, so Q = b' A.A + a B.B and D = a b' are local once
    A.A and B.B are in digits (cut a piece at a time, each followed by a checkpoint)."""
    p = x.shape[1]
    a, b_nonzero = _sides(m)
    ones = np.ones((1, p), dtype=np.uint64)
    den = (a * b_nonzero).reshape(1, m, 1)
    if plan.levels == 1:
        num = s.add(s.mul_public(x, b_nonzero), s.mul_public(y, a)).reshape(1, m, p)
        den_limbs = den
    else:
        w, bits = plan.limb_bits, (m * m).bit_length()
        flat = concat([x, y])
        piece = _piece(m * p)
        step = max(1, piece * layout.SCORING_BYTES_PER_CELL[s.name] // DIGIT_BYTES[s.name])
        pieces = []
        for lo in range(0, flat.size, step):
            pieces.append(await digits(s, flat[lo:lo + step], bits, w))
            await s.checkpoint()
        limbs = join(pieces, 1).reshape(-1, 2, m, p)
        num = s.add(s.mul_public(limbs[:, 0], b_nonzero), s.mul_public(limbs[:, 1], a))
        den_limbs = np.stack([(den >> np.uint64(w * u)) & np.uint64((1 << w) - 1)
                              for u in range(plan.den_limbs)]).reshape(plan.den_limbs, m, 1)
    rows = [num, s.public(den_limbs * ones), x.reshape(1, m, p), y.reshape(1, m, p),
            s.public((a * ones).reshape(1, m, p)), s.public((b_nonzero * ones).reshape(1, m, p))]
    return join(rows, 0)


async def _better(s: Scheme, first: Shared, second: Shared, plan: LimbPlan) -> Shared:
    """Of each pair of candidates (rows: num limbs, den limbs, the rest), the one with the
    larger fraction (either where they are equal): one exact comparison, one product."""
    lq, ld, count = plan.num_limbs, plan.den_limbs, first.shape[1]
    diff = await cross_digits(s, Fractions(first[:lq], first[lq:lq + ld], plan),
                              Fractions(second[:lq], second[lq:lq + ld], plan))
    first_loses = await bit_to_arith(s, await cascade(
        s, await msb(s, sign_tests(s, diff, plan)), plan, count))
    moved = await s.mul(first_loses.reshape(1, count).broadcast_to(first.shape),
                        s.sub(second, first))
    return s.add(first, moved)


async def of_statistics(s: Scheme, stats: tuple[Shared, ...], sizes: Shared, m: int,
                        plan: LimbPlan) -> Fractions:
    """The best candidate of every column (step 4) as fractions laid out by ``plan``."""
    del sizes
    x, y = stats
    p = x.shape[1]
    match = limb_plan(m, 1)
    assert match is not None  # every accepted m (``msgini.check_rows``) has one
    lq, ld = match.num_limbs, match.den_limbs
    candidates = await _first_level(s, x, y, m, match)
    del x, y
    rows = candidates.shape[0]
    tests = match.tests_per_comparison()
    step = max(1, _piece(m * p) // tests)
    done = _Pieces(s, _piece(m * p))
    while candidates.shape[1] > 1:
        count = candidates.shape[1]
        pairs = count // 2
        first = candidates[:, 0:2 * pairs:2].reshape(rows, pairs * p)
        second = candidates[:, 1:2 * pairs:2].reshape(rows, pairs * p)
        winners = []
        for lo in range(0, pairs * p, step):  # at most a piece of sign tests at a time
            winners.append(await _better(s, first[:, lo:lo + step], second[:, lo:lo + step],
                                         match))
            await done.ran(tests * min(step, pairs * p - lo))
        kept = join(winners, 1).reshape(rows, pairs, p)
        candidates = kept if count % 2 == 0 else join([kept, candidates[:, count - 1:]], 1)
    await done.flush()  # before the next block's tournament queues its own
    best = candidates.reshape(rows, p)[lq + ld:]
    square_bits = (m * m).bit_length()
    return await square_fractions(s, best[0], best[1], best[2], best[3], plan, square_bits)
