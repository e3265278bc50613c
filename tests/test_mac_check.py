"""active3's MAC check (mpcnet.schemes.mac_check): each party's local terms of w and u sum to
the weighted sums over every record, and folding at a checkpoint weighs the records exactly as
one check at the end would."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from conftest import opened128, shares128

from mpcnet.schemes.mac_check import _CHUNK, MacRecords, local_terms


def _records(rng: np.random.Generator, sizes: tuple[int, ...]
             ) -> tuple[list[list[np.ndarray]], list[np.ndarray]]:
    """Per party, replicated (value, MAC) records of the given sizes (limb, slot, v, n), and
    the values they share (v, n) as Python ints."""
    per_party: list[list[np.ndarray]] = [[], [], []]
    plain = []
    for n in sizes:
        values = np.array([[int.from_bytes(rng.bytes(16), "little") for _ in range(n)]
                           for _ in range(2)], dtype=object)
        for party, share in enumerate(shares128(values, rng)):
            per_party[party].append(share)
        plain.append(values)
    return per_party, plain


def _stream(components: np.ndarray, party: int) -> Callable[[int], np.ndarray]:
    """Party ``party``'s coefficients (limb, slot, count), drawn in order from replicated
    shares ``components`` (party, limb, slot, total)."""
    drawn = [0]

    def coefficients(count: int) -> np.ndarray:
        start, drawn[0] = drawn[0], drawn[0] + count
        return components[party][..., start:start + count]

    return coefficients


def _observe(event: str, value: object) -> None:
    pass


def _terms(coefficients: Callable[[int], np.ndarray]) -> Callable[[list[np.ndarray]], np.ndarray]:
    return lambda records: local_terms(records, coefficients, _observe)


def test_the_parties_terms_sum_to_the_weighted_sums_of_w_and_u() -> None:
    rng = np.random.default_rng(1)
    sizes = (3, _CHUNK + 5)  # one record in two cache-sized pieces
    records, plain = _records(rng, sizes)
    total = sum(sizes)
    r = np.array([int.from_bytes(rng.bytes(16), "little") for _ in range(total)], dtype=object)
    coefficients = np.stack(shares128(r, rng))
    terms = [local_terms(records[p], _stream(coefficients, p), _observe) for p in range(3)]
    got = opened128([t[:, None] for t in terms])  # (v,): the three parties' terms summed
    values = np.concatenate(plain, axis=1)
    expected = [sum(int(a) * int(b) for a, b in zip(r, values[v], strict=True)) % (1 << 128)
                for v in (0, 1)]
    assert list(got) == expected


def test_folding_weighs_every_record_as_one_check_at_the_end_would() -> None:
    rng = np.random.default_rng(2)
    records, _ = _records(rng, (4, 7, 2))
    r = np.array([int.from_bytes(rng.bytes(16), "little") for _ in range(13)], dtype=object)
    coefficients = np.stack(shares128(r, rng))
    for party in range(3):
        once, folded = MacRecords(), MacRecords()
        assert not once.pending and once.take(_terms(_stream(coefficients, party))) is None
        for data in records[party]:
            once.queue(data)
        whole = once.take(_terms(_stream(coefficients, party)))
        terms = _terms(_stream(coefficients, party))
        folded.queue(records[party][0])
        folded.queue(records[party][1])
        folded.fold(terms)
        assert len(folded) == 0 and folded.pending  # freed, still to be checked
        folded.queue(records[party][2])
        assert len(folded) == 1
        parts = folded.take(terms)
        np.testing.assert_array_equal(parts, whole)
        assert not folded.pending and not once.pending
