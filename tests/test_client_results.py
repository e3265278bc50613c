"""client.results against real servers: the parties come from the security setting, and a
result that the servers list differently is refused.

Four ``mpc-party`` processes over TLS on 127.0.0.1 hold an active4 and a passive3 result; the
tests then act as a server that lies in its listing (fewer parties, another setting, another k).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from reliability_common import FaultCluster, four_servers_with_results, plaintext, report

from client.results import reconstruct
from client.session import Client
from mpcnet.errors import InputError
from mpcnet.net.tls import run

K = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultCluster]:
    with four_servers_with_results(tmp_path_factory.mktemp("results"), K) as c:
        yield c


def test_fetch_takes_the_parties_from_the_security_setting(
        cluster: FaultCluster, request: pytest.FixtureRequest) -> None:
    dep = cluster.dep
    expected = plaintext([cluster.folder / "base.csv"], K)

    async def fetched(result: str) -> Any:
        cl = Client(dep, "analyst")
        try:
            return await cl.fetch(result)
        finally:
            cl.close()

    honest = run(fetched("base-r"))
    assert sorted(honest.shares) == [0, 1, 2, 3]  # all four servers of active4
    assert np.array_equal(reconstruct(honest), expected)
    assert sorted(run(fetched("p3-r")).shares) == [0, 1, 2]

    def lying(server: str, **over: Any) -> str:
        """What the client says when ``server`` lists base-r with ``over`` changed."""
        path = dep.server(server).data_dir / "results" / "analyst" / "base-r" / "manifest.json"
        original = path.read_bytes()
        path.write_text(json.dumps(json.loads(original) | over))
        cluster.restart(server)  # a server reads its results' manifests when it starts
        try:
            with pytest.raises(InputError) as info:
                run(fetched("base-r"))
            return str(info.value)
        finally:
            path.write_bytes(original)
            cluster.restart(server)

    three = ["alice", "bob", "carol"]
    assert "lists its parties" in lying("alice", parties=three)  # the coordinator drops dave
    assert "describe it differently (parties, security)" in lying(
        "alice", parties=three, security="passive3")  # ... and calls it passive3
    assert "describe it differently (k)" in lying("dave", k=K + 1)
    assert "describe it differently (parties)" in lying("carol", parties=three)
    assert np.array_equal(reconstruct(run(fetched("base-r"))), expected)
    report(request, "results: fetch took 4/4 (active4) and 3/3 (passive3) servers from the "
           "security setting; 4/4 forged listings refused")
