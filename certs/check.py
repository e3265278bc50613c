"""Layer: deployment tooling. ``mpc-certs check``: a deployment folder against its file's pins.

For every name the file lists: its pins, whether a certificate for each lies in ``[tls] dir``
and how long it stays valid. For every private key in the folder: whose it is. A folder of one
organisation holds its own key only (``--name``); a key of another name, a pin with no
certificate or an expired certificate is a problem, a certificate expiring within ``--days``
a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from mpcnet.config import Deployment
from mpcnet.pins import days_left, fingerprint, pinned_certificates, read_certificates


@dataclass
class Report:
    """What ``check`` found: lines to print, and which of them are problems."""

    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        self.problems.append(text)

    def warn(self, text: str) -> None:
        self.warnings.append(text)


def key_owner(path: Path, owners: dict[str, str]) -> str | None:
    """Whose key the file at ``path`` is (by its public key's fingerprint), if anyone's."""
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    return owners.get(fingerprint(key.public_key()))  # type: ignore[arg-type]


def check(dep: Deployment, me: str | None = None, days: float = 30.0) -> Report:
    """Check ``dep``'s folder; ``me``: the one name whose key this folder may hold."""
    report = Report()
    pinned = pinned_certificates(dep)
    for name in dep.names:
        role = "server" if dep.is_server(name) else dep.client(name).role
        pins = dep.pins(name)
        # a server's copy admits by its pins; a client's need not pin the other clients
        if not pins and (me is None or dep.is_server(me) or dep.is_server(name)):
            report.warn(f"{name}: no pin; nobody is admitted as {name} yet")
        for pin in pins:
            cert = next((c for c in pinned.get(name, []) if fingerprint(c) == pin), None)
            if cert is None:
                report.problem(f"{name}: no certificate in {dep.tls_dir} holds the pinned key "
                               f"{pin}; put the one {name} sent there (mpc-certs pin)")
                continue
            left = days_left(cert)
            report.lines.append(f"{name:<16} {role:<12} {pin}  {left:7.1f} days left")
            if left < 0:
                report.problem(f"{name}: the certificate of {pin} expired; {name} makes a new "
                               "key (mpc-certs renew) for the others to pin")
            elif left < days:
                report.warn(f"{name}: the certificate of {pin} expires in {left:.0f} days; "
                            f"{name} renews it (mpc-certs renew) and the others pin the new one")
    owners = {fingerprint(c): n for n, certs in pinned.items() for c in certs}
    for path in sorted(dep.tls_dir.glob("*.key")) if dep.tls_dir.is_dir() else []:
        owner = key_owner(path, owners)
        if owner is None:
            report.warn(f"{path}: a private key whose key no pinned certificate holds")
        elif me is not None and owner != me:
            report.problem(f"{path} is the private key of {owner}: only {owner}'s own "
                           "machine may hold it")
    keys = [key_owner(p, owners) for p in dep.tls_dir.glob("*.key")] if dep.tls_dir.is_dir() \
        else []
    if me is not None and me not in keys:
        report.problem(f"{me}: its own key is not in {dep.tls_dir} or not pinned for it")
    if me is None and len({k for k in keys if k}) > 1:
        report.warn(f"{dep.tls_dir} holds the private keys of {len(set(keys) - {None})} names: "
                    "one operator holds them all (right for a local set-up only)")
    pinned_files = {fingerprint(c) for certs in pinned.values() for c in certs}
    for path, cert in read_certificates(dep.tls_dir).items():
        if fingerprint(cert) not in pinned_files:
            report.lines.append(f"(ignored: {path.name} holds a key the file does not pin)")
    return report
