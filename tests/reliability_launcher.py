"""Test-only launcher: an ``mpc-party`` server with fault-injection hooks (reliability suite).

    python tests/reliability_launcher.py CONTROL.json --config deploy.toml --name bob ...

Everything after the control file goes to ``parties.main``. The hooks read ``CONTROL.json`` each
time they run (no file: no fault), so a test switches faults on and off without restarting the
server. Keys (all optional):

- ``delay_phase``: {phase: seconds} sleep once, before the first round of that protocol phase
  of every job (keeps the whole mesh in the phase so the test can act there);
- ``fail_phase``: {phase: message} abort every job at the first round of that phase, as a
  server that hits an error would (the job fails on every server; the server stays up);
- ``delay_upload``, ``delay_commit``, ``delay_fetch``, ``delay_follow``: seconds to sleep while
  storing an uploaded share, before committing an upload, before sending a result's shares,
  before joining a job's mesh;
- ``delay_load``: seconds a job's dataset load blocks (``time.sleep`` inside
  ``Storage.load_dataset``, like reading and hashing a large dataset on a slow disk).

When a hook fires it touches ``CONTROL.json.hit-<hook>`` so the test knows where the server is.
Nothing here is used outside the tests; the product has no such hooks.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mpcnet.errors import MPCError  # noqa: E402
from mpcnet.net.engine import RoundEngine  # noqa: E402

CONTROL = Path(sys.argv[1])


def control() -> dict[str, Any]:
    try:
        return json.loads(CONTROL.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return {}


def hit(what: str) -> None:
    CONTROL.with_name(f"{CONTROL.name}.hit-{what}").touch()


_exchange = RoundEngine.exchange


async def exchange(self: RoundEngine, sends: Any, recv_from: Any) -> Any:
    c = control()
    phase = self.current_phase
    seen: set[str] = self.__dict__.setdefault("_faults_seen", set())
    if phase not in seen:
        seen.add(phase)
        if phase in c.get("fail_phase", {}):
            hit(f"fail-{phase}")
            raise MPCError(f"injected fault in phase {phase}: {c['fail_phase'][phase]}")
        if phase in c.get("delay_phase", {}):
            hit(f"phase-{phase}")
            await asyncio.sleep(float(c["delay_phase"][phase]))
    return await _exchange(self, sends, recv_from)


def install() -> None:
    """Wrap the seams the keys name, in this test process only."""
    from mpcnet.parties.server import PartyServer
    from mpcnet.parties.session import ClientSession
    from mpcnet.parties.storage import Storage
    from mpcnet.parties.uploads import Upload

    RoundEngine.exchange = exchange  # type: ignore[method-assign]

    def slowed(cls: Any, method: str, key: str) -> None:
        """``cls.method`` sleeps ``control()[key]`` seconds first (blocking the thread that
        runs it: uploads and dataset loads run off the event loop, like a slow disk)."""
        original = getattr(cls, method)

        def wrapper(self: Any, *args: Any) -> Any:
            delay = control().get(key)
            if delay:
                hit(key.removeprefix("delay_"))
                time.sleep(float(delay))
            return original(self, *args)
        setattr(cls, method, wrapper)

    def delayed(cls: Any, method: str, key: str) -> None:
        original = getattr(cls, method)

        async def wrapper(self: Any, *args: Any) -> Any:
            delay = control().get(key)
            if delay:
                hit(key.removeprefix("delay_"))
                await asyncio.sleep(float(delay))
            return await original(self, *args)
        setattr(cls, method, wrapper)

    slowed(Upload, "receive", "delay_upload")
    slowed(Storage, "load_dataset", "delay_load")
    delayed(ClientSession, "op_commit", "delay_commit")
    delayed(ClientSession, "op_fetch", "delay_fetch")
    delayed(PartyServer, "_follow", "delay_follow")


if __name__ == "__main__":
    install()
    from mpcnet.parties.main import main

    sys.exit(main(sys.argv[2:]))
