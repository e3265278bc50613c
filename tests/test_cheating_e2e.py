"""End to end under a cheating server: real ``mpc-party`` processes over TLS, for both active
settings (three servers for active3, four for active4).

One of the servers runs the test-only launcher ``tests/cheating_party.py`` instead of
``mpc-party``; it re-reads its fault spec at the start of every job, so one cluster serves every
case (only the cheater is restarted when another server takes its role). Each case shares
nothing new: the analyst runs ``mpc-client select`` on the same 30 x 6 dataset and the test
checks that

- the cheater's fault really fired (its report says which message it changed);
- the job failed on every honest server, each record naming the failed check
  (``CheatingDetected``) or, for a silent server or a malformed frame, the cheater;
- a silent server is detected within the round timeout;
- no server lists the result and ``mpc-client fetch`` fails: no D' is stored or returned.

Every server also runs one honest job as the cheater's launcher with no fault (D' equal to the
plaintext one); its report gives the rounds and peers of every message kind, from which the
cases aim at the first, middle and last round. The default run covers every fault kind and
every server as the cheater; ``-m slow`` runs the whole (cheater, message kind, fault) matrix.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cheating_party import ACTIONS, INPUT_KINDS, FaultSpec
from conftest import ROOT
from keyed_common import keyed_files

from mpcnet.client.local import SERVER_NAMES, LocalCluster
from mpcnet.client.session import Client
from mpcnet.net.tls import run

LAUNCHER = ROOT / "tests" / "cheating_party.py"
LSVT = ROOT / "data" / "lsvt_126x310.csv"
ROUND, HANDSHAKE = 3.0, 3.0
TIMEOUTS = {"round_timeout": ROUND, "handshake_timeout": HANDSHAKE, "connect_timeout": 5.0}
DATASET, K = "study", 2
KEYED = "linked"  # two owners' columns keyed by record IDs: 30 records each, 18 in common
SETTINGS = ("active3", "active4")
N_SERVERS = {"active3": 3, "active4": 4}
_ACTIVE3_ALL = {"MAC", "AND", "open consistency", "coin", "input consistency"}
CHECKS = {  # per setting, message kind -> the checks that may catch a deviation in it
    "active4": {
        "key-contribution": {"key agreement"}, "key-confirm": {"key agreement"},
        "jmp-value": {"joint-message hash"}, "jmp-hash": {"joint-message hash"},
        "input-hash": {"input consistency"},
        "data-share": {"joint-message hash", "input consistency"},
        "key-share": {"joint-message hash", "input consistency"},
        "label-share": {"joint-message hash", "input consistency"},
        "open-value": {"open consistency"}, "open-hash": {"open consistency"},
    },
    "active3": {
        # mismatched PRF keys or inputs make every later message inconsistent
        "key-contribution": _ACTIVE3_ALL, "data-share": _ACTIVE3_ALL,
        "label-share": _ACTIVE3_ALL, "key-share": _ACTIVE3_ALL,
        # an error in a message leaves the two copies of a component different: the check of
        # its kind, or the opening of a value that depends on it in the checks, names it
        **dict.fromkeys(("product", "shuffle", "and", "triple", "check-open"),
                        {"MAC", "AND", "open consistency"}),
        # the other holder's digest of each opened word of the AND check, in the same round
        "check-open-hash": {"open consistency"},
        # round 1 carries the triples and the MAC check's sums in one frame (its shape is
        # checked as AND), round 2 the coin and alpha w (its shape is checked as coin); the
        # triples' digest goes the other way in round 1 and is relayed in round 2
        "mac-sum": {"MAC", "AND"}, "mac-product": {"MAC", "coin"}, "coin": {"coin"},
        "triple-hash": {"AND"}, "triple-relay": {"AND", "coin"},
        # D' = D x T: its terms and their digest in one round (shapes checked as MAC), the
        # digest relayed with the coin (shape checked as coin); Freivalds' test is MAC's
        "output-product": {"MAC"}, "output-hash": {"MAC"}, "output-relay": {"MAC", "coin"},
        # the claims of the zero tests travel hashed in the last frame
        "and-claim": {"AND"}, "mac-claim": {"MAC"},
        # the zero tests' digests travel in one frame (its shape is checked as MAC); the input
        # digests in a round of their own, before anything is computed on the inputs
        "and-hash": {"AND", "MAC"}, "mac-hash": {"MAC"}, "input-hash": {"input consistency"},
        # the opening of the one-hot check's products, after the final check
        "open-value": {"open consistency"}, "open-hash": {"open consistency"},
    },
}
# Digests that share a frame: frame faults are run on one of them only (active3: mac-hash);
# a zero test's claim is no frame of its own (it is hashed into the digests) and goes to one
# peer: "add" only. In active4 a consistent change of a server's own random key contribution
# is no deviation (no "add"); in active3 it is (each peer derives a different key).
ACTIONS_OF = {
    "active4": {"key-contribution": ACTIONS[1:]},
    "active3": {"and-hash": ("add", "split"),
                **{k: ("add",) for k in ("and-claim", "mac-claim")}},
}

# Default run: every fault kind at least once, every server the cheater once.
DEFAULT = {
    "active4": {
        "alice": ["jmp-value:add:middle", "key-contribution:split", "data-share:add",
                  "jmp-hash:short:last"],
        "bob": ["jmp-hash:add:last", "jmp-value:drop:middle", "input-hash:short",
                "key-confirm:garbage"],
        "carol": ["jmp-value:garbage:first", "key-confirm:add", "label-share:add",
                  "input-hash:add"],
        "dave": ["jmp-value:short:last", "jmp-hash:split:middle", "input-hash:drop",
                 "input-hash:split"],
    },
    "active3": {
        "alice": ["product:add:middle", "key-contribution:split", "data-share:add",
                  "and:short:last", "coin:add", "mac-sum:add", "output-product:add"],
        "bob": ["triple:add", "check-open:split", "and:drop:middle", "mac-hash:add",
                "mac-product:add", "output-relay:short"],
        "carol": ["and:garbage:first", "and-hash:add", "label-share:add", "input-hash:split",
                  "check-open-hash:add", "product:short:last", "mac-claim:add",
                  "output-hash:add"],
    },
}
CASES = [(setting, name) for setting in SETTINGS for name in SERVER_NAMES[:N_SERVERS[setting]]]


# -- cluster -------------------------------------------------------------------------------
class CheatingCluster(LocalCluster):
    """Local servers; ``cheater`` runs the fault-injection launcher."""

    def __init__(self, folder: Path, n_servers: int) -> None:
        super().__init__(folder, n_servers=n_servers, timeouts=TIMEOUTS)
        self.cheater: str | None = None
        self.fault_file = self.folder / "fault.txt"
        self.report = self.folder / "report.jsonl"

    def server_argv(self, name: str) -> list[str]:
        if name != self.cheater:
            return super().server_argv(name)
        return [sys.executable, str(LAUNCHER), "--fault-file", str(self.fault_file),
                "--report", str(self.report)]

    def make_cheater(self, name: str) -> None:
        """The previous cheater becomes an honest ``mpc-party`` again; ``name`` cheats."""
        previous, self.cheater = self.cheater, name
        self.fault_file.write_text("")
        for n in dict.fromkeys(x for x in (previous, name) if x is not None):
            self.restart(n)

    def report_of(self, job_id: str, wait: float = 20.0) -> dict[str, Any]:
        """The cheater's report line for ``job_id`` (written when its job ends)."""
        deadline = time.monotonic() + wait
        while True:
            if self.report.exists():
                for line in self.report.read_text().splitlines():
                    rec = json.loads(line)
                    if rec["job"] == job_id:
                        return rec  # type: ignore[no-any-return]
            assert time.monotonic() < deadline, f"no report from {self.cheater} for {job_id}"
            time.sleep(0.05)

    def records(self, job_id: str, wait: float = 20.0) -> dict[str, dict[str, Any]]:
        """Every server's record of ``job_id`` once it has ended everywhere."""
        async def once() -> dict[str, dict[str, Any]]:
            cl = Client(self.dep, "analyst")
            try:
                sessions = await cl.sessions_for(list(self.dep.servers))
                return {s.name: (await s.request("job", id=job_id))["job"] for s in sessions}
            finally:
                cl.close()
        deadline = time.monotonic() + wait
        while True:
            recs = run(once())
            if (len(recs) == len(self.dep.servers)
                    and all(r["state"] in ("done", "failed") for r in recs.values())):
                return recs
            assert time.monotonic() < deadline, f"job {job_id} did not end everywhere: {recs}"
            time.sleep(0.1)

    def stored_results(self) -> dict[str, set[str]]:
        async def once() -> dict[str, list[dict[str, Any]]]:
            cl = Client(self.dep, "analyst")
            try:
                return (await cl.listing("results"))[0]
            finally:
                cl.close()
        return {s: {r["name"] for r in rs} for s, rs in run(once()).items()}


def ok(r: Any) -> str:
    assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}\n{r.stdout}"
    return str(r.stdout)


def _dataset(out: Path) -> Path:
    with open(LSVT, newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:31]
    keep = list(range(6)) + [head.index("label")]
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([head[c] for c in keep])
        w.writerows([r[c] for c in keep] for r in body)
    return out


def _plaintext(path: Path) -> list[list[str]]:
    """The cells of D' in the clear, as ``fetch --out`` writes them."""
    from mpcnet.client.demo import plaintext_reference
    from mpcnet.dataset import class_codes, read_csv
    from mpcnet.fixedpoint import auto_exponents

    table = read_csv(path, label="label")
    assert table.labels is not None
    classes, _ = class_codes(table.labels)
    return plaintext_reference(table, auto_exponents(table.values), classes, K).texts()


def _share_keyed(cluster: CheatingCluster, folder: Path, security: str
                 ) -> list[tuple[str, ...]]:
    """Share the keyed dataset ``KEYED`` (two owners, IDs hashed with their key); the rows of
    the plaintext join followed by the plaintext selection, sorted (D''s order is private)."""
    files = keyed_files(folder, 30, 2, 0.6)
    key = folder / "ids.key"
    ok(cluster.client("hospital-a", "id-key", "--out", str(key)))
    for owner, path in zip(("hospital-a", "hospital-b"), files, strict=True):
        ok(cluster.client(owner, "share", str(path), "--dataset", KEYED, "--columns", "--id",
                          "pid", "--id-key", str(key), "--security", security,
                          *(["--label", "label"] if path == files[0] else [])))
    expected = folder / "keyed-expected.csv"
    ok(cluster.client("analyst", "plaintext", *map(str, files), "--columns", "--id", "pid",
                      "--label", "label", "--k", str(K), "--out", str(expected)))
    return _sorted_rows(expected)


def _sorted_rows(path: Path) -> list[tuple[str, ...]]:
    with open(path, newline="") as f:
        return sorted(tuple(r) for r in list(csv.reader(f))[1:])


# -- bookkeeping ---------------------------------------------------------------------------
@dataclass
class Case:
    cheater: str
    spec: str
    checks: set[str]
    seconds: float


@dataclass
class Tally:
    """Every (cheater, message kind, fault) case that ran; a case is recorded only once all
    its checks passed, so every recorded case was detected."""

    cases: list[Case] = field(default_factory=list)

    def line(self, cheater: str | None = None) -> str:
        cases = [c for c in self.cases if cheater is None or c.cheater == cheater]
        who = ", ".join(f"{n} {sum(c.cheater == n for c in cases)}"
                        for n in SERVER_NAMES if any(c.cheater == n for c in cases))
        kinds = {c.spec.split(":")[0] for c in cases}
        faults = {c.spec.split(":")[1] for c in cases}
        checks = set().union(*(c.checks for c in cases)) if cases else set()
        return (f"cheating e2e: {len(cases)} (cheater, message kind, fault) cases ran, "
                f"{len(cases)} detected; cheaters: {who}; {len(kinds)} message kinds, "
                f"faults {'/'.join(a for a in ACTIONS if a in faults)}; checks named: "
                f"{', '.join(sorted(checks))}; {sum(c.seconds for c in cases):.0f} s of jobs")


@dataclass
class Setup:
    security: str
    cluster: CheatingCluster
    csv: Path
    expected: list[list[str]]
    names: Iterator[int]
    tally: Tally
    keyed_expected: list[tuple[str, ...]]
    kinds: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    keyed_seconds: float = 0.0  # the last honest keyed job's time, up to which a drop may wait
    unfired: dict[str, dict[str, int]] = field(default_factory=dict)  # a job's kinds, no fault


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory,
          request: pytest.FixtureRequest) -> Iterator[Setup]:
    """One cluster per security setting (``request.param``), shared by its cases."""
    security = request.param
    folder = tmp_path_factory.mktemp(f"cheating-{security}")
    data = _dataset(folder / "study.csv")
    cluster = CheatingCluster(folder / "deploy", N_SERVERS[security])
    tally = Tally()
    with cluster:
        cluster.start()
        ok(cluster.client("hospital-a", "share", str(data), "--dataset", DATASET, "--label",
                          "label", "--security", security))
        keyed = _share_keyed(cluster, folder, security)
        yield Setup(security, cluster, data, _plaintext(data), itertools.count(), tally, keyed)
    if tally.cases:
        capture = request.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled():
            print(f"\n{tally.line()}")


# -- one case ------------------------------------------------------------------------------
def _spec(text: str, kinds: dict[str, dict[str, int]]) -> str:
    """``KIND:ACTION[:first|middle|last]`` -> a launcher spec with ``at`` from the honest
    run's count of rounds of that kind."""
    kind, action, *where = text.split(":")
    n = kinds[kind]["rounds"]
    at = {"first": 0, "middle": n // 2, "last": n - 1}[where[0] if where else "first"]
    return f"{kind}:{action}:at={at}"


def honest_control(s: Setup, cheater: str, tmp_path: Path, dataset: str = DATASET
                   ) -> dict[str, dict[str, int]]:
    """The cheater's launcher with no fault: the job succeeds and D' equals the plaintext
    (for ``KEYED``, as a set of rows)."""
    c = s.cluster
    c.make_cheater(cheater)
    result = f"honest-{cheater}-{next(s.names)}"
    t0 = time.monotonic()
    out = ok(c.client("analyst", "select", "--dataset", dataset, "--k", str(K), "--result",
                      result, "--security", s.security))
    if dataset == KEYED:
        s.keyed_seconds = time.monotonic() - t0
    job_id = re.search(r"job ([0-9a-f]{12}) done", out)
    assert job_id, out
    report = c.report_of(job_id.group(1))
    assert report["spec"] is None and report["fired"] == [] and report["state"] == "done"
    ok(c.client("analyst", "fetch", "--result", result, "--out", str(tmp_path / "d.csv")))
    if dataset == KEYED:
        assert _sorted_rows(tmp_path / "d.csv") == s.keyed_expected
        return report["kinds"]  # type: ignore[no-any-return]
    with open(tmp_path / "d.csv") as f:
        got = list(csv.reader(f))[1:]
    assert got == s.expected  # equal cells: equal encoded values
    s.kinds[cheater] = report["kinds"]
    return report["kinds"]  # type: ignore[no-any-return]


def run_case(s: Setup, cheater: str, spec: str, tmp_path: Path, dataset: str = DATASET
             ) -> set[str] | None:
    """Run one job on ``dataset`` with ``spec`` at ``cheater``; check detection and that no D'
    exists. Returns the checks the honest servers named, or None when a keyed job sent fewer
    messages of the kind than the round ``spec`` aims at (the fault never fired: the
    quicksort's rounds vary with the shuffle)."""
    c = s.cluster
    fault = FaultSpec.parse(spec)
    assert fault is not None and c.cheater == cheater
    c.fault_file.write_text(spec)
    result = f"case-{next(s.names)}"
    t0 = time.monotonic()
    r = c.client("analyst", "select", "--dataset", dataset, "--k", str(K), "--result", result,
                 "--security", s.security)
    seconds = time.monotonic() - t0
    what = f"{cheater} {spec}"
    if r.returncode == 0 and dataset == KEYED:
        done = re.search(r"job ([0-9a-f]{12}) done", r.stdout)
        assert done, r.stdout
        report = c.report_of(done.group(1))
        assert not report["fired"], f"{what}: the fault fired and the job succeeded ({report})"
        s.unfired = report["kinds"]
        return None  # this job sent fewer messages of the kind than the honest run
    assert r.returncode in (3, 4), f"{what}: select exit {r.returncode}\n{r.stderr}{r.stdout}"
    job = re.search(r"job ([0-9a-f]{12}) failed", r.stderr)
    assert job, f"{what}: {r.stderr}"
    report = c.report_of(job.group(1))
    assert report["fired"], f"{what}: the fault never fired ({report})"
    records = c.records(job.group(1))
    honest = {n: rec for n, rec in records.items() if n != cheater}
    assert all(rec["state"] == "failed" for rec in honest.values()), (what, records)
    errors = [str(rec["error"]) for rec in honest.values()]
    checks: set[str] = set()
    # the analyst hears every server's record, so a cheating coordinator cannot hide the cause
    coordinator_honest = cheater != c.dep.leader.name
    if fault.action in ("drop", "garbage"):
        # at least one honest server saw the cheater directly. A server that another round
        # follows may time out on the cheater's victim first (it waits for the victim's next
        # message while the victim still waits for the cheater's; both bounds end within
        # milliseconds of each other), and then names that honest peer
        direct = "no message within" if fault.action == "drop" else "malformed frame"
        if fault.action == "garbage":
            assert all(cheater in e for e in errors), (what, errors)
        assert any(e.startswith(f"PeerError: {cheater} (") and direct in e for e in errors), \
            (what, errors)
        assert cheater in r.stderr, (what, r.stderr)
        if coordinator_honest:
            assert r.returncode == 3
        if fault.action == "drop":
            # a keyed job's alignment may come before the dropped message (twice an honest
            # job's time: a loaded machine)
            before = 2 * s.keyed_seconds if dataset == KEYED else 0.0
            assert ROUND <= seconds < ROUND + HANDSHAKE + 2.0 + before, (what, seconds)
    elif fault.action == "short" and not any(e.startswith("CheatingDetected") for e in errors):
        # a short array inside a bundle of several (``RoundEngine.together``) is a malformed
        # bundle, refused naming its sender before any check could look at it
        assert all("malformed bundle" in e or cheater in e for e in errors), (what, errors)
        assert any(f"party {c.dep.party(cheater)} sent a malformed bundle" in e
                   for e in errors), (what, errors)
    else:
        for e in errors:
            assert e.startswith("CheatingDetected: cheating detected: "), (what, errors)
            checks |= set(re.findall(r"cheating detected: ([A-Za-z -]+?) check failed", e))
        assert checks and checks <= CHECKS[s.security][fault.kind], (what, checks, errors)
        assert r.returncode == 4 and "cheating detected" in r.stderr, (what, r.stderr)
    # no D' anywhere: no server lists the result, fetch refuses
    assert all(result not in names for names in c.stored_results().values()), what
    r = c.client("analyst", "fetch", "--result", result, "--out", str(tmp_path / "x.csv"))
    assert r.returncode == 2 and "no result" in r.stderr, (what, r.stderr)
    assert not (tmp_path / "x.csv").exists()
    s.tally.cases.append(Case(cheater, spec, checks, seconds))
    return checks


def _results_cli_lists_only_honest_runs(s: Setup) -> None:
    listing = json.loads(ok(s.cluster.client("analyst", "--json", "results")))
    names = {r["name"] for rs in listing.values() for r in rs}
    assert names and all(n.startswith("honest-") for n in names), names


# -- tests ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("setup", "cheater"), CASES, indirect=["setup"])
def test_cheating_server_is_caught(setup: Setup, cheater: str, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    kinds = honest_control(setup, cheater, tmp_path)
    for case in DEFAULT[setup.security][cheater]:
        run_case(setup, cheater, _spec(case, kinds), tmp_path)
    _results_cli_lists_only_honest_runs(setup)
    with capsys.disabled():
        print(f"\n{setup.tally.line(cheater)}")


# The alignment of a keyed dataset (``mpcnet.ops.join``) runs first in its job, so a kind's
# first round falls in it; its own kinds are the shuffle's (active3: ``shuffle``; active4: joint
# messages) and ``key-share``, the cheater's own shares of the ID hashes.
KEYED_DEFAULT = {
    "active4": {"bob": ["key-share:add", "jmp-value:add:first", "jmp-hash:add:first",
                        "data-share:add", "open-value:add:first"]},
    "active3": {"bob": ["key-share:add", "shuffle:add:first", "shuffle:split:last",
                        "and:add:first", "data-share:add", "open-value:add:first"]},
}
KEYED_CASES = [(setting, name) for setting in SETTINGS for name in KEYED_DEFAULT[setting]]


@pytest.mark.parametrize(("setup", "cheater"), KEYED_CASES, indirect=["setup"])
def test_cheating_during_the_alignment_is_caught(setup: Setup, cheater: str,
                                                 tmp_path: Path) -> None:
    kinds = honest_control(setup, cheater, tmp_path, KEYED)
    assert "key-share" in kinds and (setup.security != "active3" or "shuffle" in kinds)
    for case in KEYED_DEFAULT[setup.security][cheater]:
        run_keyed_case(setup, cheater, _spec(case, kinds), tmp_path)


def run_keyed_case(s: Setup, cheater: str, spec: str, tmp_path: Path) -> None:
    """``run_case`` on the keyed dataset; a fault aimed past the job's last message of its
    kind is aimed again at an earlier one (each job shuffles anew)."""
    fault = FaultSpec.parse(spec)
    assert fault is not None
    for attempt in range(4):
        if run_case(s, cheater, str(fault), tmp_path, KEYED) is not None:
            return
        sent = s.unfired.get(fault.kind, {}).get("rounds", 0)
        # past that job's last message of the kind: its last; else (an empty message there)
        # an earlier one
        at = sent - 1 if fault.at >= sent else (fault.at - 1, fault.at // 2, 0)[attempt % 3]
        fault = dataclasses.replace(fault, at=max(0, at))
    raise AssertionError(f"{cheater} {spec}: the fault never fired in four jobs")


def full_matrix(security: str, kinds: dict[str, dict[str, int]]) -> list[str]:
    """Every message kind this server sent in the honest run x every fault x the first,
    middle and last round of that kind (split only where it went to several peers)."""
    specs = []
    for kind, info in sorted(kinds.items()):
        if kind in INPUT_KINDS:
            specs.append(f"{kind}:add:at=0")
            continue
        for action in ACTIONS_OF[security].get(kind, ACTIONS):
            if action == "split" and info["peers"] < 2:
                continue
            n = info["rounds"]
            specs += [f"{kind}:{action}:at={at}" for at in sorted({0, n // 2, n - 1})]
    return specs


@pytest.mark.slow
@pytest.mark.parametrize(("setup", "cheater"), CASES, indirect=["setup"])
def test_every_message_kind_and_fault(setup: Setup, cheater: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    kinds = honest_control(setup, cheater, tmp_path)
    assert set(CHECKS[setup.security]) <= set(kinds)
    for spec in full_matrix(setup.security, kinds):
        run_case(setup, cheater, spec, tmp_path)
    _results_cli_lists_only_honest_runs(setup)
    with capsys.disabled():
        print(f"\n{setup.tally.line(cheater)}")


# -- a cheating coordinator ----------------------------------------------------------------
# job-spec action -> what every member's record of the refused job says
COORDINATOR_CASES = {
    "downgrade": "the coordinator says security 'passive3'",
    "downgrade-signed": "does not verify",
    "k": "the coordinator says k 3",
    "dataset": "the coordinator says dataset 'another'",
    "replay": "already used by job",  # the request of the refused job just before
    "forge": "its certificate names 'alice', not 'analyst'",
}


@pytest.mark.parametrize("setup", SETTINGS, indirect=True)
def test_a_cheating_coordinator_cannot_change_the_job(setup: Setup, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The coordinator (alice) alters the job it sends the members: every member refuses it
    with the reason, the analyst's select exits 4 and no result exists anywhere."""
    c = setup.cluster
    honest_control(setup, "alice", tmp_path)  # alice runs the launcher; a job to replay
    members = [s.name for s in c.dep.servers[1:]]
    for action, words in COORDINATOR_CASES.items():
        c.fault_file.write_text(f"job-spec:{action}")
        result = f"coordinator-{action}"
        r = c.client("analyst", "select", "--dataset", DATASET, "--k", str(K), "--result",
                     result, "--security", setup.security)
        assert r.returncode == 4 and words in r.stderr, (action, r.stderr)
        job = re.search(r"job ([0-9a-f]{12}) failed", r.stderr)
        assert job, r.stderr
        records = c.records(job.group(1))
        for name in members:
            rec = records[name]
            assert rec["state"] == "failed" and rec["started"] is None, (action, name, rec)
            assert "job request check failed" in rec["error"] and words in rec["error"], rec
        assert all(result not in names for names in c.stored_results().values()), action
    # no request at all: the members refuse before they can record anything
    c.fault_file.write_text("job-spec:unsigned")
    r = c.client("analyst", "select", "--dataset", DATASET, "--k", str(K), "--result",
                 "coordinator-unsigned", "--security", setup.security)
    assert r.returncode == 4 and "no signed job request" in r.stderr, r.stderr
    # a job reported done that never ran: the client checks every member's record
    c.fault_file.write_text("job-spec:fake-done")
    r = c.client("analyst", "select", "--dataset", DATASET, "--k", str(K), "--result",
                 "coordinator-fake", "--security", setup.security)
    assert r.returncode == 4 and "job record check failed" in r.stderr, r.stderr
    assert "has no record of it" in r.stderr, r.stderr
    # a job nobody asked for, then the analyst's own, honestly: only the latter runs
    c.fault_file.write_text("job-spec:unrequested")
    out = ok(c.client("analyst", "select", "--dataset", DATASET, "--k", str(K), "--result",
                      "coordinator-real", "--security", setup.security))
    real = re.search(r"job ([0-9a-f]{12}) done", out)
    assert real, out
    listing = json.loads(ok(c.client("analyst", "--json", "jobs")))
    for name in members:
        made_up = [j for j in listing[name] if j["result"] == f"unrequested-{real.group(1)}"]
        assert len(made_up) == 1 and made_up[0]["state"] == "failed", listing[name]
        assert "names 'alice', not 'analyst'" in made_up[0]["error"], made_up[0]
    stored = c.stored_results()
    assert all("coordinator-real" in names and not any(n.startswith("unrequested-")
                                                       for n in names)
               for names in stored.values()), stored
    c.fault_file.write_text("")
    with capsys.disabled():
        print(f"\ncheating coordinator ({setup.security}): {len(COORDINATOR_CASES) + 3} "
              "altered jobs refused by every member (each with its reason) or by the client; "
              "the analyst's own job ran once")


@pytest.mark.slow
@pytest.mark.parametrize(("setup", "cheater"), CASES, indirect=["setup"])
def test_every_message_kind_and_fault_of_a_keyed_job(setup: Setup, cheater: str,
                                                     tmp_path: Path) -> None:
    kinds = honest_control(setup, cheater, tmp_path, KEYED)
    for spec in full_matrix(setup.security, kinds):
        run_keyed_case(setup, cheater, spec, tmp_path)
