"""Client sessions (``client.connection``) with a server that accepts TCP but never completes
the TLS handshake: a stopped (SIGSTOP) process, whose kernel still accepts connections for it.

Every client command must fail within ``probe_timeout`` (plus the interpreter's start), name
the server, and name ``probe_timeout`` as what bounds the wait; not wait out the handshake
timeout (10 s here, its default). As in ``test_e2e.py``, the bound asserted lies half way
between the two, so that a loaded machine's slow start does not fail it but a client waiting
for the handshake timeout does; the times themselves are printed (about 2.5 s each on a quiet
machine: docs/reliability.md). Real ``mpc-party`` processes over TLS on 127.0.0.1, driven
through ``mpc-client``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability_common import lsvt_files, ok

from mpcnet.client.local import LocalCluster
from mpcnet.errors import PeerError
from mpcnet.net.tls import dial, run

PROBE = 2.0      # probe_timeout, its default
HANDSHAKE = 10.0  # handshake_timeout, its default: what bounded the wait before
LIMIT = (PROBE + HANDSHAKE) / 2


def test_a_dial_to_a_port_that_never_handshakes_ends_by_the_deadline() -> None:
    """A listener that accepts and then says nothing: the dial gives up at its deadline, not
    after the handshake timeout, and the error names the setting passed as the bound."""
    async def scenario() -> tuple[float, str]:
        held: list[asyncio.StreamWriter] = []

        async def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            held.append(writer)  # never answers, never closes

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        t0 = time.monotonic()
        try:
            await dial("carol", "127.0.0.1", port, ssl.create_default_context(),
                       max_frame=1024, deadline=time.monotonic() + 0.5,
                       handshake_timeout=HANDSHAKE, bound="probe_timeout")
        except PeerError as exc:
            return time.monotonic() - t0, str(exc)
        finally:
            for w in held:
                w.close()
            server.close()
        raise AssertionError("the dial succeeded")

    took, message = run(scenario())
    assert took < 1.0, f"the dial took {took:.2f} s with a 0.5 s deadline"
    assert "carol" in message and "probe_timeout" in message and "handshake" in message, message


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return lsvt_files(tmp_path_factory.mktemp("csv"), {"small": (slice(0, 40), range(6))})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            files: dict[str, Path]) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("frozen"),
                     timeouts={"probe_timeout": PROBE, "handshake_timeout": HANDSHAKE})
    with c:
        c.start()
        ok(c.client("hospital-a", "share", str(files["small"]), "--dataset", "d", "--label",
                    "label"))
        ok(c.client("analyst", "select", "--dataset", "d", "--k", "3", "--result", "r"))
        ok(c.client("analyst", "train", "--result", "r", "--model", "m", "--owner", "clinic",
                    "--epochs", "2"))
        yield c


def test_every_command_fails_fast_naming_a_frozen_server(
        cluster: LocalCluster, files: dict[str, Path], tmp_path: Path) -> None:
    commands = {
        "select": ("analyst", "select", "--dataset", "d", "--k", "3", "--result", "x"),
        "datasets": ("analyst", "datasets"),
        "status": ("analyst", "status"),
        "results": ("analyst", "results"),
        "jobs": ("analyst", "jobs"),
        "share": ("hospital-b", "share", str(files["small"]), "--dataset", "d2", "--label",
                  "label"),
        "schema": ("hospital-a", "schema", "--dataset", "d"),
        "fetch": ("analyst", "fetch", "--result", "r", "--out", str(tmp_path / "r.csv")),
        "train": ("analyst", "train", "--result", "r", "--model", "m2", "--owner", "clinic"),
        "model": ("clinic", "model", "--model", "m", "--out", str(tmp_path / "m.json")),
    }
    carol = cluster.pid("carol")
    times: dict[str, float] = {}
    t0 = time.monotonic()
    ok(cluster.client("analyst", "--version"))
    start_up = time.monotonic() - t0  # the interpreter and imports, for the printed figures
    os.kill(carol, signal.SIGSTOP)
    try:
        for what, (who, *args) in commands.items():
            t0 = time.monotonic()
            r = cluster.client(who, *args)
            times[what] = took = time.monotonic() - t0
            said = r.stdout + r.stderr
            assert r.returncode == 3, (what, r.returncode, said)
            assert "carol" in r.stderr and "probe_timeout" in said, (what, said)
            assert took <= LIMIT, f"{what} took {took:.2f} s with carol frozen: {said}"
    finally:
        os.kill(carol, signal.SIGCONT)
    print("\n[connection] carol frozen: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in times.items())
          + f" (mpc-client --version: {start_up:.2f} s)")
    assert not (tmp_path / "r.csv").exists() and not (tmp_path / "m.json").exists()
    ok(cluster.client("analyst", "status"))  # carol answers again once it runs


def test_a_frozen_coordinator_is_named_too(cluster: LocalCluster) -> None:
    """The coordinator takes every job request: with it frozen, select and the listings fail
    as fast, naming it."""
    alice = cluster.pid("alice")
    os.kill(alice, signal.SIGSTOP)
    try:
        for who, *args in (("analyst", "select", "--dataset", "d", "--k", "3", "--result", "y"),
                           ("analyst", "datasets")):
            t0 = time.monotonic()
            r = cluster.client(who, *args)
            took = time.monotonic() - t0
            assert r.returncode == 3 and "alice" in r.stderr, (args, r.stderr)
            assert "probe_timeout" in r.stdout + r.stderr and took <= LIMIT, (took, r.stderr)
    finally:
        os.kill(alice, signal.SIGCONT)
    ok(cluster.client("analyst", "status"))
