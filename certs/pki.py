"""Layer: deployment tooling. Make a deployment's CA and its servers' and clients' certificates.

One private CA per deployment signs every certificate. A server's certificate carries its name
and its host (DNS or IP) as subject-alternative names and may act as TLS server and client (it
dials its peers); a client's carries its name and may only act as TLS client. Keys are ECDSA
P-256 and written readable by their owner only (mode 0600). Uses the ``cryptography`` package.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mpcnet.config import Deployment

CA_DAYS = 3650
LEAF_DAYS = 825


@dataclass(frozen=True)
class Issued:
    name: str
    cert: Path
    key: Path | None
    fingerprint: str  # SHA-256 of the DER certificate, hex with colons


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()


def make_ca(name: str = "mpcnet deployment CA", days: int = CA_DAYS
            ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def issue(ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, name: str, *,
          server: bool, hosts: tuple[str, ...] = (), days: int = LEAF_DAYS,
          not_before: dt.datetime | None = None
          ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A key and a certificate for ``name`` signed by the CA (``days`` may be negative with an
    earlier ``not_before`` to make an expired certificate for tests)."""
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(name)]
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            if h != name:
                sans.append(x509.DNSName(h))
    start = not_before or (_now() - dt.timedelta(minutes=5))
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if server
                                                  else [])
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return key, cert


def write_pair(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate, cert_path: Path,
               key_path: Path) -> None:
    _write_key(key, key_path)
    _write_cert(cert, cert_path)


def init_deployment(dep: Deployment, out: Path | None = None, force: bool = False
                    ) -> list[Issued]:
    """Create the CA and every server's and client's key and certificate.

    With ``out``, files go there as ``ca.pem``, ``<name>.pem``, ``<name>.key`` (and the
    configured paths are ignored); without it, to the paths the deployment file names. The CA
    key is written beside the CA certificate as ``ca.key``; keep it offline after this step.
    """
    def paths(name: str, cert: Path, key: Path) -> tuple[Path, Path]:
        return (out / f"{name}.pem", out / f"{name}.key") if out else (cert, key)

    ca_cert_path = out / "ca.pem" if out else dep.ca
    ca_key_path = ca_cert_path.with_name("ca.key")
    targets = [ca_cert_path, ca_key_path]
    targets += [p for s in dep.servers for p in paths(s.name, s.cert, s.key)]
    targets += [p for c in dep.clients for p in paths(c.name, c.cert, c.key)]
    existing = [str(p) for p in targets if p.exists()]
    if existing and not force:
        from mpcnet.errors import ConfigError
        raise ConfigError(f"refusing to overwrite existing files ({', '.join(existing[:3])}"
                          f"{'...' if len(existing) > 3 else ''}); pass --force to replace "
                          "the whole deployment's certificates")
    ca_key, ca_cert = make_ca()
    write_pair(ca_key, ca_cert, ca_cert_path, ca_key_path)
    issued = [Issued("CA", ca_cert_path, ca_key_path, fingerprint(ca_cert))]
    for s in dep.servers:
        hosts = tuple(dict.fromkeys([s.host, "localhost", "127.0.0.1"] if s.host in (
            "127.0.0.1", "localhost") else [s.host]))
        key, cert = issue(ca_key, ca_cert, s.name, server=True, hosts=hosts)
        cp, kp = paths(s.name, s.cert, s.key)
        write_pair(key, cert, cp, kp)
        issued.append(Issued(s.name, cp, kp, fingerprint(cert)))
    for c in dep.clients:
        key, cert = issue(ca_key, ca_cert, c.name, server=False)
        cp, kp = paths(c.name, c.cert, c.key)
        write_pair(key, cert, cp, kp)
        issued.append(Issued(c.name, cp, kp, fingerprint(cert)))
    return issued
