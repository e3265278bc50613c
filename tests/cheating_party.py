"""Test-only launcher: an ``mpc-party`` server that cheats on purpose (the cheating-server harness).

Layer: tests. It is never installed (``tests/`` is outside the distribution) and nothing under
``mpcnet/``, ``parties/`` or ``client/`` reads a fault setting, so a deployment cannot enable
it: only starting this file instead of ``mpc-party`` does. It runs ``parties.main.main`` with
its own server class, which runs jobs on its own ``parties.runner.Runtime``::

    python tests/cheating_party.py --config deploy.toml --name bob --fault jmp-value:add:at=3
    python tests/cheating_party.py --config deploy.toml --name bob \\
        --fault-file fault.txt --report report.jsonl     # spec re-read at the start of each job

A fault spec is ``KIND:ACTION[:at=N][:peer=P]``; ``at`` counts the rounds (0 = the first) in
which this server sends a message of KIND in the job, ``peer`` is a party index. Kinds:

- the message kinds of the active schemes (``mpcnet.schemes.faults.KINDS``): for active4
  ([F4]) ``jmp-value``, ``jmp-hash`` (joint message passing: value and digest),
  ``input-hash`` (the input check), ``key-confirm``, ``open-value``, ``open-hash``; for active3
  ``product``, ``and``, ``triple``, ``mac-sum``, ``coin``, ``mac-product``, ``check-open``,
  ``check-open-hash``, the zero tests' claims ``and-claim``, ``mac-claim`` and the digests
  ``and-hash``, ``mac-hash``, ``input-hash``;
- ``key-contribution``: the first frame of the job to each peer (this server's contributions
  to the correlated-randomness keys, setup round 1);
- ``data-share``, ``label-share``: the server's own share of the stored dataset, perturbed when
  the job loads it (a wrong input share; ``at`` is the flat element index); of a dataset keyed
  by record IDs, ``key-share`` and ``data-share`` are its shares of the first contribution's
  ID hashes and columns (its label among them).
- ``job-spec`` (the coordinator only): the job it sends the other servers differs from the
  analyst's signed request. Actions: ``downgrade`` (passive3 in the job, the request intact),
  ``downgrade-signed`` (passive3 in the request too, so its signature breaks), ``k`` (k + 1),
  ``dataset`` (another dataset name), ``replay`` (the request of its job before, even one the
  members refused), ``forge`` (the request signed again with the coordinator's own key),
  ``unsigned`` (no request), ``unrequested`` (first a job nobody asked for, signed with its
  own key in the analyst's name; then the real job, honestly) and ``fake-done`` (no job at
  all, reported done).

Actions: ``add`` (a wrong value or digest: +1 on the first word of every message of KIND in
that round), ``split`` (the same, on the message to one peer only: ``peer`` or the first one,
so peers get different values), ``drop`` (nothing at all: the server stays silent from that
message on, holding its connections open), ``short`` (a well-formed frame one word short) and
``garbage`` (bytes that are no frame). Input kinds take ``add`` only.

What it injects: the runtime's channel (``CheatingChannel``: drops, shortens or garbles a
frame), scheme (the setting's scheme, whose ``setup`` passes the ``FaultInjector`` hook) and
input shares (perturbed); the server class loads the fault for each job and appends one JSON
line per job to ``--report`` (the spec, how many messages it changed, and per message kind the
rounds and the most peers in one round, so tests can aim at the last round), and as the
coordinator carries out the ``job-spec`` faults. Logs name the fault and where it fired, never
a value.
"""

from __future__ import annotations

import argparse
import contextvars
import dataclasses
import json
import logging
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mpcnet.config import Deployment  # noqa: E402
from mpcnet.errors import MPCError  # noqa: E402
from mpcnet.featsel.source import ArraySource, ShareSource  # noqa: E402
from mpcnet.jobrequest import JobRequest, SignedRequest  # noqa: E402
from mpcnet.net import wire  # noqa: E402
from mpcnet.net.engine import RoundEngine  # noqa: E402
from mpcnet.net.framing import FrameProtocol  # noqa: E402
from mpcnet.net.tls import TLSChannel  # noqa: E402
from mpcnet.parties.jobs import Job  # noqa: E402
from mpcnet.parties.main import main as party_main  # noqa: E402
from mpcnet.parties.runner import KeyedParts, Runtime, Shares  # noqa: E402
from mpcnet.parties.server import PartyServer  # noqa: E402
from mpcnet.schemes import registry  # noqa: E402
from mpcnet.schemes.base import Scheme  # noqa: E402
from mpcnet.schemes.faults import KINDS as FAULT_KINDS  # noqa: E402
from mpcnet.schemes.faults import FaultInjector  # noqa: E402

log = logging.getLogger("mpcnet.cheater")

SCHEME_KINDS = tuple(sorted({k for kinds in FAULT_KINDS.values() for k in kinds}))
FRAME_KINDS = ("key-contribution",)
INPUT_KINDS = ("data-share", "label-share", "key-share")
SPEC_KIND = "job-spec"
KINDS = (*SCHEME_KINDS, *FRAME_KINDS, *INPUT_KINDS, SPEC_KIND)
ACTIONS = ("add", "split", "drop", "short", "garbage")
SPEC_ACTIONS = ("downgrade", "downgrade-signed", "k", "dataset", "replay", "forge", "unsigned",
                "unrequested", "fake-done")
GARBAGE = b"JUNK" + bytes(range(60))  # no "MPC1" magic: not a frame at all


@dataclasses.dataclass(frozen=True)
class FaultSpec:
    """What to do (``action``) to which message (``kind``, round ``at``, ``peer``)."""

    kind: str
    action: str
    at: int = 0
    peer: int | None = None

    @classmethod
    def parse(cls, text: str) -> FaultSpec | None:
        """``KIND:ACTION[:at=N][:peer=P]``; an empty text means an honest server."""
        text = text.strip()
        if not text:
            return None
        kind, action, *opts = text.split(":")
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; one of {', '.join(KINDS)}")
        allowed = {SPEC_KIND: SPEC_ACTIONS}.get(kind, ("add",) if kind in INPUT_KINDS
                                                 else ACTIONS)
        if action not in allowed:
            raise ValueError(f"action {action!r} for {kind}; one of {', '.join(allowed)}")
        args: dict[str, int] = {}
        for opt in opts:
            key, _, value = opt.partition("=")
            if key not in ("at", "peer"):
                raise ValueError(f"unknown fault option {key!r} (at=N, peer=P)")
            args[key] = int(value)
        return cls(kind, action, **args)

    def __str__(self) -> str:
        peer = "" if self.peer is None else f":peer={self.peer}"
        return f"{self.kind}:{self.action}:at={self.at}{peer}"


def _plus_one(payload: np.ndarray) -> np.ndarray:
    """A copy with 1 added to the first word (wrapping in the array's own dtype)."""
    out = np.array(payload, copy=True)
    flat = out.reshape(-1)
    np.add(flat[:1], np.ones(1, dtype=flat.dtype), out=flat[:1])
    return out


class JobFault:
    """The fault of one job at this server, and what it saw of the job's messages."""

    def __init__(self, spec: FaultSpec | None) -> None:
        self.spec = spec
        self.rounds: dict[str, list[int]] = {}  # kind -> round ids in which it was sent
        self.peers: dict[str, int] = {}  # kind -> most peers it went to in one round
        self._peers_of: dict[tuple[str, int], set[int]] = {}
        self.fired: list[dict[str, Any]] = []
        self.engine: RoundEngine | None = None
        self.channel: CheatingChannel | None = None
        self._target: int | None = None

    def _fire(self, kind: str, at: int, peer: int | None, action: str) -> None:
        self.fired.append({"kind": kind, "at": at, "peer": peer, "action": action})
        log.warning("FAULT INJECTED: %s %s in round %d of that kind%s", action, kind, at,
                    "" if peer is None else f" to party {peer}")

    def message(self, kind: str, peer: int, rnd: int, payload: np.ndarray) -> np.ndarray:
        """Called for every outgoing message of a known kind in round ``rnd`` (a round id of
        the engine); returns what to send instead (or arms the channel)."""
        seen = self.rounds.setdefault(kind, [])
        if not seen or seen[-1] != rnd:
            seen.append(rnd)
        at = len(seen) - 1
        peers = self._peers_of.setdefault((kind, at), set())
        peers.add(peer)
        self.peers[kind] = max(self.peers.get(kind, 0), len(peers))
        s = self.spec
        if s is None or kind != s.kind or at != s.at or payload.size == 0:
            return payload
        if s.action == "add":
            self._fire(kind, at, peer, "add")
            return _plus_one(payload)
        if s.action == "split":
            if self._target is None:
                self._target = peer if s.peer is None else s.peer
            if peer != self._target:
                return payload
            self._fire(kind, at, peer, "split")
            return _plus_one(payload)
        if self.fired or (s.peer is not None and peer != s.peer):
            return payload
        assert self.channel is not None, "the cheating channel registers itself per job"
        self.channel.arm(peer, s.action)
        self._fire(kind, at, peer, s.action)
        return payload

    def perturb_input(self, kind: str, share: np.ndarray) -> np.ndarray:
        """A wrong input share: +1 on one element of this server's share (``data-share`` or
        ``label-share``)."""
        self.rounds[kind], self.peers[kind] = [0], 0
        s = self.spec
        if s is None or s.kind != kind:
            return share
        out = np.array(share, copy=True)
        flat = out.reshape(-1)
        i = s.at % flat.size
        np.add(flat[i:i + 1], np.ones(1, dtype=flat.dtype), out=flat[i:i + 1])
        self._fire(kind, s.at, None, "add")
        return out

    def report(self) -> dict[str, Any]:
        return {"spec": None if self.spec is None else str(self.spec), "fired": self.fired,
                "kinds": {k: {"rounds": len(v), "peers": self.peers.get(k, 0)}
                          for k, v in sorted(self.rounds.items())}}


CURRENT: contextvars.ContextVar[JobFault | None] = contextvars.ContextVar("fault", default=None)


class CheatingChannel(TLSChannel):
    """``TLSChannel`` that carries out frame faults armed by ``JobFault`` (drop, short,
    garbage) and reports the first frame to each peer as ``key-contribution``."""

    def __init__(self, party: int, n_parties: int, job: str,
                 conns: dict[int, FrameProtocol]) -> None:
        super().__init__(party, n_parties, job, conns)
        self.fault = CURRENT.get()
        if self.fault is not None:
            self.fault.channel = self
        self._armed: dict[int, str] = {}
        self._frames: dict[int, int] = {}
        self.silent = False

    def arm(self, peer: int, action: str) -> None:
        self._armed[peer] = action

    async def send(self, peer: int, payload: np.ndarray) -> None:
        if self.fault is None:
            await super().send(peer, payload)
            return
        if self._frames.get(peer, 0) == 0:
            payload = self.fault.message("key-contribution", peer, 0, payload)
        self._frames[peer] = self._frames.get(peer, 0) + 1
        action = self._armed.pop(peer, None)
        if action == "drop":
            self.silent = True
        if self.silent:
            return
        if action == "short":
            flat = payload.reshape(-1)
            payload = flat[:-1] if flat.size else np.zeros(1, dtype=flat.dtype)
        elif action == "garbage":
            transport = self.conns[peer].transport
            assert transport is not None
            transport.write(GARBAGE)
            return
        await super().send(peer, payload)

    def abort(self, reason: str, check: str | None = None) -> None:
        """A silent server stays silent: it closes its connections without a reason."""
        if not self.silent:
            super().abort(reason, check)
            return
        for conn in self.conns.values():
            conn.close()


class _SchemeHook(FaultInjector):
    """The scheme's fault hook, forwarding every message to the job's ``JobFault``."""

    def __init__(self, job: JobFault) -> None:  # no dataclass fields: a pure forwarder
        self.job = job

    def apply(self, party: int, kind: str, peer: int, payload: np.ndarray) -> np.ndarray:
        assert self.job.engine is not None
        return self.job.message(kind, peer, self.job.engine.rounds, payload)


def _cheating_scheme(security: str) -> type[Scheme]:
    """The setting's scheme, with a setup that passes the harness hook when a job has a
    fault."""
    base = registry.get(security).scheme

    class Cheating(base):  # type: ignore[valid-type, misc]
        @classmethod
        async def setup(cls, engine: RoundEngine, fault: FaultInjector | None = None
                        ) -> Scheme:
            job = CURRENT.get()
            if job is not None and fault is None:
                job.engine = engine
                fault = _SchemeHook(job)
            return await super().setup(engine, fault)  # type: ignore[no-any-return]

    return Cheating


def _perturbed(data: ShareSource, labels: np.ndarray | None) -> Shares:
    """The server's own input shares, as the job's fault wants them."""
    job = CURRENT.get()
    if job is None:
        return data, labels
    whole = data.block(slice(None), slice(None))
    return (ArraySource(job.perturb_input("data-share", whole)),
            None if labels is None else job.perturb_input("label-share", labels))


def _perturbed_keyed(parts: KeyedParts) -> KeyedParts:
    """The server's own shares of a keyed dataset, as the job's fault wants them: the first
    contribution's ID hashes (``key-share``) or columns (``data-share``)."""
    job = CURRENT.get()
    if job is None:
        return parts
    (keys, values), *rest = parts
    return [(job.perturb_input("key-share", keys), job.perturb_input("data-share", values)),
            *rest]


RUNTIME = Runtime(channel=CheatingChannel, scheme=_cheating_scheme, inputs=_perturbed,
                  keyed_inputs=_perturbed_keyed)


def cheating_server(spec: FaultSpec | None, fault_file: Path | None,
                    report: Path | None) -> type[PartyServer]:
    """A ``PartyServer`` that runs jobs on ``RUNTIME`` with the fault of the moment (the
    spec, or what ``fault_file`` holds at the start of the job) and reports each job."""

    def current_spec() -> FaultSpec | None:
        if fault_file is None:
            return spec
        return FaultSpec.parse(fault_file.read_text()) if fault_file.exists() else None

    def write_report(fault: JobFault, job: Job) -> None:
        if report is not None:
            line = dict(fault.report(), job=job.id, state=job.state, time=time.time())
            with open(report, "a", encoding="utf-8") as f:
                f.write(json.dumps(line) + "\n")

    class CheatingServer(PartyServer):
        def __init__(self, dep: Deployment, name: str) -> None:
            super().__init__(dep, name, RUNTIME)
            self.tampered: dict[str, Any] = {}

        async def run(self, job: Job, conns: dict[int, FrameProtocol]) -> None:
            fault = JobFault(current_spec())
            if fault.spec is not None:
                log.warning("job %s runs with fault %s", job.id, fault.spec)
            token = CURRENT.set(fault)
            try:
                await super().run(job, conns)
            finally:
                CURRENT.reset(token)
                write_report(fault, job)

        def spec_of(self, job: Job) -> dict[str, Any]:
            return self.tampered.pop(job.id, None) or super().spec_of(job)

        async def lead(self, job: Job) -> None:
            spec = current_spec()
            if spec is None or spec.kind != SPEC_KIND:
                await super().lead(job)
                return
            fault = JobFault(spec)
            fault._fire(SPEC_KIND, 0, None, spec.action)
            try:
                if spec.action == "fake-done":
                    self.jobs.start(job)
                    self.jobs.finish(job, None, None)
                    self.ended(job.id).set()
                    return
                if spec.action == "unrequested":
                    await _unrequested_job(self, job)
                else:
                    self.tampered[job.id] = _tampered_spec(self, job, spec.action)
                await super().lead(job)
            finally:
                write_report(fault, job)

    return CheatingServer


def _resigned(srv: PartyServer, request: JobRequest) -> dict[str, Any]:
    """``request`` signed with the coordinator's own key and certificate."""
    return SignedRequest.sign(request, srv.me.key, srv.me.cert).to_wire()


def _tampered_spec(srv: PartyServer, job: Job, action: str) -> dict[str, Any]:
    """The job's specification as the cheating coordinator sends it to the members."""
    spec = job.spec()
    request = SignedRequest.from_wire(spec["request"]).request
    if action == "downgrade":
        spec.update(security="passive3", n_parties=3)
    elif action == "downgrade-signed":
        spec.update(security="passive3", n_parties=3,
                    request=dict(spec["request"], security="passive3"))
    elif action == "k":
        spec["k"] += 1
    elif action == "dataset":
        spec["dataset"] = "another"
    elif action == "replay":  # the request of its job before this one, whatever became of it
        earlier = max((j for j in srv.jobs.jobs.values() if j.request and j.id != job.id),
                      key=lambda j: j.created)
        spec.update({k: getattr(earlier, k) for k in ("dataset", "k", "score", "security",
                                                      "result", "n_parties", "request")})
    elif action == "forge":
        spec["request"] = _resigned(srv, request)
    elif action == "unsigned":
        spec["request"] = {}
    return spec


async def _unrequested_job(srv: PartyServer, job: Job) -> None:
    """Start, on every member, a job nobody asked for (it signs in the analyst's name)."""
    asked = SignedRequest.from_wire(job.request).request
    made_up = JobRequest.new(asked.analyst, asked.dataset, asked.k, asked.score, asked.security,
                             f"unrequested-{job.id}")
    spec = dict(job.spec(), id=uuid.uuid4().hex[:12], result=made_up.result,
                request=_resigned(srv, made_up))
    for peer in range(1, job.n_parties):
        try:
            conn = await srv.mesh.dial(peer, wire.PeerHello(srv.name, spec["id"], spec))
            conn.close()
        except MPCError as exc:
            log.warning("the unrequested job was refused: %s", exc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="cheating_party", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Every other option is passed to mpc-party (--config, --name, --ready-file).")
    parser.add_argument("--fault", default="", help="fault spec for every job")
    parser.add_argument("--fault-file", type=Path, help="file holding the spec, read per job")
    parser.add_argument("--report", type=Path, help="append one JSON line per job here")
    args, rest = parser.parse_known_args(argv)
    spec = FaultSpec.parse(args.fault)
    return party_main(rest, cheating_server(spec, args.fault_file, args.report))


if __name__ == "__main__":
    sys.exit(main())
