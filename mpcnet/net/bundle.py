"""Layer: network. Several arrays in one message: the payload of a round that several
independent computations share (``RoundEngine.together``).

Layout of a bundle (one uint8 array, all integers little-endian)::

    hlen    uint64              length of the msgpack index
    index   msgpack list        [[tag, dtype, shape], ...] in the order of the bodies
    bodies  raw bytes           each array's buffer in C order, from an offset that is a
                                multiple of 8 (zero padding between)

Pure functions, no I/O. The receiver gets views into the bundle, not copies. A malformed
bundle (a peer running other code, or a corrupted one) raises ``PeerError``, never a numpy
error or a silently wrong split.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import msgpack
import numpy as np

from mpcnet.errors import PeerError
from mpcnet.net.framing import ALLOWED_DTYPES, MAX_HEADER, shape_bytes

_HLEN = struct.Struct("<Q")
_ALIGN = 8


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def pack(parts: Mapping[int, np.ndarray]) -> np.ndarray:
    """One uint8 array carrying ``parts`` (tag -> array), in the order of the mapping."""
    arrays = {tag: np.asarray(a, order="C") for tag, a in parts.items()}
    for a in arrays.values():
        if a.dtype.str not in ALLOWED_DTYPES:
            raise TypeError(f"cannot bundle an array of dtype {a.dtype}")
    index = msgpack.packb([[tag, a.dtype.str, list(a.shape)] for tag, a in arrays.items()])
    offset = _aligned(_HLEN.size + len(index))
    starts = []
    for a in arrays.values():
        starts.append(offset)
        offset = _aligned(offset + a.nbytes)
    out = np.zeros(offset, dtype=np.uint8)
    out[:_HLEN.size] = np.frombuffer(_HLEN.pack(len(index)), dtype=np.uint8)
    out[_HLEN.size:_HLEN.size + len(index)] = np.frombuffer(index, dtype=np.uint8)
    for start, a in zip(starts, arrays.values(), strict=True):
        out[start:start + a.nbytes] = a.reshape(-1).view(np.uint8)
    return out


def unpack(bundle: np.ndarray, peer: str) -> dict[int, np.ndarray]:
    """The arrays of a bundle by tag (views into it); ``peer`` names the sender in errors."""
    def fail(what: str) -> PeerError:
        return PeerError(f"{peer} sent a malformed bundle of arrays ({what}); check that every "
                         "server runs the same mpcnet version and job")

    if bundle.dtype != np.uint8 or bundle.ndim != 1 or bundle.size < _HLEN.size:
        raise fail("not a byte array with an index length")
    raw = bundle.data.cast("B")
    (hlen,) = _HLEN.unpack(raw[:_HLEN.size])
    if not 0 < hlen <= MAX_HEADER or _HLEN.size + hlen > bundle.size:
        raise fail(f"index length {hlen}")
    try:
        index = msgpack.unpackb(bytes(raw[_HLEN.size:_HLEN.size + hlen]), raw=False)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is a bad bundle
        raise fail(f"index is not msgpack: {exc}") from None
    if not isinstance(index, list):
        raise fail("index is not a list")
    out: dict[int, np.ndarray] = {}
    offset = _aligned(_HLEN.size + hlen)
    for entry in index:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], int)
                and entry[1] in ALLOWED_DTYPES):
            raise fail(f"bad entry {entry!r:.80}")
        tag, dtype = entry[0], np.dtype(entry[1])
        nbytes = shape_bytes(dtype, entry[2])
        if nbytes is None:
            raise fail(f"bad entry {entry!r:.80}")
        if tag in out:
            raise fail(f"tag {tag} twice")
        shape = tuple(entry[2])
        if offset + nbytes > bundle.size:
            raise fail(f"array {tag} runs past the end")
        out[tag] = bundle[offset:offset + nbytes].view(dtype).reshape(shape)
        offset = _aligned(offset + nbytes)
    if offset != bundle.size:
        raise fail(f"{bundle.size - offset} bytes after the last array")
    return out
