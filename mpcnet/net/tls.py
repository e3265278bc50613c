"""Layer: network. Mutually authenticated TLS 1.3 connections and the TLS channel.

Every server and client holds its own key and a self-signed certificate (``mpc-certs
keygen``). Both ends of every connection present theirs, and each checks the other's against
the pins of its own deployment file (``mpcnet.pins``): a dialer checks after the handshake that
the server it dialed presented a key pinned for that server's name; an acceptor lets OpenSSL
verify a client certificate against the pinned certificates (TLS needs some trust store to ask
for one) and then checks that the key is pinned for the name it claims. No other trust exists:
no certificate authority, no host name.

``TLSChannel`` implements ``Channel`` over one framed connection per peer, so the round engine
and every protocol run over it unchanged. ``run`` starts an event loop, using uvloop when it is
installed (about twice the TLS throughput of the default loop, docs/design.md, section 5).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from cryptography import x509

from mpcnet.errors import (
    CheatingDetected,
    ConfigError,
    HandshakeError,
    MPCError,
    NotPinned,
    PeerError,
)
from mpcnet.net import wire
from mpcnet.net.channel import Channel
from mpcnet.net.framing import FrameProtocol
from mpcnet.pins import check_certificate, fingerprint

T = TypeVar("T")
log = logging.getLogger("mpcnet.net")


# -- event loop ----------------------------------------------------------------------------
def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on uvloop if installed, else on asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


# -- contexts ------------------------------------------------------------------------------
def load_identity(ctx: ssl.SSLContext, cert: Path, key: Path) -> None:
    """Present ``cert`` with ``key`` from now on (also on a context in use: a server that
    reloads after its key changed presents the new one on new connections)."""
    for what, p in (("certificate", cert), ("private key", key)):
        if not p.is_file():
            raise ConfigError(f"{what} {p} not found; make this host's key with `mpc-certs "
                              "keygen NAME` (or fix the [tls] dir or cert/key paths)")
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"certificate {cert} with key {key} cannot be loaded ({exc}); do they "
                          "belong together?") from None


def trust(ctx: ssl.SSLContext, pinned: str) -> None:
    """Add the pinned certificates ``pinned`` (PEM) to a server context's trust store. OpenSSL
    can only add: a name removed from the pins stays in the store of a running server, and the
    pin check after the handshake refuses it (``parties.server``)."""
    if pinned:
        ctx.load_verify_locations(cadata=pinned)


def server_context(cert: Path, key: Path, pinned: str) -> ssl.SSLContext:
    """Context of a listening server: TLS 1.3 only, a client certificate required and checked
    against the pinned certificates ``pinned`` (PEM)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.verify_mode = ssl.CERT_REQUIRED
    load_identity(ctx, cert, key)
    trust(ctx, pinned)
    return ctx


def client_context(cert: Path, key: Path) -> ssl.SSLContext:
    """Context of a dialer (client or server): TLS 1.3 only, presents our certificate. It
    checks no chain and no host name: ``dial`` checks the server's key against its pins."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    load_identity(ctx, cert, key)
    return ctx


# -- connections ---------------------------------------------------------------------------
def describe(name: str, host: str, port: int) -> str:
    return f"{name} ({host}:{port})"


async def dial(name: str, host: str, port: int, ctx: ssl.SSLContext, *, pins: tuple[str, ...],
               max_frame: int, deadline: float, handshake_timeout: float = 10.0,
               bound: str = "connect_timeout") -> FrameProtocol:
    """Connect to server ``name`` at host:port, which must present a key among ``pins`` (the
    fingerprints the deployment pins for ``name``), retrying with exponential backoff until
    ``deadline`` (a ``time.monotonic()`` instant). Raises ``NotPinned`` or ``HandshakeError``
    at once when the identity check fails (retrying would not help) and ``PeerError`` at the
    deadline.

    Every attempt (TCP connect and TLS handshake) ends by the deadline too, so a peer that
    accepts TCP but never completes the handshake (a stopped process: the kernel accepts for
    it) fails the dial by then. ``bound`` names the deployment setting the deadline comes
    from, for the error message."""
    loop = asyncio.get_running_loop()
    label = describe(name, host, port)
    delay, attempt, last = 0.05, 0, ""
    while True:
        attempt += 1
        wait = max(min(handshake_timeout, deadline - time.monotonic()), 0.01)
        try:
            # the outer timeout fires first, so a slow handshake always reads as a timeout
            async with asyncio.timeout(wait):
                _, proto = await loop.create_connection(
                    lambda: FrameProtocol(max_frame, label), host, port, ssl=ctx,
                    server_hostname=name, ssl_handshake_timeout=wait + 1.0)
            try:
                check_certificate(name, proto.peer_certificate(), pins, label)
            except HandshakeError:
                proto.close()
                raise
            proto.peer_name = name
            return proto
        except ssl.SSLError as exc:
            raise HandshakeError(f"{label}: TLS handshake failed ({exc.reason or exc}); does "
                                 "it pin our key?") from None
        except TimeoutError:
            last = (f"no TLS handshake within {wait:.1f} s (the port accepts connections but "
                    "the server does not answer: stopped, frozen or overloaded?)")
        except OSError as exc:
            last = str(exc) or type(exc).__name__
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PeerError(f"cannot reach {label} after {attempt} attempt(s): {last}. Is "
                            f"`mpc-party --name {name}` running there and its port open? "
                            f"({bound} in the deployment file bounds the wait)")
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, 1.0)


def not_admitted(label: str, cert: Path, exc: PeerError) -> NotPinned:
    """The error of a server that closed a fresh session before answering its hello: with TLS
    1.3 this is how a server refuses a client certificate it does not trust (the client's side
    of the handshake completed before the server decided), so most likely its deployment file
    does not pin our key."""
    try:
        ours = fingerprint(x509.load_pem_x509_certificate(cert.read_bytes()))
    except (OSError, ValueError):
        ours = "(unreadable)"
    return NotPinned(f"{label} refused the session before answering ({exc}): most likely its "
                     f"deployment file does not pin our key {ours} (or the certificate {cert} "
                     f"expired); send its operator {cert.name} to pin (mpc-certs pin), then it "
                     "reloads (mpc-party --reload)")


class TLSChannel(Channel):
    """A party's end of the mesh of one job: one framed TLS connection per peer.

    Each array travels as one frame tagged with the job id; a frame of another kind or job is
    a protocol violation (``PeerError``). Sends return at once; receives wait for the peer.
    """

    def __init__(self, party: int, n_parties: int, job: str,
                 conns: dict[int, FrameProtocol]) -> None:
        self.party = party
        self.n_parties = n_parties
        self.job = job
        self.conns = conns
        self.recv_timeout: float | None = None  # set below the engine's to name a silent peer

    async def send(self, peer: int, payload: np.ndarray) -> None:
        conn = self.conns[peer]
        try:
            conn.send(wire.encode(wire.JobArray(self.job))[0], payload)
        except PeerError:
            stop = conn.queued("err")
            if stop is not None:  # it stopped the job and said why before closing
                raise self._stopped(conn, wire.decode(stop, None, conn.label)) from None
            raise

    async def recv(self, peer: int) -> np.ndarray:
        conn = self.conns[peer]
        header, array = await conn.recv(self.recv_timeout)
        message = wire.decode(header, array, conn.label)
        if isinstance(message, wire.JobArray) and message.job == self.job and array is not None:
            return array
        if isinstance(message, wire.Stop):
            raise self._stopped(conn, message)
        raise PeerError(f"{conn.label} sent an unexpected {header.get('k')!r} frame during "
                        f"job {self.job}")

    def _stopped(self, conn: FrameProtocol, stop: wire.Message) -> MPCError:
        """The error a peer's stop reports: ``CheatingDetected`` with the check it names (so
        every honest server records the check, whichever server detected it), else
        ``PeerError``."""
        if not isinstance(stop, wire.Stop):
            return PeerError(f"{conn.label} sent an unexpected frame during job {self.job}")
        reason = f"{conn.label} stopped job {self.job}: {stop.reason}"
        if stop.check:
            return CheatingDetected(stop.check, f"reported by {reason}")
        return PeerError(reason)

    def bytes_by_peer(self) -> dict[int, tuple[int, int]]:
        """(sent, received) bytes on the wire per peer, framing included."""
        return {p: (c.bytes_sent, c.bytes_recv) for p, c in self.conns.items()}

    def abort(self, reason: str, check: str | None = None) -> None:
        """Tell every peer the job stops here (and which active-security check failed, if
        one did) and drop the connections."""
        frame, _ = wire.encode(wire.Stop(self.job, reason, check))
        for conn in self.conns.values():
            if not conn.closed:
                try:
                    conn.send(frame)
                except PeerError:
                    pass
                conn.close()

    async def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
