"""Bundles of arrays in one message: round trip, and malformed bundles refused."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from mpcnet.errors import PeerError
from mpcnet.net.bundle import pack, unpack


def test_arrays_of_any_allowed_dtype_and_shape_come_back_as_sent() -> None:
    parts = {3: np.arange(10, dtype=np.uint64).reshape(2, 5), 0: np.array([1, 2, 3], np.uint8),
             7: np.zeros((0, 4), np.int32), 1: np.array(5.5)}
    bundle = pack(parts)
    assert bundle.dtype == np.uint8 and bundle.size % 8 == 0
    back = unpack(bundle.copy(), "party 1")
    assert list(back) == [3, 0, 7, 1]
    for tag, array in parts.items():
        assert back[tag].dtype == array.dtype and np.array_equal(back[tag], array)
        assert back[tag].flags.writeable


def _bundle(index: object, body: bytes = b"") -> np.ndarray:
    packed = msgpack.packb(index)
    head = len(packed).to_bytes(8, "little") + packed
    head += b"\0" * (-len(head) % 8)
    return np.frombuffer(head + body, dtype=np.uint8).copy()


@pytest.mark.parametrize("bundle, what", [
    (np.zeros(3, np.uint8), "index length"),
    (np.zeros(4, np.uint64), "not a byte array"),
    (_bundle({"a": 1}), "not a list"),
    (_bundle([[0, "|O", [1]]], b"\0" * 8), "bad entry"),
    (_bundle([[0, "<u8", [-1]]]), "bad entry"),
    (_bundle([[0, "<u8", [0, 2 ** 63]]]), "bad entry"),  # numpy: "maximum dimension"
    (_bundle([[0, "<u8", [0, 2 ** 62]]]), "bad entry"),  # numpy: "array is too big"
    (_bundle([[0, "<u8", [0, 1 << 20, 1 << 20, 1 << 20]]]), "bad entry"),
    (_bundle([[0, "<u8", [True]]], b"\0" * 8), "bad entry"),
    (_bundle([[0, "<u8", [2]]], b"\0" * 8), "past the end"),
    (_bundle([[0, "<u8", [1]], [0, "<u8", [1]]], b"\0" * 16), "twice"),
    (_bundle([[0, "<u8", [1]]], b"\0" * 16), "after the last array"),
])
def test_malformed_bundles_raise_peer_error(bundle: np.ndarray, what: str) -> None:
    with pytest.raises(PeerError, match=what):
        unpack(bundle, "party 2")
