"""Layer: schemes. The security settings by name, with their client-side share/reconstruct."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mpcnet.errors import ConfigError
from mpcnet.schemes import rep3, rep4, spdz3
from mpcnet.schemes.base import Scheme


@dataclass(frozen=True)
class SchemeInfo:
    """What a client and a server need to know about one security setting."""

    name: str
    n_parties: int
    scheme: type[Scheme]
    share: Callable[[np.ndarray], list[np.ndarray]]
    reconstruct: Callable[..., np.ndarray]  # (shares by party, binary=False)
    sharing: str  # the setting whose input sharing datasets are stored in (reused by others)


SCHEMES: dict[str, SchemeInfo] = {
    "passive3": SchemeInfo("passive3", 3, rep3.Rep3, rep3.share, rep3.reconstruct,
                           "passive3"),
    "active3": SchemeInfo("active3", 3, spdz3.Spdz3, rep3.share, rep3.reconstruct,
                          "passive3"),
    "active4": SchemeInfo("active4", 4, rep4.Rep4, rep4.share, rep4.reconstruct,
                          "active4"),
}


def get(name: str) -> SchemeInfo:
    """The setting called ``name``, or a ``ConfigError`` listing the known ones."""
    try:
        return SCHEMES[name]
    except KeyError:
        raise ConfigError(f"unknown security setting {name!r}; choose one of "
                          f"{', '.join(sorted(SCHEMES))}") from None
