"""Typed errors shared by every layer; each message names the party, peer or file and the remedy."""


class MPCError(Exception):
    """Base class of every error this project raises on purpose."""


class ConfigError(MPCError):
    """A configuration file or option is wrong."""


class RangeError(MPCError):
    """A value does not fit the fixed-point or ring range it must be encoded in."""


class InputError(MPCError):
    """A user input (CSV file, dataset name, k) is malformed or out of range."""


class PeerError(MPCError):
    """A peer could not be reached, went away, stalled or sent a malformed frame."""


class HandshakeError(PeerError):
    """TLS or identity check with a peer failed."""


class NotPinned(HandshakeError):
    """A peer's key is not one the deployment file pins for the name it claims (a stranger, a
    certificate of a pinned name made by someone else, or a participant removed)."""


class CheatingDetected(MPCError):
    """An active-security check failed: some server deviated from the protocol. ``message``
    replaces the standard text (an error relayed from another server keeps its words)."""

    def __init__(self, check: str, detail: str = "", *, message: str | None = None) -> None:
        self.check = check
        suffix = f" ({detail})" if detail else ""
        super().__init__(message or f"cheating detected: {check} check failed{suffix}")


class AccessDenied(MPCError):
    """A client asked for something its role does not allow."""


class StorageError(MPCError):
    """A stored file is missing, damaged or the data folder is unusable."""
