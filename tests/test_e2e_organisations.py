"""End to end: a deployment of separate organisations, each with its own folder and key.

Each party (three servers' operators, owners, analysts) has a folder of its own, as it would
have a machine of its own: its copy of the deployment file and ``certs/`` with its own key.
Only certificates travel between folders (``outbox/``). The tests follow the README's
walk-through, then attack it: keys nobody pinned (a certificate of a pinned name made by
someone else) at every server and every client; an owner added and an analyst removed while
the servers run (``mpc-party --reload`` and SIGHUP); one server's key changed while the others
keep theirs. Real ``mpc-party`` processes over TLS on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from reliability_common import fetch_values, lsvt_files, ok, plaintext, refused

from mpcnet import config
from mpcnet.certs.main import main as certs
from mpcnet.client.local import LocalCluster, write_config
from mpcnet.client.session import Client
from mpcnet.errors import NotPinned, PeerError
from mpcnet.jobrequest import JobRequest, SignedRequest
from mpcnet.net.tls import run

SERVERS = ("alice", "bob", "carol")
CLIENTS = (("hospital-a", "owner"), ("hospital-b", "owner"), ("analyst", "analyst"),
           ("analyst-2", "analyst"))


class Organisations:
    """One folder per party; ``outbox`` holds what they send each other (certificates)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.outbox = root / "outbox"
        self.outbox.mkdir(parents=True)
        self.draft = write_config(root / "draft", 3, clients=CLIENTS,
                                  timeouts={"handshake_timeout": 20.0})

    def config(self, name: str) -> Path:
        return self.root / name / "deploy.toml"

    def join(self, name: str, draft: Path | None = None) -> None:
        """``name`` takes a copy of the agreed file, makes its key and sends its certificate."""
        (self.root / name).mkdir()
        shutil.copy(draft or self.draft, self.config(name))
        assert certs(["keygen", name, "--dir", str(self.root / name / "certs")]) == 0
        shutil.copy(self.root / name / "certs" / f"{name}.pem", self.outbox)

    def pin(self, name: str, *whose: str) -> None:
        """``name`` pins in its own copy the certificates of ``whose`` it received."""
        assert certs(["pin", "--config", str(self.config(name)),
                      *(str(self.outbox / f"{w}.pem") for w in whose)]) == 0

    def reload(self, server: str) -> str:
        """``mpc-party --reload`` by ``server``'s operator: what it printed."""
        return ok(subprocess.run(
            [sys.executable, "-m", "mpcnet.parties.main", "--config", str(self.config(server)),
             "--name", server, "--reload"], capture_output=True, text=True, timeout=60))

    def admit(self, server: str, name: str, role: str) -> None:
        """``server``'s operator adds client ``name`` to its own copy and pins its key."""
        path = self.config(server)
        path.write_text(path.read_text() + f'\n[[clients]]\nname = "{name}"\nrole = "{role}"\n')
        self.pin(server, name)


@pytest.fixture
def orgs(tmp_path: Path) -> Organisations:
    """The README's walk-through up to starting the servers."""
    o = Organisations(tmp_path)
    names = [*SERVERS, *(c for c, _ in CLIENTS)]
    for name in names:
        o.join(name)
    for name in names:  # servers pin everyone; clients the servers and themselves
        o.pin(name, *(names if name in SERVERS else (*SERVERS, name)))
    for name in names:
        assert certs(["check", "--config", str(o.config(name)), "--name", name]) == 0
    return o


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "csv").mkdir()
    return lsvt_files(tmp_path / "csv", {"a": (slice(0, 30), range(10)),
                                         "b": (slice(30, 60), range(10)),
                                         "c": (slice(60, 90), range(10))})


@pytest.fixture
def cluster(orgs: Organisations) -> Iterator[LocalCluster]:
    """Each server runs on its operator's own copy; the cluster's client runs as the analyst
    on the analyst's copy."""
    (orgs.root / "run").mkdir()
    c = LocalCluster(orgs.root / "run", config_path=orgs.config("analyst"), make_certs=False,
                     server_configs={s: orgs.config(s) for s in SERVERS})
    with c:
        c.start()
        yield c


def share(cluster: LocalCluster, orgs: Organisations, owner: str, csv: Path,
          dataset: str = "study") -> subprocess.CompletedProcess[str]:
    return cluster.client(owner, "share", str(csv), "--dataset", dataset, "--label", "label",
                          config_path=orgs.config(owner))


def block(status: str, server: str) -> str:
    """The lines ``mpc-client status`` printed for ``server``: its own and its mesh's."""
    lines = status.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{server} "))
    end = next((j for j in range(start + 1, len(lines)) if not lines[j].startswith(" ")),
               len(lines))
    return "\n".join(lines[start:end])


def key_files(root: Path) -> dict[Path, str]:
    """Every file under ``root`` that holds a private key, with the folder it lies in."""
    return {p: p.relative_to(root).parts[0] for p in root.rglob("*")
            if p.is_file() and b"PRIVATE KEY" in p.read_bytes()}


def test_walkthrough_keeps_every_key_in_its_owners_folder(
        orgs: Organisations, cluster: LocalCluster, files: dict[str, Path]) -> None:
    ok(share(cluster, orgs, "hospital-a", files["a"]))
    ok(share(cluster, orgs, "hospital-b", files["b"]))
    ok(cluster.client("analyst", "select", "--dataset", "study", "--k", "4", "--result", "r"))
    assert np.array_equal(fetch_values(cluster, "r"), plaintext([files["a"], files["b"]], 4))
    held = key_files(orgs.root)
    names = [*SERVERS, *(c for c, _ in CLIENTS)]
    assert sorted(held.values()) == sorted(names)  # one key per party, nothing else
    for path, folder in held.items():
        assert path == orgs.root / folder / "certs" / f"{folder}.key", path
    assert not list(orgs.outbox.glob("*.key"))


def test_keys_nobody_pinned_are_refused_by_every_server_and_client(
        orgs: Organisations, cluster: LocalCluster, files: dict[str, Path]) -> None:
    # a key for the pinned name "analyst" made by someone else: every server refuses it
    rogue = orgs.root / "rogue"
    (rogue / "certs").mkdir(parents=True)
    shutil.copy(orgs.config("analyst"), rogue / "deploy.toml")
    assert certs(["keygen", "analyst", "--dir", str(rogue / "certs")]) == 0
    r = cluster.client("analyst", "status", "--no-mesh", config_path=rogue / "deploy.toml")
    assert r.returncode == 3
    for s in SERVERS:
        assert f"{s} " in r.stdout and "DOWN" in r.stdout
    assert r.stdout.count("does not pin our key") == 3, r.stdout
    assert "not pinned" in refused(cluster.client("analyst", "datasets",
                                                  config_path=rogue / "deploy.toml"), code=2)
    # a server presenting a key for the name "bob" that someone else made, at bob's address
    cluster.kill("bob", signal.SIGTERM)
    fake = orgs.root / "fake-bob"
    (fake / "certs").mkdir(parents=True)
    shutil.copy(orgs.config("bob"), fake / "deploy.toml")
    assert certs(["keygen", "bob", "--dir", str(fake / "certs"), "--force"]) == 0
    assert certs(["pin", "--config", str(fake / "deploy.toml"), "--replace",
                  str(fake / "certs" / "bob.pem")]) == 0
    fake_pin = config.load(fake / "deploy.toml").pins("bob")[0]
    cluster.server_configs["bob"] = fake / "deploy.toml"
    cluster.start(["bob"])
    for client in ("hospital-a", "analyst"):  # every client refuses it, naming the key
        r = cluster.client(client, "status", config_path=orgs.config(client))
        line = next(li for li in r.stdout.splitlines() if li.startswith("bob "))
        assert "DOWN" in line and f"{fake_pin} of 'bob' is not pinned" in line, r.stdout
    status = cluster.client("analyst", "status").stdout
    for server in ("alice", "carol"):  # so does every server that dials it
        assert f"the key {fake_pin} of 'bob' is not pinned" in block(status, server), status
    reason = refused(share(cluster, orgs, "hospital-a", files["a"], "never"), code=2)
    assert "not pinned" in reason and fake_pin in reason  # the owner sends it nothing
    fake_view = cluster.client("bob", "status", config_path=fake / "deploy.toml").stdout
    mesh = block(fake_view, "bob")
    for server in ("alice", "carol"):  # and every server refuses the fake bob
        line = next(li for li in mesh.splitlines() if li.strip().startswith(f"{server}:"))
        assert f"does not pin our key {fake_pin}" in line, fake_view
    cluster.kill("bob", signal.SIGTERM)  # the real bob is back: nothing reached anyone
    cluster.server_configs["bob"] = orgs.config("bob")
    cluster.start(["bob"])
    assert "never" not in ok(cluster.client("analyst", "datasets"))


def test_an_owner_added_while_the_servers_run_shares_and_is_in_the_job(
        orgs: Organisations, cluster: LocalCluster, files: dict[str, Path]) -> None:
    ok(share(cluster, orgs, "hospital-a", files["a"]))
    ok(share(cluster, orgs, "hospital-b", files["b"]))
    draft = orgs.root / "draft-c.toml"
    draft.write_text(orgs.draft.read_text() + '\n[[clients]]\nname = "hospital-c"\n'
                     'role = "owner"\n')
    orgs.join("hospital-c", draft)
    orgs.pin("hospital-c", *SERVERS, "hospital-c")
    for server in SERVERS:
        orgs.admit(server, "hospital-c", "owner")
    assert '"added": [\n  "hospital-c"' in orgs.reload("alice")
    orgs.reload("bob")
    # carol's operator has not applied its file yet: the upload needs every server
    reason = refused(share(cluster, orgs, "hospital-c", files["c"]), code=2)
    assert "carol" in reason and "not pinned" in reason
    os.kill(cluster.pid("carol"), signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "reloaded" not in cluster.log("carol"):
        assert time.monotonic() < deadline, cluster.log("carol")
        time.sleep(0.05)
    ok(share(cluster, orgs, "hospital-c", files["c"]))
    ok(cluster.client("analyst", "select", "--dataset", "study", "--k", "4", "--result", "r"))
    got = fetch_values(cluster, "r")
    assert got.shape[0] == 90
    assert np.array_equal(got, plaintext([files["a"], files["b"], files["c"]], 4))


def test_a_reload_that_does_not_check_is_refused_and_changes_nothing(
        orgs: Organisations, cluster: LocalCluster) -> None:
    path = orgs.config("alice")
    good = path.read_text()
    path.write_text(good.replace('data_dir = "data/bob"', 'data_dir = "data/bob2"'))
    r = subprocess.run([sys.executable, "-m", "mpcnet.parties.main", "--config", str(path),
                        "--name", "alice", "--reload"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "the servers changed (bob)" in r.stderr, r.stderr
    path.write_text(good + "\n[[clients]]\nname = \"late\"\nrole = \"boss\"\n")
    os.kill(cluster.pid("alice"), signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "reload refused, still running on the previous file" not in cluster.log("alice"):
        assert time.monotonic() < deadline, cluster.log("alice")
        time.sleep(0.05)
    path.write_text(good)
    ok(cluster.client("analyst", "status"))


def test_an_analyst_removed_while_the_servers_run_is_refused_at_once(
        orgs: Organisations, cluster: LocalCluster, files: dict[str, Path]) -> None:
    ok(share(cluster, orgs, "hospital-a", files["a"]))
    ok(share(cluster, orgs, "hospital-b", files["b"]))

    def signed(who: str, result: str) -> dict[str, object]:
        dep = config.load(orgs.config(who))
        cert, key = dep.identity(who)
        request = JobRequest.new(who, "study", 3, "ms-gini", "passive3", result)
        return SignedRequest.sign(request, key, cert).to_wire()

    async def scenario() -> tuple[dict[str, object], bool, str]:
        removed = Client(config.load(orgs.config("analyst")), "analyst")
        other = Client(config.load(orgs.config("analyst-2")), "analyst-2")
        try:
            open_sessions = await removed.sessions_for(list(removed.dep.servers))
            leader = await other.session(other.dep.leader)
            # bob is frozen: analyst-2's job is running at alice (forming its mesh) and the
            # analyst's request waits in the queue behind it
            os.kill(cluster.pid("bob"), signal.SIGSTOP)
            running = (await leader.request("select", request=signed("analyst-2", "kept")))
            queued = (await open_sessions[0].request("select",
                                                     request=signed("analyst", "dropped")))
            assert queued["job"]["state"] == "queued"
            for server in SERVERS:  # each operator removes the analyst from its own copy
                assert certs(["unpin", "--config", str(orgs.config(server)), "analyst"]) == 0
            os.kill(cluster.pid("alice"), signal.SIGHUP)
            deadline = time.monotonic() + 10
            while "reloaded" not in cluster.log("alice"):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            os.kill(cluster.pid("bob"), signal.SIGCONT)
            await asyncio.to_thread(orgs.reload, "bob")
            await asyncio.to_thread(orgs.reload, "carol")
            job = running["job"]
            while job["state"] in ("queued", "running"):  # type: ignore[index]
                job = (await leader.request("job", id=job["id"], wait=5))["job"]  # type: ignore
            return job, open_sessions[0].conn.closed, queued["job"]["id"]
        finally:
            removed.close()
            other.close()

    try:
        job, closed, dropped = run(scenario())
    finally:
        os.kill(cluster.pid("bob"), signal.SIGCONT)
    assert job["state"] == "done", job  # the running job was not disturbed
    assert closed  # the removed analyst's open session was closed at once
    data = config.load(orgs.config("alice")).server("alice").data_dir
    record = json.loads((data / "jobs" / f"{dropped}.json").read_text())
    assert record["state"] == "failed" and record["started"] is None  # never started
    assert "refused after a reload" in record["error"] and "not pinned" in record["error"]
    r = cluster.client("analyst", "status", "--no-mesh")
    assert r.returncode == 3
    for server in SERVERS:  # its next request: every server refuses it, naming the reason
        line = next(li for li in r.stdout.splitlines() if li.startswith(server))
        assert "not pinned" in line, r.stdout
    assert "not pinned" in refused(cluster.client("analyst", "datasets"), code=2)
    ok(cluster.client("analyst-2", "datasets", config_path=orgs.config("analyst-2")))


def test_one_server_changes_its_key_while_the_others_keep_theirs(
        orgs: Organisations, cluster: LocalCluster, files: dict[str, Path]) -> None:
    bob_certs = orgs.root / "bob" / "certs"
    old = config.load(orgs.config("bob")).pins("bob")[0]
    assert certs(["renew", "bob", "--dir", str(bob_certs)]) == 0  # bob's server runs on
    shutil.copy(bob_certs / "bob.pem", orgs.outbox / "bob.pem")
    everyone = [*SERVERS, *(c for c, _ in CLIENTS)]
    for name in everyone:  # the new key beside the old one
        orgs.pin(name, "bob")
    for server in ("alice", "carol", "bob"):  # bob last: then it presents its new key
        orgs.reload(server)
    new = config.load(orgs.config("bob")).pins("bob")[1]
    ok(cluster.client("analyst", "status"))
    for name in everyone:  # the old key is unpinned everywhere
        assert certs(["unpin", "--config", str(orgs.config(name)), "bob", old]) == 0
    for server in SERVERS:
        orgs.reload(server)
    ok(cluster.client("analyst", "status"))
    ok(share(cluster, orgs, "hospital-a", files["a"]))
    ok(share(cluster, orgs, "hospital-b", files["b"]))
    ok(cluster.client("analyst", "select", "--dataset", "study", "--k", "3", "--result", "r"))
    assert new != old and config.load(orgs.config("alice")).pins("bob") == (new,)
    assert len(key_files(orgs.root / "bob")) == 1  # bob's old key is gone


def test_status_warns_about_a_certificate_that_expires_soon(
        orgs: Organisations, cluster: LocalCluster) -> None:
    r = cluster.client("analyst", "status", "--expiry-days", "1000")
    assert r.returncode == 0
    for who in ("your certificate", *(f"the certificate of {s}" for s in SERVERS)):
        assert f"warning: {who}" in r.stderr, r.stderr
    assert "warning" not in ok(cluster.client("analyst", "status")) + cluster.client(
        "analyst", "status").stderr


def test_a_removed_client_unknown_to_the_trust_store_is_refused_in_tls(
        orgs: Organisations, cluster: LocalCluster) -> None:
    """After a restart the removed analyst's certificate is no longer trusted at all: the TLS
    session fails, and the client still names the reason (NotPinned)."""
    for server in SERVERS:
        certs(["unpin", "--config", str(orgs.config(server)), "analyst"])
        cluster.restart(server)

    async def attempt() -> BaseException | None:
        cl = Client(config.load(orgs.config("analyst")), "analyst")
        try:
            await cl.session(cl.dep.leader)
        except PeerError as exc:
            return exc
        finally:
            cl.close()
        return None

    err = run(attempt())
    own = config.load(orgs.config("analyst")).pins("analyst")[0]
    assert isinstance(err, NotPinned), err  # named, with the key it does not pin
    assert f"does not pin our key {own}" in str(err), err
