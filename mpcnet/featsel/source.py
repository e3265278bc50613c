"""Layer: featsel. Where a job's input shares come from, a block at a time.

A server's shares of a large dataset do not fit its memory budget at once (10^6 x 100 under
passive3 is 1.6 GB of shares before any computation), so pi_GINI-FS asks for blocks: of
columns (or tiles of rows of a column) while scoring, of rows for D' = D x T
(``mpcnet.featsel.layout``). ``ShareSource`` is what it asks: the product
reads stored contributions from disk (``parties.storage.StoredShares``); ``ArraySource`` holds
an array in memory (tests, benchmarks, the in-process runs).

``Blocks`` turns a source into sharings of the scheme: ``Streamed`` inputs every block it
reads (``Scheme.input``: the holders of each component compare it before anything is computed
on it, and active schemes add its MACs unless the caller says the block needs none), ``Held``
slices sharings input earlier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mpcnet.schemes.base import Scheme, Shared


class ShareSource(Protocol):
    """This party's share array of an m x p matrix, read in blocks."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The whole share array's shape: the scheme's leading axes, then (m, p)."""

    def block(self, rows: slice, columns: slice) -> np.ndarray:
        """The block of the given rows and columns (slices with start and stop)."""


@dataclass(frozen=True, eq=False)
class ArraySource:
    """A share array in memory."""

    data: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def block(self, rows: slice, columns: slice) -> np.ndarray:
        return np.ascontiguousarray(self.data[..., rows, columns])


class Blocks(Protocol):
    """Sharings of an m x p matrix, a block at a time."""

    @property
    def shape(self) -> tuple[int, int]: ...

    async def block(self, s: Scheme, rows: slice, columns: slice, authenticate: bool = True
                    ) -> Shared:
        """The sharing of a block; ``authenticate=False`` where it is only added, compared
        or the data factor of D' = D x T (``Scheme.input``)."""


@dataclass(frozen=True, eq=False)
class Held:
    """Sharings already input, sliced."""

    data: Shared

    @property
    def shape(self) -> tuple[int, int]:
        m, p = self.data.shape
        return m, p

    async def block(self, s: Scheme, rows: slice, columns: slice, authenticate: bool = True
                    ) -> Shared:
        return self.data[rows, columns]  # as it was input


@dataclass(frozen=True, eq=False)
class Streamed:
    """Blocks read from a source and input one by one."""

    source: ShareSource

    @property
    def shape(self) -> tuple[int, int]:
        m, p = self.source.shape[-2:]
        return m, p

    async def block(self, s: Scheme, rows: slice, columns: slice, authenticate: bool = True
                    ) -> Shared:
        (block,) = await s.input(self.source.block(rows, columns), authenticate=authenticate)
        return block
