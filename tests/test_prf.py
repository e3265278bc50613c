"""The AES-CTR PRF and the pairwise key agreement."""

from __future__ import annotations

import numpy as np
import pytest

from mpcnet.net.local import run_local_sync
from mpcnet.prf import PRF, random_key
from mpcnet.schemes.keys import pairwise_prfs


def test_same_key_same_stream_in_any_chunking() -> None:
    key = random_key()
    a, b = PRF(key), PRF(key)
    whole = a.words(3000)
    parts = np.concatenate([b.words(1), b.words(999), b.words((20, 100)).ravel()])
    np.testing.assert_array_equal(whole, parts.ravel())


@pytest.mark.parametrize("sizes", [(1,), (7, 8, 9), (200_000, 3), (131_072,), (131_080, 5)])
def test_fill_continues_the_same_stream_as_words(sizes: tuple[int, ...]) -> None:
    """In place or fresh, any sizes (also across the keystream chunk and its scratch tail)."""
    key = random_key()
    whole = PRF(key).words(sum(sizes))
    prf, parts = PRF(key), []
    for i, n in enumerate(sizes):
        if i % 2:
            parts.append(prf.words(n))
        else:
            out = np.zeros((2, n), dtype=np.uint64)[1]  # a contiguous row of a larger array
            prf.fill(out)
            parts.append(out)
    np.testing.assert_array_equal(whole, np.concatenate(parts))


def test_fill_refuses_what_it_cannot_write_in_place() -> None:
    with pytest.raises(ValueError, match="C-contiguous uint64"):
        PRF(random_key()).fill(np.zeros((4, 4), dtype=np.uint64)[:, 0])


def test_large_draw_crosses_chunks_and_looks_uniform() -> None:
    words = PRF(random_key()).words(300_000)  # 2.4 MB, more than one keystream chunk
    bits = np.unpackbits(words.view(np.uint8))
    assert abs(bits.mean() - 0.5) < 0.002
    assert len(np.unique(words)) == words.size


def test_different_keys_differ_and_bad_key_refused() -> None:
    assert not np.array_equal(PRF(random_key()).words(8), PRF(random_key()).words(8))
    with pytest.raises(ValueError, match="16 bytes"):
        PRF(b"short")


def test_pairwise_keys_agree_between_the_two_ends_only() -> None:
    async def party(engine):  # type: ignore[no-untyped-def]
        prfs = await pairwise_prfs(engine)
        return {peer: prf.words(4) for peer, prf in prfs.items()}

    streams = run_local_sync(3, party)
    for i in range(3):
        for j in range(3):
            if i != j:
                np.testing.assert_array_equal(streams[i][j], streams[j][i])
    assert not np.array_equal(streams[0][1], streams[0][2])
