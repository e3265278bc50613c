"""The bit length of shared words in binary (``length_bits``) and the barrel shift by it
(``shift_right``), under every scheme, against numpy."""

from __future__ import annotations

import numpy as np
from conftest import opened, run_protocol

from mpcnet.ops.bitlength import length_bits, length_width, shift_right
from mpcnet.ops.convert import a2b, b2a_masked, bit_to_arith

WIDTH = 38


def test_length_bits_and_the_shift_by_them_match_numpy(scheme: str) -> None:
    """Every length 0..38 (the edges 2^j - 1 and 2^j among them), and two's complement words
    of either sign shifted by it: floor(w / 2^L), the sign copied down."""
    lengths = np.arange(WIDTH + 1)
    words = np.concatenate([[0], (1 << lengths[1:]) - 1, 1 << lengths[1:-1]]).astype(np.int64)
    rng = np.random.default_rng(5)
    values = rng.integers(-2**56, 2**56, (7, words.size), dtype=np.int64)
    values[0], values[1] = -1, 2**56 - 1  # the sign's copies and the largest positive word

    async def body(s, words, values):  # type: ignore[no-untyped-def]
        bits = await length_bits(s, await a2b(s, words), WIDTH)
        length = await bit_to_arith(s, bits)
        shifted = await shift_right(s, await a2b(s, values), bits)
        return await s.open(length), await s.open(await b2a_masked(s, shifted))

    length_bit, shifted = opened(run_protocol(scheme, {"words": words, "values": values}, body))
    assert length_bit.shape == (length_width(WIDTH), words.size)
    weights = 1 << np.arange(length_width(WIDTH), dtype=np.uint64)[:, None]
    expected = np.array([int(w).bit_length() for w in words])
    np.testing.assert_array_equal((length_bit * weights).sum(0), expected)
    np.testing.assert_array_equal(shifted.view(np.int64), values >> expected)


def test_b2a_masked_adds_the_words_it_is_given(scheme: str) -> None:
    """The sum of several binary words (mod 2^64) comes back arithmetic: the rounding bit of
    the standardisation joins its adder that way."""
    rng = np.random.default_rng(6)
    x, y = (rng.integers(-2**63, 2**63 - 1, 50, dtype=np.int64) for _ in range(2))

    async def body(s, x, y):  # type: ignore[no-untyped-def]
        return await s.open(await b2a_masked(s, await a2b(s, x), await a2b(s, y)))

    total = opened(run_protocol(scheme, {"x": x, "y": y}, body))
    np.testing.assert_array_equal(total, x.view(np.uint64) + y.view(np.uint64))
