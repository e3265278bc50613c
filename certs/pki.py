"""Layer: deployment tooling. A party's own key and self-signed certificate, made where it is used.

``keygen`` makes one name's ECDSA P-256 key (mode 0600, never overwritten unless asked) and a
self-signed certificate naming it (common name and DNS subject-alternative name, not a CA, TLS
client and server usage), and returns the key's fingerprint (``mpcnet.pins``) for the other
parties to pin. ``renew`` replaces one's own key (a key change or a certificate about to
expire) and keeps the old certificate beside it under another file name, so that the pins of
the old key still find their certificate until they are removed. No function here writes a key
for anyone but the name it is called for; only ``local_deployment`` (the one-command local
set-up: the demo and the tests, one operator on one machine) makes every name's key, in one
folder, and says so. Uses the ``cryptography`` package.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mpcnet.config import NAME_RE, Deployment
from mpcnet.errors import ConfigError
from mpcnet.pins import fingerprint

LEAF_DAYS = 825  # about 27 months, the longest lifetime browsers accepted for a TLS certificate


@dataclass(frozen=True)
class Made:
    """A key made for ``name``: its files and the fingerprint the others pin."""

    name: str
    cert: Path
    key: Path
    fingerprint: str


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def self_signed(name: str, days: int = LEAF_DAYS, not_before: dt.datetime | None = None
                ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new key for ``name`` and a certificate of it signed by itself, valid for ``days`` from
    ``not_before`` (default: five minutes ago; an earlier one makes an expired certificate for
    tests)."""
    if not NAME_RE.fullmatch(name):
        raise ConfigError(f"{name!r} is not a valid name: use 1-64 letters, digits, '_', '.', "
                          "'-', starting with a letter or digit")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    start = not_before or (_now() - dt.timedelta(minutes=5))
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            # the key identifiers tell OpenSSL which of two certificates of one name (a key
            # change) signed a certificate: without them it may try the other and refuse
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH,
                                                  ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    """``key`` to ``path``, readable by its owner only (mode 0600 from its creation on)."""
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def write_cert(cert: x509.Certificate, path: Path) -> None:
    """``cert`` to ``path`` (public: mode 0644)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def kept_name(name: str, cert: x509.Certificate) -> str:
    """The file name a certificate of ``name`` is kept under beside ``<name>.pem``."""
    return f"{name}.{fingerprint(cert)[7:19]}.pem"


def keygen(name: str, folder: Path, days: int = LEAF_DAYS, force: bool = False) -> Made:
    """Make ``name``'s own key ``folder/<name>.key`` and certificate ``folder/<name>.pem``;
    refuse to replace an existing key unless ``force`` (a key change is ``renew``)."""
    cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
    if key_path.exists() and not force:
        raise ConfigError(f"{key_path} exists; refusing to replace {name}'s key (to change "
                          f"it: mpc-certs renew {name}; to start over: --force)")
    key, cert = self_signed(name, days)
    write_key(key, key_path)
    write_cert(cert, cert_path)
    return Made(name, cert_path, key_path, fingerprint(cert))


def renew(name: str, folder: Path, days: int = LEAF_DAYS) -> tuple[Made, str]:
    """Replace ``name``'s own key in ``folder`` (it must be there: one renews only one's own).
    The old certificate stays as ``<name>.<fingerprint>.pem``. The new key and its old
    fingerprint."""
    cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
    try:
        old = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"no certificate of {name} to renew at {cert_path} ({exc})") from None
    if not key_path.is_file():
        raise ConfigError(f"{key_path} not found: only the holder of {name}'s key renews it "
                          "(on its own machine)")
    write_cert(old, folder / kept_name(name, old))
    return keygen(name, folder, days, force=True), fingerprint(old)


def local_deployment(dep: Deployment, force: bool = False) -> list[Made]:
    """The one-command local set-up: a key for every server and client of ``dep``, all in
    its ``[tls] dir``, each pinned in its file. One operator then holds every key: right for
    a demonstration or a test on one machine, never for a deployment of several
    organisations (each makes its own key: ``keygen``)."""
    from mpcnet.certs.pinfile import set_pins

    for name in dep.names:
        if dep.identity(name) != (dep.tls_dir / f"{name}.pem", dep.tls_dir / f"{name}.key"):
            raise ConfigError(f"{dep.path}: {name} has cert/key paths of its own; the local "
                              f"set-up writes every key to {dep.tls_dir}/<name>.key")
    existing = [n for n in dep.names if (dep.tls_dir / f"{n}.key").exists()]
    if existing and not force:
        raise ConfigError(f"{dep.tls_dir} already holds the keys of {', '.join(existing)}; "
                          "pass --force to replace every key of this local deployment")
    made = [keygen(name, dep.tls_dir, force=True) for name in dep.names]
    set_pins(dep.path, {m.name: [m.fingerprint] for m in made})
    return made
