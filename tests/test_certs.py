"""mpc-certs: one's own key (keygen, renew), the pins of a file (pin, unpin), check, local."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509

from mpcnet import config
from mpcnet.certs.main import main
from mpcnet.client.local import write_config
from mpcnet.pins import fingerprint, pinned_certificates


@pytest.fixture
def dep_file(tmp_path: Path) -> Path:
    return write_config(tmp_path / "deploy", 3, ports=[7001, 7002, 7003])


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_keygen_writes_only_its_own_key_and_prints_the_pin(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "bob-machine"
    assert main(["keygen", "bob", "--dir", str(folder), "--days", "90"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["bob.key", "bob.pem"]
    assert stat.S_IMODE((folder / "bob.key").stat().st_mode) == 0o600
    cert = _cert(folder / "bob.pem")
    cert.verify_directly_issued_by(cert)  # self-signed: no authority vouches for it
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert 89 < (cert.not_valid_after_utc - cert.not_valid_before_utc).days <= 90
    assert fingerprint(cert) in capsys.readouterr().out
    assert main(["keygen", "bob", "--dir", str(folder)]) == 2  # never replaced unasked
    assert "renew" in capsys.readouterr().err
    assert _cert(folder / "bob.pem") == cert


def test_pin_edits_the_entry_in_place_and_copies_the_certificate(
        dep_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = dep_file.read_text().replace('name = "bob"', 'name = "bob"  # the second server')
    dep_file.write_text("# our copy of the deployment\n" + text)
    main(["keygen", "bob", "--dir", str(tmp_path / "bob")])
    main(["keygen", "analyst", "--dir", str(tmp_path / "analyst")])
    assert main(["pin", "--config", str(dep_file), str(tmp_path / "bob" / "bob.pem"),
                 str(tmp_path / "analyst" / "analyst.pem")]) == 0
    dep = config.load(dep_file)
    bob, analyst = _cert(tmp_path / "bob" / "bob.pem"), _cert(tmp_path / "analyst" / "analyst.pem")
    assert dep.pins("bob") == (fingerprint(bob),) and dep.pins("analyst") == (fingerprint(analyst),)
    assert dep.pins("alice") == ()
    assert "# our copy of the deployment" in dep_file.read_text()
    assert 'name = "bob"  # the second server' in dep_file.read_text()
    assert pinned_certificates(dep)["bob"] == [bob]
    assert not list(dep.tls_dir.glob("*.key"))  # only public material arrived
    capsys.readouterr()
    # a certificate for a name the file does not list
    main(["keygen", "stranger", "--dir", str(tmp_path / "s")])
    assert main(["pin", "--config", str(dep_file), str(tmp_path / "s" / "stranger.pem")]) == 2
    assert "no [[servers]] or [[clients]] entry named 'stranger'" in capsys.readouterr().err


def test_a_key_change_pins_two_keys_then_one(dep_file: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    own = tmp_path / "bob"
    main(["keygen", "bob", "--dir", str(own)])
    old = _cert(own / "bob.pem")
    main(["pin", "--config", str(dep_file), str(own / "bob.pem")])
    capsys.readouterr()
    assert main(["renew", "bob", "--dir", str(own)]) == 0
    out = capsys.readouterr().out
    new = _cert(own / "bob.pem")
    assert fingerprint(old) in out and fingerprint(new) in out and new != old
    assert sorted(p.name for p in own.glob("*.key")) == ["bob.key"]  # the old key is gone
    assert _cert(next(own.glob("bob.*.pem"))) == old  # its certificate stays, public
    main(["pin", "--config", str(dep_file), str(own / "bob.pem")])
    dep = config.load(dep_file)
    assert dep.pins("bob") == (fingerprint(old), fingerprint(new))
    assert sorted(map(fingerprint, pinned_certificates(dep)["bob"])) == sorted(
        [fingerprint(old), fingerprint(new)])  # both certificates are in the folder
    assert main(["unpin", "--config", str(dep_file), "bob", fingerprint(old)]) == 0
    assert config.load(dep_file).pins("bob") == (fingerprint(new),)
    assert main(["unpin", "--config", str(dep_file), "bob", fingerprint(old)]) == 2
    assert main(["unpin", "--config", str(dep_file), "bob"]) == 0
    assert config.load(dep_file).pins("bob") == ()
    assert main(["pin", "--config", str(dep_file), "--replace", str(own / "bob.pem")]) == 0
    assert config.load(dep_file).pins("bob") == (fingerprint(new),)


def test_a_ca_certificate_is_never_pinned(dep_file: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import datetime as dt

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from mpcnet.certs.pki import write_cert

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "analyst")])
    now = dt.datetime.now(dt.UTC)
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
          .public_key(key.public_key()).serial_number(1).not_valid_before(now)
          .not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.SubjectAlternativeName([x509.DNSName("analyst")]), critical=False)
          .sign(key, hashes.SHA256()))
    write_cert(ca, tmp_path / "ca.pem")
    assert main(["pin", "--config", str(dep_file), str(tmp_path / "ca.pem")]) == 2
    assert "is a CA certificate" in capsys.readouterr().err
    # pinned by hand, the servers still do not trust it
    dep_file.write_text(dep_file.read_text().replace(
        'name = "analyst"', f'name = "analyst"\npin = "{fingerprint(ca)}"'))
    write_cert(ca, config.load(dep_file).tls_dir / "analyst.pem")
    assert pinned_certificates(config.load(dep_file)).get("analyst", []) == []


def test_local_makes_every_key_in_one_folder_and_says_so(
        dep_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["local", "--config", str(dep_file)]) == 0
    err = capsys.readouterr().err
    assert "one operator holds them all" in err
    dep = config.load(dep_file)
    for name in dep.names:
        cert_path, key_path = dep.identity(name)
        assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
        assert dep.pins(name) == (fingerprint(_cert(cert_path)),)
    assert main(["local", "--config", str(dep_file)]) == 2  # keys there: not replaced unasked
    assert "--force" in capsys.readouterr().err
    assert main(["check", "--config", str(dep_file)]) == 0
    assert "holds the private keys of" in capsys.readouterr().err


def test_check_finds_foreign_keys_missing_certificates_and_expiry(
        dep_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dep = config.load(dep_file)
    main(["keygen", "alice", "--dir", str(dep.tls_dir), "--days", "10"])
    main(["pin", "--config", str(dep_file), str(dep.tls_dir / "alice.pem")])
    capsys.readouterr()
    assert main(["check", "--config", str(dep_file), "--name", "alice"]) == 0
    err = capsys.readouterr().err
    assert "alice: the certificate of" in err and "expires in 10 days" in err
    assert main(["check", "--config", str(dep_file), "--name", "alice", "--days", "5"]) == 0
    assert "expires in" not in capsys.readouterr().err
    # bob's key in alice's folder, and a pin whose certificate nobody put there
    main(["keygen", "bob", "--dir", str(dep.tls_dir)])
    main(["pin", "--config", str(dep_file), str(dep.tls_dir / "bob.pem")])
    main(["keygen", "carol", "--dir", str(tmp_path / "carol")])
    main(["pin", "--config", str(dep_file), str(tmp_path / "carol" / "carol.pem")])
    (dep.tls_dir / "carol.pem").unlink()
    capsys.readouterr()
    assert main(["check", "--config", str(dep_file), "--name", "alice"]) == 2
    err = capsys.readouterr().err
    assert "bob.key is the private key of bob" in err
    assert "carol: no certificate in" in err
