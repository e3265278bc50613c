"""The servers' logs (``parties.logs``, ``parties.peers``): JSON lines with job and peer events,
and never a share, a key or a value.

In memory: the formatter's fields (an array or bytes given as a field is not written) and the
peer events (a change logged once). With real ``mpc-party`` processes over TLS on 127.0.0.1
(alice and bob ``--log-format json``, carol text; every server at DEBUG level): two owners
share, an analyst selects, fetches and trains, the model owner receives the model, an owner
is refused a job. Then every log line is read (each one JSON on alice and bob), the events
are checked against the job records, and the logs are scanned for every 64-bit word of every
share each server stores (in decimal, signed, hex and base64), every cell of the owners' files
and its fixed-point encoding, every weight of the model and every private key's text.
"""

from __future__ import annotations

import base64
import csv
import json
import logging
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability_common import ok

from mpcnet.client.local import LocalCluster
from mpcnet.dataset import read_csv
from mpcnet.fixedpoint import auto_exponents, encode
from mpcnet.parties.logs import JsonLines, event, plain
from mpcnet.parties.peers import PeerStates
from mpcnet.parties.storage import Storage

JSON_SERVERS = ("alice", "bob")
TEXT_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} carol [A-Z]+ [\w.]+: .*")
WORD_MIN = 1 << 24  # smaller words (counts, sizes, times) are not share words worth scanning


# -- in memory ---------------------------------------------------------------------------------
def _record(msg: str, **extra: Any) -> logging.LogRecord:
    rec = logging.LogRecord("mpcnet.party", logging.INFO, __file__, 1, msg, (), None)
    rec.__dict__.update(extra)
    return rec


def test_a_json_line_carries_the_event_and_plain_fields_only() -> None:
    share = np.array([0x0123456789ABCDEF, 42], dtype=np.uint64)
    line = json.loads(JsonLines("alice").format(_record("job j done", **event(
        "job.done", job="j", rounds=3, wire={"bob": {"sent": 1}}, share=share,
        raw=b"\x01\x02", word=np.uint64(7), nan=float("nan")))))
    assert line["server"] == "alice" and line["event"] == "job.done" and line["job"] == "j"
    assert line["rounds"] == 3 and line["wire"] == {"bob": {"sent": 1}}
    assert line["message"] == "job j done" and line["time"].endswith("Z")
    assert line["share"] == "<not logged: ndarray>" and line["raw"] == "<not logged: bytes>"
    assert line["word"] == "<not logged: uint64>" and line["nan"] == "nan"
    # a field never replaces the line's own keys
    clash = json.loads(JsonLines("alice").format(_record("m", **event("e", server="mallory"))))
    assert clash["server"] == "alice"


def test_plain_bounds_depth_and_length() -> None:
    assert plain(list(range(100))) == list(range(64))
    assert plain({"a": {"b": {"c": {"d": 1}}}}) == {"a": {"b": {"c": "<not logged: dict>"}}}
    assert plain({1: "x"}) == "<not logged: dict>"


def test_a_peer_state_change_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    peers = PeerStates(["bob"])
    with caplog.at_level(logging.INFO, "mpcnet.party"):
        for state in ("up", "up", "down", "down", "refused", "up", "up"):
            peers.seen("bob", state, "" if state == "up" else f"it is {state}")
        peers.seen("mallory", "down", "not a server of ours")
    events = [r.__dict__["mpc_event"] for r in caplog.records]
    assert events == ["peer.up", "peer.down", "peer.refused", "peer.up"]
    assert peers.peers["bob"].state == "up" and "mallory" not in peers.peers


# -- a real deployment -------------------------------------------------------------------------
class LoggingCluster(LocalCluster):
    def server_argv(self, name: str) -> list[str]:
        fmt = "json" if name in JSON_SERVERS else "text"
        return [*super().server_argv(name), "--log-format", fmt, "--log-level", "DEBUG"]


def _owner_file(path: Path, rows: range, seed: int) -> Path:
    """Distinctive values (six decimals) in five columns, and a label of two classes."""
    rng = np.random.default_rng(seed)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*(f"x{j}" for j in range(5)), "label"])
        for i in rows:
            w.writerow([*(f"{v:.6f}" for v in rng.uniform(-900, 900, 5)), ("yes", "no")[i % 2]])
    return path


@pytest.fixture(scope="module")
def run_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The deployment's logs after its jobs, what it stored and what the clients got."""
    folder = tmp_path_factory.mktemp("logs")
    a = _owner_file(folder / "a.csv", range(0, 24), 1)
    b = _owner_file(folder / "b.csv", range(24, 40), 2)
    c = LoggingCluster(folder / "deploy")
    with c:
        c.start()
        ok(c.client("hospital-a", "share", str(a), "--dataset", "d", "--label", "label"))
        ok(c.client("hospital-b", "share", str(b), "--dataset", "d", "--label", "label"))
        ok(c.client("analyst", "select", "--dataset", "d", "--k", "3", "--result", "r"))
        ok(c.client("analyst", "fetch", "--result", "r", "--out", str(folder / "r.csv")))
        ok(c.client("analyst", "train", "--result", "r", "--model", "m", "--owner", "clinic",
                    "--epochs", "3"))
        ok(c.client("clinic", "model", "--model", "m", "--out", str(folder / "m.json")))
        refused = c.client("hospital-a", "select", "--dataset", "d", "--k", "2", "--result",
                           "x")
        assert refused.returncode == 2, refused.stderr
        jobs = json.loads(ok(c.client("analyst", "--json", "jobs")))
    yield {"cluster": c, "files": [a, b], "jobs": jobs, "model": folder / "m.json",
           "logs": {s.name: c.log(s.name) for s in c.dep.servers}}


def _stored_words(root: Path) -> np.ndarray:
    """Every 64-bit word of every share array a server stores: its datasets (data and label
    shares) and its results (D', the label shares kept for training, the model)."""
    st = Storage(root)
    st.open()
    arrays = []
    try:
        for name in st.dataset_names():
            _, data, labels = st.load_dataset(name)
            m, p = data.shape[-2:]
            arrays.append(data.block(slice(0, m), slice(0, p)))
            data.close()
            if labels is not None:
                arrays.append(labels)
        for owner in ("analyst", "clinic"):
            for manifest in st.results_for(owner):
                arrays += st.load_result(manifest["owner"], manifest["name"])[1].values()
    finally:
        st.close()
    words = np.concatenate([np.ascontiguousarray(a).view(np.uint64).ravel() for a in arrays
                            if a.dtype.itemsize == 8])
    return np.unique(words[(words >= WORD_MIN) & (words <= (1 << 64) - WORD_MIN)])


def _word_forms(word: int) -> list[str]:
    raw = int(word).to_bytes(8, "little")
    signed = word - (1 << 64) if word >= 1 << 63 else word
    return [str(word), str(signed), f"{word:x}", f"{word:016x}",
            base64.b64encode(raw).decode()[:10], base64.b64encode(raw[::-1]).decode()[:10]]


def _leaks(text: str, secrets: dict[str, list[str]]) -> list[str]:
    return [f"{what}: {s!r}" for what, forms in secrets.items() for s in forms if s in text]


def _secrets(run: dict[str, Any]) -> dict[str, list[str]]:
    c: LocalCluster = run["cluster"]
    out: dict[str, list[str]] = {}
    for s in c.dep.servers:
        words = _stored_words(s.data_dir)
        assert len(words) > 500, f"{s.name} stores only {len(words)} share words"
        out[f"share word of {s.name}"] = [f for w in words for f in _word_forms(int(w))]
    cells, encoded = [], []
    for path in run["files"]:
        with open(path, newline="") as f:
            cells += [v for row in list(csv.reader(f))[1:] for v in row[:-1]]
        table = read_csv(path, label="label")
        ints = encode(table.values, auto_exponents(table.values))
        encoded += [str(v) for v in ints.ravel() if abs(v) >= 1 << 16]
    out["plaintext cell"] = cells
    out["encoded value"] = encoded
    model = json.loads(run["model"].read_text())
    weights = np.concatenate([np.ravel(model[k]) for k in ("coef", "intercept", "mean",
                                                           "scale")])
    out["model weight"] = [t for w in weights for t in (repr(float(w)), f"{w:.6g}")
                           if len(t.lstrip("-")) >= 7]
    keys = [line for key in (c.dep.tls_dir).glob("*.key")
            for line in key.read_text().splitlines() if not line.startswith("-----")]
    assert len(keys) >= 8, "the deployment's private keys were not found"
    out["private key text"] = [line[i:i + 16] for line in keys for i in range(0, len(line) - 15,
                                                                              16)]
    return out


def test_no_share_value_or_key_reaches_a_log(run_logs: dict[str, Any]) -> None:
    secrets = _secrets(run_logs)
    logs = run_logs["logs"]
    assert all(len(text.splitlines()) >= 15 for text in logs.values()), logs
    for name, text in logs.items():
        assert not _leaks(text, secrets), f"{name}'s log holds {_leaks(text, secrets)[:5]}"
    print(f"\n[logs] {sum(len(t.splitlines()) for t in logs.values())} lines of "
          f"{len(logs)} servers: none holds any of "
          + ", ".join(f"{len(v)} {k} forms" for k, v in secrets.items()))
    # the scan finds what it looks for: a share word, a cell or a key line planted in a log
    for what in ("share word of bob", "plaintext cell", "private key text"):
        planted = logs["alice"] + secrets[what][len(secrets[what]) // 2]
        assert _leaks(planted, secrets), what


def test_every_line_is_json_with_job_and_peer_events(run_logs: dict[str, Any]) -> None:
    jobs = run_logs["jobs"]
    for name in JSON_SERVERS:
        lines = [json.loads(line) for line in run_logs["logs"][name].splitlines()]
        assert all({"time", "server", "level", "logger", "message"} <= set(x) and
                   x["server"] == name for x in lines), name
        events: dict[str, list[dict[str, Any]]] = {}
        for x in lines:
            events.setdefault(x.get("event", ""), []).append(x)
        ids = [j["id"] for j in jobs[name]]
        assert [j["state"] for j in jobs[name]] == ["done", "done"]
        first = "job.queued" if name == "alice" else "job.accepted"
        for kind in (first, "job.running", "job.done"):
            assert [e["job"] for e in events[kind]] == ids, (name, kind, events.get(kind))
        for done, record in zip(events["job.done"], jobs[name], strict=True):
            fig = record["figures"]
            assert (done["rounds"], done["bytes_sent"], done["wire"]) == (
                fig["rounds"], fig["bytes_sent"], fig["wire"])
        others = {s.name for s in run_logs["cluster"].dep.servers} - {name}
        assert {e["peer"] for e in events["peer.up"]} == others
        assert all(set(e["peers"]) == others for e in events["job.running"])
        assert len(events["upload.committed"]) == 2 and len(events["result.fetched"]) == 2
        if name == "alice":
            assert [e["op"] for e in events["client.refused"]] == ["select"]
        assert events["server.listening"][0]["port"] == run_logs["cluster"].dep.server(
            name).port
    # text stays text, one line per record
    lines = run_logs["logs"]["carol"].splitlines()
    assert lines and all(TEXT_LINE.fullmatch(line) for line in lines), lines[:3]


def test_a_metrics_port_in_use_stops_the_server_with_a_reason(
        run_logs: dict[str, Any]) -> None:
    """(Here because this module's deployment is stopped by now.) The server does not run
    without the metrics it was asked for: exit status 2, naming the port."""
    c: LocalCluster = run_logs["cluster"]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run([*c.server_argv("alice"), "--config", str(c.config_path), "--name",
                            "alice", "--metrics-port", str(port)], capture_output=True,
                           text=True, timeout=60, env=c._env())
    assert r.returncode == 2, r.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in r.stderr, r.stderr
