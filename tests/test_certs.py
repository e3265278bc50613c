"""mpc-certs: a CA and one key and certificate per server and client."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from mpcnet import config
from mpcnet.certs.main import main
from mpcnet.client.local import write_config


@pytest.fixture
def dep_file(tmp_path: Path) -> Path:
    return write_config(tmp_path, 3, ports=[7001, 7002, 7003])


def test_init_makes_every_key_and_certificate(dep_file: Path, capsys: pytest.CaptureFixture[str]
                                              ) -> None:
    assert main(["init", "--config", str(dep_file)]) == 0
    printed = capsys.readouterr().out
    dep = config.load(dep_file)
    ca = x509.load_pem_x509_certificate(dep.ca.read_bytes())
    for name in dep.names:
        cert_path, key_path = dep.identity(name)
        assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert name in sans.get_values_for_type(x509.DNSName)
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert (ExtendedKeyUsageOID.SERVER_AUTH in usage) == dep.is_server(name)
        assert name in printed
    assert stat.S_IMODE((dep.ca.parent / "ca.key").stat().st_mode) == 0o600
    assert printed.count(":") > 31 * len(dep.names)  # SHA-256 fingerprints


def test_init_refuses_to_overwrite_without_force(dep_file: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--config", str(dep_file)]) == 0
    first = config.load(dep_file).ca.read_bytes()
    assert main(["init", "--config", str(dep_file)]) == 2
    assert "--force" in capsys.readouterr().err
    assert config.load(dep_file).ca.read_bytes() == first
    assert main(["init", "--config", str(dep_file), "--force"]) == 0
    assert config.load(dep_file).ca.read_bytes() != first


def test_out_folder_and_show(dep_file: Path, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "elsewhere"
    assert main(["init", "--config", str(dep_file), "--out", str(out)]) == 0
    assert (out / "ca.pem").is_file() and (out / "alice.key").is_file()
    capsys.readouterr()
    assert main(["show", "--config", str(dep_file)]) == 0
    assert "missing" in capsys.readouterr().out
