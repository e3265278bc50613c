"""mpcnet.ops.join (and the shuffle it rests on) in memory, under every scheme: the aligned rows
equal the plaintext inner join as a set, whatever the owners' orders; the sort is a sort; what
a server opens is bits, and the flags' ones are the size of the intersection; the order it sees
does not follow an owner's order; a dishonest owner's repeated keys neither show in the
opened comparisons (the adversarial review's attacks, replayed) nor fill another
contribution's place."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from conftest import run_protocol

from mpcnet.errors import InputError
from mpcnet.featsel.layout import DEFAULT_MEMORY_BUDGET
from mpcnet.net.engine import RoundEngine
from mpcnet.net.local import run_local_sync
from mpcnet.ops import join
from mpcnet.ops.join import inner_join, sort_order
from mpcnet.ops.quicksort import opened_quicksort
from mpcnet.recordids import hashed
from mpcnet.schemes import registry
from mpcnet.schemes.base import Scheme

KEY = bytes(range(32))


def _owners(holds: list[list[int]], widths: list[int], seed: int = 1
            ) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[int, ...]]]:
    """Per owner its ID hashes and columns (record r's column j of owner o is a function of
    r, o, j), and the plaintext inner join's rows."""
    rng = np.random.default_rng(seed)
    parts = []
    for o, (records, w) in enumerate(zip(holds, widths, strict=True)):
        order = rng.permutation(records)
        values = np.array([[1000 * r + 10 * o + j for j in range(w)] for r in order],
                          dtype=np.uint64).reshape(len(order), w)
        parts.append((hashed([f"id-{r}" for r in order], KEY), values))
    common = set(holds[0]).intersection(*holds[1:])
    rows = sorted(tuple(1000 * r + 10 * o + j for o, w in enumerate(widths) for j in range(w))
                  for r in common)
    return parts, rows


def _joined(scheme: str, parts: list[tuple[np.ndarray, np.ndarray]],
            spy: list[Any] | None = None, **options: Any) -> tuple[list[tuple[int, ...]], int]:
    """The reconstructed join (sorted rows) and its row count; ``spy`` collects what party 0
    opens."""
    values, m = _run_join(scheme, parts, spy, **options)
    return sorted(tuple(int(v) for v in row) for row in values), m


def _run_join(scheme: str, parts: list[tuple[np.ndarray, np.ndarray]],
              spy: list[Any] | None = None, **options: Any) -> tuple[np.ndarray, int]:
    """The reconstructed join, in the order the servers made, and its row count."""
    info = registry.get(scheme)
    shares = [info.share(a) for part in parts for a in part]

    async def party(engine: RoundEngine) -> tuple[np.ndarray, int]:
        s = await info.scheme.setup(engine)
        if spy is not None and engine.party == 0:
            _spy_on(s, spy)
        mine = await s.input(*(sh[engine.party] for sh in shares))
        out = await inner_join(s, [(mine[2 * o], mine[2 * o + 1]) for o in range(len(parts))],
                               **{"memory_budget": DEFAULT_MEMORY_BUDGET, **options})
        return await s.output(out.values), out.rows

    outs = run_local_sync(info.n_parties, party, 60.0)
    assert len({o[1] for o in outs}) == 1
    return info.reconstruct({i: o[0] for i, o in enumerate(outs)}), outs[0][1]


def _spy_on(s: Scheme, seen: list[Any]) -> None:
    opened, opened_binary = s.open, s.open_binary

    async def open_(x: Any) -> np.ndarray:
        seen.append(("value", np.asarray(await opened(x)).copy()))
        return seen[-1][1]

    async def open_binary(x: Any) -> np.ndarray:
        seen.append(("bits", np.asarray(await opened_binary(x)).copy()))
        return seen[-1][1]

    s.open, s.open_binary = open_, open_binary  # type: ignore[method-assign]


def test_two_owners_join_as_in_the_clear(scheme: str) -> None:
    parts, rows = _owners([list(range(0, 30)), list(range(12, 40))], [3, 2])
    got, m = _joined(scheme, parts)
    assert got == rows and m == 18


def test_three_owners_join_only_what_all_hold(scheme: str) -> None:
    holds = [list(range(0, 20)), list(range(5, 25)), [*range(0, 10), *range(15, 30)]]
    parts, rows = _owners(holds, [2, 1, 3], seed=4)
    got, m = _joined(scheme, parts)
    assert got == rows and m == 10  # 5..9 and 15..19


def test_a_budget_too_small_for_a_level_sorts_and_tests_in_pieces(
        scheme: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no memory to spare, the sort's levels and the adjacency test run MIN_PIECE (here
    7) at a time, one piece after the other, the value columns one at a time: the same
    join."""
    holds = [list(range(0, 20)), list(range(5, 25)), [*range(0, 10), *range(15, 30)]]
    parts, rows = _owners(holds, [2, 1, 3], seed=4)
    monkeypatch.setattr(join, "MIN_PIECE", 7)
    assert _joined(scheme, parts, memory_budget=0) == (rows, 10)


def test_value_columns_in_blocks_of_two_and_in_a_given_order(
        scheme: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table's value columns moved two at a time (blocks of every contribution's columns
    and of the padding beyond a narrower one's), the joined columns in the order asked: the
    same join, its columns so ordered."""
    holds = [list(range(0, 20)), list(range(5, 25)), [*range(0, 10), *range(15, 30)]]
    parts, rows = _owners(holds, [3, 1, 4], seed=5)
    monkeypatch.setattr(join, "_columns_at_once", lambda *_: 2)
    order = [7, 0, 4, 1, 6, 3, 2, 5]
    got, m = _joined(scheme, parts, columns=order)
    assert m == 10 and got == sorted(tuple(row[c] for c in order) for row in rows)


def test_no_common_record_gives_no_rows() -> None:
    parts, rows = _owners([list(range(10)), list(range(10, 16))], [1, 1])
    assert _joined("passive3", parts) == ([], 0) and rows == []


def test_one_contribution_is_refused() -> None:
    parts, _ = _owners([list(range(5))], [1])
    with pytest.raises(InputError, match="2 to 8 contributions"):
        _joined("passive3", parts)


@pytest.mark.parametrize("n", [1, 2, 3, 17, 200])
def test_the_opened_quicksort_sorts_by_key_then_tie(n: int) -> None:
    rng = np.random.default_rng(n)
    keys = rng.choice(1 << 40, n).astype(np.uint64)
    keys[rng.integers(0, n, n // 2)] = keys[0]  # many ties
    ties = rng.permutation(n).astype(np.uint64)

    async def body(s: Scheme, keys: Any, ties: Any) -> np.ndarray:
        return await sort_order(s, keys, ties)

    (order, *_) = run_protocol("passive3", {"keys": keys, "ties": ties}, body)
    np.testing.assert_array_equal(order, np.lexsort((ties, keys)))


def test_a_server_opens_bits_and_the_size_of_the_intersection_only() -> None:
    """What server 0 opens: the masked hi (uniform words, ``b2a_masked``), then per sort
    level the comparisons' outcomes, 64 to a word and nothing in the padding (the replayed
    levels must end in a sorted order), then the flags, whose ones are the join's size."""
    parts, _ = _owners([list(range(0, 24)), list(range(8, 40))], [2, 2])
    seen: list[Any] = []
    _, m = _joined("passive3", parts, seen)
    (masked_kind, masked), *comparisons, (kind, flags) = seen
    assert masked_kind == "bits" and masked.size == 56
    assert all(k == "bits" for k, _ in comparisons)
    _fixed_levels([v for _, v in comparisons], 56)
    assert kind == "value" and set(np.unique(flags)) <= {0, 1} and int(flags.sum()) == m == 16


def test_the_aligned_order_does_not_follow_the_owners() -> None:
    """The first row of the first owner's file lands at another row of the aligned dataset
    from run to run (the second shuffle's order, which the flags' positions show)."""
    parts, _ = _owners([list(range(6)), list(range(6))], [1, 1])
    first_row = int(parts[0][1][0, 0])
    landed = set()
    for _ in range(12):
        values, _ = _run_join("passive3", parts)
        landed.add(int(np.flatnonzero(values[:, 0] == first_row)[0]))
    assert len(landed) >= 3  # six places, twelve runs: a fixed place would be one


def test_keys_out_of_range_are_reduced_before_the_sort() -> None:
    """A dishonest owner's hi at or above 2^57 (here + 2^62, which 16 hi would wrap) is taken
    mod 2^57: the sort's comparisons stay a total order, and this owner's rows join as their
    hi mod 2^57 says."""
    parts, rows = _owners([list(range(0, 20)), list(range(8, 30))], [1, 2])
    hashes, values = parts[1]
    parts[1] = (hashes + np.array([1 << 62, 0], dtype=np.uint64), values)
    assert _joined("passive3", parts) == (rows, 12)


def _fixed_levels(opened: list[np.ndarray], n: int) -> np.ndarray:
    """What a server computes from the opened comparisons alone: per sorted position, the
    quicksort level at which its row became a pivot or a part of one row (``sort_order``'s
    driver, ``opened_quicksort``, replayed on the words opened, 64 outcomes to a word, the
    padding zero: a row's level is that of the batch where it was last a pivot, or the one
    after the last where it was compared with one)."""
    batches = iter(opened)
    last = np.zeros(n, dtype=np.int64)
    level = 0

    async def less(rows: np.ndarray, pivots: np.ndarray) -> np.ndarray:
        nonlocal level
        words = next(batches)
        count = rows.size
        bits = ((words[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).reshape(-1)
        assert bits.size == -(-count // 64) * 64 and not bits[count:].any()
        last[rows] = level + 1
        last[pivots] = level
        level += 1
        return bits[:count].astype(np.int64)

    order = asyncio.run(opened_quicksort(less, np.array([n])))
    assert next(batches, None) is None
    return last[order]


def _chains(levels: np.ndarray, least: int) -> list[tuple[int, int]]:
    """Runs of sorted positions (start, end) of at least ``least`` whose levels strictly
    increase: equal keys compared by key alone form one (each pivot leaves the rest of the
    tied rows on one side), random distinct keys give runs of about 2."""
    runs, start = [], 0
    for q in range(1, levels.size + 1):
        if q == levels.size or levels[q] <= levels[q - 1]:
            if q - start >= least:
                runs.append((start, q))
            start = q
    return runs


def _comparisons_seen(scheme: str, parts: list[tuple[np.ndarray, np.ndarray]]
                      ) -> tuple[np.ndarray, int]:
    """The sort's levels as server 0 replays them from the bits it opened, and the join size."""
    seen: list[Any] = []
    _, m = _run_join(scheme, parts, seen)
    n = sum(p[0].shape[0] for p in parts)
    words = [v.reshape(-1) for kind, v in seen if kind == "bits"]
    masked = int(words[0].size == n)  # the reduction's masked hi where it opens it here
    return _fixed_levels(words[masked:], n), m


def _random_lo(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 1 << 61, n, dtype=np.uint64)


def _ones(n: int) -> np.ndarray:
    return np.ones((n, 1), dtype=np.uint64)


def test_tied_keys_do_not_tell_the_rank_of_a_key_among_the_honest_ones(scheme: str) -> None:
    """Review attack 1: a dishonest owner (its client's check bypassed) sends g rows all at
    hi = K and watches one server's view. Compared by key alone, the tied rows form a chain
    whose sorted start is the number of honest hashes below K; with the secret tie-break the
    view is that of a random order. The attacker tells 0 from all 40 honest hashes below K
    by the chain's start; over 16 jobs it may be right about half the time (more than 13
    right: 0.2 % by chance), not always."""
    n0, g, k = 40, 16, 1 << 56
    right = 0
    for job in range(16):
        rng = np.random.default_rng(job)
        below = n0 if job % 2 else 0
        hi0 = np.concatenate([rng.choice(k - 1, below, replace=False),
                              k + 1 + rng.choice(k - 2, n0 - below, replace=False)])
        parts = [(np.stack([rng.permutation(hi0).astype(np.uint64), _random_lo(rng, n0)], 1),
                  _ones(n0)),
                 (np.stack([np.full(g, k, np.uint64), _random_lo(rng, g)], 1), _ones(g))]
        levels, m = _comparisons_seen(scheme, parts)
        assert m == 0
        start, end = max(_chains(levels, 1), key=lambda r: r[1] - r[0])
        right += (start > n0 // 2) == bool(below)
    print(f"{scheme}: {right}/16 jobs' rank of K read from the comparisons")
    assert right <= 13


def test_tied_keys_do_not_tell_whether_an_honest_owner_holds_a_guessed_id(scheme: str
                                                                        ) -> None:
    """Review attack 2: owners hold the hash key, so a dishonest one hashes guessed IDs and
    sends, per guess h, g rows at hi = h - 1 and g at hi = h (random lo: the join is empty).
    Compared by key alone, the server sees two chains per guess with an honest row between
    them exactly when the honest owner holds h: every guess's membership in one job. With
    the secret tie-break the chains are gone; where the view shows no two per guess, the
    attacker says "not held" for each (2 of its 4 guesses per job are held: half right)."""
    right = total = 0
    for job in range(8):
        rng = np.random.default_rng(100 + job)
        n0, g = 60, 10
        hi0 = rng.choice(1 << 57, n0, replace=False).astype(np.uint64)
        guesses = sorted([int(hi0[3]), int(hi0[7]), *(int(x) for x in rng.choice(1 << 57, 2))])
        held = [h in set(hi0.tolist()) for h in guesses]
        hi1 = np.array([v for h in guesses for v in [h - 1] * g + [h] * g], dtype=np.uint64)
        parts = [(np.stack([hi0, _random_lo(rng, n0)], 1), _ones(n0)),
                 (np.stack([hi1, _random_lo(rng, hi1.size)], 1), _ones(hi1.size))]
        levels, m = _comparisons_seen(scheme, parts)
        assert m == 0
        runs = _chains(levels, g - 2)
        said = ([runs[2 * i + 1][0] > runs[2 * i][1] for i in range(len(guesses))]
                if len(runs) == 2 * len(guesses) else [False] * len(guesses))
        right += sum(a == b for a, b in zip(said, held, strict=True))
        total += len(guesses)
    print(f"{scheme}: {right}/{total} guesses' membership read from the comparisons")
    assert right <= 0.7 * total


def test_a_repeated_key_does_not_fill_another_contributions_place(scheme: str) -> None:
    """Three owners; owner 0 (dishonest) sends record 3's hashes twice, with its own values,
    where owner 1 lacks record 3 and owner 2 holds it. Sorted, hi' reads 16h, 16h, 16h + 2: a
    test of hi'_(s+2) - hi'_s alone would join the second copy as owner 1's row. Record 3 is
    not joined; records all three hold are, once each, even when owner 0 repeats one."""
    holds = [list(range(10)), [r for r in range(10) if r != 3], list(range(10))]
    parts, rows = _owners(holds, [1, 1, 1], seed=7)
    hashes, values = parts[0]
    again = [int(np.flatnonzero(values[:, 0] == 1000 * r)[0]) for r in (3, 5)]
    parts[0] = (np.concatenate([hashes, hashes[again]]),
                np.concatenate([values, values[again] + 1]))
    got, m = _joined(scheme, parts)
    assert m == 9 and [row[1:] for row in got] == [row[1:] for row in rows]
