"""Probabilistic (perfect and statistical mask) and exact truncation, under every scheme."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.ops.convert import random_bits
from mpcnet.ops.truncate import statistical_security, trunc, trunc_exact, trunc_floor

F = 16


def _signed(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.uint64).view(np.int64)


def _bounded(n: int, bits: int, seed: int) -> np.ndarray:
    """Random values with |x| < 2^bits, plus the edges of that range and of the shift."""
    top = 2**bits - 1
    edges = [0, 1, -1, top, -top, 2**F, -(2**F), 2**F - 1, -(2**F) + 1, 2**F + 1]
    rng = np.random.default_rng(seed)
    return np.concatenate([np.array(edges, dtype=np.int64),
                           rng.integers(-top, top, n, dtype=np.int64, endpoint=True)])


def _assert_rounded(result: np.ndarray, x: np.ndarray, f: int | np.ndarray) -> None:
    """result is floor(x / 2^f) or one more."""
    diff = _signed(result) - (x >> f)
    assert set(np.unique(diff)) <= {0, 1}


@pytest.mark.parametrize("f", [1, F, 40])
def test_trunc_perfect_mask_full_range(scheme: str, f: int) -> None:
    x = np.concatenate([_bounded(300, 62, f), [-(2**62)]])

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await trunc(s, x, f))

    _assert_rounded(opened(run_protocol(scheme, {"x": x}, body)), x, f)


def test_trunc_per_value_shifts_and_premade_mask(scheme: str) -> None:
    rng = np.random.default_rng(11)
    x = _bounded(200, 62, 12).reshape(-1, 15)[:13]
    shifts = rng.integers(0, 63, x.shape)
    shifts[0, :3] = [0, 62, 1]

    async def body(s, x):  # type: ignore[no-untyped-def]
        mask = await random_bits(s, (64,) + x.shape)
        before = s.engine.rounds
        out = await trunc(s, x, shifts, mask=mask)
        rounds = s.engine.rounds - before
        return await s.open(out), rounds

    result, rounds = opened(run_protocol(scheme, {"x": x}, body))
    assert result.shape == x.shape
    _assert_rounded(result, x, shifts)
    # with a pre-made mask, one opening: a masked opening, so active3 folds its MAC records
    # into the job's one zero test instead of testing them here (Scheme.open_masked)
    assert rounds == 1


@pytest.mark.parametrize("k", [F, 30, 40])
def test_trunc_statistical_mask(scheme: str, k: int) -> None:
    x = _bounded(300, k, k)

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await trunc(s, x, F, k)), statistical_security(s, F, k)

    result, sigma = opened(run_protocol(scheme, {"x": x}, body))
    _assert_rounded(result, x, F)
    assert sigma == {"passive3": 61, "active3": 61, "active4": 60}.get(scheme, sigma) - k


@pytest.mark.parametrize("k", [None, 40])
def test_trunc_rounds_stochastically_without_bias(scheme: str, k: int | None) -> None:
    x = np.full(4000, 5 * 2**F + 2**F // 4, dtype=np.int64)  # 5.25

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await trunc(s, x, F, k))

    result = _signed(opened(run_protocol(scheme, {"x": x}, body)))
    assert set(np.unique(result)) == {5, 6}
    assert 0.21 < (result == 6).mean() < 0.29


@pytest.mark.parametrize("f", [1, F, 63])
def test_trunc_exact_is_floor_for_every_word(scheme: str, f: int) -> None:
    rng = np.random.default_rng(f)
    x = np.concatenate([[0, 1, -1, 2**63 - 1, -(2**63), 2**F, -(2**F), -(2**F) - 1],
                        rng.integers(-(2**63), 2**63 - 1, 200, dtype=np.int64)]).astype(np.int64)

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await trunc_exact(s, x, f))

    np.testing.assert_array_equal(_signed(opened(run_protocol(scheme, {"x": x}, body))), x >> f)


def test_trunc_floor_is_floor_for_every_word_and_shift(scheme: str) -> None:
    rng = np.random.default_rng(5)
    x = np.concatenate([[0, 1, -1, 2**63 - 1, -(2**63), 2**F, -(2**F), -(2**F) - 1],
                        rng.integers(-(2**63), 2**63 - 1, 200, dtype=np.int64)]).astype(np.int64)
    shifts = rng.integers(0, 63, x.shape)
    shifts[:3] = [0, 62, 1]

    async def body(s, x):  # type: ignore[no-untyped-def]
        return await s.open(await trunc_floor(s, x, shifts))

    np.testing.assert_array_equal(_signed(opened(run_protocol(scheme, {"x": x}, body))),
                                  x >> shifts)


def test_truncation_rounds_do_not_grow_with_the_batch(scheme: str) -> None:
    def rounds(n: int) -> list[int]:
        async def body(s, x):  # type: ignore[no-untyped-def]
            out = []
            for k in (None, 30):
                before = s.engine.rounds
                await trunc(s, x, F, k)
                out.append(s.engine.rounds - before)
            before = s.engine.rounds
            await trunc_exact(s, x, F)
            return out + [s.engine.rounds - before]

        return run_protocol(scheme, {"x": _bounded(n, 30, n)[:n]}, body)[0]

    small, large = rounds(1), rounds(400)
    assert small == large
    # active3: the perfect mask's opening is masked, so its MAC records are folded into the
    # job's one zero test (one more round for the inputs' check); the statistical one opens
    # after the four rounds of a full check, and one to authenticate its random bits;
    # passive3 deals its mask (two rounds)
    perfect = {"active3": 4, "passive3": 2}.get(scheme, 3)
    assert small[:2] == [perfect, 8 if scheme == "active3" else 3] and small[2] <= 11


@pytest.mark.parametrize(("scheme", "dealers"), [("passive3", (2,)), ("active4", (2, 3))])
def test_the_parties_that_know_the_mask_never_see_it_added(scheme: str, dealers: tuple[int, ...]
                                                          ) -> None:
    """The schemes' own truncations (``Scheme.truncate``): the parties that make the mask r
    receive no word of the round that opens c = x + r to the others (passive3's dealer
    receives nothing at all); each party sends 2 (passive3) or 3.5 (active4) words a value."""
    x = _bounded(400, 62, 5)

    async def body(s, x):  # type: ignore[no-untyped-def]
        received: list[int] = []
        exchange, sent = s.engine.exchange, s.engine.bytes_sent

        async def spy(sends, recv_from):  # type: ignore[no-untyped-def]
            got = await exchange(sends, recv_from)
            received.append(sum(v.nbytes for v in got.values()))
            return got

        s.engine.exchange = spy
        out = await trunc(s, x, F)
        s.engine.exchange, sent = exchange, s.engine.bytes_sent - sent
        return await s.open(out), np.array(received), sent

    results = run_protocol(scheme, {"x": x}, body)
    _assert_rounded(opened([r[0] for r in results]), x, F)
    for party in dealers:
        received = results[party][1]
        assert received[0] == 0 and (scheme != "passive3" or received.sum() == 0)
    words = max(int(r[2]) for r in results) / 8 / x.size
    assert words == pytest.approx(2 if scheme == "passive3" else 3.5, abs=0.05)


@pytest.mark.parametrize("f", [0, 1, F, 40, 62])
def test_active3_truncates_a_large_batch_by_conversion(monkeypatch: pytest.MonkeyPatch,
                                                       f: int) -> None:
    """A scheme without a truncation of its own (active3) converts a large batch to binary and
    back (``CONVERSION_BATCH``, lowered here): rounded down or up, without bias."""
    from mpcnet.ops import truncate

    monkeypatch.setattr(truncate, "CONVERSION_BATCH", 1)
    x = np.concatenate([_bounded(300, 62, f), [-(2**62)],
                        np.full(3000, 5 * 2**F + 2**F // 4, dtype=np.int64)])

    async def body(s, x):  # type: ignore[no-untyped-def]
        before = s.engine.rounds
        out = await trunc(s, x, f)
        rounds = s.engine.rounds - before
        return await s.open(out), rounds

    result, rounds = opened(run_protocol("active3", {"x": x}, body))
    _assert_rounded(result, x, f)
    if f == F:
        quarter = _signed(result[-3000:])
        assert 0.21 < (quarter == 6).mean() < 0.29
    assert rounds > 10  # binary and back, not the 64 bits' masked opening


def test_truncates_says_whether_the_scheme_has_a_truncation_of_its_own(scheme: str) -> None:
    """``Scheme.truncates`` is what ``Scheme.truncate`` does: a result, or None (active3)."""
    x = np.array([5 << F, -(3 << F)], dtype=np.int64)

    async def body(s, x):  # type: ignore[no-untyped-def]
        own = await s.truncate(x, np.full(x.size, F, dtype=np.int64))
        return s.truncates, own is not None

    for truncates, has_own in run_protocol(scheme, {"x": x}, body):
        assert truncates == has_own == (scheme != "active3")
