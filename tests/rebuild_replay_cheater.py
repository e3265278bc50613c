"""Test-only launcher (issue 33 review): a server that replays a result its peers aborted.

Layer: tests (never installed).

For the first job storing result ``--result NAME``, in the job's final round it sends its
peers a garbage statement (both then refuse the job with CheatingDetected and discard it),
but it keeps their valid signed statements and its own components in a stash, without
committing. Later, when a peer rebuilds, it lists the stashed (aborted) result in its
inventory in place of the result now stored under that name, and serves the stashed
components. Everything else honest.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.errors import CheatingDetected
from mpcnet.net import wire
from mpcnet.parties import inventory, runner, statements
from mpcnet.parties.inventory import _result_view
from mpcnet.parties.main import main as party_main
from mpcnet.parties.server import PartyServer
from mpcnet.parties.session import ClientSession
from mpcnet.signing import Signed


def cheating_server(target: str, stash: Path, malformed: str | None = None
                    ) -> type[PartyServer]:
    honest = runner.JobRunner._statements

    async def _statements(self, engine, job, manifest, arrays):  # type: ignore[no-untyped-def]
        if manifest.get("name") != target or stash.exists():
            return await honest(self, engine, job, manifest, arrays)
        n = job.n_parties
        shapes = {part: tuple(a.shape[1:]) for part, a in arrays.items()}
        mine = statements.result_statement(manifest, manifest["files"], shapes)
        server = self.dep.server(self.name)
        signed = Signed.sign(self.name, mine, server.key, server.cert).to_wire()
        junk = np.frombuffer(b"{}", dtype=np.uint8)
        got = await engine.exchange({p: junk for p in engine.peers}, engine.peers)
        out = {self.name: signed}
        for peer, data in got.items():
            out[self.dep.servers[peer].name] = json.loads(data.tobytes())
        stash.write_bytes(pickle.dumps({"manifest": dict(manifest, statements=out),
                                        "arrays": arrays, "n": n}))
        raise CheatingDetected("result statement", "(the cheater aborts too, quietly)")

    runner.JobRunner._statements = _statements  # type: ignore[method-assign]

    class Session(ClientSession):
        async def op_inventory(self, args: dict[str, Any]) -> dict[str, Any]:
            listed = await super().op_inventory(args)
            if stash.exists():
                old = pickle.loads(stash.read_bytes())["manifest"]
                listed["results"] = [r for r in listed["results"] if r["name"] != target]
                listed["results"].insert(0, _result_view(old))
            for r in listed["results"]:
                if r["name"] == malformed:
                    r["parties"] = 5  # not a list: a TypeError outside the except MPCError
            return listed

        async def op_component(self, args: dict[str, Any]) -> None:
            if args.get("result") != target or not stash.exists():
                return await super().op_component(args)
            s = pickle.loads(stash.read_bytes())
            part, comp = str(args["part"]), args["component"]
            slot = inventory._component(self.s.dep, self.s.party, self.name, s["n"], comp)
            salt = s["manifest"]["files"][part]["components"][str(comp)]["salt"]
            block = s["arrays"][part][slot]
            self.send(wire.Ok({"salt": salt, "shape": list(block.shape)}))
            self.send(wire.NamedArray(part), np.ascontiguousarray(block))
            await self.conn.drain()

    class Server(PartyServer):
        session_class = Session

    return Server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rebuild_replay_cheater")
    parser.add_argument("--result", required=True)
    parser.add_argument("--stash", required=True)
    parser.add_argument("--malformed")
    args, rest = parser.parse_known_args(argv)
    return party_main(rest, cheating_server(args.result, Path(args.stash), args.malformed))


if __name__ == "__main__":
    sys.exit(main())
