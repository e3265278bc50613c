"""Layer: server. The server's metrics, in Prometheus' text format, on a local port (opt-in).

``mpc-party --metrics-port PORT`` serves ``GET /metrics`` over plain HTTP on 127.0.0.1:PORT
(``--metrics-bind`` to listen elsewhere, for example in a container). Every figure is read
from the server's own state when it is scraped, nothing is kept twice:

- the job records (``parties.jobs``, which persist: the counters carry on across restarts):
  jobs by state, kind and setting, their durations, rounds, phase times and bytes on the wire
  per peer, and the active-security checks that failed;
- the other servers: reachable now (a probe of each, as ``status`` makes, bounded by
  ``probe_timeout``) and the links of running jobs to each;
- the process: open connections, tasks, parked mesh connections, resident memory.

Labels are servers' names, kinds, settings, states, phases and checks' names: never a share,
key or value, nor a dataset's or a client's name. The text format is Prometheus' exposition
format 0.0.4 (one ``# HELP`` and ``# TYPE`` per family, then its samples).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from mpcnet import __version__
from mpcnet.errors import PeerError
from mpcnet.parties.jobs import KINDS, Job
from mpcnet.parties.logs import event
from mpcnet.schemes.registry import SCHEMES

if TYPE_CHECKING:
    from mpcnet.parties.server import PartyServer

log = logging.getLogger("mpcnet.party")
STATES = ("queued", "running", "done", "failed")
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                    1800.0, 3600.0)
# CheatingDetected's own text ("cheating detected: <check> check failed"), which a relayed
# error keeps word for word (``wire.error_of``)
_CHECK = re.compile(r"CheatingDetected: .*?cheating detected: (.+?) check failed")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = dict[str, str]


def failed_check(job: Job) -> str | None:
    """The active-security check whose failure ended ``job``, if one did."""
    m = _CHECK.match(job.error or "")
    return m.group(1) if m else None


def duration(job: Job) -> float | None:
    """How long an ended job ran here: its own figure, else from start to end (None for a
    job that never started)."""
    seconds = (job.figures or {}).get("seconds")
    if isinstance(seconds, int | float):
        return float(seconds)
    if job.started is not None and job.finished is not None:
        return max(job.finished - job.started, 0.0)
    return None


# -- the text format ------------------------------------------------------------------------
def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _sample(name: str, labels: Labels, value: float) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    if isinstance(value, int) or float(value).is_integer():
        text = str(int(value))
    else:
        text = "+Inf" if value == math.inf else repr(float(value))
    return f"{name}{{{inner}}} {text}" if inner else f"{name} {text}"


class Exposition:
    """Metric families written in order, each with its help and type."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str,
               samples: Iterable[tuple[Labels, float]]) -> None:
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        self.lines += [_sample(name, labels, value) for labels, value in samples]

    def histogram(self, name: str, help_text: str,
                  observed: dict[tuple[tuple[str, str], ...], list[float]]) -> None:
        self.lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        for key, values in sorted(observed.items()):
            labels = dict(key)
            for le in (*DURATION_BUCKETS, math.inf):
                self.lines.append(_sample(f"{name}_bucket",
                                          labels | {"le": "+Inf" if le == math.inf else str(le)},
                                          sum(v <= le for v in values)))
            self.lines.append(_sample(f"{name}_sum", labels, round(sum(values), 6)))
            self.lines.append(_sample(f"{name}_count", labels, len(values)))

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


# -- the view ---------------------------------------------------------------------------------
def job_families(out: Exposition, jobs: list[Job], peers: list[str]) -> None:
    """The families computed from job records; ``peers`` are the other servers."""
    by_state = Counter((j.state, j.kind, j.security) for j in jobs)
    out.family("mpc_jobs", "gauge", "Jobs this server knows, by state, kind and setting.",
               [({"state": st, "kind": k, "security": s}, by_state[st, k, s])
                for st in STATES for k in KINDS for s in SCHEMES])
    durations: dict[tuple[tuple[str, str], ...], list[float]] = defaultdict(list)
    rounds: Counter[tuple[str, str]] = Counter()
    phases: dict[str, float] = defaultdict(float)
    wire: Counter[tuple[str, str]] = Counter()
    checks: Counter[str] = Counter()
    for j in jobs:
        if j.state in ("done", "failed") and (d := duration(j)) is not None:
            durations[(("kind", j.kind), ("security", j.security), ("state", j.state))] \
                .append(d)
        fig = j.figures or {}
        rounds[j.kind, j.security] += int(fig.get("rounds") or 0)
        for phase, p in (fig.get("phases") or {}).items():
            phases[phase] += float(p.get("seconds") or 0.0)
        for peer, sent_recv in (fig.get("wire") or {}).items():
            wire[peer, "sent"] += int(sent_recv.get("sent") or 0)
            wire[peer, "received"] += int(sent_recv.get("recv") or 0)
        if (check := failed_check(j)) is not None:
            checks[check] += 1
    out.histogram("mpc_job_duration_seconds", "Wall time of ended jobs on this server.",
                  durations)
    out.family("mpc_job_rounds_total", "counter", "Protocol rounds of jobs, by kind and "
               "setting.", [({"kind": k, "security": s}, rounds[k, s])
                            for k in KINDS for s in SCHEMES])
    out.family("mpc_job_phase_seconds_total", "counter", "Wall time of jobs by phase.",
               [({"phase": p}, round(v, 6)) for p, v in sorted(phases.items())])
    out.family("mpc_job_wire_bytes_total", "counter", "Bytes of jobs on the wire (framing "
               "included) to and from each other server.",
               [({"peer": p, "direction": d}, wire[p, d]) for p in peers
                for d in ("sent", "received")])
    out.family("mpc_checks_failed_total", "counter", "Jobs ended by a failed active-security "
               "check, by check.", [({"check": c}, n) for c, n in sorted(checks.items())])
    out.family("mpc_jobs_cheating_detected_total", "counter", "Jobs ended by a failed "
               "active-security check (any).", [({}, sum(checks.values()))])


def live_links(server: PartyServer) -> Counter[str]:
    """Open connections of running jobs, per other server."""
    links: Counter[str] = Counter()
    for engine in list(server.runner.engines.values()):
        for conn in getattr(engine.channel, "conns", {}).values():
            if not conn.closed and conn.peer_name:
                links[conn.peer_name] += 1
    return links


async def render(server: PartyServer) -> str:
    """The metrics view of ``server`` now."""
    out = Exposition()
    names = [s.name for s in server.dep.servers]
    peers = [n for n in names if n != server.name]
    out.family("mpc_server_info", "gauge", "This server: name, party, role and version.",
               [({"server": server.name, "party": str(server.party), "version": __version__,
                  "role": "coordinator" if server.is_coordinator else "member"}, 1)])
    job_families(out, list(server.jobs.jobs.values()), peers)
    reach = await server.mesh.reachability()
    out.family("mpc_peer_up", "gauge", "Whether each other server answered a probe now "
               "(within probe_timeout).", [({"peer": p}, int(reach.get(p) == "ok"))
                                           for p in peers])
    links = live_links(server)
    out.family("mpc_peer_links", "gauge", "Open connections of running jobs to each other "
               "server.", [({"peer": p}, links[p]) for p in peers])
    load: dict[str, Any] = server.load()
    for key, name, help_text in (
            ("connections", "mpc_connections_open", "Open TLS connections (peers and clients)."),
            ("tasks", "mpc_tasks", "Live asyncio tasks of the server."),
            ("parked", "mpc_parked_connections", "Mesh connections waiting for their job."),
            ("rss", "mpc_resident_memory_bytes", "Resident memory of the server process.")):
        out.family(name, "gauge", help_text, [({}, load[key])])
    return out.text()


# -- the endpoint -----------------------------------------------------------------------------
class MetricsEndpoint:
    """``GET /metrics`` over plain HTTP/1.1, one request per connection. Requests are read
    under a size and time limit and answered one view at a time (each scrape probes the
    peers), so a local client cannot make the server probe its peers in a flood."""

    MAX_CONNECTIONS = 8
    REQUEST_TIMEOUT = 5.0
    MAX_HEAD = 8192

    def __init__(self, view: Callable[[], Awaitable[str]], bind: str, port: int) -> None:
        self.view, self.bind, self.port = view, bind, port
        self._server: asyncio.AbstractServer | None = None
        self._turn = asyncio.Lock()
        self._open = 0

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, self.bind, self.port,
                                                      limit=self.MAX_HEAD, reuse_address=True)
        except OSError as exc:
            raise PeerError(f"cannot serve metrics on {self.bind}:{self.port} "
                            f"({exc.strerror}); is the port in use?") from None
        log.info("metrics on http://%s:%d/metrics", self.bind, self.port,
                 extra=event("metrics.listening", bind=self.bind, port=self.port))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open += 1
        try:
            if self._open > self.MAX_CONNECTIONS:
                return
            async with asyncio.timeout(self.REQUEST_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
            method, target, *_ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ") + [""]
            if method != "GET":
                status, body = "405 Method Not Allowed", "only GET\n"
            elif target.split("?", 1)[0] != "/metrics":
                status, body = "404 Not Found", "see /metrics\n"
            else:
                async with self._turn:
                    status, body = "200 OK", await self.view()
            data = body.encode()
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\n"
                         f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
                         .encode() + data)
            await writer.drain()
        except (TimeoutError, ValueError, ConnectionError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError):
            pass  # a slow, oversized or broken request gets no answer
        finally:
            self._open -= 1
            writer.close()
