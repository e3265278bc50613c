"""TLS transport: framing, pin checks, retries, and protocols running over real sockets."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cryptography import x509

from mpcnet.certs.pki import keygen, self_signed, write_cert, write_key
from mpcnet.client.local import free_ports
from mpcnet.errors import HandshakeError, NotPinned, PeerError
from mpcnet.net.engine import RoundEngine
from mpcnet.net.framing import PREFIX, FrameDecoder, FrameProtocol, encode
from mpcnet.net.tls import TLSChannel, client_context, dial, server_context
from mpcnet.pins import fingerprint
from mpcnet.schemes import rep3
from mpcnet.schemes.base import Shared


# -- framing (sans-IO) ---------------------------------------------------------------------
def _feed(dec: FrameDecoder, data: bytes, chunk: int) -> list[Any]:
    frames, pos = [], 0
    while pos < len(data):
        buf = dec.buffer()
        n = min(len(buf), chunk, len(data) - pos)
        buf[:n] = data[pos:pos + n]
        pos += n
        frames += dec.advance(n)
    return frames


def _wire(header: dict[str, Any], array: np.ndarray | None = None) -> bytes:
    head, body = encode(header, array)
    return head + (bytes(body) if body is not None else b"")


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
def test_frames_round_trip_in_any_chunking(chunk: int) -> None:
    rng = np.random.default_rng(1)
    arrays = [rng.integers(0, 2**63, (3, 5), dtype=np.uint64), np.zeros((0, 4), np.uint64),
              np.arange(10, dtype=np.int64)[::2], np.ones((2, 2, 2), np.uint8), None]
    data = b"".join(_wire({"k": "a", "i": i}, a) for i, a in enumerate(arrays))
    frames = _feed(FrameDecoder(1 << 20), data, chunk)
    assert [h["i"] for h, _ in frames] == list(range(len(arrays)))
    for (_, got), want in zip(frames, arrays, strict=True):
        if want is None:
            assert got is None
        else:
            assert got.dtype == want.dtype and np.array_equal(got, want)
            assert got.flags.writeable


def _corrupt(data: bytes, hlen: int | None = None, blen: int | None = None,
             magic: bytes | None = None) -> bytes:
    m, h, b = PREFIX.unpack(data[:PREFIX.size])
    return PREFIX.pack(magic or m, hlen if hlen is not None else h,
                       blen if blen is not None else b) + data[PREFIX.size:]


@pytest.mark.parametrize("mutate, words", [
    (lambda d: _corrupt(d, magic=b"HTTP"), "magic"),
    (lambda d: _corrupt(d, hlen=10**6), "header length"),
    (lambda d: _corrupt(d, blen=1 << 40), "exceeds the limit"),
    (lambda d: _corrupt(d, blen=16), "does not match"),
    (lambda d: d.replace(b"<u8", b"|O8"), "not allowed"),
])
def test_malformed_frames_are_refused(mutate: Any, words: str) -> None:
    data = mutate(_wire({"k": "a"}, np.arange(4, dtype=np.uint64)))
    with pytest.raises(PeerError, match=words):
        _feed(FrameDecoder(1 << 20, "bob (h:1)"), data, 1 << 20)


@pytest.mark.parametrize("shape", [[0, 2 ** 63], [0, 2 ** 62], [0, 1 << 20, 1 << 20, 1 << 20]])
def test_an_empty_array_with_a_huge_dimension_is_refused(shape: list[int]) -> None:
    """numpy would raise its own ValueError making such an empty array."""
    import msgpack
    packed = msgpack.packb({"k": "a", "dt": "<u8", "sh": shape})
    data = PREFIX.pack(b"MPC1", len(packed), 0) + packed
    with pytest.raises(PeerError, match="bad shape"):
        _feed(FrameDecoder(1024), data, 64)


def test_header_that_is_not_a_map_is_refused() -> None:
    import msgpack
    packed = msgpack.packb([1, 2])
    data = PREFIX.pack(b"MPC1", len(packed), 0) + packed
    with pytest.raises(PeerError, match="map"):
        _feed(FrameDecoder(1024), data, 64)


def test_sender_refuses_object_arrays() -> None:
    with pytest.raises(TypeError):
        encode({"k": "a"}, np.array([object()]))


# -- TLS -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Own keys of p0, p1, p2 and cli; rogue.* and rogue-p1.* are keys someone else made for
    the names cli and p1 (certificates of pinned names, not pinned)."""
    d = tmp_path_factory.mktemp("pki")
    for name in ("p0", "p1", "p2", "cli"):
        keygen(name, d)
    for file, name in (("rogue", "cli"), ("rogue-p1", "p1")):
        key, cert = self_signed(name)
        write_key(key, d / f"{file}.key")
        write_cert(cert, d / f"{file}.pem")
    return d


def _pins(pki: Path, name: str) -> tuple[str, ...]:
    return (fingerprint(x509.load_pem_x509_certificate((pki / f"{name}.pem").read_bytes())),)


def _trusted(pki: Path) -> str:
    return "".join((pki / f"{n}.pem").read_text() for n in ("p0", "p1", "p2", "cli"))


def _sctx(pki: Path, name: str, cert: str | None = None) -> Any:
    return server_context(pki / f"{cert or name}.pem", pki / f"{cert or name}.key",
                          _trusted(pki))


def _cctx(pki: Path, name: str) -> Any:
    return client_context(pki / f"{name}.pem", pki / f"{name}.key")


async def _listen(ctx: Any, port: int, accepted: asyncio.Queue[FrameProtocol]) -> Any:
    loop = asyncio.get_running_loop()

    def factory() -> FrameProtocol:
        proto = FrameProtocol(1 << 28, "incoming")
        proto.connected.add_done_callback(
            lambda f: accepted.put_nowait(proto) if not f.exception() else None)
        return proto
    return await loop.create_server(factory, "127.0.0.1", port, ssl=ctx)


async def _mesh(pki: Path, ports: list[int]) -> tuple[list[TLSChannel], list[Any]]:
    """Three TLS channels in one process: party i dials every j > i."""
    queues: list[asyncio.Queue[FrameProtocol]] = [asyncio.Queue() for _ in range(3)]
    servers = [await _listen(_sctx(pki, f"p{i}"), ports[i], queues[i]) for i in range(3)]
    conns: list[dict[int, FrameProtocol]] = [{}, {}, {}]
    for i in range(3):
        for j in range(i + 1, 3):
            c = await dial(f"p{j}", "127.0.0.1", ports[j], _cctx(pki, f"p{i}"),
                           pins=_pins(pki, f"p{j}"), max_frame=1 << 28,
                           deadline=time.monotonic() + 5)
            c.send({"k": "hello", "from": i})
            conns[i][j] = c
            inc = await queues[j].get()
            hello, _ = await inc.recv(timeout=5)
            assert fingerprint(inc.peer_certificate()) == _pins(pki, f"p{hello['from']}")[0]
            conns[j][i] = inc
    return [TLSChannel(i, 3, "job1", conns[i]) for i in range(3)], servers


def test_rep3_protocol_runs_over_tls_unchanged(pki: Path) -> None:
    x = np.arange(-50, 50, dtype=np.int64).view(np.uint64).reshape(10, 10)
    y = (np.arange(100, dtype=np.int64) * 7 - 300).view(np.uint64).reshape(10, 10)
    sx, sy = rep3.share(x), rep3.share(y)

    async def main() -> list[Any]:
        channels, servers = await _mesh(pki, free_ports(3))

        async def party(i: int) -> Any:
            eng = RoundEngine(channels[i], 10.0)
            s = await rep3.Rep3.setup(eng)
            with eng.phase("mul"):
                z = await s.mul(Shared(sx[i], 1), Shared(sy[i], 1))
            return await s.open(z), eng.report()
        try:
            return list(await asyncio.gather(*(party(i) for i in range(3))))
        finally:
            for ch in channels:
                await ch.close()
            for srv in servers:
                srv.close()

    out = asyncio.run(main())
    for value, report in out:
        assert np.array_equal(value, x * y)
        assert report["phases"]["mul"]["rounds"] == 1


def test_large_arrays_cross_in_both_directions_at_once(pki: Path) -> None:
    """Both ends send 8 MB before reading: sends never wait for the peer (no deadlock). The
    bodies go to the transport in WRITE_CHUNK pieces, the last one shorter."""
    big = [np.random.default_rng(i).integers(0, 2**63, (1 << 20) + 5 * i, dtype=np.uint64)
           for i in range(3)]

    async def main() -> None:
        channels, servers = await _mesh(pki, free_ports(3))
        engines = [RoundEngine(ch, 20.0) for ch in channels]
        got = await asyncio.gather(*(e.broadcast(big[e.party]) for e in engines))
        for received in got:
            for peer, arr in received.items():
                assert np.array_equal(arr, big[peer])
        for ch in channels:
            await ch.close()
        for srv in servers:
            srv.close()
    asyncio.run(main())


def test_peer_that_goes_away_is_named(pki: Path) -> None:
    async def main() -> None:
        channels, servers = await _mesh(pki, free_ports(3))
        for c in channels[1].conns.values():
            c.abort()
        channels[0].conns[1].set_label("p1 (127.0.0.1:1)")
        with pytest.raises(PeerError, match="p1"):
            await asyncio.wait_for(channels[0].recv(1), 5)
        for ch in channels:
            await ch.close()
        for srv in servers:
            srv.close()
    asyncio.run(main())


def test_silent_peer_times_out_naming_it(pki: Path) -> None:
    async def main() -> None:
        channels, servers = await _mesh(pki, free_ports(3))
        channels[0].recv_timeout = 0.3
        channels[0].conns[2].set_label("p2 (127.0.0.1:2)")
        t = time.monotonic()
        with pytest.raises(PeerError, match="p2.*no message within 0.3"):
            await channels[0].recv(2)
        assert time.monotonic() - t < 2
        for ch in channels:
            await ch.close()
        for srv in servers:
            srv.close()
    asyncio.run(main())


def test_unreachable_server_fails_at_the_deadline_naming_it(pki: Path) -> None:
    port = free_ports(1)[0]

    async def main() -> None:
        t = time.monotonic()
        with pytest.raises(PeerError, match=rf"p1 \(127.0.0.1:{port}\).*mpc-party --name p1"):
            await dial("p1", "127.0.0.1", port, _cctx(pki, "p0"), pins=_pins(pki, "p1"),
                       max_frame=1024, deadline=time.monotonic() + 0.6)
        assert 0.5 < time.monotonic() - t < 3
    asyncio.run(main())


def test_server_whose_key_is_not_pinned_is_refused(pki: Path) -> None:
    """A certificate of the pinned name p1 that someone else made: refused at once, naming
    the key it presents."""
    rogue = fingerprint(x509.load_pem_x509_certificate((pki / "rogue-p1.pem").read_bytes()))

    async def main() -> None:
        port = free_ports(1)[0]
        srv = await _listen(_sctx(pki, "p1", cert="rogue-p1"), port, asyncio.Queue())
        t = time.monotonic()
        with pytest.raises(NotPinned, match=f"{rogue} of 'p1' is not pinned"):
            await dial("p1", "127.0.0.1", port, _cctx(pki, "p0"), pins=_pins(pki, "p1"),
                       max_frame=1024, deadline=time.monotonic() + 5)
        assert time.monotonic() - t < 2  # no retrying
        srv.close()
    asyncio.run(main())


def test_server_name_must_match_its_certificate(pki: Path) -> None:
    async def main() -> None:
        port = free_ports(1)[0]
        srv = await _listen(_sctx(pki, "p2"), port, asyncio.Queue())
        with pytest.raises(HandshakeError, match="names 'p2', not 'p1'"):
            await dial("p1", "127.0.0.1", port, _cctx(pki, "p0"), pins=_pins(pki, "p1"),
                       max_frame=1024, deadline=time.monotonic() + 5)
        srv.close()
    asyncio.run(main())


def test_client_whose_key_is_not_pinned_is_refused_by_the_server(pki: Path) -> None:
    """The TLS server trusts the pinned certificates only: a certificate of the pinned name
    cli made by someone else does not complete a session."""
    async def main() -> None:
        port = free_ports(1)[0]
        accepted: asyncio.Queue[FrameProtocol] = asyncio.Queue()
        srv = await _listen(_sctx(pki, "p0"), port, accepted)
        ctx = client_context(pki / "rogue.pem", pki / "rogue.key")
        with pytest.raises(PeerError):  # TLS 1.3: the refusal arrives after the handshake
            conn = await dial("p0", "127.0.0.1", port, ctx, pins=_pins(pki, "p0"),
                              max_frame=1024, deadline=time.monotonic() + 5)
            conn.send({"k": "hello"})
            await conn.recv(timeout=5)
        assert accepted.empty()
        srv.close()
    asyncio.run(main())


def test_client_without_certificate_is_refused(pki: Path) -> None:
    import ssl

    async def main() -> None:
        port = free_ports(1)[0]
        accepted: asyncio.Queue[FrameProtocol] = asyncio.Queue()
        srv = await _listen(_sctx(pki, "p0"), port, accepted)
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx,
                                                       server_hostname="p0")
        writer.write(b"x" * 16)
        try:  # TLS 1.3: the server's refusal arrives after the client's handshake
            assert await asyncio.wait_for(reader.read(1), 5) == b""
        except (ssl.SSLError, ConnectionError):
            pass
        assert accepted.empty()
        writer.close()
        srv.close()
    asyncio.run(main())


def test_a_running_server_trusts_a_certificate_pinned_later(pki: Path, tmp_path: Path) -> None:
    """A reload adds the certificates of new participants to the trust store of the listening
    context in place: the next handshake of the newcomer completes."""
    from mpcnet.net.tls import trust

    newcomer = keygen("newcomer", tmp_path)

    async def attempt(port: int, accepted: asyncio.Queue[FrameProtocol]) -> bool:
        ctx = client_context(newcomer.cert, newcomer.key)
        conn = await dial("p0", "127.0.0.1", port, ctx, pins=_pins(pki, "p0"),
                          max_frame=1024, deadline=time.monotonic() + 5)
        conn.send({"k": "hello"})
        try:  # TLS 1.3: the server decides after the client's handshake is done
            inc = await asyncio.wait_for(accepted.get(), 1.0)
        except TimeoutError:
            assert conn.closed
            return False
        hello, _ = await inc.recv(timeout=5)
        conn.close()
        return bool(hello["k"] == "hello")

    async def main() -> None:
        port = free_ports(1)[0]
        accepted: asyncio.Queue[FrameProtocol] = asyncio.Queue()
        ctx = _sctx(pki, "p0")
        srv = await _listen(ctx, port, accepted)
        assert not await attempt(port, accepted)
        trust(ctx, newcomer.cert.read_text())
        assert await attempt(port, accepted)
        srv.close()
    asyncio.run(main())


def test_an_expired_server_certificate_is_refused(tmp_path: Path) -> None:
    import datetime as dt

    key, cert = self_signed("p1", days=1, not_before=dt.datetime.now(dt.UTC)
                            - dt.timedelta(days=3))
    write_key(key, tmp_path / "old.key")
    write_cert(cert, tmp_path / "old.pem")
    client = keygen("p0", tmp_path)

    async def main() -> None:
        port = free_ports(1)[0]
        srv = await _listen(server_context(tmp_path / "old.pem", tmp_path / "old.key",
                                           client.cert.read_text()), port, asyncio.Queue())
        with pytest.raises(HandshakeError, match="valid only from .*mpc-certs renew"):
            await dial("p1", "127.0.0.1", port, client_context(client.cert, client.key),
                       pins=(fingerprint(cert),), max_frame=1024,
                       deadline=time.monotonic() + 5)
        srv.close()
    asyncio.run(main())


def test_plain_tcp_is_not_served(pki: Path) -> None:
    async def main() -> None:
        port = free_ports(1)[0]
        accepted: asyncio.Queue[FrameProtocol] = asyncio.Queue()
        srv = await _listen(_sctx(pki, "p0"), port, accepted)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"MPC1" + bytes(200))
            await asyncio.sleep(0.2)
        assert accepted.empty()
        srv.close()
    asyncio.run(main())


def test_a_stop_names_the_failed_check_even_behind_a_failed_send(pki: Path) -> None:
    """A server that detects cheating tells its peers which check failed: they raise
    ``CheatingDetected`` with that check, also a peer whose next send fails because the
    connection is already closed (the reason waits in its receive queue)."""
    from mpcnet.errors import CheatingDetected

    async def main() -> None:
        channels, servers = await _mesh(pki, free_ports(3))
        channels[1].abort("p1: cheating detected: open consistency check failed",
                          "open consistency")
        with pytest.raises(CheatingDetected, match="reported by") as err:
            await asyncio.wait_for(channels[0].recv(1), 5)
        assert err.value.check == "open consistency"
        conn = channels[2].conns[1]
        deadline = time.monotonic() + 5
        while not conn.closed:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        with pytest.raises(CheatingDetected) as err:
            await channels[2].send(1, np.zeros(1, dtype=np.uint64))
        assert err.value.check == "open consistency"
        for ch in channels:
            await ch.close()
        for srv in servers:
            srv.close()
    asyncio.run(main())


def test_large_messages_travel_as_a_body() -> None:
    """A reply bigger than a frame header allows (a listing of hundreds of jobs) is sent as a
    msgpack body and read back whole; small ones stay in the header."""
    from mpcnet.net.framing import MAX_HEADER, encode, large_message, read_large_message

    small = {"jobs": [{"id": "a"}]}
    header, body = large_message(small, "ok")
    assert body is None and read_large_message(header, body) == {"k": "ok", **small}
    big = {"jobs": [{"id": f"{i:012x}", "state": "done", "error": "x" * 200}
                    for i in range(1000)]}
    header, body = large_message(big, "ok")
    assert body is not None
    prefix, view = encode(header, body)  # fits a frame, although the message is > MAX_HEADER
    assert len(prefix) < MAX_HEADER < body.nbytes
    assert read_large_message(header, body) == {"k": "ok", **big}
    with pytest.raises(PeerError):
        read_large_message(header, np.frombuffer(b"\xc1garbage", dtype=np.uint8))


def test_a_request_too_large_for_a_header_travels_as_a_body() -> None:
    """An upload's description lists every column: 20,000 names do not fit a 64 KB header."""
    from mpcnet.net import wire

    meta = {"columns": [f"feature_{j}" for j in range(20_000)], "exponents": [3] * 20_000}
    header, body = wire.encode(wire.Request("upload", {"meta": meta}))
    assert body is not None and "meta" not in header
    assert wire.decode(header, body) == wire.Request("upload", {"meta": meta})
    small = wire.encode(wire.Request("status", {}))
    assert small[1] is None and wire.decode(*small) == wire.Request("status", {})


def _ca_like(name: str) -> tuple[Any, x509.Certificate]:
    """A key and self-signed certificate for ``name`` that OpenSSL may take for an issuer:
    key usage keyCertSign, no basicConstraints (what a participant could send to be pinned)."""
    import datetime as dt

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(7)
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False,
                                         False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def test_a_trusted_certificate_without_ca_false_issues_no_client_certificate(
        pki: Path, tmp_path: Path) -> None:
    """Strict verification: a certificate in the trust store that does not say CA=false does
    not make a leaf it signed acceptable at the TLS layer (the pins keep such certificates out
    of the store too, ``mpcnet.pins.is_ca``)."""
    import datetime as dt

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding
    from cryptography.x509.oid import NameOID

    from mpcnet.net.tls import trust

    issuer_key, issuer = _ca_like("outsider")
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cli")]))
            .issuer_name(issuer.subject).public_key(key.public_key()).serial_number(8)
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("cli")]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                issuer_key.public_key()), critical=False)
            .sign(issuer_key, hashes.SHA256()))
    write_key(key, tmp_path / "leaf.key")
    write_cert(leaf, tmp_path / "leaf.pem")

    async def main() -> None:
        port = free_ports(1)[0]
        accepted: asyncio.Queue[FrameProtocol] = asyncio.Queue()
        ctx = _sctx(pki, "p0")
        trust(ctx, issuer.public_bytes(Encoding.PEM).decode("ascii"))
        srv = await _listen(ctx, port, accepted)
        conn = await dial("p0", "127.0.0.1", port,
                          client_context(tmp_path / "leaf.pem", tmp_path / "leaf.key"),
                          pins=_pins(pki, "p0"), max_frame=1024, deadline=time.monotonic() + 5)
        conn.send({"k": "hello"})
        with pytest.raises(TimeoutError):  # the server refused the chain: nothing arrives
            await asyncio.wait_for(accepted.get(), 1.0)
        conn.close()
        srv.close()
    asyncio.run(main())


def test_the_server_issues_no_session_tickets(pki: Path) -> None:
    """No TLS session resumption: a resumed session skips the certificate check, so a client
    whose pin was removed could come back on a ticket from before."""
    import ssl

    def connect(port: int) -> ssl.SSLSession | None:
        ctx = client_context(pki / "cli.pem", pki / "cli.key")
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                             server_hostname="p0") as s:
            s.sendall(encode({"k": "hello"})[0])
            s.recv(64)  # the server's answer; any ticket arrives before it
            return s.session

    async def main() -> None:
        port = free_ports(1)[0]
        accepted: asyncio.Queue[FrameProtocol] = asyncio.Queue()
        srv = await _listen(_sctx(pki, "p0"), port, accepted)

        async def answer() -> None:
            inc = await accepted.get()
            await inc.recv(timeout=5)
            inc.send({"k": "ok"})
        answering = asyncio.ensure_future(answer())
        session = await asyncio.to_thread(connect, port)
        await answering
        assert session is not None and not session.has_ticket
        srv.close()
    asyncio.run(main())
