"""parties.statements without sockets: what an owner's and a server's statements must say."""

from __future__ import annotations

from typing import Any

import pytest

from mpcnet.errors import CheatingDetected, InputError
from mpcnet.parties import catalog, statements

D = "ab" * 32  # a digest


def meta() -> dict[str, Any]:
    return catalog.contribution_meta(
        dataset="d", upload_id="u1", layout="rows", sharing="passive3", rows=4,
        columns=["a", "b"], exponents=[0, 0], categories={}, label="y", classes=["0", "1"])


def contribution(**digests: str) -> dict[str, Any]:
    every = {str(c): digests.get(f"c{c}", D) for c in range(3)}
    return {"kind": "contribution", "meta": meta(),
            "components": {"data": {"shape": [4, 2], "digests": every},
                           "labels": {"shape": [4, 2], "digests": dict(every)}}}


def test_an_owner_statement_must_describe_the_upload_and_its_components() -> None:
    mine = {"data": {"1": D, "2": D}, "labels": {"1": D, "2": D}}
    statements.check_contribution(contribution(), meta(), 3, mine)
    with pytest.raises(InputError, match="component 2 of data differs"):
        statements.check_contribution(contribution(c2="cd" * 32), meta(), 3, mine)
    with pytest.raises(InputError, match="not of this upload"):
        statements.check_contribution(contribution(), dict(meta(), rows=5), 3, mine)
    short = contribution()
    del short["components"]["data"]["digests"]["0"]  # every component, not only bob's
    with pytest.raises(InputError, match="malformed"):
        statements.check_contribution(short, meta(), 3, mine)
    wide = contribution()
    wide["components"]["data"]["shape"] = [5, 2]
    with pytest.raises(InputError, match="malformed or is not of a"):
        statements.check_contribution(wide, meta(), 3, mine)


def result(party: int, n: int = 3, **over: Any) -> dict[str, Any]:
    """Server ``party``'s statement of a result, its components' digests all ``D``."""
    from mpcnet.schemes.registry import held

    manifest = {"name": "r", "owner": "analyst", "job": "0123456789ab", "k": 2}
    files = {"reduced": {"components": {str(c): {"digest": D} for c in held(n, party)}}}
    return statements.result_statement(manifest, files, {"reduced": (4, 2)}) | over


def test_a_servers_statement_must_be_of_the_same_result_and_agree_on_shared_components() -> None:
    mine = result(0)  # alice: x_0, x_1
    assert statements.check_result_statement(result(1), mine, "bob", 3, 1)
    other = result(1)
    other["components"]["reduced"]["digests"]["1"] = "cd" * 32  # x_1: alice holds it too
    with pytest.raises(CheatingDetected, match="gives component 1 of reduced another digest"):
        statements.check_result_statement(other, mine, "bob", 3, 1)
    theirs = result(1)
    theirs["components"]["reduced"]["digests"]["0"] = D  # not one of bob's
    with pytest.raises(CheatingDetected, match="other components"):
        statements.check_result_statement(theirs, mine, "bob", 3, 1)
    for changed in (result(1, job="ba9876543210"), result(1, meta="0" * 64),
                    result(1, owner="analyst-2")):
        with pytest.raises(CheatingDetected, match="another result, job or manifest"):
            statements.check_result_statement(changed, mine, "bob", 3, 1)
    # under active4 each component has three holders; dave holds x_0, x_1, x_2
    assert statements.check_result_statement(result(3, 4), result(0, 4), "dave", 4, 3)
