"""mpcnet.pins: a name is admitted only by a key its deployment file pins, within its dates."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest
from cryptography import x509

from mpcnet import config
from mpcnet.certs.pinfile import pin
from mpcnet.certs.pki import keygen, self_signed, write_cert, write_key
from mpcnet.client.local import write_config
from mpcnet.errors import HandshakeError, NotPinned
from mpcnet.pins import (
    admit,
    check_certificate,
    fingerprint,
    pinned_keys,
    trust_store,
    unfound_pins,
)


@pytest.fixture
def dep_file(tmp_path: Path) -> Path:
    path = write_config(tmp_path / "deploy", 3, ports=[7001, 7002, 7003])
    made = keygen("analyst", tmp_path / "analyst-machine")
    pin(path, made.cert)
    return path


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_the_fingerprint_is_the_sha256_of_the_public_key(tmp_path: Path) -> None:
    import hashlib

    from cryptography.hazmat.primitives import serialization

    cert = _cert(keygen("x", tmp_path).cert)
    der = cert.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)
    assert fingerprint(cert) == fingerprint(cert.public_key()) == \
        "sha256:" + hashlib.sha256(der).hexdigest()
    assert config.PIN_RE.fullmatch(fingerprint(cert))


def test_a_pinned_key_is_admitted_and_any_other_is_not(dep_file: Path, tmp_path: Path) -> None:
    dep = config.load(dep_file)
    mine = _cert(tmp_path / "analyst-machine" / "analyst.pem")
    assert admit(dep, mine, "client") == "analyst"
    _, someone_elses = self_signed("analyst")  # the pinned name, another key
    with pytest.raises(NotPinned, match=f"{fingerprint(someone_elses)} of 'analyst' is not "
                                        f"pinned .*pinned: {fingerprint(mine)}"):
        admit(dep, someone_elses, "client")
    _, stranger = self_signed("stranger")  # a name the file does not list
    with pytest.raises(NotPinned, match="pinned: none"):
        admit(dep, stranger, "client")
    with pytest.raises(HandshakeError, match="names 'analyst', not 'bob'"):
        check_certificate("bob", mine, dep.pins("analyst"), "peer")


def test_a_pinned_key_outside_its_dates_is_refused(tmp_path: Path) -> None:
    _, cert = self_signed("analyst", days=10,
                          not_before=dt.datetime.now(dt.UTC) - dt.timedelta(days=5))
    pins = (fingerprint(cert),)
    check_certificate("analyst", cert, pins, "peer")
    with pytest.raises(HandshakeError, match="valid only from"):
        check_certificate("analyst", cert, pins, "peer", now=time.time() + 6 * 86400)
    with pytest.raises(HandshakeError, match="valid only from"):
        check_certificate("analyst", cert, pins, "peer", now=time.time() - 6 * 86400)


def test_pinned_keys_and_the_trust_store_hold_the_pinned_certificates_only(
        dep_file: Path, tmp_path: Path) -> None:
    dep = config.load(dep_file)
    mine = _cert(tmp_path / "analyst-machine" / "analyst.pem")
    assert pinned_keys(dep, "analyst") == [mine.public_key()]
    assert pinned_keys(dep, "bob") == []
    key, other = self_signed("analyst")  # lies in the folder, not pinned
    write_key(key, tmp_path / "other.key")
    write_cert(other, dep.tls_dir / "stray.pem")
    store = trust_store(config.load(dep_file))
    assert store.count("BEGIN CERTIFICATE") == 1
    assert _cert_from(store) == mine
    # a key change: both keys pinned, both certificates found
    pin(dep_file, dep.tls_dir / "stray.pem")
    dep = config.load(dep_file)
    assert len(pinned_keys(dep, "analyst")) == 2
    assert unfound_pins(dep) == {}
    for path in dep.tls_dir.glob("*.pem"):  # stray.pem and the copy pin made of it
        if _cert(path) == other:
            path.unlink()
    assert unfound_pins(dep) == {"analyst": [fingerprint(other)]}


def _cert_from(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())
