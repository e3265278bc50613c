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
    active: bool  # secure against a server that deviates (not only one that looks)


SCHEMES: dict[str, SchemeInfo] = {
    "passive3": SchemeInfo("passive3", 3, rep3.Rep3, rep3.share, rep3.reconstruct,
                           "passive3", active=False),
    "active3": SchemeInfo("active3", 3, spdz3.Spdz3, rep3.share, rep3.reconstruct,
                          "passive3", active=True),
    "active4": SchemeInfo("active4", 4, rep4.Rep4, rep4.share, rep4.reconstruct,
                          "active4", active=True),
}


def get(name: str) -> SchemeInfo:
    """The setting called ``name``, or a ``ConfigError`` listing the known ones."""
    try:
        return SCHEMES[name]
    except KeyError:
        raise ConfigError(f"unknown security setting {name!r}; choose one of "
                          f"{', '.join(sorted(SCHEMES))}") from None


def sharing_of(security: str) -> tuple[str, int]:
    """(input sharing, number of parties) of a security setting: datasets are stored in the
    input sharing of the setting they were shared for, and every setting with that sharing
    can run on them (active3 uses passive3's shares)."""
    info = get(security)
    return info.sharing, info.n_parties


def held(n_parties: int, party: int) -> tuple[int, ...]:
    """The components of a replicated sharing among ``n_parties`` that ``party`` holds, in the
    order of its share array: rep3's x_i and x_{i+1} (Araki et al. 2016), rep4's every
    component but its own (Fantastic Four, Dalskov et al. 2021, section 3). ``ValueError``
    for a party that is not one of the ``n_parties``."""
    if not 0 <= party < n_parties or n_parties not in (3, 4):
        raise ValueError(f"party {party} holds nothing of a sharing among {n_parties}")
    if n_parties == 3:
        return (party, (party + 1) % 3)
    return rep4.held(party)


def holders(n_parties: int, component: int) -> list[int]:
    """The parties that hold ``component`` of a replicated sharing among ``n_parties``."""
    return [p for p in range(n_parties) if component in held(n_parties, p)]


def for_sharing(sharing: str) -> SchemeInfo:
    """The first setting whose input sharing is ``sharing`` (its ``share`` makes shares in
    that format), or ``ConfigError`` listing the sharings there are."""
    for info in SCHEMES.values():
        if info.sharing == sharing:
            return info
    raise ConfigError(f"unknown sharing {sharing!r}; known: "
                      f"{', '.join(sorted({i.sharing for i in SCHEMES.values()}))}")
