"""Share files read and written a block at a time: the same arrays as whole reads, any layout."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mpcnet.parties import sharefiles
from mpcnet.parties.sharefiles import ShareFile, ShareFileWriter, StoredShares, sha256_of


def _saved(tmp_path: Path, name: str, array: np.ndarray) -> ShareFile:
    np.save(tmp_path / name, array)
    return ShareFile.open(tmp_path / name)


@pytest.mark.parametrize("by_rows", [True, False])
def test_blocks_equal_slices_of_the_joined_array(tmp_path: Path, by_rows: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sharefiles, "READ_BYTES", 200)  # many small pieces per column block
    rng = np.random.default_rng(1)
    shapes = [(2, 7, 5), (2, 4, 5)] if by_rows else [(2, 9, 3), (2, 9, 4)]
    parts = [rng.integers(0, 2**63, s, dtype=np.uint64) for s in shapes]
    source = StoredShares([_saved(tmp_path, f"{i}.npy", a) for i, a in enumerate(parts)],
                          by_rows)
    whole = np.concatenate(parts, axis=-2 if by_rows else -1)
    assert source.shape == whole.shape
    m, p = whole.shape[-2:]
    for rows in [slice(0, m), slice(3, 9), slice(6, 8), slice(m - 1, m)]:
        for columns in [slice(0, p), slice(1, 3), slice(p - 1, p), slice(2, p)]:
            np.testing.assert_array_equal(source.block(rows, columns), whole[..., rows, columns])


def test_a_file_written_in_blocks_is_a_normal_share_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    array = rng.integers(0, 2**63, (3, 10, 4), dtype=np.uint64)
    writer = ShareFileWriter(tmp_path / "w.npy", array.shape, 0o600)
    for start, stop in [(6, 10), (0, 3), (3, 6)]:
        assert not writer.complete
        writer.write_rows(start, array[:, start:stop])
    assert writer.complete
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), array)
    entry = writer.entry()
    assert entry["sha256"] == sha256_of(tmp_path / "w.npy")
    assert (tmp_path / "w.npy").stat().st_mode & 0o777 == 0o600
    with pytest.raises(ValueError, match="arrived twice"):
        writer.write_rows(2, array[:, 2:4])


def test_blocks_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    writer = ShareFileWriter(tmp_path / "w.npy", (2, 5, 3), 0o600)
    for start, block in [(4, np.zeros((2, 2, 3), np.uint64)), (0, np.zeros((2, 1, 4), np.uint64)),
                         (-1, np.zeros((2, 1, 3), np.uint64))]:
        with pytest.raises(ValueError, match="do not fit"):
            writer.write_rows(start, block)


def test_a_short_file_is_named(tmp_path: Path) -> None:
    from mpcnet.errors import StorageError

    f = _saved(tmp_path, "s.npy", np.zeros((2, 6, 2), np.uint64))
    with open(f.path, "r+b") as handle:
        handle.truncate(f.offset + 8 * 20)
    with pytest.raises(StorageError, match="shorter than its header"):
        f.read_rows(0, 6)


def test_a_job_reads_what_it_checked_even_if_the_file_goes(tmp_path: Path) -> None:
    """A contribution withdrawn (its file unlinked) or replaced while a job runs: the job
    keeps reading, through its descriptor, the file whose checksum it took."""
    array = np.arange(24, dtype=np.uint64).reshape(2, 4, 3)
    np.save(tmp_path / "s.npy", array)
    f = ShareFile.open(tmp_path / "s.npy", sha256_of(tmp_path / "s.npy"))
    (tmp_path / "s.npy").unlink()
    np.save(tmp_path / "s.npy", array + 1)
    np.testing.assert_array_equal(StoredShares([f], True).block(slice(1, 3), slice(None)),
                                  array[:, 1:3])
    f.close()
