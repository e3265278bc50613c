"""Layer: network. The abstract point-to-point channel every transport implements.

A channel carries whole numpy arrays between numbered parties, in order per peer. The receiver
gets back the same dtype and shape. Transports (in-process loopback, TLS) differ only here; the
round engine and every protocol above it are unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class Channel(ABC):
    """Ordered, reliable delivery of numpy arrays to and from each peer."""

    party: int
    n_parties: int

    @abstractmethod
    async def send(self, peer: int, payload: np.ndarray) -> None:
        """Queue ``payload`` for ``peer``; returns once it is handed to the transport."""

    @abstractmethod
    async def recv(self, peer: int) -> np.ndarray:
        """The next array ``peer`` sent to us (raises ``PeerError`` if the peer is lost)."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release the transport; the default has nothing to release."""
