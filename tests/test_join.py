"""mpcnet.ops.join (and the shuffle it rests on) in memory, under every scheme: the aligned rows
equal the plaintext inner join as a set, whatever the owners' orders; the sort is a sort; what
a server opens is bits, and the flags' ones are the size of the intersection; the order it sees
does not follow an owner's order."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import run_protocol

from mpcnet.errors import InputError
from mpcnet.net.engine import RoundEngine
from mpcnet.net.local import run_local_sync
from mpcnet.ops.join import inner_join, sort_order
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
            spy: list[Any] | None = None) -> tuple[list[tuple[int, ...]], int]:
    """The reconstructed join (sorted rows) and its row count; ``spy`` collects what party 0
    opens."""
    values, m = _run_join(scheme, parts, spy)
    return sorted(tuple(int(v) for v in row) for row in values), m


def _run_join(scheme: str, parts: list[tuple[np.ndarray, np.ndarray]],
              spy: list[Any] | None = None) -> tuple[np.ndarray, int]:
    """The reconstructed join, in the order the servers made, and its row count."""
    info = registry.get(scheme)
    shares = [info.share(a) for part in parts for a in part]

    async def party(engine: RoundEngine) -> tuple[np.ndarray, int]:
        s = await info.scheme.setup(engine)
        if spy is not None and engine.party == 0:
            _spy_on(s, spy)
        mine = await s.input(*(sh[engine.party] for sh in shares))
        out = await inner_join(s, [(mine[2 * o], mine[2 * o + 1]) for o in range(len(parts))])
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
        seen.append(("bits", np.asarray(await opened_binary(x)) & np.uint64(1)))
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


def test_no_common_record_gives_no_rows() -> None:
    parts, rows = _owners([list(range(10)), list(range(10, 16))], [1, 1])
    assert _joined("passive3", parts) == ([], 0) and rows == []


def test_one_contribution_is_refused() -> None:
    parts, _ = _owners([list(range(5))], [1])
    with pytest.raises(InputError, match="2 to 8 contributions"):
        _joined("passive3", parts)


@pytest.mark.parametrize("n", [1, 2, 3, 17, 200])
def test_the_opened_quicksort_sorts(n: int) -> None:
    keys = np.random.default_rng(n).choice(1 << 40, n, replace=False).astype(np.uint64)

    async def body(s: Scheme, keys: Any) -> np.ndarray:
        return await sort_order(s, keys)

    (order, *_) = run_protocol("passive3", {"keys": keys}, body)
    np.testing.assert_array_equal(keys[order], np.sort(keys))


def test_a_server_opens_bits_and_the_size_of_the_intersection_only() -> None:
    parts, _ = _owners([list(range(0, 24)), list(range(8, 40))], [2, 2])
    seen: list[Any] = []
    _, m = _joined("passive3", parts, seen)
    *comparisons, (kind, flags) = seen
    assert all(k == "bits" and set(np.unique(v)) <= {0, 1} for k, v in comparisons)
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
