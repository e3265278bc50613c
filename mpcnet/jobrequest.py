"""Layer: deployment. The job request an analyst signs and every server verifies.

A selection runs only on a request that its analyst signed with the key of its client
certificate: the dataset, k, the score, the security setting, the result's name, the analysts
it is shared with, a fresh nonce and the time it was made. The coordinator forwards the signed
request to the other servers with the job; each of them checks that the certificate's key is
the one its own deployment file pins for that analyst (``mpcnet.pins``), the signature, that the
job is the
one the request describes, and that no earlier job used the nonce. So a coordinator can refuse to
run a job (liveness), but it cannot run another one in the analyst's name: no downgrade of the
security setting, no other k, dataset or result, no replay, no job nobody asked for. The client
then checks every server's record of the job against the request it signed.

Signatures are ECDSA P-256 with SHA-256 (the keys ``mpc-certs keygen`` makes) over a canonical JSON
encoding of the request, prefixed with a domain tag so that no other signed message can pass
for a request.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mpcnet.config import NAME_RE, Deployment
from mpcnet.errors import AccessDenied, HandshakeError, InputError, NotPinned
from mpcnet.pins import check_certificate, check_key, fingerprint, pinned_certificates

DOMAIN = b"mpcnet job request v1\n"
NONCE_RE = re.compile(r"[0-9a-f]{32}")
MAX_CERT_BYTES = 8192
MAX_SHARED = 64
MAX_CANDIDATES = 16  # values of k a request may list (``mpcnet.train.choose`` checks them)
DEFAULT_VALIDITY = 3600.0  # seconds a request stays usable unless the analyst says otherwise
MAX_VALIDITY = 7 * 86400.0
CLOCK_SKEW = 300.0  # servers' and clients' clocks may differ this much
TRAIN_SCORE = "logistic-regression"  # the score field of a training request
TRAIN_FIELDS = ("kind", "model_owner", "epochs", "learning_rate", "l2")


@dataclass(frozen=True)
class JobRequest:
    """What an analyst asks the servers to compute, field by field as it signs it."""

    analyst: str
    dataset: str
    k: int
    score: str
    security: str
    result: str
    share_with: tuple[str, ...] = ()
    nonce: str = ""
    issued: float = 0.0
    expires: float = 0.0  # the job must start before this time (servers' clocks)
    # a training job (kind "train"): ``dataset`` names the analyst's selection result it
    # trains on, ``result`` the model, revealed to ``model_owner`` only
    kind: str = "select"
    model_owner: str = ""
    epochs: int = 0
    learning_rate: float = 0.0
    l2: float = 0.0
    # a selection with a private choice of k (``select --k auto``): the candidates, k the
    # largest of them; empty otherwise (and then not signed, so older signatures still hold)
    candidates: tuple[int, ...] = ()

    @classmethod
    def new(cls, analyst: str, dataset: str, k: int, score: str, security: str, result: str,
            share_with: tuple[str, ...] = (), valid_for: float = DEFAULT_VALIDITY,
            candidates: tuple[int, ...] = ()) -> JobRequest:
        """A request with a fresh nonce, made now, that a job may start on for ``valid_for``
        seconds; with ``candidates``, k is the largest and the servers choose among them."""
        if not 0 < valid_for <= MAX_VALIDITY:
            raise InputError(f"a job request is valid for 1 s to {MAX_VALIDITY / 86400:.0f} "
                             f"days, not {valid_for} s")
        now = round(time.time(), 3)
        if candidates and k != max(candidates):
            raise InputError(f"with candidates, k is the largest of them, not {k}")
        return cls(analyst, dataset, k, score, security, result,
                   tuple(sorted(set(share_with))), secrets.token_hex(16), now,
                   round(now + valid_for, 3), candidates=tuple(candidates))

    @classmethod
    def training(cls, analyst: str, source: str, security: str, model: str, owner: str,
                 epochs: int, learning_rate: float, l2: float,
                 valid_for: float = DEFAULT_VALIDITY) -> JobRequest:
        """A request to train a model on the analyst's result ``source`` for ``owner``."""
        base = cls.new(analyst, source, 0, TRAIN_SCORE, security, model, (), valid_for)
        return dataclasses.replace(base, kind="train", model_owner=owner, epochs=epochs,
                                   learning_rate=float(learning_rate), l2=float(l2))

    def fields(self) -> dict[str, Any]:
        """The request as it is signed and travels: a selection's without the training
        fields (so its signature is what it always was)."""
        fields = asdict(self)
        fields["share_with"] = list(self.share_with)
        if self.kind == "select":
            for name in TRAIN_FIELDS:
                del fields[name]
        if self.candidates:
            fields["candidates"] = list(self.candidates)
        else:
            del fields["candidates"]
        return fields

    def payload(self) -> bytes:
        """The bytes that are signed: the domain tag and the fields as canonical JSON."""
        return DOMAIN + json.dumps(self.fields(), sort_keys=True, separators=(",", ":")).encode()

    def may_read(self, name: str) -> bool:
        """Whether client ``name`` may see the job and fetch its result."""
        return name == self.analyst or name in self.share_with


@dataclass(frozen=True)
class SignedRequest:
    """A request with its analyst's signature and certificate (PEM), as it travels."""

    request: JobRequest
    signature: bytes
    certificate: bytes

    @classmethod
    def sign(cls, request: JobRequest, key_path: Path, cert_path: Path) -> SignedRequest:
        """Sign ``request`` with the analyst's key (the one of its TLS client certificate)."""
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise InputError(f"{key_path}: not an ECDSA key; make the deployment's keys with "
                             "mpc-certs")
        signature = key.sign(request.payload(), ec.ECDSA(hashes.SHA256()))
        return cls(request, signature, cert_path.read_bytes())

    def to_wire(self) -> dict[str, Any]:
        return {**self.request.fields(), "signature": self.signature.hex(),
                "certificate": self.certificate.decode("ascii")}

    @classmethod
    def from_wire(cls, wire: Any) -> SignedRequest:
        """Parse a request as it arrived; ``InputError`` naming the first malformed field."""
        if not isinstance(wire, dict) or not wire:
            raise InputError("no signed job request (the analyst's client signs one)")

        def field(name: str, kind: type | tuple[type, ...]) -> Any:
            value = wire.get(name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise InputError(f"job request: {name} is missing or malformed")
            return value

        names = [field(n, str) for n in ("analyst", "dataset", "result", "score", "security")]
        shared = field("share_with", list)
        if len(shared) > MAX_SHARED or not all(isinstance(n, str) for n in shared):
            raise InputError("job request: share_with must list at most "
                             f"{MAX_SHARED} client names")
        for name in [names[0], names[1], names[2], *shared]:
            if not NAME_RE.fullmatch(name):
                raise InputError(f"job request: {name!r} is not a valid name")
        nonce, cert, signature = field("nonce", str), field("certificate", str), \
            field("signature", str)
        if not NONCE_RE.fullmatch(nonce):
            raise InputError("job request: the nonce must be 32 hex digits")
        if len(cert) > MAX_CERT_BYTES or len(signature) > 300 or not re.fullmatch(
                r"[0-9a-f]*", signature):
            raise InputError("job request: malformed signature or certificate")
        request = JobRequest(names[0], names[1], field("k", int), names[3], names[4], names[2],
                             tuple(shared), nonce, float(field("issued", (int, float))),
                             float(field("expires", (int, float))))
        kind = wire.get("kind", "select")
        if kind == "train":
            owner = field("model_owner", str)
            if not NAME_RE.fullmatch(owner):
                raise InputError(f"job request: {owner!r} is not a valid name")
            request = dataclasses.replace(
                request, kind="train", model_owner=owner, epochs=field("epochs", int),
                learning_rate=float(field("learning_rate", (int, float))),
                l2=float(field("l2", (int, float))))
        elif kind != "select" or any(name in wire for name in TRAIN_FIELDS):
            raise InputError(f"job request: unknown kind {kind!r} or fields of another kind")
        if "candidates" in wire:
            listed = field("candidates", list)
            if kind != "select" or not listed or len(listed) > MAX_CANDIDATES or not all(
                    isinstance(c, int) and not isinstance(c, bool) for c in listed):
                raise InputError("job request: candidates must list 1 to "
                                 f"{MAX_CANDIDATES} integers k, for a selection")
            request = dataclasses.replace(request, candidates=tuple(listed))
        return cls(request, bytes.fromhex(signature), cert.encode("ascii"))

    def verify(self, dep: Deployment, now: float | None = None) -> JobRequest:
        """The request, once it checks: its certificate names its analyst and holds the key
        that deployment ``dep`` pins for that analyst, whose pinned certificate in ``dep``'s
        ``[tls] dir`` is valid now (``mpcnet.pins``), the
        analyst is an analyst of ``dep``, the analysts it shares with are analysts, the
        signature verifies, and it is within its validity, all as of ``now`` (default: the
        clock; with ``CLOCK_SKEW`` of tolerance). ``NotPinned`` if ``dep`` does not pin the
        key that signed it for its analyst, ``AccessDenied`` saying which other check failed."""
        r = self.request
        try:
            cert = x509.load_pem_x509_certificate(self.certificate)
        except ValueError:
            raise AccessDenied(f"the job request's certificate for {r.analyst!r} cannot be "
                               "read") from None
        now = time.time() if now is None else now
        try:
            _check_pinned(dep, r.analyst, cert, now)
        except NotPinned:
            raise  # the reader's file does not admit that key: a refusal, not a forgery
        except HandshakeError as exc:
            raise AccessDenied(f"{type(exc).__name__}: {exc}") from None
        if not dep.is_client(r.analyst) or dep.client(r.analyst).role != "analyst":
            raise AccessDenied(f"{r.analyst!r} is not an analyst of this deployment")
        if r.kind == "train" and not (r.model_owner == r.analyst or (
                dep.is_client(r.model_owner)
                and dep.client(r.model_owner).role == "model-owner")):
            raise AccessDenied(f"the job request reveals its model to {r.model_owner!r}, who "
                               "is not a model owner of this deployment (nor the analyst)")
        if r.kind == "train" and r.share_with:
            raise AccessDenied("a training request shares nothing: its model goes to its "
                               "owner only")
        not_analysts = [n for n in r.share_with
                        if not dep.is_client(n) or dep.client(n).role != "analyst"]
        if not_analysts:
            raise AccessDenied(f"the job request shares its result with "
                               f"{', '.join(not_analysts)}, who are not analysts of this "
                               "deployment")
        public = cert.public_key()
        if not isinstance(public, ec.EllipticCurvePublicKey):
            raise AccessDenied("the job request's certificate does not hold an ECDSA key")
        try:
            public.verify(self.signature, r.payload(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise AccessDenied(f"the job request's signature by {r.analyst!r} does not verify: "
                               "it was changed or made without the analyst's key") from None
        if not r.issued <= r.expires <= r.issued + MAX_VALIDITY:
            raise AccessDenied("the job request's validity is malformed")
        if r.issued > now + CLOCK_SKEW:
            raise AccessDenied("the job request was made in the future (is a clock wrong?)")
        if now > r.expires + CLOCK_SKEW:
            raise AccessDenied(f"the job request expired at {_when(r.expires)}, before its job "
                               "started; sign a new one (mpc-client select again)")
        return r


def _check_pinned(dep: Deployment, analyst: str, carried: x509.Certificate, now: float) -> None:
    """The carried certificate names ``analyst`` with a key ``dep`` pins for it, and a
    certificate of that key in ``dep``'s ``[tls] dir`` (the one its operator pinned) is valid
    ``now``. The carried certificate's own dates count for nothing: nobody checked who signed
    it, so whoever carries the request could re-date it."""
    where = f"the job request (deployment file {dep.path})"
    check_key(analyst, carried, dep.pins(analyst), where)
    key = fingerprint(carried)
    stored = [c for c in pinned_certificates(dep).get(analyst, []) if fingerprint(c) == key]
    if not stored:
        raise NotPinned(f"{where}: the key {key} of {analyst!r} is pinned but no certificate of "
                        f"it lies in {dep.tls_dir} (mpc-certs pin puts it there)")
    refused = []
    for cert in stored:
        try:
            check_certificate(analyst, cert, dep.pins(analyst), where, now)
            return
        except HandshakeError as exc:
            refused.append(exc)
    raise refused[0]


def _when(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

