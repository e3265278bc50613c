"""Layer: network. The wire vocabulary: every message of a server, a client or a job mesh.

Each message is a frozen dataclass; ``encode`` makes the frame header of one (``framing``
carries it, with an array body where the message has one), ``decode`` reads a header back and
raises ``PeerError`` naming what is malformed. One codec turns an error into a frame and back
(``Refused``), so the same typed error that a server raises is what the client or the peer
raises, through its constructor, with its message and, for ``CheatingDetected``, its check.

A connection starts with a hello: ``ClientHello`` opens a session of ``Request`` / ``Ok`` (or
``Refused``) pairs; ``PeerHello`` comes from another server (a reachability probe, the
coordinator starting a job with its specification, or a member joining a job's mesh). Within
a job, protocol arrays travel as ``JobArray``; a server that stops a job tells its peers why
with ``Stop``. Uploads and fetches move arrays as ``NamedArray``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mpcnet import errors
from mpcnet.errors import CheatingDetected, MPCError, PeerError
from mpcnet.net.framing import Frame, large_message, read_large_message


@dataclass(frozen=True)
class ClientHello:
    """A client (owner or analyst, or a server checking itself) opens a session."""

    name: str


@dataclass(frozen=True)
class PeerHello:
    """Another server: a ``probe``, the coordinator starting ``job`` with ``spec``, or a member
    joining the mesh of ``job``."""

    sender: str
    job: str | None = None
    spec: dict[str, Any] | None = None
    probe: bool = False


@dataclass(frozen=True)
class Request:
    """One operation of a client session (``op`` and its arguments)."""

    op: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Ok:
    """A successful answer with its fields (any size: a long one travels as a body)."""

    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Refused:
    """An error answer: the error the other end raised."""

    error: MPCError


@dataclass(frozen=True)
class JobArray:
    """One protocol message of job ``job`` (the array is the body)."""

    job: str


@dataclass(frozen=True)
class NamedArray:
    """One named array of an upload or a fetch (the array is the body), or a block of its
    rows from row ``start`` on (large uploads arrive a block at a time)."""

    name: str
    start: int = 0


@dataclass(frozen=True)
class Stop:
    """A server stops job ``job``: why, and the active-security check that failed, if one
    did (so that every honest server records the check, whichever one detected it)."""

    job: str
    reason: str
    check: str | None = None


Message = ClientHello | PeerHello | Request | Ok | Refused | JobArray | NamedArray | Stop


# -- errors ---------------------------------------------------------------------------------
def error_header(exc: MPCError) -> dict[str, Any]:
    """The frame fields of an error: its type, message and check."""
    out = {"type": type(exc).__name__, "msg": str(exc)}
    if isinstance(exc, CheatingDetected):
        out["check"] = exc.check
    return out


def error_of(fields: dict[str, Any], prefix: str = "") -> MPCError:
    """The typed error of ``error_header``'s fields, its message prefixed with ``prefix``
    (who said it); an unknown type becomes ``MPCError``."""
    kind, msg = str(fields.get("type", "MPCError")), prefix + str(fields.get("msg", "error"))
    if kind == "CheatingDetected":
        return CheatingDetected(str(fields.get("check", "")), message=msg)
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, MPCError) and cls is not CheatingDetected:
        return cls(msg)
    return MPCError(msg)


# -- the codec ------------------------------------------------------------------------------
def encode(message: Message) -> Frame:
    """The frame (header, body) of ``message``; array messages get their body from the
    sender (``framing.FrameProtocol.send``)."""
    match message:
        case ClientHello(name):
            return {"k": "hello", "as": "client", "name": name}, None
        case PeerHello(sender, job, spec, probe):
            header: dict[str, Any] = {"k": "hello", "as": "peer", "from": sender}
            if probe:
                header["probe"] = True
            if job is not None:
                header["job"] = job
            if spec is not None:
                header["spec"] = spec
            return header, None
        case Request(op, args):
            return large_message({"op": op, **args}, "req")  # an upload of 20,000 columns
        case Ok(fields):
            return large_message(fields, "ok")
        case Refused(error):
            return {"k": "err", **error_header(error)}, None
        case JobArray(job):
            return {"k": "a", "j": job}, None
        case NamedArray(name, start):
            return {"k": "a", "name": name} | ({"start": start} if start else {}), None
        case Stop(job, reason, check):
            return {"k": "err", "j": job, "msg": reason} | ({"check": check} if check else {}), None
    raise TypeError(f"not a wire message: {message!r}")


def decode(header: dict[str, Any], body: np.ndarray | None = None, peer: str = "peer"
           ) -> Message:
    """The message of a received frame; ``PeerError`` naming ``peer`` if it is none."""
    kind = header.get("k")

    def text(key: str) -> str:
        value = header.get(key)
        if not isinstance(value, str):
            raise PeerError(f"{peer} sent a malformed {kind!r} message ({key} missing)")
        return value

    if kind == "hello":
        if header.get("as") == "peer":
            job, spec = header.get("job"), header.get("spec")
            if (job is not None and not isinstance(job, str)) or (
                    spec is not None and not isinstance(spec, dict)):
                raise PeerError(f"{peer} sent a malformed peer hello")
            return PeerHello(text("from"), job, spec, bool(header.get("probe")))
        name = header.get("name")
        return ClientHello(name if isinstance(name, str) else "")
    if kind == "req":
        fields = read_large_message(header, body)
        op = fields.get("op")
        if not isinstance(op, str):
            raise PeerError(f"{peer} sent a malformed 'req' message (op missing)")
        return Request(op, {k: v for k, v in fields.items() if k not in ("k", "op")})
    if kind == "ok":
        fields = read_large_message(header, body)
        return Ok({k: v for k, v in fields.items() if k != "k"})
    if kind == "err":
        if "j" in header:
            check = header.get("check")
            return Stop(text("j"), str(header.get("msg", "")),
                        check if isinstance(check, str) and check else None)
        return Refused(error_of(header))
    if kind == "a":
        if "j" in header:
            return JobArray(text("j"))
        start = header.get("start", 0)
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            raise PeerError(f"{peer} sent a malformed array block (start {start!r})")
        return NamedArray(text("name"), start)
    raise PeerError(f"{peer} sent an unknown {kind!r} message")
