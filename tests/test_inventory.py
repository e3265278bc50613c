"""parties.inventory without sockets: a peer rebuilding gets only what it held."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from signed_uploads import salts, statement

from mpcnet import config
from mpcnet.client.local import write_config
from mpcnet.config import Deployment
from mpcnet.errors import AccessDenied, InputError
from mpcnet.parties import catalog, inventory
from mpcnet.parties.storage import Storage
from mpcnet.parties.uploads import Upload
from mpcnet.schemes import registry

ROWS, COLS = 5, 3


@pytest.fixture
def alice(tmp_path: Path) -> Iterator[tuple[Deployment, Storage, dict[str, list[np.ndarray]]]]:
    """Alice's storage on a four-server deployment, with a passive3 dataset (alice, bob and
    carol hold it; dave holds nothing of it)."""
    dep = config.load(write_config(tmp_path, 4, ports=[7001, 7002, 7003, 7004]))
    storage = Storage(tmp_path / "alice")
    storage.open()
    meta = catalog.contribution_meta(
        dataset="d", upload_id="u1", layout="rows", sharing="passive3", rows=ROWS,
        columns=[f"c{i}" for i in range(COLS)], exponents=[0] * COLS, categories={},
        label="y", classes=["0", "1"])
    info = registry.for_sharing("passive3")
    rng = np.random.default_rng(0)
    shares = {"data": info.share(rng.integers(0, 9, (ROWS, COLS), dtype=np.uint64)),
              "labels": info.share(np.eye(2, dtype=np.uint64)[rng.integers(0, 2, ROWS)])}
    up = Upload.describe(storage, dep, 0, "hospital-a", meta, salts(meta, 0))
    up.receive("data", shares["data"][0])
    up.receive("labels", shares["labels"][0])
    up.commit(dep, is_coordinator=True, seq=None, signed=statement("hospital-a", meta, shares))
    yield dep, storage, shares
    storage.close()


def test_a_peer_receives_the_components_it_held_and_no_other(
        alice: tuple[Deployment, Storage, dict[str, list[np.ndarray]]]) -> None:
    dep, storage, shares = alice
    what = {"dataset": "d", "upload": "u1", "part": "data"}
    # alice holds x_0 and x_1; carol (x_2, x_0) may take x_0 back, bob (x_1, x_2) x_1
    for peer, component, slot in (("carol", 0, 0), ("bob", 1, 1)):
        head, blocks = inventory.component(storage, dep, 0, peer, dict(what,
                                                                       component=component))
        np.testing.assert_array_equal(np.concatenate(list(blocks)),
                                      shares["data"][0][slot])
        blocks.close()
        assert len(head["salt"]) == 64 and head["shape"] == [ROWS, COLS]
    for peer, component in (("bob", 0), ("carol", 1), ("dave", 0), ("dave", 1)):
        with pytest.raises(AccessDenied, match="takes back only what it held"):
            inventory.component(storage, dep, 0, peer, dict(what, component=component))
    with pytest.raises(InputError, match="not held here"):
        inventory.component(storage, dep, 0, "bob", dict(what, component=2))
    for bad in ({"component": 1.0}, {"component": True}, {"component": 3},
                {"component": 1, "part": "keys"}, {"component": 1, "upload": "u2"},
                {"component": 1, "dataset": "../d"}):
        with pytest.raises(InputError):
            inventory.component(storage, dep, 0, "bob", dict(what, **bad))


def test_the_inventory_lists_what_the_peer_holds_without_this_servers_files(
        alice: tuple[Deployment, Storage, dict[str, list[np.ndarray]]]) -> None:
    dep, storage, _ = alice
    listed = inventory.inventory(storage, dep, "bob")
    assert [d["name"] for d in listed["datasets"]] == ["d"]
    contribution = listed["datasets"][0]["contributions"][0]
    assert "files" not in contribution and contribution["signed"]["signer"] == "hospital-a"
    assert inventory.inventory(storage, dep, "dave") == {"datasets": [], "results": []}
