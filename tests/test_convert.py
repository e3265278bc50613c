"""A2B, B2A (bit decomposition and masked) and shared random bits, under every scheme."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.ops.convert import a2b, b2a, b2a_masked, bits_of, bits_times, random_bits

EDGE = np.array([0, 1, -1, 2, -2, 2**62, -(2**62), 2**63 - 1, -(2**63), 2**63 - 2,
                 -(2**63) + 1, 2**32 - 1, 2**32, -(2**32)], dtype=np.int64)


def _values(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([EDGE, rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)])


@pytest.mark.parametrize("n", [1, 200])
def test_a2b_gives_all_64_bits(scheme: str, n: int) -> None:
    x = _values(n, n)

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open_binary(await a2b(s, x))

    np.testing.assert_array_equal(opened(run_protocol(scheme, {"x": x}, body)), x.view(np.uint64))


def test_a2b_keeps_shape(scheme: str) -> None:
    x = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open_binary(await a2b(s, x))

    np.testing.assert_array_equal(opened(run_protocol(scheme, {"x": x}, body)), x.view(np.uint64))


def test_b2a_round_trips(scheme: str) -> None:
    x = _values(150, 3)

    async def body(s, x):  # type: ignore[no-untyped-def]
        words = await a2b(s, x)
        return (await s.open(await b2a(s, words)), await s.open(await b2a(s, words, bits=20)),
                await s.open(await b2a_masked(s, words)))

    full, low, masked = opened(run_protocol(scheme, {"x": x}, body))
    xu = x.view(np.uint64)
    np.testing.assert_array_equal(full, xu)
    np.testing.assert_array_equal(low, xu & np.uint64(2**20 - 1))
    np.testing.assert_array_equal(masked, xu)


def test_bits_of_chosen_positions(scheme: str) -> None:
    x = _values(40, 4)
    positions = [0, 5, 31, 62, 63]

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await bits_of(s, await a2b(s, x), positions))

    bits = opened(run_protocol(scheme, {"x": x}, body))
    expected = (x.view(np.uint64)[None, :] >> np.array(positions, dtype=np.uint64)[:, None]) & 1
    np.testing.assert_array_equal(bits, expected)


def test_random_bits_are_fair_independent_bits(scheme: str) -> None:
    async def body(s):  # type: ignore[no-untyped-def]
        return await s.open(await random_bits(s, (4, 1000))), await s.open(
            await random_bits(s, (1000,)))

    first, second = opened(run_protocol(scheme, {}, body))
    assert first.shape == (4, 1000)
    assert set(np.unique(first)) | set(np.unique(second)) == {0, 1}
    assert 0.45 < first.mean() < 0.55 and 0.43 < second.mean() < 0.57
    for row in first:
        assert 0.43 < row.mean() < 0.57
    # no two rows (or calls) repeat, and adjacent bits do not agree more than chance
    assert len({row.tobytes() for row in first} | {second.tobytes()}) == 5
    assert 0.45 < (first[:, 1:] == first[:, :-1]).mean() < 0.55


def test_rounds_do_not_grow_with_the_batch(scheme: str) -> None:
    def costs(n: int) -> list[int]:
        async def body(s, x):  # type: ignore[no-untyped-def]
            marks = [s.engine.rounds]
            words = await a2b(s, x)
            marks.append(s.engine.rounds)
            await b2a(s, words)
            marks.append(s.engine.rounds)
            await b2a_masked(s, words)
            marks.append(s.engine.rounds)
            await random_bits(s, (n,))
            marks.append(s.engine.rounds)
            return list(np.diff(marks))

        return run_protocol(scheme, {"x": _values(n, 5)[:n]}, body)[0]

    small, large = costs(1), costs(500)
    assert small == large
    a2b_rounds, b2a_rounds, masked_rounds, bit_rounds = small
    # active3 authenticates the bits' XOR components (one round) and checks before it opens
    # (the four rounds of verify); active4 checks the inputs before its first opening (one)
    extra, check = {"active3": (1, 4), "active4": (0, 1)}.get(scheme, (0, 0))
    assert a2b_rounds <= 9 and b2a_rounds == 2 + extra and bit_rounds == 2 + extra
    assert masked_rounds <= 11 + extra + check


@pytest.mark.parametrize("shape", [(40,), (3, 13, 5)])
def test_bits_times_applies_each_bit_to_its_values(scheme: str, shape: tuple[int, ...]) -> None:
    """b v for the sign bits of x (binary, broadcast over a leading axis of v), whatever the
    scheme's protocol (passive3 deals a random bit, ``Rep3.bit_mul``)."""
    x = _values(int(np.prod(shape[-2:])) - len(EDGE) if len(shape) > 1 else 26, 8)
    x = x[:int(np.prod(shape[1:] if len(shape) > 1 else shape))].reshape(shape[1:] or shape)
    v = np.random.default_rng(9).integers(-(2**62), 2**62, shape, dtype=np.int64)

    async def body(s, x, v):  # type: ignore[no-untyped-def]
        from mpcnet.ops.compare import msb

        bits = await msb(s, x)
        before, heard = s.engine.rounds, _received(s)
        out = await bits_times(s, bits, v)
        rounds, heard = s.engine.rounds - before, _received(s) - heard
        return await s.open(out), rounds, heard

    results = run_protocol(scheme, {"x": x, "v": v}, body)
    result, rounds, _ = results[0]
    expected = np.where(x < 0, v, 0).view(np.uint64)
    np.testing.assert_array_equal(opened([r[0] for r in results]), np.broadcast_to(expected,
                                                                                   shape))
    np.testing.assert_array_equal(result, np.broadcast_to(expected, shape))
    if scheme == "passive3":
        assert rounds == 2  # where bit_to_arith and a product take three
        assert results[2][2] == 0  # the party that knows the random bit hears nothing


def _received(s) -> int:  # type: ignore[no-untyped-def]
    return sum(sum(m.bytes_recv.values()) for m in s.engine.phases.values())
