"""Reliability: hostile clients and peers against real servers.

Certificates (none, a key someone else made for a pinned name, expired, a key made for a
server's name, a name not in the deployment), identities and roles that do not match,
hand-crafted frames over a TLS session with a valid certificate (``mpcnet.net.framing``: wrong
magic, lengths, dtype, shape, header, kind; oversized; cut), and a bounded flood of
connections. Each must be refused without taking the server down or leaking anything, and a
normal request must succeed right after. The logs are checked for key material, array dumps,
tracebacks and the values sent.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from reliability_common import (
    SERVERS,
    alive,
    healthy,
    lsvt_slice,
    ok,
    refused,
    report,
    running_cluster,
    snapshot,
)
from signed_uploads import salts

from mpcnet.certs.pki import self_signed, write_cert, write_key
from mpcnet.client.local import LocalCluster
from mpcnet.client.session import Client
from mpcnet.errors import PeerError
from mpcnet.net.framing import MAGIC, PREFIX, FrameProtocol, encode
from mpcnet.net.tls import client_context, dial, run
from mpcnet.parties.access import OPERATIONS
from mpcnet.schemes.registry import sharing_of

SECRET = 0x5EC2E75EC2E7AB1E  # a value no log may ever show
Case = Callable[["Env"], Awaitable[str]]


class Env:
    """The cluster and the certificates the hostile cases use."""

    def __init__(self, cluster: LocalCluster, certs: Path) -> None:
        self.cluster = cluster
        self.dep = cluster.dep
        self.certs = certs

    def ctx(self, who: str) -> ssl.SSLContext:
        """A client TLS context for identity ``who`` (a deployment name or a file in certs/)."""
        if (self.certs / f"{who}.pem").exists():
            return client_context(self.certs / f"{who}.pem", self.certs / f"{who}.key")
        cert, key = self.dep.identity(who)
        return client_context(cert, key)

    async def connect(self, who: str, server: str = "alice",
                      hello: dict[str, Any] | None = None) -> FrameProtocol:
        s = self.dep.server(server)
        conn = await dial(s.name, s.host, s.port, self.ctx(who), pins=self.dep.pins(s.name),
                          max_frame=1 << 24,
                          deadline=time.monotonic() + 5, handshake_timeout=5)
        if hello is not None:
            conn.send(hello)
        return conn

    async def session(self, who: str, server: str = "alice") -> FrameProtocol:
        conn = await self.connect(who, server, {"k": "hello", "as": "client", "name": who})
        reply, _ = await conn.recv(timeout=5)
        assert reply["k"] == "ok", reply
        return conn


async def outcome(conn: FrameProtocol, timeout: float = 5.0) -> dict[str, Any] | None:
    """The server's answer, or None if it dropped the connection."""
    try:
        header, _ = await conn.recv(timeout=timeout)
        return header
    except PeerError as exc:
        assert conn.closed, f"no answer and not dropped: {exc}"
        return None


async def dropped(conn: FrameProtocol) -> str:
    got = await outcome(conn)
    assert got is None, f"expected the connection to be dropped, got {got}"
    return "dropped"


async def refused_with(conn: FrameProtocol, *words: str, kind: str | None = None) -> str:
    got = await outcome(conn)
    assert got is not None and got["k"] == "err", f"expected an error frame, got {got}"
    assert kind is None or got["type"] == kind, got
    assert all(w in got["msg"] for w in words), got
    return f"{got['type']}: {got['msg'][:60]}"


def raw(header: dict[str, Any], body: bytes = b"", hlen: int | None = None,
        blen: int | None = None, magic: bytes = MAGIC) -> bytes:
    packed = msgpack.packb(header, use_bin_type=True)
    return PREFIX.pack(magic, len(packed) if hlen is None else hlen,
                       len(body) if blen is None else blen) + packed + body


def write(conn: FrameProtocol, data: bytes) -> None:
    assert conn.transport is not None
    conn.transport.write(data)


# -- certificates and identities ----------------------------------------------------------------
async def no_certificate(env: Env) -> str:
    s = env.dep.leader
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    reader, writer = await asyncio.open_connection(s.host, s.port, ssl=ctx,
                                                   server_hostname=s.name)
    writer.write(raw({"k": "hello", "as": "client", "name": "analyst"}))
    try:  # TLS 1.3: the refusal arrives after the client's side of the handshake
        assert await asyncio.wait_for(reader.read(1), 5) == b""
    except (ssl.SSLError, ConnectionError):
        pass
    writer.close()
    return "dropped"


async def tls_refused(env: Env, who: str) -> str:
    try:
        conn = await env.connect(who, hello={"k": "hello", "as": "client", "name": "analyst"})
    except PeerError:
        return "handshake refused"
    return await dropped(conn)


async def unpinned_key(env: Env) -> str:
    """A certificate of the pinned name ``analyst`` that someone else made."""
    return await tls_refused(env, "rogue-analyst")


async def expired(env: Env) -> str:
    return await tls_refused(env, "expired-analyst")


async def unknown_name(env: Env) -> str:
    return await tls_refused(env, "stranger")


async def key_made_for_a_server_name(env: Env) -> str:
    """A key someone else made for the name ``bob`` tries to join a job as bob."""
    try:
        conn = await env.connect("fake-bob", "carol",
                                 {"k": "hello", "as": "peer", "from": "bob", "job": "j1"})
    except PeerError:
        return "handshake refused"
    return await dropped(conn)


async def client_claims_server(env: Env) -> str:
    conn = await env.connect("hospital-a", "carol",
                             {"k": "hello", "as": "peer", "from": "bob", "job": "j1"})
    return await refused_with(conn, "does not belong to a server")


async def client_claims_other_client(env: Env) -> str:
    conn = await env.connect("hospital-a", hello={"k": "hello", "as": "client",
                                                  "name": "analyst"})
    return await refused_with(conn, "claims to be 'analyst'")


async def server_cert_as_client(env: Env) -> str:
    conn = await env.session("bob")
    conn.send({"k": "req", "op": "status", "mesh": False})
    assert (await outcome(conn) or {}).get("k") == "ok"  # healthchecks are allowed
    for op in ("datasets", "fetch", "upload"):
        conn.send({"k": "req", "op": op})
        await refused_with(conn, "role server", kind="AccessDenied")
    conn.close()
    return "status only"


async def member_starts_a_job(env: Env) -> str:
    spec = {"id": "evil", "dataset": "d", "digest": "", "k": 2, "score": "ms-gini",
            "security": "passive3", "result": "stolen", "submitted_by": "carol",
            "n_parties": 3}
    conn = await env.connect("carol", "bob", {"k": "hello", "as": "peer", "from": "carol",
                                              "job": "evil", "spec": spec})
    return await refused_with(conn, "not the coordinator", kind="AccessDenied")


async def mesh_connection_for_no_job(env: Env) -> str:
    """A server's certificate parks a mesh connection for a job nobody runs: it is closed
    once the join window (connect + handshake timeouts) has passed."""
    conn = await env.connect("bob", "carol", {"k": "hello", "as": "peer", "from": "bob",
                                              "job": "nosuchjob"})
    assert (await outcome(conn) or {}).get("k") == "ok"
    bound = env.dep.timeouts.connect + env.dep.timeouts.handshake + 2
    t = time.monotonic()
    try:
        got = await conn.recv(timeout=bound)
        raise AssertionError(f"unexpected frame {got[0]}")
    except PeerError:
        assert conn.closed and time.monotonic() - t < bound
    return "closed after the join window"


async def malformed_peer_hello(env: Env) -> str:
    conn = await env.connect("bob", "carol", {"k": "hello", "as": "peer", "from": "bob",
                                              "job": 42})
    return await dropped(conn)


async def wrong_roles(env: Env) -> str:
    owner = await env.session("hospital-a")
    for op in ("select", "fetch", "jobs", "results", "job"):
        owner.send({"k": "req", "op": op, "spec": {}, "result": "x", "id": "x"})
        await refused_with(owner, "may not", OPERATIONS[op][1], kind="AccessDenied")
    analyst = await env.session("analyst")
    for op in ("upload", "commit", "abort", "withdraw"):
        analyst.send({"k": "req", "op": op})
        await refused_with(analyst, "may not", OPERATIONS[op][1], kind="AccessDenied")
    owner.close()
    analyst.close()
    return "9 operations refused"


# -- frames -----------------------------------------------------------------------------------
def _frame_case(data: Callable[[], bytes], hello_first: bool = True) -> Case:
    async def case(env: Env) -> str:
        conn = (await env.session("hospital-a")) if hello_first else \
            await env.connect("hospital-a")
        write(conn, data())
        return await dropped(conn)
    return case


def _huge_dims() -> bytes:
    return raw({"k": "req", "dt": "<u8", "sh": [1] * 9}, b"\0" * 8)


FRAMES: dict[str, Case] = {
    "wrong magic": _frame_case(lambda: raw({"k": "req", "op": "datasets"}, magic=b"HTTP")),
    "header length 0": _frame_case(lambda: PREFIX.pack(MAGIC, 0, 0)),
    "header length 1 MB": _frame_case(lambda: PREFIX.pack(MAGIC, 1 << 20, 0) + b"\x80" * 64),
    "body length 1 TB (oversized)": _frame_case(
        lambda: raw({"k": "a", "dt": "<u8", "sh": [1 << 37]}, blen=1 << 40)),
    "body length not matching shape": _frame_case(
        lambda: raw({"k": "a", "dt": "<u8", "sh": [4]}, b"\0" * 16)),
    "dtype object": _frame_case(lambda: raw({"k": "a", "dt": "|O", "sh": [1]}, b"\0" * 8)),
    "negative dimension": _frame_case(
        lambda: raw({"k": "a", "dt": "<u8", "sh": [-1]}, blen=0)),
    "9 dimensions": _frame_case(_huge_dims),
    "header not msgpack": _frame_case(lambda: PREFIX.pack(MAGIC, 4, 0) + b"\xc1\xc1\xc1\xc1"),
    "header a list": _frame_case(
        lambda: PREFIX.pack(MAGIC, 3, 0) + msgpack.packb([1, 2])),
    "header without a kind": _frame_case(lambda: raw({"op": "datasets"})),
    "body before the hello": _frame_case(
        lambda: raw({"k": "hello", "as": "client", "dt": "<u8", "sh": [1 << 17]},
                    blen=8 << 17), hello_first=False),
    "first frame not a hello": _frame_case(lambda: raw({"k": "req", "op": "datasets"}),
                                           hello_first=False),
}


async def unknown_op(env: Env) -> str:
    conn = await env.session("hospital-a")
    conn.send({"k": "req", "op": "shutdown"})
    await refused_with(conn, "unknown request", kind="InputError")
    conn.send({"k": "bogus"})
    await refused_with(conn, "unknown request", kind="InputError")
    conn.send({"k": "req", "op": "datasets"})  # the session goes on
    assert (await outcome(conn) or {}).get("k") == "ok"
    conn.close()
    return "refused, session kept"


async def malformed_arguments(env: Env) -> str:
    conn = await env.session("hospital-a")
    for args in ({"meta": "x"}, {"meta": {"dataset": "d"}}, {"meta": {"dataset": 5, "id": []}}):
        conn.send({"k": "req", "op": "upload", **args})
        await refused_with(conn, kind="InputError")
    analyst = await env.session("analyst")
    for spec in ("text", {"dataset": "base", "k": "3", "result": "r"}, {"dataset": ["x"]}):
        analyst.send({"k": "req", "op": "select", "spec": spec})
        await refused_with(analyst, kind="InputError")
    conn.close()
    analyst.close()
    return "6 requests refused"


def _meta(rows: int = 20, cols: int = 4) -> dict[str, Any]:
    return {"dataset": "hostile", "id": f"h{time.monotonic_ns()}", "layout": "rows",
            "sharing": sharing_of("passive3")[0], "rows": rows,
            "columns": [f"c{i}" for i in range(cols)], "exponents": [0] * cols,
            "categories": {}, "label": "y", "classes": ["0", "1"]}


async def _upload(env: Env, arrays: list[tuple[str, np.ndarray]], *words: str) -> str:
    conn = await env.session("hospital-a")
    meta = _meta()
    conn.send({"k": "req", "op": "upload", "meta": meta, "salts": salts(meta, 0)})
    assert (await outcome(conn) or {}).get("send") == ["data", "labels"]
    for name, arr in arrays:
        conn.send({"k": "a", "name": name}, arr)
    got = await refused_with(conn, *words, kind="InputError")
    conn.close()
    return got


async def upload_wrong_dtype(env: Env) -> str:
    return await _upload(env, [("data", np.full((2, 20, 4), 1.5))], "must be uint64")


async def upload_wrong_shape(env: Env) -> str:
    secret = np.full((2, 21, 4), SECRET, dtype=np.uint64)
    return await _upload(env, [("data", secret)], "do not fit")  # 21 rows for 20


async def upload_unexpected_part(env: Env) -> str:
    return await _upload(env, [("keys", np.zeros((2, 20, 4), np.uint64))], "expected the arrays")


async def upload_cut_then_silent(env: Env) -> str:
    """Half a share array, then nothing: the upload waits request_timeout, then is dropped."""
    conn = await env.session("hospital-a")
    meta = _meta()
    conn.send({"k": "req", "op": "upload", "meta": meta, "salts": salts(meta, 0)})
    assert (await outcome(conn) or {}).get("send") == ["data", "labels"]
    head, body = encode({"k": "a", "name": "data"}, np.full((2, 20, 4), SECRET, np.uint64))
    assert body is not None
    write(conn, head + bytes(body[:100]))
    got = await outcome(conn, timeout=env.dep.timeouts.request + 3)
    assert got is not None and got["k"] == "err" and "no message within" in got["msg"], got
    await dropped(conn)  # the stream may stop inside a frame: the session ends
    return "refused after request_timeout"


IDENTITY: dict[str, Case] = {
    "no certificate": no_certificate,
    "a key someone else made for a pinned client": unpinned_key,
    "expired certificate": expired,
    "certificate for a name not in the deployment": unknown_name,
    "a key someone else made for a server's name": key_made_for_a_server_name,
    "client claiming a server's name": client_claims_server,
    "client claiming another client's name": client_claims_other_client,
    "server certificate used as a client": server_cert_as_client,
    "owner/analyst operations of the other role": wrong_roles,
    "member server starting a job": member_starts_a_job,
    "mesh connection for a job nobody runs": mesh_connection_for_no_job,
    "malformed peer hello": malformed_peer_hello,
}
REQUESTS: dict[str, Case] = {
    "unknown operation and kind": unknown_op,
    "malformed request arguments": malformed_arguments,
    "upload: wrong dtype": upload_wrong_dtype,
    "upload: wrong shape": upload_wrong_shape,
    "upload: unexpected array": upload_unexpected_part,
    "upload: cut mid-frame, then silent": upload_cut_then_silent,
}


# -- fixtures ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    folder = tmp_path_factory.mktemp("hostile")
    certs = folder / "hostile-certs"
    with running_cluster(folder) as cluster:
        long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
        for file, name, days, start in (("expired-analyst", "analyst", 10, long_ago),
                                        ("fake-bob", "bob", 30, None),
                                        ("stranger", "stranger", 30, None),
                                        ("rogue-analyst", "analyst", 30, None)):
            key, cert = self_signed(name, days, start)
            write_key(key, certs / f"{file}.key")
            write_cert(cert, certs / f"{file}.pem")
        csv_path = lsvt_slice(folder / "base.csv", slice(0, 40), list(range(8)))
        ok(cluster.client("hospital-a", "share", str(csv_path), "--dataset", "base",
                          "--label", "label"))
        yield Env(cluster, certs)


async def _serving(env: Env) -> float:
    """A normal analyst request right after a hostile one; returns its latency."""
    t = time.monotonic()
    cl = Client(env.dep, "analyst")
    try:
        s = await cl.session(env.dep.leader)
        assert any(d["name"] == "base" for d in (await s.request("datasets"))["datasets"])
    finally:
        cl.close()
    return time.monotonic() - t


def _run_cases(env: Env, cases: dict[str, Case]) -> dict[str, str]:
    before = snapshot(env.cluster)
    results: dict[str, str] = {}
    failures: list[str] = []
    for name, case in cases.items():
        async def one(case: Case = case) -> str:
            got = await asyncio.wait_for(case(env), 30)
            await _serving(env)
            return got
        try:
            results[name] = run(one())
            assert alive(env.cluster), "a server stopped"
        except Exception as exc:  # noqa: BLE001 - report every case, then fail
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)
    assert snapshot(env.cluster) == before  # nothing stored, staging empty
    return results


def test_identities_and_certificates_are_refused(env: Env,
                                                  request: pytest.FixtureRequest) -> None:
    results = _run_cases(env, IDENTITY)
    # the user-facing message of a refused certificate
    cfg = env.cluster.config_path
    text = cfg.read_text().replace('name = "analyst"\nrole = "analyst"',
                                   'name = "analyst"\nrole = "analyst"\n'
                                   f'cert = "{env.certs / "expired-analyst.pem"}"\n'
                                   f'key = "{env.certs / "expired-analyst.key"}"')
    expired_cfg = cfg.with_name("expired.toml")
    expired_cfg.write_text(text)
    err = refused(env.cluster.client("analyst", "datasets", config_path=expired_cfg), code=2)
    assert "not pinned" in err and "expired" in err, err
    at_tls = sum(v in ("dropped", "handshake refused") for v in results.values())
    report(request, f"hostile: {len(results)}/{len(results)} identity/certificate cases "
           f"refused ({at_tls} dropped at the TLS or hello stage, {len(results) - at_tls} "
           "with a named error or role limit); a normal request succeeded after each; the "
           "CLI with an expired certificate exits 2 saying so")


def test_malformed_frames_and_requests_are_refused(env: Env,
                                                   request: pytest.FixtureRequest) -> None:
    frames = _run_cases(env, FRAMES)
    requests = _run_cases(env, REQUESTS)
    n = len(frames) + len(requests)
    report(request, f"hostile: {n}/{n} crafted frames and requests refused "
           f"({len(frames)} malformed frames dropped, {len(requests)} bad requests answered "
           "with an error, nothing staged); a normal request succeeded after each")


def test_connection_flood_is_bounded(env: Env, request: pytest.FixtureRequest) -> None:
    """200 connections held open (100 plain TCP that never start TLS, 100 TLS sessions with a
    valid certificate that never say hello): the server keeps answering, drops them after the
    handshake timeout, and returns to its idle load."""
    import psutil

    alice = env.dep.leader
    proc = psutil.Process(env.cluster.pid("alice"))
    fds_idle = proc.num_fds()
    n_tcp = n_tls = 100
    hold = env.dep.timeouts.handshake + 1.5

    async def flood() -> tuple[float, int, float]:
        tcp = [await asyncio.open_connection(alice.host, alice.port) for _ in range(n_tcp)]
        ctx = env.ctx("hospital-a")
        tls = [await asyncio.open_connection(alice.host, alice.port, ssl=ctx,
                                             server_hostname=alice.name)
               for _ in range(n_tls)]
        try:
            latency = await _serving(env)  # while 200 connections are open
            t = time.monotonic()
            deadline = t + hold + 2
            closed = 0
            for reader, _ in tcp + tls:  # the server drops each one by itself
                try:
                    data = await asyncio.wait_for(reader.read(1),
                                                  max(0.05, deadline - time.monotonic()))
                    closed += data == b""
                except (ConnectionError, ssl.SSLError):
                    closed += 1
                except TimeoutError:
                    pass
            return latency, closed, time.monotonic() - t
        finally:
            for _, writer in tcp + tls:
                writer.close()

    t0 = time.monotonic()
    latency, closed, waited = run(flood())
    assert closed == n_tcp + n_tls, f"only {closed} connections were dropped by the server"
    assert time.monotonic() - t0 < 30
    deadline = time.monotonic() + 5
    while True:
        rows = run(Client(env.dep, "bob").status(mesh=False))  # load: for servers only
        load = {r["server"]: r["load"] for r in rows}
        if load["alice"]["connections"] <= 1 and proc.num_fds() <= fds_idle + 2:
            break
        assert time.monotonic() < deadline, (load, proc.num_fds(), fds_idle)
        time.sleep(0.1)
    assert healthy(env.cluster)
    report(request, f"hostile: flood of {n_tcp + n_tls} connections ({n_tcp} TCP, {n_tls} TLS "
           f"without hello) held: a normal request took {latency:.2f} s meanwhile; "
           f"{closed}/{n_tcp + n_tls} dropped by the server within {waited:.1f} s "
           f"(handshake_timeout {env.dep.timeouts.handshake:.0f} s); open files back to "
           f"{proc.num_fds()} (idle {fds_idle})")


def test_logs_leak_nothing(env: Env, request: pytest.FixtureRequest) -> None:
    """Run last: after every hostile case, no log holds key material, a certificate, an array
    dump, a traceback or the value the hostile uploads carried."""
    assert all(env.cluster.log(s) for s in SERVERS)
    forbidden = ["PRIVATE KEY", "BEGIN CERTIFICATE", "array(", "Traceback", "internal error",
                 str(SECRET), hex(SECRET), f"{SECRET:x}".upper(), str(SECRET - 2**64),
                 struct.pack("<Q", SECRET).hex()]
    lines = 0
    for s in SERVERS:
        log = env.cluster.log(s)
        lines += log.count("\n")
        found = [w for w in forbidden if w in log]
        assert not found, f"{s} log contains {found}"
    report(request, f"hostile: {len(forbidden)} forbidden patterns (key, certificate, array "
           f"dump, traceback, the uploaded value in 5 encodings) absent from {lines} log lines "
           "of 3 servers")
