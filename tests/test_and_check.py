"""active3's AND check (mpcnet.schemes.and_check): the rotation matches every AND word with a
distinct triple, and the openings and zero tests of three parties, combined in plaintext,
accept correct ANDs and catch a wrong AND, a wrong matched triple and a wrong cut triple."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from mpcnet.errors import CheatingDetected
from mpcnet.schemes import rep3
from mpcnet.schemes.and_check import And, Triples, and_openings, check_plan, rotation

U64 = np.uint64


@pytest.mark.parametrize(("start", "count", "size", "shift"),
                         [(0, 5, 7, 0), (3, 4, 7, 2), (2, 5, 11, 10), (0, 6, 7, 6)])
def test_the_rotation_matches_word_j_with_triple_j_plus_shift(start: int, count: int,
                                                             size: int, shift: int) -> None:
    matched = []
    for words, triples in rotation(start, count, size, shift):
        matched += list(zip(range(count)[words], range(size)[triples], strict=True))
    assert matched == [(j, (start + j + shift) % size) for j in range(count)]


def _shares(words: np.ndarray) -> list[np.ndarray]:
    return rep3.share(words, binary=True)


def _keeper(noted: list[np.ndarray]) -> Callable[[np.ndarray], None]:
    """A ``note`` that keeps a copy of each pool's t (``and_openings`` reuses its buffer)."""
    return lambda t: noted.append(t.copy())


def _check(errors: dict[str, tuple[int, ...]]) -> list[np.ndarray]:
    """The reconstructed t of every pool for 3 queued ANDs (5 words) and their triples, with
    bit 1 flipped in component 0 of the words named in ``errors`` (an AND's z, or a triple's
    c at (pool, index)); raises what the check raises."""
    rng = np.random.default_rng(4)
    n = 5
    pools, size = check_plan(n)
    x, y = (rng.integers(0, 2**63, n, dtype=np.int64).view(U64) for _ in range(2))
    a, b = (rng.integers(0, 2**63, (pools, size), dtype=np.int64).view(U64) for _ in range(2))
    z, c = _shares(x & y), _shares(a & b)
    for party in (0, 2):  # both holders of component 0 (slot 0 at party 0, slot 1 at party 2)
        slot = 0 if party == 0 else 1
        for j in errors.get("z", ()):
            z[party][slot, j] ^= U64(2)
        if "c" in errors:
            c[party][slot][errors["c"]] ^= U64(2)
    xs, ys, abc = _shares(x), _shares(y), [_shares(a), _shares(b), c]
    seed = b"a coin"
    finishes, opened = [], np.zeros(0, dtype=U64)
    for party in range(3):
        ands: list[And] = [(xs[party][:, s], ys[party][:, s], z[party][:, s])
                           for s in (slice(0, 2), slice(2, 3), slice(3, 5))]
        triples: Triples = (abc[0][party], abc[1][party], abc[2][party])
        to_open, finish = and_openings(ands, triples, seed, party)
        opened = to_open[0] if party == 0 else opened ^ to_open[0]  # slot 0: component i
        finishes.append(finish)
    ts: list[list[np.ndarray]] = [[], [], []]
    for noted, finish in zip(ts, finishes, strict=True):
        finish(opened, _keeper(noted))
    return [ts[0][pool][0] ^ ts[1][pool][0] ^ ts[2][pool][0] for pool in range(pools)]


def test_correct_ands_give_zero_tests_that_are_zero() -> None:
    assert all(not t.any() for t in _check({}))


def test_a_wrong_and_makes_its_word_non_zero_in_every_pool() -> None:
    for t in _check({"z": (3,)}):
        assert list(np.flatnonzero(t)) == [3] and t[3] == 2


def test_a_wrong_triple_is_caught_where_it_is_matched_or_cut() -> None:
    """A wrong c of pool 0 either shows in the zero test of the AND matched with it, or, if
    the coin leaves it unmatched, fails the cut-and-choose."""
    _, size = check_plan(5)
    outcomes = set()
    for index in range(size):
        try:
            t = _check({"c": (0, index)})
        except CheatingDetected as exc:
            assert exc.check == "AND"
            outcomes.add("cut")
            continue
        assert np.count_nonzero(t[0]) == 1 and not any(p.any() for p in t[1:])
        outcomes.add("matched")
    assert outcomes == {"cut", "matched"}
