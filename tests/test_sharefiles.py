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


@pytest.mark.parametrize("lead", [(), (2,), (3,), (2, 2)])
@pytest.mark.parametrize("by_rows", [True, False])
def test_blocks_equal_slices_of_the_joined_array(tmp_path: Path, by_rows: bool,
                                                 lead: tuple[int, ...],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Every block, narrow or wide, first or last rows, one column or all, across the files'
    joins and over many mapped pieces, is the slice of the joined array."""
    monkeypatch.setattr(sharefiles, "READ_BYTES", 200)  # many small pieces per column block
    rng = np.random.default_rng(1)
    shapes = [(7, 5), (4, 5), (1, 5)] if by_rows else [(9, 3), (9, 4), (9, 1)]
    parts = [rng.integers(0, 2**64, lead + s, dtype=np.uint64) for s in shapes]
    source = StoredShares([_saved(tmp_path, f"{i}.npy", a) for i, a in enumerate(parts)],
                          by_rows)
    whole = np.concatenate(parts, axis=-2 if by_rows else -1)
    assert source.shape == whole.shape
    m, p = whole.shape[-2:]
    row_slices = [slice(0, m), slice(0, 1), slice(3, 9), slice(6, 8), slice(m - 1, m),
                  slice(7, 11), slice(5, 5)]
    column_slices = [slice(0, p), slice(0, 1), slice(1, 3), slice(p - 1, p), slice(2, p),
                     slice(3, 7), slice(6, 8), slice(4, 4)]
    for rows in row_slices:
        for columns in column_slices:
            block = source.block(rows, columns)
            np.testing.assert_array_equal(block, whole[..., rows, columns])
            assert block.flags.c_contiguous and block.dtype == np.uint64
    source.close()


def test_a_block_of_one_column_spans_pieces_and_pages(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows wider than a page and pieces that start inside a page: one column of every row."""
    monkeypatch.setattr(sharefiles, "READ_BYTES", 3 * 8 * 700)  # 3 rows a piece
    rng = np.random.default_rng(3)
    array = rng.integers(0, 2**64, (2, 50, 700), dtype=np.uint64)
    source = StoredShares([_saved(tmp_path, "w.npy", array)], True)
    for rows, columns in [(slice(0, 50), slice(699, 700)), (slice(1, 49), slice(0, 1)),
                          (slice(10, 11), slice(300, 500)), (slice(0, 50), slice(0, 700))]:
        np.testing.assert_array_equal(source.block(rows, columns), array[..., rows, columns])
    source.close()


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
    with pytest.raises(StorageError, match="shorter than its header"):
        StoredShares([f], True).block(slice(0, 1), slice(0, 1))  # refused before it is mapped


def test_a_job_reads_what_it_checked_even_if_the_file_goes(tmp_path: Path) -> None:
    """A contribution withdrawn (its file unlinked) or replaced while a job runs: the job
    keeps reading, through its descriptor, the file whose checksum it took."""
    array = np.arange(24, dtype=np.uint64).reshape(2, 4, 3)
    np.save(tmp_path / "s.npy", array)
    f = ShareFile.open(tmp_path / "s.npy", sha256_of(tmp_path / "s.npy"))
    (tmp_path / "s.npy").unlink()
    np.save(tmp_path / "s.npy", array + 1)
    for columns in [slice(None), slice(1, 2)]:
        np.testing.assert_array_equal(StoredShares([f], True).block(slice(1, 3), columns),
                                      array[:, 1:3, columns])
    f.close()
