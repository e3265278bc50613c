"""Layer: server. Durable storage of one server's shares, results and job records.

Layout under the server's ``data_dir``::

    LOCK                          held (flock) while a server uses the folder; its pid
    RELOAD.json                   how the last reload of the deployment file went
    staging/                      uploads and results being written; emptied at every start
    datasets/<name>/manifest.json schema, contributions, and a SHA-256 per share file
    datasets/<name>/<random>.data.npy, <random>.labels.npy   (names chosen by the server)
    results/<analyst>/<name>/manifest.json, reduced.npy, exponents.npy   (one namespace per
                                  analyst: the one whose signed request made the result)
    jobs/<id>.json                job records (state, error, figures)

Every file is written to a temporary name, flushed with fsync, then renamed into place
(``os.replace`` is atomic) and the folder is fsynced. Folders are created mode 0700 and files
0600 (whatever the umask), so other users of the host cannot read shares. Every path built
from a name a client or a peer chose (dataset, result, job, stored file) goes through
``inside``: a plain name (``mpcnet.config.NAME_RE``) whose path stays in its folder.

A manifest is the only source of truth: share files it does not list are leftovers of an
interrupted commit and are removed at start; a half-received upload lives only in
``staging/`` and is dropped. Every share file is checked against its SHA-256 when loaded, so
damage is reported instead of computed on.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mpcnet.config import NAME_RE
from mpcnet.errors import StorageError
from mpcnet.parties.sharefiles import ShareFile, StoredShares
from mpcnet.signing import component_digest

log = logging.getLogger("mpcnet.storage")

DIR_MODE = 0o700   # data folders: this server's user only
FILE_MODE = 0o600  # share files, manifests, job records, the lock file


def inside(base: Path, name: object, what: str) -> Path:
    """``base / name`` for a ``name`` that may come from a client or a peer: it must be a plain
    name (no separator, no leading dot, no newline) and the path must resolve to an entry of
    ``base`` itself (not through a symlink elsewhere); else ``StorageError``."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise StorageError(f"refusing {what} {name!r}: not a plain file name")
    return _within(base, base / name, what)


def _within(base: Path, path: Path, what: str) -> Path:
    if path.resolve().parent != base.resolve():
        raise StorageError(f"refusing {what} {path.name!r}: its path leaves {base}")
    return path


def _create(path: Path, mode: str) -> Any:
    """``open(path, mode)`` for writing, the file readable by this user only (mode 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    os.fchmod(fd, FILE_MODE)  # an existing file keeps its mode otherwise
    if "b" in mode:
        return os.fdopen(fd, mode)
    return os.fdopen(fd, mode, encoding="utf-8")


def _tighten(folder: Path) -> None:
    """Mode 0700 for a folder made earlier (or by hand) with a looser mode."""
    if folder.stat().st_mode & 0o077:
        try:
            os.chmod(folder, DIR_MODE)
        except PermissionError:
            log.warning("%s is readable by other users and not ours to change: restrict it "
                        "(chmod 700)", folder)


class _HashingWriter:
    def __init__(self, f: Any) -> None:
        self.f, self.h, self.n = f, hashlib.sha256(), 0

    def write(self, b: bytes | memoryview) -> int:
        self.h.update(b)
        self.n += len(b)
        return self.f.write(b)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_array(path: Path, array: np.ndarray, salts: Sequence[tuple[int, bytes]] = ()
                ) -> dict[str, Any]:
    """Write ``array`` as .npy with fsync; return its file entry (name, sha256, bytes) and,
    given the salt of the component in each slot (``(component, salt)`` for ``array[slot]``),
    every component's salted digest (``mpcnet.signing``)."""
    with _create(path, "wb") as f:
        w = _HashingWriter(f)
        np.lib.format.write_array(w, np.ascontiguousarray(array), allow_pickle=False)  # type: ignore[arg-type]
        f.flush()
        os.fsync(f.fileno())
    entry: dict[str, Any] = {"file": path.name, "sha256": w.h.hexdigest(), "bytes": w.n}
    if salts:
        entry["components"] = {str(c): {"salt": salt.hex(),
                                        "digest": component_digest(salt, array[slot])}
                               for slot, (c, salt) in enumerate(salts)}
    return entry


def running_pid(root: Path) -> int | None:
    """The pid of the server that holds the lock of data folder ``root``; None if no server
    holds it."""
    try:
        with open(root / "LOCK") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return int(f.read().strip() or 0) or None
            fcntl.flock(f, fcntl.LOCK_UN)
    except (OSError, ValueError):
        pass
    return None


def write_json(path: Path, obj: Any) -> None:
    """Atomically replace ``path`` with the JSON of ``obj``."""
    tmp = path.with_name(f".{path.name}.tmp")
    with _create(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _label_matrix(stored: np.ndarray, n_stored: int, n_classes: int, dataset: str
                  ) -> np.ndarray:
    """Shares of one contribution's m x (n-1) label matrix L (Protocol 2's input) for the
    dataset's ``n_classes``, from the stored shares of its m x ``n_stored`` class indicators.

    Classes are only ever appended to a dataset's list (parties.catalog), so the contribution's
    rows are in none of the classes it did not know: zero columns, which are shares of zero in
    every sharing. L then drops the last class, as Protocol 2 does. Contributions stored before
    class lists could grow hold L itself (n_stored - 1 columns), valid while no class is added.
    """
    width = stored.shape[-1]
    if width == n_stored - 1 and n_stored == n_classes:
        return stored
    if width != n_stored:
        raise StorageError(f"dataset {dataset!r}: a stored label matrix has {width} columns "
                           f"for {n_stored} classes; it was stored before later owners could "
                           "add classes; share the dataset again under a new name")
    pad = [(0, 0)] * (stored.ndim - 1) + [(0, n_classes - n_stored)]
    return np.pad(stored, pad)[..., :n_classes - 1]


class Storage:
    """One server's data folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.staging = root / "staging"
        self.datasets = root / "datasets"
        self.results = root / "results"
        self.jobs = root / "jobs"
        self._lock: Any = None
        self.reserved = 0  # bytes the uploads being received will still write
        self._results: dict[tuple[str, str], dict[str, Any]] = {}
        self._readers: dict[str, set[tuple[str, str]]] = {}  # analyst -> results it may read

    # -- start -----------------------------------------------------------------------------
    def open(self) -> None:
        """Create the folders, take the lock, drop staged leftovers and unlisted files."""
        try:
            self.root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            for d in (self.root, self.datasets, self.results, self.jobs):
                d.mkdir(mode=DIR_MODE, exist_ok=True)
                _tighten(d)
            self._lock = _create(self.root / "LOCK", "w")
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._lock.write(str(os.getpid()))  # for `mpc-party --reload` (``running_pid``)
            self._lock.flush()
        except BlockingIOError:
            raise StorageError(f"data folder {self.root} is in use by another running server; "
                               "each server needs its own data_dir") from None
        except OSError as exc:
            raise StorageError(f"data folder {self.root} is not usable: {exc}") from None
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(mode=DIR_MODE)
        for folder in self._stored_folders():
            self._tidy(folder)
        # results are answered from memory: a listing or a refused fetch touches no file of
        # a result the client may not read (so its timing tells nothing of others' results)
        self._results, self._readers = {}, {}
        for d in self._stored_folders():
            if d.parent.parent == self.results:
                self._index(self._read(d / "manifest.json"))

    def _stored_folders(self) -> list[Path]:
        """Every dataset folder and every result folder (results/<analyst>/<name>). A result
        stored directly under results/ by a version without per-analyst names has no owner:
        it is kept, not served."""
        out = sorted(self.datasets.iterdir())
        for owner in sorted(self.results.iterdir()):
            if (owner / "manifest.json").is_file():
                log.warning("result %s has no analyst (stored by an earlier version); it is "
                            "kept but not served: run its selection again", owner.name)
                continue
            out += sorted(owner.iterdir())
        return out

    def record_reload(self, outcome: dict[str, Any]) -> None:
        """How the last reload went (``mpc-party --reload`` reads it back)."""
        write_json(self.root / "RELOAD.json", outcome)

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _tidy(self, folder: Path) -> None:
        manifest = folder / "manifest.json"
        if not manifest.is_file():
            log.warning("removing %s: no manifest (an interrupted first commit)", folder)
            shutil.rmtree(folder, ignore_errors=True)
            return
        listed = {"manifest.json"} | {e["file"] for e in self._files(self._read(manifest))}
        for f in folder.iterdir():
            if f.name not in listed:
                log.warning("removing %s: not listed in its manifest (an interrupted commit)", f)
                f.unlink()

    @staticmethod
    def _files(manifest: dict[str, Any]) -> list[dict[str, Any]]:
        if "contributions" in manifest:
            return [e for c in manifest["contributions"] for e in c["files"].values()]
        return list(manifest["files"].values())

    @staticmethod
    def _read(path: Path) -> dict[str, Any]:
        try:
            return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
        except (OSError, ValueError) as exc:
            raise StorageError(f"{path} cannot be read ({exc}); restore it from a backup") from None

    def checked_file(self, folder: Path, entry: dict[str, Any]) -> ShareFile:
        """A stored share file, open, after checking its SHA-256 against the manifest
        (streamed, through the descriptor every later read uses); the caller closes it."""
        return ShareFile.open(inside(folder, entry["file"], "share file"), entry["sha256"])

    def load_array(self, folder: Path, entry: dict[str, Any]) -> np.ndarray:
        """A (small) stored share array, checked, in memory."""
        f = self.checked_file(folder, entry)
        try:
            return f.read_rows(0, f.rows)
        finally:
            f.close()

    def verify_all(self) -> int:
        """Check every stored file against its checksum; returns how many were checked."""
        n = 0
        for folder in self._stored_folders():
            for entry in self._files(self._read(folder / "manifest.json")):
                self.checked_file(folder, entry).close()
                n += 1
        return n

    # -- staging ---------------------------------------------------------------------------
    def stage(self, tag: str) -> Path:
        """A fresh folder for one upload or result being written."""
        path = self.staging / f"{tag}-{os.getpid()}-{time.monotonic_ns()}"
        path.mkdir(mode=DIR_MODE)
        return path

    @staticmethod
    def discard(staged: Path) -> None:
        shutil.rmtree(staged, ignore_errors=True)

    # -- datasets --------------------------------------------------------------------------
    def dataset_names(self) -> list[str]:
        return sorted(d.name for d in self.datasets.iterdir() if (d / "manifest.json").is_file())

    def dataset(self, name: str) -> dict[str, Any] | None:
        path = inside(self.datasets, name, "dataset") / "manifest.json"
        return self._read(path) if path.is_file() else None

    def commit_contribution(self, manifest: dict[str, Any], staged: Path) -> None:
        """Move the staged share files into the dataset folder and publish the new manifest,
        which lists them (the atomic step: before it, the files are unlisted leftovers)."""
        folder = inside(self.datasets, manifest["name"], "dataset")
        first = not folder.exists()
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        for f in staged.iterdir():
            os.replace(f, inside(folder, f.name, "share file"))
        write_json(folder / "manifest.json", manifest)
        if first:
            _fsync_dir(self.datasets)
        self.discard(staged)

    def withdraw(self, name: str, upload_id: str) -> bool:
        """Remove one contribution (the client's undo when another server failed to commit);
        removes the dataset if it was the only one. Returns whether anything was removed."""
        manifest = self.dataset(name)
        if manifest is None:
            return False
        keep = [c for c in manifest["contributions"] if c["id"] != upload_id]
        if len(keep) == len(manifest["contributions"]):
            return False
        folder = inside(self.datasets, name, "dataset")
        if not keep:
            (folder / "manifest.json").unlink()
            shutil.rmtree(folder, ignore_errors=True)
            _fsync_dir(self.datasets)
            return True
        from mpcnet.parties import catalog

        gone = next(c for c in manifest["contributions"] if c["id"] == upload_id)
        rebuilt = catalog.assemble(name, manifest["layout"], manifest["sharing"], keep)
        write_json(folder / "manifest.json", rebuilt)
        for entry in gone["files"].values():
            with contextlib.suppress(FileNotFoundError):
                inside(folder, entry["file"], "share file").unlink()
        return True

    def load_dataset(self, name: str
                     ) -> tuple[dict[str, Any], StoredShares, np.ndarray | None]:
        """Manifest, this server's shares of the data matrix (contributions joined by rows or
        by columns, read a block at a time) and of the whole label matrix, every file
        checked."""
        manifest = self.dataset(name)
        if manifest is None:
            raise StorageError(f"dataset {name!r} is not stored here")
        folder = inside(self.datasets, name, "dataset")
        n_classes = len(manifest["schema"]["classes"] or [])
        datas: list[ShareFile] = []
        labels = []
        try:
            for c in manifest["contributions"]:
                datas.append(self.checked_file(folder, c["files"]["data"]))
                if datas[-1].shape[-2:] != (c["rows"], len(c["columns"])):
                    raise StorageError(f"{datas[-1].path} holds a {datas[-1].shape} array, not "
                                       f"the {c['rows']} x {len(c['columns'])} its manifest "
                                       "lists; restore it from a backup")
                if "labels" in c["files"]:
                    labels.append(_label_matrix(self.load_array(folder, c["files"]["labels"]),
                                                len(c["classes"]), n_classes, name))
        except BaseException:
            StoredShares(datas, True).close()
            raise
        data = StoredShares(datas, manifest["layout"] == "rows")
        label = None
        if labels:
            label = np.concatenate(labels, axis=-2) if len(labels) > 1 else labels[0]
        return manifest, data, label

    def load_keyed(self, name: str
                   ) -> tuple[dict[str, Any], list[tuple[np.ndarray, np.ndarray]]]:
        """Manifest and, per contribution of a dataset keyed by record IDs, this server's
        shares of its ID hashes (n x 2) and of its columns followed by its label matrix if it
        carries the label (n x (c + classes - 1)), every file checked, in memory (the
        alignment, ``mpcnet.ops.join``, needs them whole)."""
        manifest = self.dataset(name)
        if manifest is None:
            raise StorageError(f"dataset {name!r} is not stored here")
        folder = inside(self.datasets, name, "dataset")
        n_classes = len(manifest["schema"]["classes"] or [])
        parts = []
        for c in manifest["contributions"]:
            ids = self.load_array(folder, c["files"]["ids"])
            data = self.load_array(folder, c["files"]["data"])
            if data.shape[-2:] != (c["rows"], len(c["columns"])) or \
                    ids.shape[-2:] != (c["rows"], 2):
                raise StorageError(f"dataset {name!r}: the shares of {c['owner']}'s "
                                   "contribution do not have the shape its manifest lists; "
                                   "restore them from a backup")
            if "labels" in c["files"]:
                labels = _label_matrix(self.load_array(folder, c["files"]["labels"]),
                                       len(c["classes"]), n_classes, name)
                data = np.concatenate([data, labels], axis=-1)
            parts.append((ids, data))
        return manifest, parts

    # -- results ---------------------------------------------------------------------------
    def _result_folder(self, owner: str, name: str) -> Path:
        return inside(inside(self.results, owner, "analyst"), name, "result")

    def results_for(self, reader: str) -> list[dict[str, Any]]:
        """The manifests of the results ``reader`` owns or was named in, by (analyst, name):
        only those are looked at, so the time this takes does not depend on how many results
        others have."""
        return [self._results[key] for key in sorted(self._readers.get(reader, ()))]

    def all_results(self) -> list[dict[str, Any]]:
        """The manifests of every stored result and model (for a peer rebuilding its data
        folder, ``parties.inventory``)."""
        return [self._results[key] for key in sorted(self._results)]

    def _index(self, manifest: dict[str, Any]) -> None:
        """Remember a result under its analyst and every analyst it is shared with."""
        key = (manifest.get("owner"), manifest.get("name"))
        self._results[key] = manifest  # type: ignore[index]
        for reader in {manifest.get("owner"), *manifest.get("share_with", [])}:
            self._readers.setdefault(str(reader), set()).add(key)  # type: ignore[arg-type]

    def result(self, owner: str, name: str) -> dict[str, Any] | None:
        """The manifest of a stored result (not to be changed), or None."""
        self._result_folder(owner, name)  # refuses a name that is no plain name
        return self._results.get((owner, name))

    def stage_result(self, arrays: dict[str, np.ndarray],
                     salts: dict[str, list[tuple[int, bytes]]] | None = None
                     ) -> tuple[Path, dict[str, Any]]:
        """The result's arrays written to a fresh staging folder (``salts``: per array, the
        salt of the component in each slot, for their digests); their file entries."""
        staged = self.stage("result")
        files = {k: write_array(staged / f"{k}.npy", v, (salts or {}).get(k, ()))
                 for k, v in arrays.items()}
        return staged, files

    def commit_result(self, manifest: dict[str, Any], staged: Path) -> None:
        """Publish a staged result under its analyst: the whole folder is renamed into place
        at once."""
        manifest = dict(manifest, stored=time.time())
        write_json(staged / "manifest.json", manifest)
        target = self._result_folder(manifest["owner"], manifest["name"])
        if target.exists():
            raise StorageError(f"result {manifest['name']!r} already exists")
        target.parent.mkdir(mode=DIR_MODE, exist_ok=True)
        os.replace(staged, target)
        _fsync_dir(target.parent)
        _fsync_dir(self.results)
        self._index(manifest)

    def load_result(self, owner: str, name: str
                    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        manifest = self.result(owner, name)
        if manifest is None:
            raise StorageError(f"result {name!r} of {owner} is not stored here")
        folder = self._result_folder(owner, name)
        return manifest, {k: self.load_array(folder, e) for k, e in manifest["files"].items()}

    # -- jobs ------------------------------------------------------------------------------
    def save_job(self, record: dict[str, Any]) -> None:
        job_id = record["id"]
        if not isinstance(job_id, str) or not NAME_RE.fullmatch(job_id):
            raise StorageError(f"refusing job id {job_id!r}: not a plain file name")
        write_json(_within(self.jobs, self.jobs / f"{job_id}.json", "job record"), record)

    def load_jobs(self) -> list[dict[str, Any]]:
        out = []
        for f in sorted(self.jobs.glob("*.json")):
            try:
                out.append(json.loads(f.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                log.warning("ignoring unreadable job record %s", f)
        return sorted(out, key=lambda r: r.get("created", 0))
