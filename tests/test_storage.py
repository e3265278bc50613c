"""A server's storage: atomic commits, checksums, leftovers removed, one server per folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from signed_uploads import SALT, salts, statement

from mpcnet import config
from mpcnet.client.local import write_config
from mpcnet.parties import catalog
from mpcnet.parties.storage import Storage, StorageError, write_array


def _contribute(st: Storage, upload: str, owner: str, seq: int, rows: int = 4,
                classes: tuple[str, ...] = ("0", "1"), labels: np.ndarray | None = None
                ) -> None:
    meta = catalog.contribution_meta(dataset="d", upload_id=upload, layout="rows",
                                     sharing="passive3", rows=rows, columns=["a", "b"],
                                     exponents=[0, 0], categories={}, label="y",
                                     classes=list(classes))
    staged = st.stage("upload")
    files = {"data": write_array(staged / f"{upload}.data.npy",
                                 np.full((2, rows, 2), seq, dtype=np.uint64)),
             "labels": write_array(staged / f"{upload}.labels.npy",
                                   np.zeros((2, rows, 1), dtype=np.uint64)
                                   if labels is None else labels)}
    man = st.dataset("d")
    entry = dict(catalog.entry(meta, owner), seq=seq, files=files)
    new = catalog.assemble("d", "rows", "passive3", (man["contributions"] if man else []) + [entry])
    st.commit_contribution(new, staged)


def test_contributions_join_in_order_and_survive_reopening(tmp_path: Path) -> None:
    st = Storage(tmp_path)
    st.open()
    _contribute(st, "u1", "a", 1, rows=3)
    _contribute(st, "u2", "b", 2, rows=2)
    st.close()
    st = Storage(tmp_path)
    st.open()
    man, data, labels = st.load_dataset("d")
    assert man["rows"] == 5 and data.shape == (2, 5, 2) and labels is not None
    assert data.block(slice(0, 5), slice(0, 1))[0, :, 0].tolist() == [1, 1, 1, 2, 2]
    assert st.verify_all() == 4
    assert st.withdraw("d", "u2") and st.load_dataset("d")[0]["rows"] == 3
    assert st.withdraw("d", "u1") and st.dataset_names() == []


def test_label_matrices_grow_with_the_class_list(tmp_path: Path) -> None:
    """An owner who adds a class leaves the earlier owners' label shares valid: they are padded
    with zero columns (shares of zero) and the last class dropped, as Protocol 2 wants."""
    from mpcnet.dataset import indicators, one_hot
    from mpcnet.schemes import rep3

    first, second = np.array([0, 1, 1]), np.array([2, 0, 1, 2])
    shares_1, shares_2 = rep3.share(indicators(first, 2)), rep3.share(indicators(second, 3))
    loaded = []
    for party in range(3):
        st = Storage(tmp_path / str(party))
        st.open()
        _contribute(st, "u1", "a", 1, rows=3, labels=shares_1[party])
        _contribute(st, "u2", "b", 2, rows=4, classes=("0", "1", "2"), labels=shares_2[party])
        man, _, labels = st.load_dataset("d")
        assert man["schema"]["classes"] == ["0", "1", "2"] and labels is not None
        loaded.append(labels)
        st.close()
    expected = one_hot(np.concatenate([first, second]), 3)
    assert np.array_equal(rep3.reconstruct(dict(enumerate(loaded))), expected)


def test_damage_is_detected_not_computed_on(tmp_path: Path) -> None:
    st = Storage(tmp_path)
    st.open()
    _contribute(st, "u1", "a", 1)
    f = tmp_path / "datasets" / "d" / "u1.data.npy"
    raw = bytearray(f.read_bytes())
    raw[-1] ^= 1
    f.write_bytes(bytes(raw))
    with pytest.raises(StorageError, match="damaged"):
        st.load_dataset("d")


def test_half_written_uploads_and_unlisted_files_are_dropped(tmp_path: Path) -> None:
    st = Storage(tmp_path)
    st.open()
    _contribute(st, "u1", "a", 1)
    staged = st.stage("upload")
    (staged / "half.npy").write_bytes(b"partial")
    (tmp_path / "datasets" / "d" / "orphan.data.npy").write_bytes(b"x")
    (tmp_path / "datasets" / "nomanifest").mkdir()
    st.close()
    st = Storage(tmp_path)
    st.open()
    assert list(st.staging.iterdir()) == []
    assert not (tmp_path / "datasets" / "d" / "orphan.data.npy").exists()
    assert st.dataset_names() == ["d"] and st.verify_all() == 2


def test_results_commit_as_a_whole_in_their_analysts_namespace(tmp_path: Path) -> None:
    st = Storage(tmp_path)
    st.open()
    for owner in ("ann", "bea"):  # one name, two analysts: two results
        staged, files = st.stage_result({"reduced": np.ones((2, 3, 2), np.uint64),
                                         "exponents": np.zeros((2, 2), np.uint64)})
        st.commit_result({"name": "r", "owner": owner, "files": files,
                          "share_with": ["cid"] if owner == "bea" else []}, staged)
    man, arrays = st.load_result("ann", "r")
    assert arrays["reduced"].shape == (2, 3, 2) and man["owner"] == "ann"
    assert [m["owner"] for m in st.results_for("ann")] == ["ann"]
    assert [m["owner"] for m in st.results_for("cid")] == ["bea"]
    assert st.results_for("dan") == [] and st.result("ann", "x") is None
    staged, files = st.stage_result({"reduced": np.ones(1, np.uint64)})
    with pytest.raises(StorageError, match="exists"):
        st.commit_result({"name": "r", "owner": "ann", "files": files}, staged)
    assert st.verify_all() == 4
    st.close()
    st = Storage(tmp_path)  # the index is rebuilt from the stored manifests
    st.open()
    assert [m["owner"] for m in st.results_for("cid")] == ["bea"]
    st.close()


def test_a_result_without_an_analyst_is_kept_but_not_served(tmp_path: Path) -> None:
    """Stored by a version without per-analyst names: nobody may read it any more."""
    st = Storage(tmp_path)
    st.open()
    legacy = st.results / "old"
    legacy.mkdir()
    (legacy / "manifest.json").write_text('{"name": "old", "files": {}}')
    st.close()
    st = Storage(tmp_path)
    st.open()
    assert (legacy / "manifest.json").is_file() and st.results_for("None") == []
    st.close()


def test_one_server_per_data_folder(tmp_path: Path) -> None:
    a = Storage(tmp_path)
    a.open()
    with pytest.raises(StorageError, match="in use"):
        Storage(tmp_path).open()
    a.close()


def test_storage_refuses_paths_outside_its_folders(tmp_path: Path) -> None:
    st = Storage(tmp_path / "data")
    st.open()
    try:
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "manifest.json").write_text("{}")
        (st.datasets / "link").symlink_to(outside)
        checks = [lambda: st.dataset("../outside"), lambda: st.dataset("link"),
                  lambda: st.result("a", ".."), lambda: st.result("a", "a/b"),
                  lambda: st.result("..", "a"), lambda: st.load_result("a", "../datasets"),
                  lambda: st.load_dataset("../../outside"),
                  lambda: st.save_job({"id": "../../outside/job"}),
                  lambda: st.save_job({"id": "x\n"}),
                  lambda: st.load_array(st.datasets, {"file": "../LOCK", "sha256": ""}),
                  lambda: st.withdraw("../outside", "u1"),
                  lambda: st.commit_result({"name": "../escape", "owner": "a"},
                                           st.stage("result")),
                  lambda: st.commit_result({"name": "x", "owner": "../up"},
                                           st.stage("result"))]
        for i, check in enumerate(checks):
            with pytest.raises(StorageError, match="refusing"):
                check()
                pytest.fail(f"check {i} passed")
        assert not list(tmp_path.glob("escape*")) and not (outside / "job.json").exists()
    finally:
        st.close()


def test_stored_folders_and_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    """Datasets, results and job records of one server, written under a common umask (022):
    folders 0700, files 0600."""
    import os
    import stat

    from mpcnet.parties.uploads import Upload
    from mpcnet.schemes import registry

    old = os.umask(0o022)
    try:
        st = Storage(tmp_path / "data")
        st.open()
        dep = config.load(write_config(tmp_path, 3, ports=[7001, 7002, 7003]))
        meta = catalog.contribution_meta(
            dataset="d", upload_id="u1", layout="rows", sharing="passive3", rows=4,
            columns=["a", "b"], exponents=[0, 0], categories={}, label="y", classes=["0", "1"])
        info = registry.for_sharing("passive3")
        shares = {"data": info.share(np.zeros((4, 2), np.uint64)),
                  "labels": info.share(np.zeros((4, 2), np.uint64))}
        up = Upload.describe(st, dep, 0, "hospital-a", meta, salts(meta, 0))
        up.receive("data", shares["data"][0])
        up.receive("labels", shares["labels"][0])
        up.commit(dep, is_coordinator=True, seq=None, signed=statement("hospital-a", meta, shares))
        staged, files = st.stage_result({"reduced": np.zeros((2, 4, 1), np.uint64)},
                                        {"reduced": [(0, SALT), (1, SALT)]})
        assert set(files["reduced"]["components"]) == {"0", "1"}
        st.commit_result({"name": "r", "owner": "analyst", "files": files}, staged)
        st.save_job({"id": "0123456789ab", "state": "done"})
        st.close()
    finally:
        os.umask(old)
    loose = [f"{p} {oct(stat.S_IMODE(p.lstat().st_mode))}"
             for p in [tmp_path / "data", *(tmp_path / "data").rglob("*")]
             if stat.S_IMODE(p.lstat().st_mode) != (0o700 if p.is_dir() else 0o600)]
    assert not loose, "not private:\n" + "\n".join(loose)
    kinds = {p.parent.name for p in (tmp_path / "data").rglob("*.json")}
    assert {"jobs", "d", "r"} <= kinds  # job records, datasets and results checked

