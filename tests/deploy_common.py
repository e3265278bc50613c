"""Helpers of the deployment suites (tests/test_deploy_containers.py, test_deploy_hosts.py):
every party's key set up in its own folder, and the demo's pipeline driven through mpc-client
wherever the clients run (one-off containers, a network namespace of their own).

The pipeline is the demo's (``mpc-demo``): LSVT shared by two owners split by rows, the k = 103
best features selected (the paper's k for LSVT), D' fetched and compared with the plaintext
selection exactly, a logistic regression trained on D' for a model owner, who alone reads it.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import numpy as np
from reliability_common import LSVT, ok, refused

from mpcnet import config
from mpcnet.plain import logreg

K = 103  # the paper's k for LSVT
OWNERS = ("hospital-a", "hospital-b")
# the reduced dataset's texts and the model: every owner releases values, label and names
RELEASE = ("--release", "values", "label", "names")


def make_keys(deploy_file: Path, homes: Mapping[str, Path]) -> None:
    """Every server and client of ``deploy_file`` sets itself up in its own folder
    ``homes[name]``, as docs/operations.md walks through it: it takes a copy of the agreed file
    (``deploy.toml``), makes its own key there (``mpc-certs keygen``, which prints the key's
    fingerprint) and sends its certificate; each pins in its own copy every certificate it
    receives, with the fingerprint its owner read out (``mpc-certs pin``, which copies it into
    the folder; a model owner, for one, checks the analyst's signed request). Only
    certificates and fingerprints travel; no folder ever holds another's key.

    The one place where these suites make keys.
    """
    from mpcnet.certs import pinfile

    dep = config.load(deploy_file)
    sent: dict[str, tuple[Path, str]] = {}  # name -> (certificate, fingerprint)
    with tempfile.TemporaryDirectory(prefix="mpc-outbox-") as box:
        for name in dep.names:
            homes[name].mkdir(parents=True, exist_ok=True)
            shutil.copyfile(deploy_file, homes[name] / "deploy.toml")
            cert, _ = config.load(homes[name] / "deploy.toml").identity(name)
            printed = _run_certs("keygen", name, "--dir", str(cert.parent))
            sent[name] = (Path(shutil.copy(cert, Path(box) / cert.name)), printed.split()[1])
        for name in dep.names:  # (in-process: 49 or 64 pins as commands take 20 s)
            for whose, (cert, fp) in sent.items():
                pinfile.pin(homes[name] / "deploy.toml", whose, cert, fp)


def _run_certs(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "mpcnet.certs.main", *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def key_files(folder: Path) -> set[str]:
    """The names of the private keys under ``folder``."""
    return {p.stem for p in folder.rglob("*.key")}


class Clients(Protocol):
    """Where and how the deployment's clients run."""

    def run(self, identity: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``mpc-client --as identity args...`` as that client runs it."""

    def path(self, identity: str, name: str) -> tuple[Path, str]:
        """A file ``name`` of client ``identity``: where the test reads or writes it, and how
        the client names it."""


def split_lsvt(a: Path, b: Path) -> None:
    """The demo's split: the first 63 rows of LSVT to ``a``, the other 63 to ``b``."""
    with open(LSVT, newline="") as f:
        rows = list(csv.reader(f))
    half = 1 + (len(rows) - 1) // 2
    for path, body in ((a, rows[1:half]), (b, rows[half:])):
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows([rows[0], *body])


def owner_files(clients: Clients) -> list[tuple[Path, str]]:
    """Each owner's half of LSVT (``clients.path``)."""
    return [clients.path(owner, f"{owner}.csv") for owner in OWNERS]


def share(clients: Clients, dataset: str, security: str) -> None:
    """Both owners share their half of LSVT (for ``security``'s kind of sharing)."""
    files = owner_files(clients)
    split_lsvt(files[0][0], files[1][0])
    for owner, (_, seen) in zip(OWNERS, files, strict=True):
        ok(clients.run(owner, "share", seen, "--dataset", dataset, "--label", "label",
                       "--security", security, *RELEASE))


def select(clients: Clients, dataset: str, result: str, security: str,
           k: int = K) -> tuple[float, int]:
    """The analyst selects the ``k`` best features of ``dataset`` into ``result``; returns
    the protocol's seconds and rounds as the coordinator reports them."""
    out = ok(clients.run("analyst", "select", "--dataset", dataset, "--k", str(k), "--result",
                         result, "--security", security))
    total = re.search(r"^\s*total\s+([\d.]+)\s+(\d+)\s", out, re.MULTILINE)
    assert total, out
    return float(total[1]), int(total[2])


def fetch_equals_plaintext(clients: Clients, result: str, k: int = K,
                           out: str | None = None) -> None:
    """The analyst fetches D' of ``result`` (into its file ``out``, default RESULT.csv); it
    equals, text for text, the plaintext selection of the owners' files (``mpc-client
    plaintext``, run by the test on the host)."""
    got_host, got = clients.path("analyst", out or f"{result}.csv")
    ok(clients.run("analyst", "fetch", "--result", result, "--out", got))
    want = got_host.with_name(f".{got_host.stem}-plaintext.csv")
    ok(subprocess.run([sys.executable, "-m", "mpcnet.client.main", "plaintext",
                       *(str(host) for host, _ in owner_files(clients)), "--label", "label",
                       "--k", str(k), *RELEASE, "--out", str(want)],
                      capture_output=True, text=True, timeout=120))
    text = got_host.read_text()
    assert len(text.splitlines()[0].split(",")) == k + 1, text.splitlines()[0]
    assert text == want.read_text(), f"D' of {result} differs from the plaintext selection"


def train_and_read(clients: Clients, result: str, model: str, epochs: int = 10) -> None:
    """Train a model on ``result`` for the model owner clinic; clinic reads it, the analyst
    cannot; the model names D''s columns and predicts D''s labels better than chance."""
    ok(clients.run("analyst", "train", "--result", result, "--model", model, "--owner",
                   "clinic", "--epochs", str(epochs)))
    host, seen = clients.path("clinic", f"{model}.json")
    ok(clients.run("clinic", "model", "--model", model, "--out", seen))
    got = json.loads(host.read_text())
    reduced = clients.path("analyst", f"{result}.csv")[0].read_text().splitlines()
    header = reduced[0].split(",")
    assert got["columns"] == header[:-1] and len(got["coef"]) == 1
    assert len(got["coef"][0]) == len(header) - 1
    denied_host, denied = clients.path("analyst", f"{model}-by-analyst.json")
    assert "no result" in refused(clients.run("analyst", "model", "--model", model, "--out",
                                              denied), 2)
    assert not denied_host.exists()
    rows = [r.split(",") for r in reduced[1:]]
    x = np.array([r[:-1] for r in rows], dtype=np.float64)
    labels = [r[-1] for r in rows]
    private = logreg.Model(got["classes"], got["columns"], np.array(got["coef"]),
                           np.array(got["intercept"]), np.array(got["mean"]),
                           np.array(got["scale"]))
    accuracy = float(np.mean(np.array(private.predict(x)) == np.array(labels)))
    assert accuracy > 0.7, f"the model predicts D''s labels with accuracy {accuracy:.2f}"


def timed(timings: dict[str, float], what: str) -> _Timer:
    """``with timed(t, "select"):`` adds the block's wall time to ``t["select"]``."""
    return _Timer(timings, what)


class _Timer:
    def __init__(self, timings: dict[str, float], what: str) -> None:
        self.timings, self.what = timings, what

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.timings[self.what] = round(self.timings.get(self.what, 0.0)
                                        + time.perf_counter() - self.start, 2)
