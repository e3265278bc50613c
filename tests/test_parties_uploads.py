"""parties.uploads without sockets: describe, receive, stage, commit or abort one upload."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from signed_uploads import salts, statement

from mpcnet import config
from mpcnet.client.local import write_config
from mpcnet.config import Deployment
from mpcnet.errors import AccessDenied, InputError
from mpcnet.parties import catalog
from mpcnet.parties.storage import Storage
from mpcnet.parties.uploads import Upload, withdraw, withdraw_dataset
from mpcnet.schemes import registry
from mpcnet.signing import Signed

ROWS, COLS = 6, 3


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Deployment, Storage]]:
    dep = config.load(write_config(tmp_path, 3, ports=[7001, 7002, 7003],
                                   extra_client_lines={"outsider": 'datasets = ["elsewhere"]'}))
    storage = Storage(tmp_path / "data")
    storage.open()
    yield dep, storage
    storage.close()


def _meta(**over: Any) -> dict[str, Any]:
    return catalog.contribution_meta(
        dataset="d", upload_id="u1", layout="rows", sharing="passive3", rows=ROWS,
        columns=[f"c{i}" for i in range(COLS)], exponents=[0] * COLS, categories={},
        label="y", classes=["0", "1"]) | over


SHARES = {"data": registry.for_sharing("passive3").share(np.zeros((ROWS, COLS), np.uint64)),
          "labels": registry.for_sharing("passive3").share(np.zeros((ROWS, 2), np.uint64))}


def _shares(party: int = 1) -> tuple[np.ndarray, np.ndarray]:
    return SHARES["data"][party], SHARES["labels"][party]


def _describe(storage: Storage, dep: Deployment, party: int, owner: str, meta: Any) -> Upload:
    return Upload.describe(storage, dep, party, owner, meta,
                           salts(meta, party) if isinstance(meta, dict) else None)


def _signed(meta: dict[str, Any], owner: str = "hospital-a") -> Signed:
    return statement(owner, meta, SHARES)


def test_an_upload_is_described_then_staged_then_committed(setup: tuple[Deployment, Storage]
                                                           ) -> None:
    dep, storage = setup
    up = _describe(storage, dep, 1, "hospital-a", _meta())
    assert up.expect == {"data": (2, ROWS, COLS), "labels": (2, ROWS, 2)}
    data, labels = _shares()
    up.receive("data", data)
    assert up.state == "receiving" and storage.dataset("d") is None
    with pytest.raises(InputError, match="not staged"):
        up.commit(dep, is_coordinator=True, seq=None, signed=_signed(_meta()))
    up.receive("labels", labels)
    assert up.state == "staged" and storage.dataset("d") is None  # nothing visible yet
    with pytest.raises(InputError, match="coordinator's sequence number"):
        up.commit(dep, is_coordinator=False, seq=None, signed=_signed(_meta()))
    done = up.commit(dep, is_coordinator=False, seq=7, signed=_signed(_meta()))
    assert done["seq"] == 7 and storage.dataset("d")["rows"] == ROWS
    # the server names the stored files itself, never after the client's upload id
    files = storage.dataset("d")["contributions"][0]["files"]
    assert all("u1" not in entry["file"] for entry in files.values())


def test_a_keyed_upload_needs_its_record_id_hashes_and_is_loaded_with_them(
        setup: tuple[Deployment, Storage]) -> None:
    """Keyed by record IDs: the hashes (n x 2) are a part of their own; ``load_keyed`` hands
    each contribution's hashes and its columns with the label matrix after them."""
    dep, storage = setup
    owners = (("hospital-a", "u1", "y", ROWS), ("hospital-b", "u2", None, ROWS - 2))
    for owner, upload, label, rows in owners:
        meta = _meta(id=upload, layout="keyed", rows=rows, label=label,
                     classes=["0", "1"] if label else None,
                     columns=[f"{owner}-c{i}" for i in range(COLS)])
        up = _describe(storage, dep, 1, owner, meta)
        assert up.expect["ids"] == (2, rows, 2)
        info = registry.for_sharing("passive3")
        shares = {"data": info.share(np.zeros((rows, COLS), np.uint64)),
                  "ids": info.share(np.zeros((rows, 2), np.uint64))}
        up.receive("data", shares["data"][1])
        if label:
            shares["labels"] = SHARES["labels"]
            up.receive("labels", _shares()[1])
        assert up.state == "receiving"  # the hashes are still missing
        up.receive("ids", shares["ids"][1])
        up.commit(dep, is_coordinator=True, seq=None, signed=statement(owner, meta, shares))
    manifest, parts = storage.load_keyed("d")
    assert manifest["layout"] == "keyed" and manifest["rows"] == ROWS - 2
    assert [(ids.shape, data.shape) for ids, data in parts] == [
        ((2, ROWS, 2), (2, ROWS, COLS + 1)), ((2, ROWS - 2, 2), (2, ROWS - 2, COLS))]


def test_the_coordinator_numbers_contributions(setup: tuple[Deployment, Storage]) -> None:
    dep, storage = setup
    for i, owner in enumerate(("hospital-a", "hospital-b"), start=1):
        up = _describe(storage, dep, 0, owner, _meta(id=f"u{i}"))
        for part, arr in zip(("data", "labels"), _shares(0), strict=True):
            up.receive(part, arr)
        done = up.commit(dep, is_coordinator=True, seq=99, signed=_signed(_meta(id=f"u{i}"), owner))
        assert done["seq"] == i  # its own number wins


def test_a_commit_needs_the_owners_statement_of_what_this_server_received(
        setup: tuple[Deployment, Storage]) -> None:
    """The owner's statement must describe this upload and give this server's components
    the digests of what it received; the salts of its components come with the description;
    the statement is kept with the contribution, the salts with its files."""
    dep, storage = setup
    with pytest.raises(InputError, match="salts of components"):
        Upload.describe(storage, dep, 1, "hospital-a", _meta(), None)
    up = _describe(storage, dep, 1, "hospital-a", _meta())
    for part, arr in zip(("data", "labels"), _shares(), strict=True):
        up.receive(part, arr)
    other = dict(SHARES, data=[a + np.uint64(1) for a in SHARES["data"]])
    for signed, words in ((statement("hospital-a", _meta(), other), "component 1 of data"),
                          (_signed(_meta(rows=ROWS + 1)), "not of this upload"),
                          (_signed(_meta(), owner="hospital-b"), "hospital-b signed it")):
        with pytest.raises(InputError, match=words):
            up.commit(dep, is_coordinator=True, seq=None, signed=signed)
    up.commit(dep, is_coordinator=True, seq=None, signed=_signed(_meta()))
    entry = storage.dataset("d")["contributions"][0]
    assert entry["signed"]["statement"]["meta"] == _meta()
    assert set(entry["files"]["data"]["components"]) == {"1", "2"}  # bob's: x_1 and x_2


def test_arrays_must_be_the_ones_described(setup: tuple[Deployment, Storage]) -> None:
    dep, storage = setup
    up = _describe(storage, dep, 1, "hospital-a", _meta())
    data, _ = _shares()
    for part, arr, words in (("keys", data, "expected the arrays"),
                             ("data", None, "expected the arrays"),
                             ("data", data.astype(np.float64), "must be uint64"),
                             ("data", data[..., :-1], "of shape"),
                             ("data", data[0], "of shape")):
        with pytest.raises(InputError, match=words):
            up.receive(part, arr)
    up.receive("data", data)
    with pytest.raises(InputError, match="expected the arrays"):
        up.receive("data", data)  # twice


def test_large_arrays_arrive_as_blocks_of_rows(setup: tuple[Deployment, Storage]) -> None:
    """Blocks in any order make the same stored file; an overlap or a block past the end is
    refused, and the upload is staged only once every row has arrived."""
    dep, storage = setup
    up = _describe(storage, dep, 0, "hospital-a", _meta())
    data, labels = _shares(0)
    up.receive("labels", labels)
    cut = ROWS // 2
    up.receive("data", data[:, cut:], cut)
    for start, block in ((cut, data[:, cut:cut + 1]), (ROWS, data[:, :1]),
                         (cut - 1, data[:, :2])):
        with pytest.raises(InputError, match="do not fit"):
            up.receive("data", block, start)
    assert up.state == "receiving"
    up.receive("data", data[:, :cut], 0)
    assert up.state == "staged"
    up.commit(dep, is_coordinator=True, seq=None, signed=_signed(_meta()))
    _, stored, _ = storage.load_dataset("d")
    np.testing.assert_array_equal(stored.block(slice(0, ROWS), slice(None)), data)


def test_bad_descriptions_are_refused_before_any_array(setup: tuple[Deployment, Storage]
                                                       ) -> None:
    dep, storage = setup
    cases = {
        "no description": ("x", InputError, "without a description"),
        "an id climbing out of the folder": (_meta(id="../../escape"), InputError, "upload id"),
        "an id with a newline": (_meta(id="u\n"), InputError, "upload id"),
        "an empty id": (_meta(id=""), InputError, "upload id"),
        "a list for an id": (_meta(id=[]), InputError, "upload id"),
        "a dataset name climbing out": (_meta(dataset="../d"), InputError, "dataset name"),
        "an unknown sharing": (_meta(sharing="rot13"), InputError, "unknown sharing"),
        "no rows": (_meta(rows=0), InputError, "at least one row"),
        "one exponent too few": (_meta(exponents=[0]), InputError, "one exponent per column"),
    }
    for name, (meta, error, words) in cases.items():
        with pytest.raises(error, match=words):
            _describe(storage, dep, 1, "hospital-a", meta)
            pytest.fail(name)
    with pytest.raises(AccessDenied, match="may not contribute to dataset 'd'"):
        _describe(storage, dep, 1, "outsider", _meta())
    assert not list(storage.staging.iterdir())  # no staging folder left behind
    assert not list(storage.root.parent.rglob("escape*"))


def test_an_aborted_upload_leaves_nothing(setup: tuple[Deployment, Storage]) -> None:
    dep, storage = setup
    up = _describe(storage, dep, 1, "hospital-a", _meta())
    up.receive("data", _shares()[0])
    assert up.abort() and not up.folder.exists() and storage.dataset("d") is None
    assert not up.abort()  # once


def test_an_owner_withdraws_only_its_own_contribution(setup: tuple[Deployment, Storage]
                                                      ) -> None:
    dep, storage = setup
    up = _describe(storage, dep, 1, "hospital-a", _meta())
    for part, arr in zip(("data", "labels"), _shares(), strict=True):
        up.receive(part, arr)
    up.commit(dep, is_coordinator=True, seq=None, signed=_signed(_meta()))
    assert not withdraw(storage, dep, "hospital-b", "d", "u1")
    assert withdraw(storage, dep, "hospital-a", "d", "u1")
    assert storage.dataset("d") is None or not storage.dataset("d")["contributions"]


def _commit(storage: Storage, dep: Deployment, owner: str, upload_id: str, **over: Any
            ) -> None:
    meta = _meta(id=upload_id, **over)
    up = _describe(storage, dep, 1, owner, meta)
    for part, arr in zip(("data", "labels"), _shares(), strict=True):
        up.receive(part, arr)
    up.commit(dep, is_coordinator=True, seq=None, signed=_signed(meta, owner))


def test_withdrawing_a_dataset_removes_only_the_askers_contribution_at_the_digest_read(
        setup: tuple[Deployment, Storage]) -> None:
    """``withdraw_dataset``: the session's own contribution only, at the digest the owner
    read from every server, never while a selection on it is queued or running."""
    dep, storage = setup
    _commit(storage, dep, "hospital-a", "u1")
    read = catalog.digest(storage.dataset("d"))
    _commit(storage, dep, "hospital-b", "u2")  # committed after hospital-a read the digest
    with pytest.raises(InputError, match="changed on this server since you read it"):
        withdraw_dataset(storage, dep, "hospital-a", "d", read, busy=False)
    now = catalog.digest(storage.dataset("d"))
    with pytest.raises(InputError, match="queued or running"):
        withdraw_dataset(storage, dep, "hospital-a", "d", now, busy=True)
    with pytest.raises(AccessDenied, match="needs the role owner"):
        withdraw_dataset(storage, dep, "analyst", "d", now, busy=False)
    assert withdraw_dataset(storage, dep, "outsider", "d", now, busy=False) == []  # holds none
    assert withdraw_dataset(storage, dep, "hospital-a", "d", now, busy=False) == ["u1"]
    left = storage.dataset("d")
    assert [c["owner"] for c in left["contributions"]] == ["hospital-b"] and left["rows"] == ROWS
    assert withdraw_dataset(storage, dep, "hospital-a", "d", now, busy=False) == []  # a retry
    assert withdraw_dataset(storage, dep, "hospital-b", "d", catalog.digest(left),
                            busy=False) == ["u2"]
    assert storage.dataset("d") is None and "d" not in storage.dataset_names()


def test_an_owner_whose_upload_permission_was_narrowed_still_withdraws(
        setup: tuple[Deployment, Storage], tmp_path: Path) -> None:
    """An operator who narrows (or revokes) an owner's datasets in its deployment file must
    not thereby keep that owner's contribution: the owner still withdraws it there."""
    dep, storage = setup
    _commit(storage, dep, "hospital-a", "u1")
    narrowed = config.load(write_config(tmp_path / "n", 3, ports=[7001, 7002, 7003],
                                        extra_client_lines={"hospital-a": 'datasets = ["x"]'}))
    assert not narrowed.client("hospital-a").may_upload("d")
    now = catalog.digest(storage.dataset("d"))
    assert withdraw_dataset(storage, narrowed, "hospital-a", "d", now, busy=False) == ["u1"]
    assert storage.dataset("d") is None


def test_the_owner_who_fixed_a_free_scale_withdraws(tmp_path: Path) -> None:
    """Honest owners: A's c0 all zero (free), B's fixes its scale at 7, C's all zero again,
    encoded at 7. B's withdrawal rebuilds the dataset from A and C, which must fit."""
    from mpcnet.client.local import CLIENTS

    dep = config.load(write_config(tmp_path, 3, ports=[7001, 7002, 7003],
                                   clients=CLIENTS + (("hospital-c", "owner"),)))
    storage = Storage(tmp_path / "data")
    storage.open()
    _commit(storage, dep, "hospital-a", "ua", zero_columns=["c0"])
    _commit(storage, dep, "hospital-b", "ub", exponents=[7, 0, 0])
    _commit(storage, dep, "hospital-c", "uc", exponents=[7, 0, 0], zero_columns=["c0"])
    now = catalog.digest(storage.dataset("d"))
    assert withdraw_dataset(storage, dep, "hospital-b", "d", now, busy=False) == ["ub"]
    left = storage.dataset("d")
    assert [c["owner"] for c in left["contributions"]] == ["hospital-a", "hospital-c"]
    assert left["schema"]["free"] == ["c0"]
    storage.close()


def test_uploads_reserve_their_disk_space_until_they_end(setup: tuple[Deployment, Storage],
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """Files are preallocated sparse, so the free space the disk reports does not shrink as
    uploads are described: the server counts what the uploads in progress will write."""
    import shutil
    from collections import namedtuple

    from mpcnet.parties import uploads

    dep, storage = setup
    need = 8 * 2 * ROWS * (3 + 2)  # passive3: 2 components of data (3 columns) and labels
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage",
                        lambda _: usage(0, 0, uploads.FREE_MARGIN + need * 3 // 2))
    first = _describe(storage, dep, 0, "hospital-a", _meta(id="u1"))
    with pytest.raises(InputError, match="free for uploads now"):
        _describe(storage, dep, 0, "hospital-b", _meta(id="u2"))
    first.abort()
    _describe(storage, dep, 0, "hospital-b", _meta(id="u2")).abort()
    assert storage.reserved == 0


def test_a_permission_removed_after_staging_stops_the_commit(tmp_path: Path) -> None:
    """The owner's dataset list is checked again at commit: a reload that removed the
    dataset from it (key and role unchanged) leaves a staged upload nothing to commit to."""
    path = write_config(tmp_path, 3, ports=[7001, 7002, 7003],
                        extra_client_lines={"hospital-a": 'datasets = ["d"]'})
    storage = Storage(tmp_path / "data")
    storage.open()
    try:
        up = _describe(storage, config.load(path), 1, "hospital-a", _meta())
        for part, arr in zip(("data", "labels"), _shares(), strict=True):
            up.receive(part, arr)
        assert up.state == "staged" and up.allowed(config.load(path))
        path.write_text(path.read_text().replace('datasets = ["d"]', 'datasets = ["other"]'))
        revoked = config.load(path)
        assert not up.allowed(revoked)
        with pytest.raises(AccessDenied, match="may not contribute to dataset 'd'"):
            up.commit(revoked, is_coordinator=True, seq=None, signed=_signed(_meta()))
        assert up.state == "aborted" and storage.dataset("d") is None
        assert storage.reserved == 0
    finally:
        storage.close()
