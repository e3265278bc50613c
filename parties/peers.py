"""Layer: server. What this server last saw of each other server, and the peer events.

Every connection to or from another server says something about it: a dial that succeeds or
a hello that arrives (up), a dial that fails (down, with why) or a peer whose certificate
does not pass (refused). ``PeerStates`` keeps the last of these per server and logs each
change once, as an event (``peer.up``, ``peer.down``, ``peer.refused``), so that an operator
reads when a link broke and came back without a line per connection. The metrics view
(``parties.metrics``) reports the states.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from mpcnet.parties.logs import event

log = logging.getLogger("mpcnet.party")
STATES = ("up", "down", "refused")


@dataclass
class PeerState:
    """How server ``name`` was last seen (``STATES``), when (Unix time) and why not up."""

    name: str
    state: str = "unknown"
    since: float = 0.0
    why: str = ""


class PeerStates:
    """The last state of every other server of the deployment."""

    def __init__(self, names: list[str]) -> None:
        self.peers = {name: PeerState(name) for name in names}

    def seen(self, name: str, state: str, why: str = "") -> None:
        """Server ``name`` was just seen in ``state``; a change is logged."""
        peer = self.peers.get(name)
        if peer is None or state not in STATES:
            return
        changed = peer.state != state
        peer.why = why
        if changed:
            peer.state, peer.since = state, time.time()
            fields = event(f"peer.{state}", peer=name, **({"reason": why} if why else {}))
            if state == "up":
                log.info("peer %s is up", name, extra=fields)
            else:
                log.warning("peer %s is %s: %s", name, state, why, extra=fields)
