"""Shared integers wider than the ring (mpcnet.ops.bigint): exact values, public shapes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import opened, run_protocol

from mpcnet.ops import bigint

WIDTH = 16
WORDS = np.array([0, 1, 2**63 - 1, 12345678901234, 2**40 + 7, 2**64 - 1], dtype=np.uint64)


def value(limbs: np.ndarray, width: int) -> list[int]:
    """The integers sum_u limbs[u] 2^(w u), limbs read as signed."""
    signed = limbs.view(np.int64)
    return [sum(int(signed[u, i]) << (width * u) for u in range(limbs.shape[0]))
            for i in range(limbs.shape[1])]


async def formula(s, x, y):  # type: ignore[no-untyped-def]
    """Every operation once, with growth that forces normalising: (x^2 2^40 m - x y)^2."""
    a = await bigint.of_words(s, x, 64, WIDTH) if s else bigint.dry(64, WIDTH, 6)
    b = await bigint.of_words(s, y, 64, WIDTH) if s else bigint.dry(64, WIDTH, 6)
    square = await bigint.scale(s, await bigint.mul(s, a, a), (1 << 24) - 1, 40)
    diff = await bigint.add(s, square, await bigint.mul(s, a, b), subtract=True)
    return await bigint.mul(s, diff, diff)


def test_values_are_exact_and_shapes_are_those_of_the_dry_run(scheme: str) -> None:
    y = WORDS[::-1].copy()

    async def body(s, x, y):  # type: ignore[no-untyped-def]
        out = await formula(s, x, y)
        return await s.open(out.values), out.shape

    limbs, shape = run_protocol(scheme, {"x": WORDS, "y": y}, body)[0]
    want = [((int(a) ** 2 * ((1 << 24) - 1) << 40) - int(a) * int(b)) ** 2
            for a, b in zip(WORDS, y, strict=True)]
    assert value(limbs, WIDTH) == want
    assert shape == bigint.dry_run(formula(None, None, None)).shape
    assert shape.bound <= 1 << 63 and shape.limbs > (max(want).bit_length() // WIDTH)


def test_normalise_keeps_the_value_and_the_zero_test_reads_it(scheme: str) -> None:
    x = np.array([0, 5, 0, 2**63 + 3, 1], dtype=np.uint64)

    async def body(s, x):  # type: ignore[no-untyped-def]
        a = await bigint.of_words(s, x, 64, WIDTH)
        grown = await bigint.scale(s, a, (1 << 40) + 1)
        small = await bigint.normalise(s, grown)
        return (await s.open(small.values), small.shape, grown.shape,
                await s.open(await bigint.is_zero(s, small)))

    limbs, small, grown, zero = opened(run_protocol(scheme, {"x": x}, body))
    assert value(limbs, WIDTH) == [int(v) * ((1 << 40) + 1) for v in x]
    assert small.bound < grown.bound and small == grown.normalised()
    np.testing.assert_array_equal(zero, (x == 0).astype(np.uint64))


def test_a_dry_run_that_would_need_a_protocol_step_is_refused() -> None:
    async def awaits() -> None:
        import asyncio
        await asyncio.sleep(0)

    with pytest.raises(RuntimeError, match="awaited a protocol step"):
        bigint.dry_run(awaits())
