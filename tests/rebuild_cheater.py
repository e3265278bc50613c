"""Test-only launcher: an ``mpc-party`` server that lies to a peer rebuilding its data folder.

Layer: tests (never installed). It runs ``parties.main.main`` with a server whose client
sessions, when a peer rebuilding its data folder asks (``parties.inventory``), add 1 to the
first word of every component of the datasets and results named by ``--lie-about``, and widen
every result it lists in its inventory to one more analyst (unless ``--true-inventory``);
everything else it does
honestly::

    python tests/rebuild_cheater.py --lie-about study top10 --config deploy.toml --name carol
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from mpcnet.net import wire
from mpcnet.parties.main import main as party_main
from mpcnet.parties.server import PartyServer
from mpcnet.parties.session import ClientSession


def lying_server(names: list[str], widen: bool = True) -> type[PartyServer]:
    class LyingSession(ClientSession):
        async def op_inventory(self, args: dict[str, Any]) -> dict[str, Any]:
            listed = await super().op_inventory(args)
            for result in listed["results"] if widen else []:
                result["share_with"] = [*result.get("share_with", []), "analyst-x"]
            return listed

        async def op_component(self, args: dict[str, Any]) -> None:
            self.lie = args.get("dataset", args.get("result")) in names
            await super().op_component(args)

        def send(self, message: wire.Message, array: np.ndarray | None = None) -> None:
            if getattr(self, "lie", False) and isinstance(message, wire.NamedArray) \
                    and array is not None:
                array = array.copy()
                array.flat[0] += np.uint64(1)
                self.lie = False  # the first block of each component
            super().send(message, array)

    class LyingServer(PartyServer):
        session_class = LyingSession

    return LyingServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rebuild_cheater", description=__doc__,
                                     epilog="Every other option is passed to mpc-party.")
    parser.add_argument("--lie-about", nargs="+", required=True,
                        help="the datasets and results whose components it changes")
    parser.add_argument("--true-inventory", action="store_true",
                        help="list the results as they are stored (lie about components only)")
    args, rest = parser.parse_known_args(argv)
    return party_main(rest, lying_server(args.lie_about, not args.true_inventory))


if __name__ == "__main__":
    sys.exit(main())
