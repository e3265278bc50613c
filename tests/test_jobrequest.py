"""mpcnet.jobrequest: a job runs only on a request its analyst signed, exactly as signed."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization

from mpcnet import config
from mpcnet.certs.pki import local_deployment, self_signed, write_cert, write_key
from mpcnet.client.local import CLIENTS, write_config
from mpcnet.config import Deployment
from mpcnet.errors import AccessDenied, InputError, NotPinned
from mpcnet.jobrequest import CLOCK_SKEW, JobRequest, SignedRequest


@pytest.fixture
def dep(tmp_path: Path) -> Deployment:
    path = write_config(tmp_path, 3, ports=[7001, 7002, 7003],
                        clients=CLIENTS + (("analyst-2", "analyst"),))
    local_deployment(config.load(path))
    return config.load(path)


def _signed(dep: Deployment, who: str = "analyst", **over: object) -> SignedRequest:
    cert, key = dep.identity(who)
    request = dataclasses.replace(JobRequest.new("analyst", "study", 5, "ms-gini", "active3",
                                                 "top5"), **over)
    return SignedRequest.sign(request, key, cert)


def test_a_signed_request_verifies_after_the_wire(dep: Deployment) -> None:
    signed = _signed(dep, share_with=("analyst-2",))
    back = SignedRequest.from_wire(signed.to_wire())
    assert back == signed
    request = back.verify(dep)
    assert request.may_read("analyst") and request.may_read("analyst-2")
    assert not request.may_read("hospital-a")


def test_two_requests_for_the_same_job_differ_in_their_nonce(dep: Deployment) -> None:
    a, b = (JobRequest.new("analyst", "d", 2, "ms-gini", "passive3", "r") for _ in range(2))
    assert a.nonce != b.nonce and a.payload() != b.payload()


@pytest.mark.parametrize("field", ["dataset", "k", "score", "security", "result", "share_with",
                                   "nonce", "issued", "analyst"])
def test_any_changed_field_breaks_the_signature(dep: Deployment, field: str) -> None:
    wire = _signed(dep).to_wire()
    changed = {"dataset": "other", "k": 6, "score": "gini", "security": "passive3",
               "result": "r2", "share_with": ["analyst-2"], "nonce": "0" * 32,
               "issued": 1.0, "analyst": "analyst-2"}[field]
    tampered = SignedRequest.from_wire(wire | {field: changed})
    with pytest.raises(AccessDenied, match="does not verify|certificate names"):
        tampered.verify(dep)


def test_a_request_signed_with_another_key_is_refused(dep: Deployment) -> None:
    with pytest.raises(AccessDenied, match="names 'alice', not 'analyst'"):
        _signed(dep, who="alice").verify(dep)
    with pytest.raises(AccessDenied, match="'hospital-a' is not an analyst"):
        _signed(dep, who="hospital-a", analyst="hospital-a").verify(dep)


def _write(tmp_path: Path, file: str, name: str, **kw: object) -> tuple[Path, Path]:
    key, cert = self_signed(name, **kw)  # type: ignore[arg-type]
    write_key(key, tmp_path / f"{file}.key")
    write_cert(cert, tmp_path / f"{file}.pem")
    return tmp_path / f"{file}.key", tmp_path / f"{file}.pem"


def test_a_key_not_pinned_for_the_analyst_or_an_expired_one_is_refused(dep: Deployment,
                                                                       tmp_path: Path) -> None:
    request = JobRequest.new("analyst", "d", 2, "ms-gini", "passive3", "r")
    foreign = SignedRequest.sign(request, *_write(tmp_path, "x", "analyst"))
    with pytest.raises(NotPinned, match="of 'analyst' is not pinned"):
        foreign.verify(dep)
    old = _write(tmp_path, "old", "analyst", days=1,
                 not_before=dt.datetime.now(dt.UTC) - dt.timedelta(days=10))
    pinned = config.load(dep.path)
    from mpcnet.certs.pinfile import pin
    from mpcnet.pins import fingerprint
    old_cert = x509.load_pem_x509_certificate(old[1].read_bytes())
    pin(dep.path, "analyst", old[1], fingerprint(old_cert), key_change=True)  # but expired
    expired = SignedRequest.sign(request, *old)
    with pytest.raises(AccessDenied, match="valid only from"):
        expired.verify(config.load(dep.path))
    assert pinned.pins("analyst") != config.load(dep.path).pins("analyst")
    # whoever carries it re-wraps the expired key in a fresh certificate it signed itself:
    # the dates that count are those of the certificate pinned in [tls] dir
    someone, _ = self_signed("analyst")
    now = dt.datetime.now(dt.UTC)
    redated = (x509.CertificateBuilder().subject_name(old_cert.subject)
               .issuer_name(old_cert.subject).public_key(old_cert.public_key())
               .serial_number(1).not_valid_before(now - dt.timedelta(days=1))
               .not_valid_after(now + dt.timedelta(days=3650))
               .add_extension(x509.SubjectAlternativeName([x509.DNSName("analyst")]), False)
               .sign(someone, hashes.SHA256()))
    rewrapped = dataclasses.replace(expired,
                                    certificate=redated.public_bytes(serialization.Encoding.PEM))
    with pytest.raises(AccessDenied, match="valid only from"):
        rewrapped.verify(config.load(dep.path))
    for stored in config.load(dep.path).tls_dir.glob("analyst.*.pem"):
        stored.unlink()  # the pin stays, its certificate is gone: nothing to date it by
    with pytest.raises(NotPinned, match="no certificate of it lies in"):
        rewrapped.verify(config.load(dep.path))


def test_sharing_with_a_non_analyst_is_refused(dep: Deployment) -> None:
    with pytest.raises(AccessDenied, match="hospital-a, who are not analysts"):
        _signed(dep, share_with=("hospital-a",)).verify(dep)


@pytest.mark.parametrize(("change", "words"), [
    ({"k": True}, "k is missing"), ({"k": "5"}, "k is missing"),
    ({"nonce": "xyz"}, "32 hex digits"), ({"dataset": "../up"}, "not a valid name"),
    ({"share_with": ["a"] * 65}, "at most 64"), ({"signature": "zz"}, "malformed signature"),
    ({"certificate": "x" * 9000}, "malformed signature or certificate"),
    ({"issued": None}, "issued is missing")])
def test_malformed_requests_are_named(dep: Deployment, change: dict[str, object],
                                      words: str) -> None:
    with pytest.raises(InputError, match=words):
        SignedRequest.from_wire(_signed(dep).to_wire() | change)
    with pytest.raises(InputError, match="no signed job request"):
        SignedRequest.from_wire(None)


def test_a_request_is_used_only_within_its_validity(dep: Deployment) -> None:
    signed = _signed(dep)
    r = signed.request
    assert signed.verify(dep, now=r.expires + CLOCK_SKEW - 1) == r
    with pytest.raises(AccessDenied, match="expired at .* sign a new one"):
        signed.verify(dep, now=r.expires + CLOCK_SKEW + 1)
    later = r.issued + CLOCK_SKEW + 60
    with pytest.raises(AccessDenied, match="made in the future"):
        _signed(dep, issued=later, expires=later + 60).verify(dep)
    eternal = _signed(dep, expires=r.issued + 30 * 86400)  # signed, but beyond the longest
    with pytest.raises(AccessDenied, match="validity is malformed"):
        eternal.verify(dep)
    with pytest.raises(InputError, match="valid for 1 s to 7 days"):
        JobRequest.new("analyst", "d", 2, "ms-gini", "passive3", "r", valid_for=0)


def test_another_participants_pinned_key_signs_for_nobody_else(dep: Deployment) -> None:
    """analyst-2's own, pinned key signs a request in the name of analyst: refused (its
    certificate names analyst-2; a certificate of that key naming analyst is not pinned)."""
    request = JobRequest.new("analyst", "d", 2, "ms-gini", "passive3", "r")
    cert, key = dep.identity("analyst-2")
    with pytest.raises(AccessDenied, match="names 'analyst-2', not 'analyst'"):
        SignedRequest.sign(request, key, cert).verify(dep)


def _training(dep: Deployment, owner: str = "clinic") -> SignedRequest:
    cert, key = dep.identity("analyst")
    request = JobRequest.training("analyst", "top5", "active3", "model", owner, 50, 0.5, 2.0)
    return SignedRequest.sign(request, key, cert)


def test_a_selection_is_signed_as_before_training_fields_and_all() -> None:
    """The training fields are not part of a selection's signed bytes (old signatures stay
    valid), and a selection that carries them is refused."""
    r = JobRequest.new("analyst", "d", 2, "ms-gini", "passive3", "r")
    assert b"model_owner" not in r.payload() and b"epochs" not in r.payload()
    wire = {k: v for k, v in dataclasses.asdict(r).items()} | {
        "share_with": [], "signature": "00", "certificate": "x"}
    with pytest.raises(InputError, match="another kind"):
        SignedRequest.from_wire(wire)
    with pytest.raises(InputError, match="unknown kind"):
        SignedRequest.from_wire({k: v for k, v in wire.items() if k not in (
            "model_owner", "epochs", "learning_rate", "l2")} | {"kind": "delete"})


@pytest.mark.parametrize("field", ["model_owner", "epochs", "learning_rate", "l2", "dataset"])
def test_a_training_request_verifies_and_any_changed_field_breaks_it(dep: Deployment,
                                                                      field: str) -> None:
    signed = _training(dep)
    back = SignedRequest.from_wire(signed.to_wire())
    assert back == signed
    request = back.verify(dep)
    assert (request.kind, request.model_owner, request.epochs) == ("train", "clinic", 50)
    changed = {"model_owner": "analyst", "epochs": 51, "learning_rate": 1.0, "l2": 0.0,
               "dataset": "other"}[field]
    tampered = SignedRequest.from_wire(signed.to_wire() | {field: changed})
    with pytest.raises(AccessDenied, match="does not verify"):
        tampered.verify(dep)


def test_a_model_goes_to_a_model_owner_or_to_the_analyst_itself(dep: Deployment) -> None:
    _training(dep, "analyst").verify(dep)
    for owner in ("analyst-2", "hospital-a", "nobody"):
        with pytest.raises(AccessDenied, match="not a model owner"):
            _training(dep, owner).verify(dep)


def test_a_choice_of_k_signs_its_candidates(dep: Deployment) -> None:
    """``select --k auto``: the candidates travel and are signed; a request without them is
    signed as before (no field), and a coordinator cannot add, drop or change them."""
    plain = _signed(dep).to_wire()
    assert "candidates" not in plain
    signed = _signed(dep, k=20, candidates=(5, 10, 20))
    wire = signed.to_wire()
    assert wire["candidates"] == [5, 10, 20]
    assert SignedRequest.from_wire(wire).verify(dep).candidates == (5, 10, 20)
    for tampered in (wire | {"candidates": [5, 20]}, {k: v for k, v in wire.items()
                                                      if k != "candidates"},
                     plain | {"candidates": [2, 5]}):
        with pytest.raises(AccessDenied, match="does not verify"):
            SignedRequest.from_wire(tampered).verify(dep)
    for bad in ([], [5, True], ["5"], list(range(1, 20))):
        with pytest.raises(InputError, match="candidates"):
            SignedRequest.from_wire(wire | {"candidates": bad})
    with pytest.raises(InputError, match="largest"):
        JobRequest.new("analyst", "d", 10, "ms-gini", "passive3", "r", candidates=(5, 20))
