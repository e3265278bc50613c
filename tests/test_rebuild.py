"""parties.rebuild end to end: a server that lost its data folder takes it back from its peers.

Real ``mpc-party`` processes over TLS on 127.0.0.1, driven through ``mpc-client``: two datasets
shared (by rows and by columns), a selection and a training, one server's data folder deleted,
``mpc-party --rebuild``, and then the next selection, the old result and the old model equal to
what they were, in every setting. A peer that sends a wrong component is caught and named,
and that dataset is refused (``tests/rebuild_cheater.py``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from reliability_common import lsvt_files, ok

from mpcnet.client.connection import Connections
from mpcnet.client.local import LocalCluster
from mpcnet.errors import AccessDenied, InputError, MPCError
from mpcnet.net.tls import run
from mpcnet.schemes.registry import held

CHEATER = Path(__file__).resolve().parent / "rebuild_cheater.py"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return lsvt_files(tmp_path_factory.mktemp("csv"), {
        "top": (slice(0, 30), range(10)), "bottom": (slice(30, 60), range(10)),
        "left": (slice(0, 60), range(4), False), "right": (slice(0, 60), range(4, 9))})


def rebuild(cluster: LocalCluster, name: str) -> subprocess.CompletedProcess[str]:
    """``mpc-party --rebuild`` for server ``name``, run to its end."""
    return subprocess.run([sys.executable, "-m", "mpcnet.parties.main", "--config",
                           str(cluster.config_path), "--name", name, "--rebuild"],
                          capture_output=True, text=True, timeout=120, env=cluster._env())


def lose_and_rebuild(cluster: LocalCluster, name: str) -> subprocess.CompletedProcess[str]:
    """Server ``name`` stopped, its data folder deleted, and ``mpc-party --rebuild`` run."""
    cluster.kill(name)
    shutil.rmtree(cluster.dep.server(name).data_dir)
    return rebuild(cluster, name)


def share_two(cluster: LocalCluster, files: dict[str, Path], tag: str, security: str) -> None:
    """Dataset ``rows-<tag>`` from two owners' records, ``cols-<tag>`` from their columns."""
    for owner, part in (("hospital-a", "top"), ("hospital-b", "bottom")):
        ok(cluster.client(owner, "share", str(files[part]), "--dataset", f"rows-{tag}",
                          "--label", "label", "--security", security, "--release", "values",
                          "label", "names"))
    ok(cluster.client("hospital-a", "share", str(files["left"]), "--dataset", f"cols-{tag}",
                      "--columns", "--security", security))
    ok(cluster.client("hospital-b", "share", str(files["right"]), "--dataset", f"cols-{tag}",
                      "--columns", "--label", "label", "--security", security))


def select(cluster: LocalCluster, dataset: str, k: int, *results: str) -> None:
    """The analyst's selection of ``k`` features of ``dataset``, stored as each result."""
    for result in results:
        ok(cluster.client("analyst", "select", "--dataset", dataset, "--k", str(k),
                          "--result", result))


def fetched(cluster: LocalCluster, out: Path, *args: str) -> str:
    ok(cluster.client("analyst", "fetch", *args, "--out", str(out)))
    return out.read_text()


def model(cluster: LocalCluster, out: Path, name: str) -> str:
    ok(cluster.client("clinic", "model", "--model", name, "--out", str(out)))
    return out.read_text()


@pytest.mark.parametrize(("servers", "security", "victims"), [
    (3, "passive3", ("bob",)), (3, "active3", ("alice",)), (4, "active4", ("dave", "carol"))])
def test_a_server_that_lost_its_disk_is_rebuilt_and_every_result_is_as_before(
        tmp_path: Path, files: dict[str, Path], servers: int, security: str,
        victims: tuple[str, ...]) -> None:
    """With four servers, two may lose their disks: every component still has a holder."""
    with LocalCluster(tmp_path / "deploy", servers) as cluster:
        cluster.start()
        share_two(cluster, files, "t", security)
        ok(cluster.client("analyst", "select", "--dataset", "rows-t", "--k", "4", "--result",
                          "r1", "--security", security))
        ok(cluster.client("analyst", "train", "--result", "r1", "--model", "m1", "--owner",
                          "clinic", "--epochs", "10"))
        reduced = fetched(cluster, tmp_path / "r1.csv", "--result", "r1")
        trained = model(cluster, tmp_path / "m1.json", "m1")

        for victim in victims:
            cluster.kill(victim)
            shutil.rmtree(cluster.dep.server(victim).data_dir)  # the disk is gone
        for victim in victims:  # the first rebuilds while the second is still down
            r = rebuild(cluster, victim)
            assert r.returncode == 0, r.stdout + r.stderr
            assert "rebuilt 2 datasets and 2 results and models" in r.stdout, r.stdout
            cluster.start([victim])

        assert fetched(cluster, tmp_path / "again.csv", "--result", "r1") == reduced
        assert model(cluster, tmp_path / "again.json", "m1") == trained
        ok(cluster.client("analyst", "select", "--dataset", "rows-t", "--k", "4", "--result",
                          "r2", "--security", security))
        assert fetched(cluster, tmp_path / "r2.csv", "--result", "r2") == reduced
        ok(cluster.client("analyst", "select", "--dataset", "cols-t", "--k", "3", "--result",
                          "c1", "--security", security))
        ok(cluster.client("analyst", "train", "--result", "r2", "--model", "m2", "--owner",
                          "clinic", "--epochs", "10"))
        # training rounds stochastically (mpcnet.ops.truncate): a model trained again on the
        # rebuilt shares is the old one up to rounding
        again, before = (json.loads(t) for t in (model(cluster, tmp_path / "m2.json", "m2"),
                                                 trained))
        assert np.allclose(again["coef"], before["coef"], atol=0.05)


class CheatingCluster(LocalCluster):
    """A local deployment whose alice runs a test launcher (``cheat``)."""

    def cheat(self) -> list[str]:
        raise NotImplementedError

    def server_argv(self, name: str) -> list[str]:
        return [sys.executable, *self.cheat()] if name == "alice" else \
            super().server_argv(name)


class LyingCluster(CheatingCluster):
    """A local deployment whose alice lies to a peer that rebuilds: wrong components of
    dataset ``rows-t`` and result ``lie-r``, and every result widened in its inventory."""

    def cheat(self) -> list[str]:
        return [str(CHEATER), "--lie-about", "rows-t", "lie-r"]


def test_a_peer_that_sends_a_wrong_component_is_named_and_its_dataset_refused(
        tmp_path: Path, files: dict[str, Path]) -> None:
    """What a lying peer sends is refused by name; the rest is rebuilt, a result from the
    other peer's copy where the liar's does not match what the rebuilt server signed."""
    with LyingCluster(tmp_path / "deploy", 3) as cluster:
        cluster.start()
        share_two(cluster, files, "t", "passive3")
        select(cluster, "cols-t", 3, "lie-r", "ok-r")
        reduced = fetched(cluster, tmp_path / "ok.csv", "--result", "ok-r")
        r = lose_and_rebuild(cluster, "bob")
        assert r.returncode == 4, r.stdout + r.stderr
        assert "rebuilt 1 datasets and 1 results" in r.stdout, r.stdout
        assert "refused dataset 'rows-t': CheatingDetected" in r.stdout, r.stdout
        assert "alice sent component 1 of data of hospital-a's contribution" in r.stdout
        # alice's copy of lie-r is not the one bob signed: what it sends of it is refused
        # without naming it again (docs/reliability.md)
        assert "refused result 'lie-r' of analyst: InputError" in r.stdout, r.stdout
        assert "alice (whose own copy was passed over) sent one that differs" in r.stdout
        assert "alice describes result lie-r otherwise than bob signed it" in r.stderr
        assert "alice describes result ok-r otherwise than bob signed it" in r.stderr
        data = cluster.dep.server("bob").data_dir
        assert not (data / "datasets" / "rows-t").exists()
        assert not (data / "results" / "analyst" / "lie-r").exists()
        assert (data / "datasets" / "cols-t").exists()
        kept = json.loads((data / "results" / "analyst" / "ok-r" / "manifest.json").read_text())
        assert kept["share_with"] == []  # not the liar's widened copy
        cluster.start(["bob"])
        assert fetched(cluster, tmp_path / "again.csv", "--result", "ok-r") == reduced


class ComponentLyingCluster(CheatingCluster):
    """Four servers; alice lists every result as stored but lies about result ``lie-r``'s
    components."""

    def cheat(self) -> list[str]:
        return [str(CHEATER), "--lie-about", "lie-r", "--true-inventory"]


def test_with_four_servers_a_wrong_component_is_asked_again_of_the_next_holder(
        tmp_path: Path, files: dict[str, Path]) -> None:
    """Each of bob's components has two other holders: alice's wrong one is named and the
    next holder's taken, so the result is rebuilt."""
    with ComponentLyingCluster(tmp_path / "deploy", 4) as cluster:
        cluster.start()
        share_two(cluster, files, "t", "active4")
        ok(cluster.client("analyst", "select", "--dataset", "rows-t", "--k", "4", "--result",
                          "lie-r", "--security", "active4"))
        reduced = fetched(cluster, tmp_path / "r.csv", "--result", "lie-r")
        r = lose_and_rebuild(cluster, "bob")
        assert r.returncode == 4, r.stdout + r.stderr
        assert "rebuilt 2 datasets and 1 results" in r.stdout, r.stdout
        assert "cheating: alice sent a wrong component of result 'lie-r'" in r.stdout, r.stdout
        cluster.start(["bob"])
        kept = json.loads((cluster.dep.server("bob").data_dir / "results" / "analyst" /
                           "lie-r" / "manifest.json").read_text())
        assert kept["files"]["reduced"]["components"].keys() == {str(c) for c in held(4, 1)}
        assert fetched(cluster, tmp_path / "again.csv", "--result", "lie-r") == reduced


def test_a_server_takes_back_only_the_components_it_held(tmp_path: Path,
                                                         files: dict[str, Path]) -> None:
    """What a peer asks for is checked against the sharing (never a component it did not
    hold), and only a server of the deployment may ask; a rebuild refuses a folder that is
    not empty."""
    with LocalCluster(tmp_path / "deploy", 3) as cluster:
        cluster.start()
        share_two(cluster, files, "t", "passive3")

        async def ask() -> None:
            bob, analyst = Connections(cluster.dep, "bob"), Connections(cluster.dep, "analyst")
            try:
                alice = await bob.session(cluster.dep.server("alice"))
                inv = await alice.request("inventory")
                upload = inv["datasets"][0]["contributions"][0]["id"]
                assert all("files" not in c for c in inv["datasets"][0]["contributions"])
                what = {"dataset": inv["datasets"][0]["name"], "upload": upload,
                        "part": "data"}
                # alice holds x_0 and x_1, bob x_1 and x_2: only x_1 may go to bob
                head = await alice.request("component", component=1, **what)
                assert len(head["salt"]) == 64
                await alice.recv_array()
                for c in (0, 2):
                    with pytest.raises(MPCError, match=f"component {c}"):
                        await alice.request("component", component=c, **what)
                session = await analyst.session(cluster.dep.server("alice"))
                with pytest.raises(AccessDenied, match="mpc-party --rebuild"):
                    await session.request("inventory")
            finally:
                bob.close()
                analyst.close()

        run(ask())
        cluster.kill("bob")  # its data folder is intact: nothing to rebuild
        r = rebuild(cluster, "bob")
        assert r.returncode == 2 and "is not empty" in r.stderr, r.stdout + r.stderr
        shutil.rmtree(cluster.dep.server("bob").data_dir)
        cluster.kill("carol")  # with three servers, a rebuild needs both others
        r = rebuild(cluster, "bob")
        assert r.returncode == 3 and "needs two of the other servers" in r.stderr \
            and "carol" in r.stderr, r.stdout + r.stderr


REPLAYER = Path(__file__).resolve().parent / "rebuild_replay_cheater.py"


class ReplayingCluster(CheatingCluster):
    """A local deployment whose alice aborts the first job storing result ``r`` (it keeps the
    aborted copy, signed by every server) and lists that copy, and serves its components, to a
    peer that rebuilds; it lists result ``ok-r`` with a malformed field."""

    def cheat(self) -> list[str]:
        return [str(REPLAYER), "--result", "r", "--malformed", "ok-r",
                "--stash", str(self.root / "alice-stash.pkl")]


def test_an_aborted_result_replayed_is_refused_without_framing_an_honest_peer(
        tmp_path: Path, files: dict[str, Path]) -> None:
    """Issue 33 review: the copies of a result its peers list must agree (its job), each
    component is asked of that job, and a malformed copy does not hide a good one."""
    with ReplayingCluster(tmp_path / "deploy", 3) as cluster:
        cluster.root = tmp_path
        cluster.start()
        share_two(cluster, files, "t", "passive3")
        # job J1: alice sends a garbage statement, bob and carol abort it and discard it
        assert cluster.client("analyst", "select", "--dataset", "cols-t", "--k", "3",
                              "--result", "r").returncode != 0
        assert (tmp_path / "alice-stash.pkl").exists()
        # job J2 stores ``r`` on every server
        select(cluster, "rows-t", 4, "r", "ok-r")
        reduced = fetched(cluster, tmp_path / "ok.csv", "--result", "ok-r")
        r = lose_and_rebuild(cluster, "bob")
        assert r.returncode == 4, r.stdout + r.stderr
        assert "refused result 'r' of analyst: CheatingDetected" in r.stdout, r.stdout
        assert "the peers do not agree on result 'r'" in r.stdout, r.stdout
        assert "carol sent" not in r.stdout + r.stderr  # carol is honest
        assert "rebuilt 2 datasets and 1 results" in r.stdout, r.stdout
        assert "alice describes result ok-r otherwise than bob signed it: a malformed " \
               "manifest" in r.stderr, r.stderr
        data = cluster.dep.server("bob").data_dir
        assert not (data / "results" / "analyst" / "r").exists()
        cluster.start(["bob"])
        assert fetched(cluster, tmp_path / "again.csv", "--result", "ok-r") == reduced

        async def ask_another_job() -> None:
            """carol hands back a component of ``ok-r`` of its own job only."""
            bob = Connections(cluster.dep, "bob")
            try:
                carol = await bob.session(cluster.dep.server("carol"))
                inv = await carol.request("inventory")
                view = next(v for v in inv["results"] if v["name"] == "ok-r")
                what = {"component": 2, "owner": "analyst", "result": "ok-r", "part": "reduced"}
                await carol.request("component", job=view["job"], **what)
                await carol.recv_array()
                with pytest.raises(InputError, match="from job"):
                    await carol.request("component", job="another", **what)
            finally:
                bob.close()

        run(ask_another_job())
