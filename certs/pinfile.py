"""Layer: deployment tooling. Pinning keys in a deployment file, in place.

``mpc-certs pin`` and ``unpin`` change the ``pin`` line of one ``[[servers]]`` or
``[[clients]]`` entry and leave every other line of the file as its operator wrote it
(comments included). The edited text is parsed again, and written (atomically) only if it
loads with exactly the pins intended. A pinned certificate is copied into the file's
``[tls] dir``, where the servers find the certificates they trust (``mpcnet.pins``).
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

from cryptography import x509

from mpcnet import config
from mpcnet.certs.pki import kept_name, write_cert
from mpcnet.errors import ConfigError, HandshakeError
from mpcnet.identity import identity_of
from mpcnet.pins import fingerprint, is_ca

TABLE_RE = re.compile(r"\s*\[")
ENTRY_RE = re.compile(r"\s*\[\[\s*(servers|clients)\s*\]\]")
NAME_LINE_RE = re.compile(r"\s*name\s*=\s*(\"[^\"]*\"|'[^']*')")
PIN_LINE_RE = re.compile(r"\s*pin\s*=")


def _entry_lines(lines: list[str], name: str, path: Path) -> tuple[int, int]:
    """The first and past-the-last line of the entry of ``name``."""
    starts = [i for i, line in enumerate(lines) if ENTRY_RE.match(line)]
    for start in starts:
        end = next((j for j in range(start + 1, len(lines)) if TABLE_RE.match(lines[j])),
                   len(lines))
        for line in lines[start + 1:end]:
            m = NAME_LINE_RE.match(line)
            if m and m.group(1)[1:-1] == name:
                return start, end
    raise ConfigError(f"{path}: no [[servers]] or [[clients]] entry named {name!r}; add it "
                      "(with its role) before pinning its key")


def _pin_line(pins: list[str]) -> str:
    if len(pins) == 1:
        return f'pin = "{pins[0]}"'
    return "pin = [" + ", ".join(f'"{p}"' for p in pins) + "]"


def set_pins(path: Path, pins: dict[str, list[str]]) -> None:
    """Make ``pins[name]`` the pins of every ``name`` in the deployment file at ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for name, fps in pins.items():
        start, end = _entry_lines(lines, name, path)
        at = next((i for i in range(start + 1, end) if PIN_LINE_RE.match(lines[i])), None)
        if at is None:  # after the entry's last key
            last_key = max(i for i in range(start + 1, end)
                           if lines[i].strip() and not lines[i].lstrip().startswith("#"))
            lines.insert(last_key + 1, _pin_line(fps))
            continue
        last = at
        if "[" in lines[at].split("=", 1)[1] and "]" not in lines[at]:  # a list over lines
            last = next((j for j in range(at, end) if "]" in lines[j]), at)
        lines[at:last + 1] = [_pin_line(fps)] if fps else []
    text = "\n".join(lines) + "\n"
    try:
        dep = config.parse(tomllib.loads(text), path.resolve())
    except (tomllib.TOMLDecodeError, ConfigError) as exc:
        raise ConfigError(f"{path}: the pins could not be written in place ({exc}); edit "
                          "the file by hand") from None
    wrong = [n for n, fps in pins.items() if list(dep.pins(n)) != list(dict.fromkeys(fps))]
    if wrong:
        raise ConfigError(f"{path}: the pin line of {', '.join(wrong)} could not be edited in "
                          "place; edit the file by hand")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_certificate(path: Path) -> tuple[str, x509.Certificate]:
    """The name a certificate file names and the certificate; ``ConfigError`` if it is none
    a participant may present (unreadable, nameless or a CA)."""
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        name = identity_of(cert).name
    except (OSError, ValueError, HandshakeError) as exc:
        raise ConfigError(f"{path} is not a certificate of a participant ({exc})") from None
    if is_ca(cert):
        raise ConfigError(f"{path} is a CA certificate: a participant's key vouches only for "
                          "itself (make it with mpc-certs keygen)")
    return name, cert


def pin(path: Path, cert_path: Path, replace: bool = False) -> tuple[str, str]:
    """Pin the key of the certificate at ``cert_path`` for the name it names, beside the
    name's other pins (a key change) or instead of them (``replace``), and copy the
    certificate into ``[tls] dir``. The name and the fingerprint pinned."""
    dep = config.load(path)
    name, cert = read_certificate(cert_path)
    fp = fingerprint(cert)
    pins = [fp] if replace else list(dict.fromkeys([*dep.pins(name), fp]))
    if len(pins) > config.MAX_PINS:
        raise ConfigError(f"{path}: {name} would have {len(pins)} pins; unpin the old ones "
                          f"first (mpc-certs unpin --config {path} {name} FINGERPRINT)")
    _entry_lines(path.read_text(encoding="utf-8").splitlines(), name, path)
    target = dep.tls_dir / f"{name}.pem"
    if target.exists() and target.resolve() != cert_path.resolve():
        try:
            same = x509.load_pem_x509_certificate(target.read_bytes()) == cert
        except ValueError:
            same = False
        target = target if same else dep.tls_dir / kept_name(name, cert)
    if target.resolve() != cert_path.resolve():
        write_cert(cert, target)
    set_pins(path, {name: pins})
    return name, fp


def unpin(path: Path, name: str, fp: str | None = None) -> list[str]:
    """Remove pin ``fp`` of ``name`` (every pin of it without ``fp``: nobody is admitted as
    ``name`` any more). The pins left."""
    dep = config.load(path)
    if fp is not None and fp not in dep.pins(name):
        raise ConfigError(f"{path}: {fp} is not a pin of {name} (pins: "
                          f"{', '.join(dep.pins(name)) or 'none'})")
    left = [p for p in dep.pins(name) if fp is not None and p != fp]
    set_pins(path, {name: left})
    return left
