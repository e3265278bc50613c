"""Test helpers: an owner's salts and statement for uploads driven without a client.

Layer: tests. ``parties.uploads.Upload`` checks the content of the owner's statement (its
signature is verified by the session, ``tests/test_signing.py`` and the e2e suites): these
make the salts an owner sends each server and the statement of every component, from every
party's share arrays as ``registry.share`` made them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpcnet.parties.statements import contribution_parts
from mpcnet.schemes.registry import held, holders
from mpcnet.signing import Signed, component_digest

SALT = bytes(range(32))


def salts(meta: dict[str, Any], party: int, n: int = 3) -> dict[str, dict[str, str]]:
    """The salts an owner sends server ``party`` (one salt for every component, for tests)."""
    return {part: {str(c): SALT.hex() for c in held(n, party)}
            for part in contribution_parts(meta)}


def statement(owner: str, meta: dict[str, Any], shares: dict[str, list[np.ndarray]]
              ) -> Signed:
    """The owner's statement of every component of ``shares`` (part -> every party's share
    array), unsigned (``Upload.commit`` checks what it says)."""
    components = {}
    for part, arrays in shares.items():
        n = len(arrays)
        digests = {}
        for c in range(n):
            holder = holders(n, c)[0]
            digests[str(c)] = component_digest(SALT, arrays[holder][held(n, holder).index(c)])
        components[part] = {"shape": list(arrays[0].shape[1:]), "digests": digests}
    return Signed(owner, {"kind": "contribution", "meta": meta, "components": components},
                  b"", b"")
