"""Layer: deployment. Whom a certificate names: one rule for servers, clients and signed requests.

A certificate names exactly one identity, its common name, which must also be its DNS
subject-alternative name (``mpc-certs keygen`` makes exactly these; ``certs/pki.py``). The name
says only whom the certificate claims to be: whether the deployment admits that claim is the
pin check of ``mpcnet.pins`` (the key must be the one the deployment file pins for the name).
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

from mpcnet.config import NAME_RE
from mpcnet.errors import HandshakeError


@dataclass(frozen=True)
class Identity:
    """The one name a certificate stands for."""

    name: str


def identity_of(cert: x509.Certificate) -> Identity:
    """The identity ``cert`` names, or ``HandshakeError`` saying why it names none."""
    common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(common) != 1 or not isinstance(common[0].value, str):
        raise HandshakeError("the certificate must have exactly one common name (its identity)")
    name = common[0].value
    if not NAME_RE.fullmatch(name):
        raise HandshakeError(f"the certificate names {name[:80]!r}, which is not a name of a "
                             "deployment")
    try:
        dns = cert.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        dns = []
    if name not in dns:
        raise HandshakeError(f"the certificate of {name!r} does not list its name among its "
                             "DNS names; make it with mpc-certs keygen")
    return Identity(name)
