"""Layer: deployment. The pins: the one public key (two during a key change) each name may use.

The deployment file is the trust root (docs/security.md, "Keys and pins"). Every server and
client makes its own key on its own machine (``mpc-certs keygen``) and hands out only its
self-signed certificate and the key's fingerprint, the SHA-256 of its DER SubjectPublicKeyInfo
(``sha256:<hex>``, RFC 7469's pin, in hex). The file pins, per name, the fingerprints it admits;
the certificates themselves lie in its ``[tls] dir``. There is no certificate authority: nobody
can admit or impersonate a name but by a key that every party's copy of the file pins for it.

Every check of a peer, whether the TLS connection of a server or client or the signature of a
job request, is ``check_certificate``: the certificate names the expected identity
(``mpcnet.identity``), its key is pinned for that name, and it is within its dates. A TLS
handshake proves that the peer holds the key of the certificate it presents (TLS 1.3
CertificateVerify), so the pin check after it authenticates the peer.

``pinned_keys(dep, name)`` answers "which public keys does the deployment pin for ``name``"
(signed manifests and requests are checked with it); keep its name stable.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes

from mpcnet.config import Deployment
from mpcnet.errors import HandshakeError, NotPinned
from mpcnet.identity import identity_of

log = logging.getLogger("mpcnet.pins")


def fingerprint(item: x509.Certificate | PublicKeyTypes) -> str:
    """``sha256:<hex>`` of the DER SubjectPublicKeyInfo of a certificate's key or of a key."""
    key = item.public_key() if isinstance(item, x509.Certificate) else item
    der = key.public_bytes(serialization.Encoding.DER,
                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(der).hexdigest()


def check_certificate(name: str, cert: x509.Certificate, pinned: tuple[str, ...], where: str,
                      now: float | None = None) -> None:
    """``cert`` may stand for ``name``: it names ``name``, its key is one of ``pinned``, and
    ``now`` (default: the clock) is within its dates. ``NotPinned`` or ``HandshakeError``
    naming ``where`` (who presented it, or the deployment file) and the remedy otherwise."""
    who = identity_of(cert).name
    if who != name:
        raise HandshakeError(f"{where}: its certificate names {who!r}, not {name!r}")
    fp = fingerprint(cert)
    if fp not in pinned:
        raise NotPinned(f"{where}: the key {fp} of {name!r} is not pinned for {name!r} (pinned: "
                        f"{', '.join(pinned) or 'none'}); a participant is admitted only by the "
                        f"key its deployment file pins (mpc-certs pin, then mpc-party --reload)")
    moment = dt.datetime.fromtimestamp(time.time() if now is None else now, dt.UTC)
    if not cert.not_valid_before_utc <= moment <= cert.not_valid_after_utc:
        raise HandshakeError(f"{where}: the certificate of {name!r} is valid only from "
                             f"{cert.not_valid_before_utc:%Y-%m-%d} to "
                             f"{cert.not_valid_after_utc:%Y-%m-%d}; its owner makes a new key "
                             "(mpc-certs renew) for the others to pin")


def admit(dep: Deployment, cert: x509.Certificate, where: str, now: float | None = None) -> str:
    """The name ``cert`` stands for, if deployment ``dep`` pins its key for that name."""
    name = identity_of(cert).name
    check_certificate(name, cert, dep.pins(name), where, now)
    return name


def read_certificates(folder: Path) -> dict[Path, x509.Certificate]:
    """Every readable certificate (``*.pem``) in ``folder``; unreadable ones are skipped."""
    found = {}
    for path in sorted(folder.glob("*.pem")) if folder.is_dir() else []:
        try:
            found[path] = x509.load_pem_x509_certificate(path.read_bytes())
        except (OSError, ValueError) as exc:
            log.warning("%s is not a certificate (%s); ignored", path, exc)
    return found


def is_ca(cert: x509.Certificate) -> bool:
    """Whether ``cert`` may sign other certificates: never so for a pinned one (a participant
    cannot vouch for anyone, not even at the TLS layer)."""
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def pinned_certificates(dep: Deployment) -> dict[str, list[x509.Certificate]]:
    """Per name, the certificates in ``[tls] dir`` whose key ``dep`` pins for the name they
    name (a CA certificate never counts). The TLS servers trust exactly these."""
    found: dict[str, list[x509.Certificate]] = {}
    for cert in read_certificates(dep.tls_dir).values():
        try:
            name = identity_of(cert).name
        except HandshakeError:
            continue
        same = found.setdefault(name, [])
        if fingerprint(cert) in dep.pins(name) and not is_ca(cert) and cert not in same:
            same.append(cert)
    return found


def pinned_keys(dep: Deployment, name: str) -> list[PublicKeyTypes]:
    """The public keys deployment ``dep`` pins for ``name`` whose certificates lie in its
    ``[tls] dir``: what a signature by ``name`` must verify with (none: ``name`` is not
    admitted)."""
    return [c.public_key() for c in pinned_certificates(dep).get(name, [])]


def trust_store(dep: Deployment) -> str:
    """The PEM bundle a TLS server verifies client certificates against: every pinned
    certificate (the pin check after the handshake is what admits a name)."""
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii")
                   for certs in pinned_certificates(dep).values() for c in certs)


def unfound_pins(dep: Deployment) -> dict[str, list[str]]:
    """Per name, the pins with no certificate in ``[tls] dir`` (their holders cannot
    connect to a server that reads this folder)."""
    have = {fingerprint(c) for certs in pinned_certificates(dep).values() for c in certs}
    return {n: missing for n in dep.names if (missing := [p for p in dep.pins(n)
                                                           if p not in have])}


def days_left(cert: x509.Certificate, now: float | None = None) -> float:
    """Days until ``cert`` expires (negative once it has)."""
    moment = dt.datetime.fromtimestamp(time.time() if now is None else now, dt.UTC)
    return (cert.not_valid_after_utc - moment).total_seconds() / 86400
