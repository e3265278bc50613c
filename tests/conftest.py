"""Shared test helpers: run a protocol body under a scheme over in-process channels."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mpcnet import ring128
from mpcnet.net.engine import RoundEngine
from mpcnet.net.local import run_local_sync
from mpcnet.net.loopback import loopback_mesh
from mpcnet.schemes import registry
from mpcnet.schemes.base import Scheme

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

SCHEME_NAMES = sorted(registry.SCHEMES)


def run_protocol(scheme: str, inputs: dict[str, np.ndarray],
                 body: Callable[..., Awaitable[Any]]) -> list[Any]:
    """Share ``inputs`` as a client would, run ``body(s, **shares)`` at every party."""
    info = registry.get(scheme)
    shares = {name: info.share(np.asarray(v).astype(np.int64).view(np.uint64)
                               if np.asarray(v).dtype != np.uint64 else v)
              for name, v in inputs.items()}

    async def party(engine: Any) -> Any:
        s: Scheme = await info.scheme.setup(engine)
        mine = await s.input(*(sh[engine.party] for sh in shares.values()))
        args = dict(zip(shares, mine, strict=True))
        return await body(s, **args)

    return run_local_sync(info.n_parties, party)


def outcomes(n_parties: int, party: Callable[[RoundEngine], Awaitable[Any]],
             round_timeout: float = 5.0) -> list[object]:
    """Run ``party`` at every party of an in-process mesh until one of them fails (an abort
    ends the job for everyone, as the servers relay it): per party what it returned, the
    exception it raised, or None if it was still running then."""
    async def main() -> list[object]:
        engines = [RoundEngine(ch, round_timeout=round_timeout)
                   for ch in loopback_mesh(n_parties)]
        tasks = [asyncio.create_task(party(e)) for e in engines]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            task.cancel()
        out: list[object] = []
        for task in tasks:
            try:
                out.append(await task)
            except asyncio.CancelledError:
                out.append(None)
            except Exception as exc:  # noqa: BLE001 - the outcome under test
                out.append(exc)
        return out

    return asyncio.run(main())


def opened(results: list[Any]) -> Any:
    """The value every party opened; asserts that they all agree."""
    first = results[0]
    for other in results[1:]:
        if isinstance(first, tuple):
            for a, b in zip(first, other, strict=True):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(first, other)
    return first


@pytest.fixture(params=SCHEME_NAMES)
def scheme(request: pytest.FixtureRequest) -> str:
    """Every registered security setting, one test run each."""
    return str(request.param)


def shares128(values: Any, rng: np.random.Generator) -> list[np.ndarray]:
    """Replicated Z_2^128 sharings (limb, slot, ...) of Python ints, one per party of three
    (party i holds components i and i+1, as active3 does)."""
    values = np.asarray(values, dtype=object)

    def draw() -> Any:
        return np.vectorize(lambda _: int.from_bytes(rng.bytes(16), "little"),
                            otypes=[object])(values)

    c0, c1 = draw(), draw()
    comps = [ring128.from_int(c) for c in (c0, c1, values - c0 - c1)]
    return [np.stack([comps[i], comps[(i + 1) % 3]], axis=1) for i in range(3)]


def opened128(shares: list[np.ndarray]) -> Any:
    """The Python ints behind three parties' replicated Z_2^128 sharings (limb, slot, ...)."""
    return sum(ring128.to_int(s[:, 0]) for s in shares) % (1 << 128)
