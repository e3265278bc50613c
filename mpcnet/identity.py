"""Layer: deployment. Whom a certificate names: one rule for servers, clients and signed requests.

A certificate issued by the deployment's CA names exactly one identity, its common name, which
must also be one of its DNS subject-alternative names. A server's certificate may act as a TLS
server and carries its host names besides (so that dialers can check them); a client's
certificate may act as a TLS client only and carries its name alone. So no certificate can
stand for two identities, and a client's certificate cannot pass for a server's (``mpc-certs``
issues exactly these; ``certs/pki.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mpcnet.errors import HandshakeError


@dataclass(frozen=True)
class Identity:
    """The one name a certificate stands for, and whether it is a server's certificate."""

    name: str
    serves: bool


def identity_of(cert: x509.Certificate) -> Identity:
    """The identity ``cert`` names, or ``HandshakeError`` saying why it names none."""
    common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(common) != 1 or not isinstance(common[0].value, str):
        raise HandshakeError("the certificate must have exactly one common name (its identity)")
    name = common[0].value
    try:
        dns = cert.extensions.get_extension_for_class(
            x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        dns = []
    if name not in dns:
        raise HandshakeError(f"the certificate of {name!r} does not list its name among its "
                             "DNS names; make it with mpc-certs")
    try:
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        serves = ExtendedKeyUsageOID.SERVER_AUTH in usage
    except x509.ExtensionNotFound:
        serves = True  # no restriction: it may act as a server
    if not serves and dns != [name]:
        raise HandshakeError(f"the client certificate of {name!r} names {dns}: a client "
                             "certificate must name its client alone")
    return Identity(name, serves)
