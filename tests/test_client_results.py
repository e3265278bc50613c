"""client.results against real servers: the parties come from the security setting, and a
result that the servers list differently is refused.

Four ``mpc-party`` processes over TLS on 127.0.0.1 hold an active4 and a passive3 result; the
tests then act as a server that lies in its listing (fewer parties, another setting, another k).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability_common import FaultCluster, four_servers_with_results, plaintext, report

from mpcnet.client.results import Reduced, reconstruct, write_csv
from mpcnet.client.session import Client
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


def test_reduced_csv_is_written_at_the_precision_of_its_encoding(tmp_path: Path) -> None:
    """Every value reads back to the same fixed-point integer, in as few decimals as the
    scale needs (0.0012, not 0.001199999824166298), and no file is silently replaced."""
    from mpcnet.fixedpoint import auto_exponents, encode

    rng = np.random.default_rng(5)
    values = np.column_stack([rng.normal(0, 1e-3, 50), rng.normal(0, 1e6, 50),
                              rng.integers(-9, 9, 50), np.full(50, 0.0012)])
    values[0] = [0.0012, -3.5, 0, 1e-9]
    exps = auto_exponents(values)
    encoded = encode(values, exps)
    out = tmp_path / "d.csv"
    write_csv(out, Reduced(encoded, exps))
    text = out.read_text().splitlines()
    assert text[0] == "f1,f2,f3,f4" and text[1].split(",")[:3] == ["0.0012", "-3.5", "0"]
    assert text[2].split(",")[3] == "0.0012"
    back = np.array([line.split(",") for line in text[1:]], dtype=np.float64)
    assert np.array_equal(encode(back, exps), encoded)
    assert max(len(c) for line in text[1:] for c in line.split(",")) <= 24
    with pytest.raises(InputError, match="--force"):
        write_csv(out, Reduced(encoded, exps))
    write_csv(out, Reduced(encoded[:2], exps), overwrite=True)
    assert len(out.read_text().splitlines()) == 3
    assert out.stat().st_mode & 0o777 == 0o600  # D' is as secret as the shares
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / ".e.csv.tmp").symlink_to(victim)  # planted where the file is staged
    write_csv(tmp_path / "e.csv", Reduced(encoded, exps))
    assert victim.read_text() == "keep" and (tmp_path / "e.csv").is_file()


def test_fetched_shares_are_private_files(cluster: FaultCluster, tmp_path: Path) -> None:
    folder = tmp_path / "shares"
    report_path = folder / "alice.reduced.npy"
    for force in ((), ("--force",)):
        out = cluster.client("analyst", "fetch", "--result", "base-r", "--shares-dir",
                             str(folder), *force)
        assert out.returncode == 0, out.stderr
    assert report_path.is_file()
    assert {oct(p.stat().st_mode & 0o777) for p in folder.iterdir()} == {"0o600"}
    again = cluster.client("analyst", "fetch", "--result", "base-r", "--shares-dir", str(folder))
    assert again.returncode == 2 and "--force" in again.stderr
