"""Layer: network. Frames on a byte stream: a fixed prefix, a small msgpack header, a raw array.

Wire format of one frame (all integers big-endian)::

    magic  b"MPC1"       4 bytes
    hlen   uint32        length of the msgpack header
    blen   uint64        length of the body (0 if the frame carries no array)
    header msgpack map   {"k": kind, ...; "dt": dtype, "sh": shape when there is a body}
    body   raw bytes     the array's buffer in C order, little-endian

The body is never encoded element by element: the sender hands the array's memory to the
transport, and the receiver decrypts straight into a preallocated ``np.empty`` (asyncio's
``BufferedProtocol``), so an 8 MB share costs no copy in Python on either side.

``FrameDecoder`` is the sans-IO core (it only hands out buffers and parses what was written into
them); ``FrameProtocol`` is the thin asyncio adapter used by TLS connections. Malformed input
(wrong magic, oversized header or body, body length that does not match dtype and shape, a dtype
outside ``ALLOWED_DTYPES``) raises ``PeerError`` and the connection is dropped.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import struct
from typing import Any

import msgpack
import numpy as np
from cryptography import x509

from mpcnet.errors import HandshakeError, PeerError

PREFIX = struct.Struct("!4sIQ")
MAGIC = b"MPC1"
MAX_HEADER = 64 * 1024
MAX_DIMS = 8
MAX_SPAN = 1 << 48
"""Bound on the bytes a received shape may describe when its zero dimensions count as one.
numpy refuses to make even an empty array whose other dimensions multiply past about 2**63
(a ``ValueError``), so a peer's shape is checked against this before numpy sees it."""
ALLOWED_DTYPES = frozenset({"|u1", "|i1", "|b1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8",
                            "<f4", "<f8"})
RECV_QUEUE_BYTES = 256 * 1024 * 1024  # pause reading beyond this many queued bytes
WRITE_CHUNK = 256 * 1024
"""Bytes of a body handed to the transport at once. A TLS transport encrypts what it is given
in one go into its memory buffer: a 32 MB body cost 1.1 ms per MB, pieces of 16 KB to 1 MB
0.5 ms (Python's ``ssl`` here); SpeedDating under active3 used 6.35 CPU-seconds on its servers
before, 5.57 after (one run each, bench/README section 1)."""

JOINED_BODY = 64 * 1024
"""Bodies up to this size are copied behind their header and written with it: each transport
write of a TLS connection is a record of its own and, on loopback, a send whose cost includes
the receiver's TCP processing. The header's separate write was 18 % of the servers' CPU
samples in training, whose rounds send kilobytes (py-spy, docs/performance.md, "Training")."""

Frame = tuple[dict[str, Any], np.ndarray | None]


def shape_bytes(dtype: np.dtype, shape: object) -> int | None:
    """Bytes of an array of ``dtype`` and ``shape`` as a peer sent it, or None when ``shape``
    is not a list of at most ``MAX_DIMS`` non-negative ints or describes more than
    ``MAX_SPAN`` bytes (counting zero dimensions as one)."""
    if (not isinstance(shape, list) or len(shape) > MAX_DIMS
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                       for d in shape)):
        return None
    span = count = dtype.itemsize
    for d in shape:
        span *= max(d, 1)
        count *= d
        if span > MAX_SPAN:
            return None
    return count


def large_message(message: dict[str, Any], kind: str) -> Frame:
    """A frame for ``message`` of any size: small ones travel in the header; one whose packed
    form would pass half of ``MAX_HEADER`` (a long job listing) travels as a msgpack body."""
    packed = msgpack.packb(message, use_bin_type=True)
    if len(packed) <= MAX_HEADER // 2:
        return {"k": kind, **message}, None
    return {"k": kind, "body": "msgpack"}, np.frombuffer(packed, dtype=np.uint8)


def read_large_message(header: dict[str, Any], body: np.ndarray | None) -> dict[str, Any]:
    """Undo ``large_message``: the message, whether it came in the header or the body."""
    if header.get("body") != "msgpack":
        return header
    if body is None or body.dtype != np.uint8:
        raise PeerError("a message announced as a msgpack body came without one")
    try:
        message = msgpack.unpackb(body.tobytes(), raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise PeerError(f"malformed message body: {type(exc).__name__}") from exc
    if not isinstance(message, dict):
        raise PeerError("a message body must be a map")
    return {"k": header.get("k"), **message}


def encode(header: dict[str, Any],
           array: np.ndarray | None = None) -> tuple[bytes, memoryview | None]:
    """Prefix and header bytes, and a zero-copy view of the body (or ``None``)."""
    header = dict(header)
    body: memoryview | None = None
    blen = 0
    if array is not None:
        arr = np.asarray(array)
        if arr.dtype.byteorder == ">" or not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        dt = arr.dtype.str
        if dt not in ALLOWED_DTYPES:
            raise TypeError(f"cannot send an array of dtype {arr.dtype}; allowed: "
                            f"{sorted(ALLOWED_DTYPES)}")
        header["dt"], header["sh"] = dt, list(arr.shape)
        blen = arr.nbytes
        body = arr.reshape(-1).view(np.uint8).data if blen else None
    packed = msgpack.packb(header, use_bin_type=True)
    if len(packed) > MAX_HEADER:
        raise ValueError(f"frame header of {len(packed)} bytes exceeds {MAX_HEADER}")
    return PREFIX.pack(MAGIC, len(packed), blen) + packed, body


class FrameDecoder:
    """Parses frames out of the buffers it hands out (sans-IO).

    Call ``buffer()`` for the memory the next bytes go into, then ``advance(n)`` after ``n``
    bytes were written there; ``advance`` returns the frames completed so far.
    """

    def __init__(self, max_body: int, peer: str = "peer") -> None:
        self.max_body = max_body
        self.peer = peer
        self._reset()

    def _reset(self) -> None:
        self._state = "prefix"
        self._small = bytearray(PREFIX.size)
        self._target: memoryview = memoryview(self._small)
        self._pos = 0
        self._blen = 0
        self._header: dict[str, Any] = {}
        self._array: np.ndarray | None = None

    def buffer(self) -> memoryview:
        return self._target[self._pos:]

    def _fail(self, what: str) -> PeerError:
        return PeerError(f"{self.peer} sent a malformed frame ({what}); the connection is "
                         "dropped. Check that both ends run the same mpcnet version")

    def advance(self, nbytes: int) -> list[Frame]:
        self._pos += nbytes
        frames: list[Frame] = []
        while self._pos == len(self._target):
            frame = self._step()
            if frame is not None:
                frames.append(frame)
        return frames

    def _step(self) -> Frame | None:
        """The current target is full: move to the next state; return a finished frame."""
        if self._state == "prefix":
            magic, hlen, blen = PREFIX.unpack(self._small)
            if magic != MAGIC:
                raise self._fail("bad magic: not an mpcnet peer")
            if not 0 < hlen <= MAX_HEADER:
                raise self._fail(f"header length {hlen} outside 1..{MAX_HEADER}")
            if blen > self.max_body:
                raise self._fail(f"body of {blen} bytes exceeds the limit of {self.max_body} "
                                 "(deployment max_frame_bytes)")
            self._blen = blen
            self._state, self._small = "header", bytearray(hlen)
            self._target, self._pos = memoryview(self._small), 0
            return None
        if self._state == "header":
            try:
                header = msgpack.unpackb(bytes(self._small), raw=False)
            except Exception as exc:  # noqa: BLE001 - any decoding failure is a bad frame
                raise self._fail(f"header is not msgpack: {exc}") from None
            if not isinstance(header, dict) or not isinstance(header.get("k"), str):
                raise self._fail("header is not a map with a kind")
            self._header = header
            if "dt" not in header:
                if self._blen:
                    raise self._fail("body without dtype and shape")
                return self._finish(None)
            dt, shape = header.get("dt"), header.get("sh", ())
            if dt not in ALLOWED_DTYPES:
                raise self._fail(f"dtype {dt!r} not allowed")
            dtype = np.dtype(dt)
            nbytes = shape_bytes(dtype, shape)
            if nbytes is None:
                raise self._fail(f"bad shape {shape!r:.80}")
            if nbytes != self._blen:
                raise self._fail(f"body of {self._blen} bytes does not match dtype {dt} and "
                                 f"shape {tuple(shape)}")
            self._array = np.empty(tuple(shape), dtype=dtype)
            if self._blen == 0:
                return self._finish(self._array)
            self._state = "body"
            self._target, self._pos = self._array.reshape(-1).view(np.uint8).data, 0
            return None
        return self._finish(self._array)

    def _finish(self, array: np.ndarray | None) -> Frame:
        header = self._header
        self._reset()
        return header, array


class FrameProtocol(asyncio.BufferedProtocol):
    """One framed connection: a queue of received frames and non-blocking sends.

    ``send`` hands the buffers to the transport and returns at once (it never waits for the
    peer to read, so two parties sending to each other in the same round cannot deadlock);
    the caller must not modify a sent array afterwards. ``drain`` waits for the transport's
    write buffer to empty below its high-water mark (uploads use it for flow control).
    """

    def __init__(self, max_body: int, label: str = "peer") -> None:
        self.label = label                  # "bob (127.0.0.1:7102)" once known, for errors
        self.peer_name: str | None = None   # name from the peer's certificate
        self.address = ""
        self.transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder(max_body, label)
        self._frames: collections.deque[Frame] = collections.deque()
        self._queued = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self.connected: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.bytes_sent = 0
        self.bytes_recv = 0

    # -- identity --------------------------------------------------------------------------
    def set_label(self, label: str) -> None:
        self.label = label
        self._decoder.peer = label

    def set_max_body(self, max_body: int) -> None:
        """Largest body accepted from now on (a server accepts none before the hello, so a
        connection that has not said who it is cannot make it allocate a large buffer)."""
        self._decoder.max_body = max_body

    def peer_certificate(self) -> x509.Certificate:
        """The certificate the peer presented (and proved it holds the key of, in the TLS
        handshake); ``HandshakeError`` if none."""
        assert self.transport is not None
        obj = self.transport.get_extra_info("ssl_object")
        der = obj.getpeercert(binary_form=True) if obj is not None else None
        if not der:
            raise HandshakeError(f"{self.label} presented no certificate")
        return x509.load_der_x509_certificate(der)

    # -- asyncio callbacks -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment] # uvloop's is no asyncio.Transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.address = f"{peer[0]}:{peer[1]}"
        if not self.connected.done():
            self.connected.set_result(None)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.bytes_recv += nbytes
        try:
            frames = self._decoder.advance(nbytes)
        except PeerError as exc:
            self._error = exc
            self._wake()
            if self.transport is not None:
                self.transport.abort()
            return
        for frame in frames:
            self._frames.append(frame)
            self._queued += frame[1].nbytes if frame[1] is not None else 0
        if frames:
            if self._queued > RECV_QUEUE_BYTES and self.transport is not None and not self._paused:
                self._paused = True
                self.transport.pause_reading()
            self._wake()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._error is None:
            self._error = self._lost_error(exc)
        if not self.connected.done():
            self.connected.set_exception(self._error)
            self.connected.exception()  # retrieved: a refused session is reported elsewhere
        self._wake()
        for w in self._drain_waiters:
            if not w.done():
                w.set_exception(self._error)
        self._drain_waiters.clear()

    def _lost_error(self, exc: Exception | None) -> PeerError:
        if isinstance(exc, ssl.SSLError):
            reason = getattr(exc, "reason", None) or str(exc)
            return HandshakeError(f"{self.label} refused the TLS session ({reason}): does its "
                                  "deployment file pin this identity's key?")
        detail = f": {exc}" if exc else ""
        return PeerError(f"{self.label} closed the connection{detail}; is the server still "
                         "running? (see its log)")

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for w in self._drain_waiters:
            if not w.done():
                w.set_result(None)
        self._drain_waiters.clear()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- API -------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once the connection is lost or being closed."""
        return self._closed or self.transport is None or self.transport.is_closing()

    def send(self, header: dict[str, Any], array: np.ndarray | None = None) -> None:
        """Queue one frame for the peer (returns immediately)."""
        if self._closed or self.transport is None or self.transport.is_closing():
            raise self._error if isinstance(self._error, PeerError) else PeerError(
                f"{self.label}: connection is closed; is the server still running?")
        head, body = encode(header, array)
        if body is not None and len(body) <= JOINED_BODY:  # one write: one record, one send
            head, body = head + body, None
        self.transport.write(head)
        if body is not None:
            for start in range(0, len(body), WRITE_CHUNK):
                self.transport.write(body[start:start + WRITE_CHUNK])
        self.bytes_sent += len(head) + (len(body) if body is not None else 0)

    async def drain(self) -> None:
        """Wait until the transport accepts more data (flow control for large uploads)."""
        if self._closed:
            raise self._error or PeerError(f"{self.label}: connection is closed")
        if not self._write_paused:
            return
        fut = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(fut)
        await fut

    async def recv(self, timeout: float | None = None) -> Frame:
        """The next frame, or ``PeerError`` if the connection is lost or ``timeout`` passes."""
        while not self._frames:
            if self._error is not None:
                raise self._error
            loop = asyncio.get_running_loop()
            self._waiter = loop.create_future()
            try:
                await asyncio.wait_for(self._waiter, timeout)
            except TimeoutError:
                raise PeerError(f"{self.label}: no message within {timeout} s; the peer may be "
                                "overloaded or stalled (see deployment timeouts)") from None
            finally:
                self._waiter = None
        frame = self._frames.popleft()
        self._queued -= frame[1].nbytes if frame[1] is not None else 0
        if self._paused and self._queued <= RECV_QUEUE_BYTES // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return frame

    def queued(self, kind: str) -> dict[str, Any] | None:
        """The header of the first received, not yet read frame of ``kind``, if any (a peer
        that stops a job sends its reason and closes: the reason may wait behind a send that
        already failed)."""
        for header, _ in self._frames:
            if header.get("k") == kind:
                return header
        return None

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
