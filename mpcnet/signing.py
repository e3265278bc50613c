"""Layer: deployment. Signed statements of what was stored, and the salted digests they sign.

An owner signs, when it uploads, the digest of every component of its contribution's
replicated sharing (every server's, not only one's); a server signs, when a job stores a result
or a model, the digests of its own components. The servers keep these statements with what
they store, so a server that lost its disk can take its components back from the other holders
and check every one against a signature that no single peer can forge (``parties.rebuild``,
docs/reliability.md).

A component's digest is SHA-256 over a domain tag, a 32-byte salt, the component's shape and
its words. The salt is known to the component's holders only (the owner sends it with the
shares; a job derives it from the holders' common key), so the digest binds the words (a peer
cannot send others that match) and hides them from the servers that do not hold the component:
they hold every other component, and an unsalted digest would let them test a guess of the
values themselves.

Statements are ECDSA P-256 signatures with SHA-256 (the keys of the deployment's parties) over
the canonical JSON of the signer's name and the statement, prefixed with a domain tag so that
neither a job request nor any other signed message can pass for one. Which key is trusted for
a name is answered by one function, ``trusted_keys``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mpcnet.config import NAME_RE, Deployment
from mpcnet.errors import AccessDenied, HandshakeError, InputError
from mpcnet.identity import identity_of
from mpcnet.pins import fingerprint

DOMAIN = b"mpcnet signed statement v1\n"
COMPONENT_DOMAIN = b"mpcnet component v1\n"
SALT_BYTES = 32
MAX_CERT_BYTES = 8192
HEX_RE = re.compile(r"[0-9a-f]*")


# -- whose key ---------------------------------------------------------------------------------
def trusted_keys(dep: Deployment, name: str, certificate: bytes
                 ) -> list[ec.EllipticCurvePublicKey]:
    """The public keys the deployment trusts for party ``name``, which presents
    ``certificate`` (PEM) with what it signed: the certificate's key, if it names ``name``
    and the deployment file pins that key for ``name`` (``mpcnet.pins``, the check of every
    TLS peer and job request). Its validity period is not checked: what a party signed stays
    signed after its certificate expires (but not after its key is unpinned). ``AccessDenied``
    saying why otherwise."""
    try:
        cert = x509.load_pem_x509_certificate(certificate)
        who = identity_of(cert)
    except (ValueError, TypeError, HandshakeError):
        raise AccessDenied(f"the statement's certificate for {name!r} cannot be read as one "
                           "of a party's") from None
    if who.name != name or name not in dep.names:
        raise AccessDenied(f"the statement is signed with the certificate of {who.name!r}, "
                           f"not with one the deployment trusts for {name!r}")
    if fingerprint(cert) not in dep.pins(name):
        raise AccessDenied(f"the statement of {name!r} is signed with the key "
                           f"{fingerprint(cert)}, which the deployment file does not pin for "
                           f"{name!r}")
    public = cert.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey):
        raise AccessDenied(f"the certificate of {name!r} does not hold an ECDSA key")
    return [public]


# -- component digests -------------------------------------------------------------------------
class ComponentHash:
    """The salted digest of one component (a uint64 array of ``shape``), fed a block of rows
    at a time in row order."""

    def __init__(self, salt: bytes, shape: tuple[int, ...]) -> None:
        if len(salt) != SALT_BYTES:
            raise ValueError(f"a component's salt has {SALT_BYTES} bytes, not {len(salt)}")
        self._h = hashlib.sha256(COMPONENT_DOMAIN + salt + json.dumps(list(shape)).encode()
                                 + b"\n")

    def update(self, block: np.ndarray) -> None:
        data = np.ascontiguousarray(block, dtype=np.uint64)
        if data.size:
            self._h.update(data.data.cast("B"))

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def component_digest(salt: bytes, component: np.ndarray) -> str:
    """The salted digest of a whole component."""
    h = ComponentHash(salt, tuple(component.shape))
    h.update(component)
    return h.hexdigest()


def salt_of(text: Any) -> bytes:
    """A salt as it travels (hex), or ``InputError``."""
    if not isinstance(text, str) or len(text) != 2 * SALT_BYTES or not HEX_RE.fullmatch(text):
        raise InputError(f"a component's salt must be {2 * SALT_BYTES} hex digits")
    return bytes.fromhex(text)


# -- statements --------------------------------------------------------------------------------
def _payload(signer: str, statement: dict[str, Any]) -> bytes:
    body = {"signer": signer, "statement": statement}
    return DOMAIN + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Signed:
    """A statement (plain JSON data) with its signer's name, signature and certificate."""

    signer: str
    statement: dict[str, Any]
    signature: bytes
    certificate: bytes

    @classmethod
    def sign(cls, signer: str, statement: dict[str, Any], key_path: Path, cert_path: Path
             ) -> Signed:
        """``statement`` signed with ``signer``'s own key."""
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise InputError(f"{key_path}: not an ECDSA key; make the deployment's keys with "
                             "mpc-certs")
        signature = key.sign(_payload(signer, statement), ec.ECDSA(hashes.SHA256()))
        return cls(signer, statement, signature, cert_path.read_bytes())

    def to_wire(self) -> dict[str, Any]:
        return {"signer": self.signer, "statement": self.statement,
                "signature": self.signature.hex(),
                "certificate": self.certificate.decode("ascii")}

    @classmethod
    def from_wire(cls, wire: Any) -> Signed:
        """A signed statement as it arrived or was stored, or ``InputError`` saying what is
        malformed."""
        if not isinstance(wire, dict):
            raise InputError("no signed statement")
        signer, statement = wire.get("signer"), wire.get("statement")
        signature, cert = wire.get("signature"), wire.get("certificate")
        if not isinstance(signer, str) or not NAME_RE.fullmatch(signer) \
                or not isinstance(statement, dict):
            raise InputError("a signed statement needs its signer's name and a statement")
        if not isinstance(signature, str) or len(signature) > 300 \
                or not HEX_RE.fullmatch(signature) or len(signature) % 2 \
                or not isinstance(cert, str) or len(cert) > MAX_CERT_BYTES or not cert.isascii():
            raise InputError(f"the statement of {signer}: malformed signature or certificate")
        return cls(signer, statement, bytes.fromhex(signature), cert.encode("ascii"))

    def verify(self, dep: Deployment, signer: str) -> dict[str, Any]:
        """The statement, once it checks: signed by ``signer`` with the key the deployment
        trusts for it (``trusted_keys``); ``AccessDenied`` otherwise."""
        if self.signer != signer:
            raise AccessDenied(f"a statement of {self.signer!r} was presented as {signer!r}'s")
        payload = _payload(signer, self.statement)
        for key in trusted_keys(dep, signer, self.certificate):
            try:
                key.verify(self.signature, payload, ec.ECDSA(hashes.SHA256()))
                return self.statement
            except InvalidSignature:
                continue
        raise AccessDenied(f"the statement signed by {signer!r} does not verify: it was "
                           "changed or made without its key")
