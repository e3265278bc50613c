"""Layer: network. Mutually authenticated TLS 1.3 connections and the TLS channel.

Every server and client holds a key and a certificate signed by the deployment's CA
(``mpc-certs init``). Both ends of every connection present one, and each checks the other's
name against the deployment file: a dialer passes the expected server name as
``server_hostname`` (the certificate must carry it as a DNS subject-alternative name), and an
acceptor looks the client's certificate name up in the configuration. No other trust exists.

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

from mpcnet.errors import CheatingDetected, ConfigError, HandshakeError, MPCError, PeerError
from mpcnet.net import wire
from mpcnet.net.channel import Channel
from mpcnet.net.framing import FrameProtocol

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
def _load(ctx: ssl.SSLContext, ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.verify_mode = ssl.CERT_REQUIRED
    for what, p in (("CA certificate", ca), ("certificate", cert), ("private key", key)):
        if not p.is_file():
            raise ConfigError(f"{what} {p} not found; create the deployment's certificates with "
                              "`mpc-certs init --config <deploy.toml>` (or fix the [tls] paths)")
    try:
        ctx.load_verify_locations(cafile=str(ca))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"CA certificate {ca} cannot be loaded: {exc}") from None
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"certificate {cert} with key {key} cannot be loaded ({exc}); do they "
                          "belong together?") from None
    return ctx


def server_context(ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    """Context of a listening server: TLS 1.3 only, client certificate required."""
    return _load(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), ca, cert, key)


def client_context(ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    """Context of a dialer (client or server): verifies the server's name and presents ours."""
    ctx = _load(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), ca, cert, key)
    ctx.check_hostname = True
    return ctx


# -- connections ---------------------------------------------------------------------------
def describe(name: str, host: str, port: int) -> str:
    return f"{name} ({host}:{port})"


async def dial(name: str, host: str, port: int, ctx: ssl.SSLContext, *, max_frame: int,
               deadline: float, handshake_timeout: float = 10.0,
               bound: str = "connect_timeout") -> FrameProtocol:
    """Connect to server ``name`` at host:port, retrying with exponential backoff until
    ``deadline`` (a ``time.monotonic()`` instant). Raises ``HandshakeError`` at once when the
    TLS identity check fails (retrying would not help) and ``PeerError`` at the deadline.

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
            who = proto.peer_identity()  # the one identity rule, as for incoming connections
            if who.name != name or not who.serves:
                proto.close()
                raise HandshakeError(f"{label}: its certificate names {who.name!r}"
                                     f"{'' if who.serves else ' as a client'}, not the server "
                                     f"{name!r}")
            proto.peer_name = name
            return proto
        except ssl.SSLCertVerificationError as exc:
            raise HandshakeError(
                f"{label}: its certificate is not valid for this deployment "
                f"({exc.verify_message}); it must be signed by the deployment CA and name "
                f"{name!r}. Re-create certificates with `mpc-certs init` and check [tls] ca"
            ) from None
        except ssl.SSLError as exc:
            raise HandshakeError(f"{label}: TLS handshake failed ({exc.reason or exc}); is our "
                                 "certificate signed by the deployment CA?") from None
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
