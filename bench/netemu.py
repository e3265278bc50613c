"""Benchmark support: an emulated network for the servers of ``bench/network.py``.

The paper ran its parties on co-located Azure machines (Section V: up to 14 Gbit/s between
them, about a millisecond apart). On one machine, loopback is far faster than that, so
``bench/network.py --netem`` also runs every case over an emulated link, in one of two ways:

- ``netem``: a network namespace created for the run (``ip netns add``) whose loopback carries
  ``tc qdisc add dev lo root netem delay D rate R``; the servers and the client run inside it
  through ``ip netns exec``. Needs root, iproute2 (``apt-get install iproute2``) and a kernel
  with ``CONFIG_NET_SCH_NETEM``. A packet on loopback passes the qdisc once, so the one-way
  delay is D and every connection of the namespace shares one queue of rate R.
- ``proxy``: where the kernel has no netem qdisc (``tc`` answers "Specified qdisc kind is
  unknown"), a user-space relay in its own process, still inside a fresh namespace when
  namespaces work: each server listens on 127.0.0.2 and the relay forwards 127.0.0.1:port to
  it, holding every chunk for D after the link (modelled per direction of each connection at
  rate R) has serialised it. Its timers have millisecond granularity and it spends CPU of its
  own, so ``bench/network.py`` also runs it at 0 ms ("proxy-0") and measures the round trip
  it really adds (``probe_link``).

The namespace is always deleted afterwards, and any process still inside it (only this
benchmark starts processes there) is killed by PID first.

The links (``PROFILES``): ``lan``, the paper's co-located machines (1 ms one way, 10 Gbit/s);
``wan``, servers in different organisations (20 ms one way, 1 Gbit/s); ``wan100m``, the same
distance over a 100 Mbit/s line, where bytes rather than rounds bind. The proxy gives each
direction of each connection the rate, as if every pair of servers had its own line; netem
shares one queue among all of them.

    python -m bench.netemu proxy --route 127.0.0.1:7101=127.0.0.2:7101 --delay-ms 1 --rate 10gbit
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Link:
    """One emulated link: one-way delay and bandwidth (None: not limited)."""

    name: str
    delay_ms: float
    rate_bit: float | None

    def describe(self) -> str:
        rate = f", {rate_text(self.rate_bit)}/s" if self.rate_bit else ", rate not limited"
        return f"{self.name}: {self.delay_ms:g} ms one way{rate}"

    def netem_args(self) -> list[str]:
        args = ["delay", f"{self.delay_ms:g}ms"]
        if self.rate_bit:
            args += ["rate", rate_text(self.rate_bit)]
        return args


PROFILES = {
    # the paper's co-located machines (Section V): about 1 ms apart, 10 Gbit/s class links
    "lan": Link("lan", 1.0, 10e9),
    # a wide-area deployment: 20 ms one way (40 ms round trip), 1 Gbit/s
    "wan": Link("wan", 20.0, 1e9),
    # the same distance over a slower line, 100 Mbit/s: where the bytes, not the rounds, bind
    "wan100m": Link("wan100m", 20.0, 100e6),
}
DEFAULT_PROFILES = ("lan", "wan", "wan100m")
PROXY_BASELINE = Link("proxy-0", 0.0, None)


def rate_text(bits: float) -> str:
    """tc's notation: 10gbit, 1gbit, 100mbit."""
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bits >= scale:
            return f"{bits / scale:g}{unit}"
    return f"{bits:g}bit"


def parse_rate(text: str) -> float:
    t = text.strip().lower()
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)):
        if t.endswith(unit):
            return float(t[: -len(unit)]) * scale
    return float(t)


# -- what the machine allows ---------------------------------------------------------------
@dataclass(frozen=True)
class Support:
    """What this machine can do: namespaces, the netem qdisc, and why not."""

    netns: bool
    netem: bool
    reason: str  # empty when both work

    def method(self, wanted: str = "auto") -> tuple[str | None, str]:
        """(method, note): "netem", "proxy" or None (skip), and the sentence to print."""
        if wanted in ("auto", "netem") and self.netem:
            return "netem", "tc netem on the loopback of a fresh network namespace"
        if wanted == "netem":
            return None, f"skipped: tc netem is not usable here ({self.reason})"
        note = ("user-space delay proxy" + (" in a fresh network namespace" if self.netns
                                            else " on the host's loopback"))
        if self.reason:
            note += f" (tc netem is not usable here: {self.reason})"
        return "proxy", note


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


def check_support() -> Support:
    """Try, in a throw-away namespace, everything ``--netem`` needs."""
    if os.geteuid() != 0:
        return Support(False, False, "not root (network namespaces and tc need root)")
    missing = [t for t in ("ip", "tc") if shutil.which(t) is None]
    if missing:
        return Support(False, False, f"{' and '.join(missing)} not found; install iproute2 "
                       "(apt-get install iproute2)")
    try:
        with namespace("mpcprobe") as ns:
            r = _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root",
                      "netem", "delay", "1ms"])
            if r.returncode != 0:
                why = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
                if "unknown" in why.lower():
                    why += " - this kernel was built without CONFIG_NET_SCH_NETEM"
                return Support(True, False, f"`tc qdisc add dev lo root netem`: {why}")
    except OSError as exc:
        return Support(False, False, f"cannot create a network namespace: {exc}")
    return Support(True, True, "")


# -- network namespaces --------------------------------------------------------------------
def _ns_pids(name: str) -> list[int]:
    r = _run(["ip", "netns", "pids", name])
    return [int(x) for x in r.stdout.split()] if r.returncode == 0 else []


@contextlib.contextmanager
def namespace(prefix: str = "mpcbench") -> Iterator[str]:
    """A new network namespace with loopback up; deleted (with anything left in it) on exit."""
    name = f"{prefix}{os.getpid()}"
    r = _run(["ip", "netns", "add", name])
    if r.returncode != 0:
        raise OSError(f"ip netns add {name}: {r.stderr.strip()}")
    try:
        r = _run(["ip", "-n", name, "link", "set", "lo", "up"])
        if r.returncode != 0:
            raise OSError(f"ip -n {name} link set lo up: {r.stderr.strip()}")
        yield name
    finally:
        for pid in _ns_pids(name):  # only this benchmark starts processes in its namespace
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _run(["ip", "netns", "del", name])


def add_netem(ns: str, link: Link) -> str:
    """Put ``link`` on the namespace's loopback; returns the qdisc as tc shows it."""
    r = _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
              *link.netem_args()])
    if r.returncode != 0:
        raise OSError(f"tc netem {' '.join(link.netem_args())}: {r.stderr.strip()}")
    return _run(["ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", "lo"]).stdout.strip()


# -- the user-space delay proxy ------------------------------------------------------------
async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float,
                rate: float | None) -> None:
    """Copy one direction of a connection: a chunk leaves when the modelled link has
    serialised it (rate) and then ``delay`` seconds have passed; order is kept."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def receive() -> None:
        free_at = 0.0
        try:
            while data := await reader.read(1 << 18):
                start = max(loop.time(), free_at)
                free_at = start + (len(data) * 8 / rate if rate else 0.0)
                queue.put_nowait((free_at + delay, data))
        except (ConnectionError, OSError):
            pass
        queue.put_nowait((-1.0, b""))

    async def transmit() -> None:
        try:
            while True:
                due, data = await queue.get()
                if due < 0:
                    break
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                if writer.transport.get_write_buffer_size() > (1 << 22):
                    await writer.drain()
            await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (ConnectionError, OSError):
            pass

    await asyncio.gather(receive(), transmit())


async def _serve_proxy(routes: list[tuple[str, int, str, int]], delay: float,
                       rate: float | None, ready: Path | None) -> None:
    async def handle(src_r: asyncio.StreamReader, src_w: asyncio.StreamWriter,
                     host: str, port: int) -> None:
        try:
            dst_r, dst_w = await asyncio.open_connection(host, port)
        except OSError:
            src_w.close()
            return
        try:
            await asyncio.gather(_pump(src_r, dst_w, delay, rate),
                                 _pump(dst_r, src_w, delay, rate))
        finally:
            for w in (src_w, dst_w):
                w.close()

    servers = []
    for lhost, lport, thost, tport in routes:
        servers.append(await asyncio.start_server(
            functools.partial(handle, host=thost, port=tport), lhost, lport,
            reuse_address=True))
    if ready is not None:
        ready.write_text("ok")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for s in servers:
        s.close()


def _route(text: str) -> tuple[str, int, str, int]:
    listen, target = text.split("=")
    lh, lp = listen.rsplit(":", 1)
    th, tp = target.rsplit(":", 1)
    return lh, int(lp), th, int(tp)


class Proxy:
    """The delay proxy as a child process (stopped by PID), inside network namespace
    ``netns`` if one is named (``ip netns exec`` replaces itself by the proxy: same PID)."""

    def __init__(self, routes: list[tuple[str, int, str, int]], link: Link,
                 folder: Path, netns: str | None = None) -> None:
        self.ready = folder / f".proxy-{os.getpid()}-{time.monotonic_ns()}.ready"
        inside = ["ip", "netns", "exec", netns] if netns else []
        args = [*inside, sys.executable, "-m", "bench.netemu", "proxy", "--delay-ms",
                str(link.delay_ms), "--ready-file", str(self.ready)]
        if link.rate_bit:
            args += ["--rate", rate_text(link.rate_bit)]
        for lh, lp, th, tp in routes:
            args += ["--route", f"{lh}:{lp}={th}:{tp}"]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while not self.ready.exists():
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise OSError(f"delay proxy exited with {self.proc.returncode}: {err[-500:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise OSError("delay proxy did not start within 15 s")
            time.sleep(0.02)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.ready.unlink(missing_ok=True)

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- what a link really does ---------------------------------------------------------------
def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


async def _probe(host: str, port: int, pings: int, bulk: int) -> tuple[float, float]:
    """(median round trip in ms of a 64-byte ping-pong, bulk throughput in MB/s) against an
    echo server at host:port."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        rtts = []
        msg = b"p" * 64
        for _ in range(pings):
            t0 = time.perf_counter()
            writer.write(msg)
            await reader.readexactly(len(msg))
            rtts.append(time.perf_counter() - t0)
        async def swallow_echo() -> None:
            got = 0
            while got < bulk:
                data = await reader.read(1 << 20)
                if not data:
                    break
                got += len(data)

        chunk = b"b" * (1 << 20)
        t0 = time.perf_counter()
        echoed = asyncio.create_task(swallow_echo())
        for _ in range(bulk // len(chunk)):
            writer.write(chunk)
            await writer.drain()
        await echoed
        seconds = time.perf_counter() - t0
        return statistics.median(rtts) * 1e3, bulk / seconds / 1e6
    finally:
        writer.close()


async def _echo_and_probe(listen: tuple[str, int], target: tuple[str, int], pings: int,
                          bulk: int) -> tuple[float, float]:
    finished = asyncio.Event()

    async def echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(1 << 20):
                w.write(data)
                await w.drain()
        except (ConnectionError, OSError):
            pass
        w.close()
        finished.set()

    server = await asyncio.start_server(echo, *listen)
    try:
        return await _probe(*target, pings, bulk)
    finally:
        with contextlib.suppress(TimeoutError):  # let the echo see the end of the stream
            await asyncio.wait_for(finished.wait(), 2.0)
        server.close()


def probe_link(method: str | None, link: Link | None, folder: Path, pings: int = 40,
               bulk: int = 32 << 20) -> dict[str, float]:
    """Round trip (ms) and echo throughput (MB/s) of plain TCP on loopback, through the delay
    proxy when ``method`` is "proxy" (netem acts on all loopback traffic of the namespace)."""
    if method == "proxy" and link is not None:
        back = free_port("127.0.0.2")
        front = free_port("127.0.0.1")
        with Proxy([("127.0.0.1", front, "127.0.0.2", back)], link, folder):
            rtt, mbs = asyncio.run(_echo_and_probe(("127.0.0.2", back), ("127.0.0.1", front),
                                                   pings, bulk))
    else:
        port = free_port()
        rtt, mbs = asyncio.run(_echo_and_probe(("127.0.0.1", port), ("127.0.0.1", port),
                                               pings, bulk))
    return {"rtt_ms": round(rtt, 3), "echo_mb_s": round(mbs, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.netemu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("proxy", help="run the delay proxy until SIGTERM")
    s.add_argument("--route", action="append", required=True, type=_route,
                   help="LISTEN_HOST:PORT=TARGET_HOST:PORT (repeatable)")
    s.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay")
    s.add_argument("--rate", type=parse_rate, help="bandwidth per direction, e.g. 10gbit")
    s.add_argument("--ready-file", type=Path)
    sub.add_parser("check", help="say whether --netem can use tc netem on this machine")
    args = p.parse_args(argv)
    if args.cmd == "check":
        sup = check_support()
        method, note = sup.method()
        print(f"namespaces: {'yes' if sup.netns else 'no'}; netem: "
              f"{'yes' if sup.netem else 'no'}; --netem would use: {note}")
        return 0
    from mpcnet.net.tls import run  # uvloop when installed

    run(_serve_proxy(args.route, args.delay_ms / 1e3, args.rate, args.ready_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
