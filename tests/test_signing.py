"""mpcnet.signing: signed statements, the key trusted for a name, salted component digests."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from mpcnet import config
from mpcnet.certs.pki import keygen, local_deployment
from mpcnet.client.local import write_config
from mpcnet.config import Deployment
from mpcnet.errors import AccessDenied, InputError
from mpcnet.jobrequest import JobRequest, SignedRequest
from mpcnet.signing import ComponentHash, Signed, component_digest, salt_of, trusted_keys

STATEMENT = {"kind": "contribution", "meta": {"dataset": "d", "rows": 3},
             "components": {"data": {"shape": [3, 2], "digests": {"0": "ab" * 32}}}}


@pytest.fixture(scope="module")
def dep(tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    folder = tmp_path_factory.mktemp("deploy")
    path = write_config(folder, 3, ports=[7001, 7002, 7003])
    local_deployment(config.load(path))
    return config.load(path)  # with the pins


def signed_as(dep: Deployment, name: str, statement: dict[str, object] = STATEMENT) -> Signed:
    cert, key = dep.identity(name)
    return Signed.sign(name, statement, key, cert)


def test_a_statement_verifies_as_its_signers_after_it_travelled(dep: Deployment) -> None:
    for name in ("hospital-a", "bob"):  # an owner's and a server's
        got = Signed.from_wire(signed_as(dep, name).to_wire())
        assert got.verify(dep, name) == STATEMENT


def test_a_changed_statement_or_another_signer_is_refused(dep: Deployment) -> None:
    signed = signed_as(dep, "hospital-a")
    changed = dataclasses.replace(signed, statement=dict(STATEMENT, meta={"rows": 4}))
    with pytest.raises(AccessDenied, match="does not verify"):
        changed.verify(dep, "hospital-a")
    with pytest.raises(AccessDenied, match="presented as 'hospital-b'"):
        signed.verify(dep, "hospital-b")
    # hospital-b's certificate does not make hospital-a's signature its own
    renamed = dataclasses.replace(signed, signer="hospital-b",
                                  certificate=dep.client("hospital-b").cert.read_bytes())
    with pytest.raises(AccessDenied, match="does not verify"):
        renamed.verify(dep, "hospital-b")
    # a job request's signature cannot pass for a statement (domain tags)
    request = JobRequest.new("analyst", "d", 2, "msgini", "passive3", "r")
    cert, key = dep.identity("analyst")
    job = SignedRequest.sign(request, key, cert)
    forged = Signed("analyst", request.fields(), job.signature, job.certificate)
    with pytest.raises(AccessDenied, match="does not verify"):
        forged.verify(dep, "analyst")


def test_the_key_trusted_for_a_name_is_the_one_the_deployment_pins_for_it(
        dep: Deployment, tmp_path: Path) -> None:
    assert len(trusted_keys(dep, "bob", dep.server("bob").cert.read_bytes())) == 1
    with pytest.raises(AccessDenied, match="not with one the deployment trusts for 'bob'"):
        trusted_keys(dep, "bob", dep.client("hospital-a").cert.read_bytes())
    # a certificate of the right name with another key (someone else's) is not trusted
    made = keygen("bob", tmp_path)
    with pytest.raises(AccessDenied, match="does not pin for 'bob'"):
        Signed.sign("bob", STATEMENT, made.key, made.cert).verify(dep, "bob")
    with pytest.raises(AccessDenied, match="cannot be read"):
        trusted_keys(dep, "bob", b"-----BEGIN CERTIFICATE-----\nnot one\n")


def test_malformed_statements_are_refused_by_name() -> None:
    good = {"signer": "bob", "statement": {}, "signature": "00", "certificate": "x"}
    for wire in (None, dict(good, signer="../bob"), dict(good, statement=[]),
                 dict(good, signature="zz"), dict(good, signature="0"),
                 dict(good, certificate="x" * 9000), dict(good, certificate=1)):
        with pytest.raises(InputError):
            Signed.from_wire(wire)
    for salt in ("00" * 31, "zz" * 32, None):
        with pytest.raises(InputError, match="salt"):
            salt_of(salt)


def test_a_component_digest_is_salted_streamed_and_binds_shape_and_words() -> None:
    rng = np.random.default_rng(1)
    component = rng.integers(0, 2**63, size=(10, 3), dtype=np.uint64)
    salt, other = bytes(32), bytes([1]) * 32
    whole = component_digest(salt, component)
    streamed = ComponentHash(salt, (10, 3))
    for start in range(0, 10, 4):
        streamed.update(component[start:start + 4])
    assert streamed.hexdigest() == whole
    changed = component.copy()
    changed[9, 2] ^= np.uint64(1)
    assert len({whole, component_digest(other, component), component_digest(salt, changed),
                component_digest(salt, component.reshape(3, 10))}) == 4
    with pytest.raises(ValueError, match="32 bytes"):
        ComponentHash(b"short", (1,))
