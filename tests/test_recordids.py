"""mpcnet.recordids: record IDs normalised and hashed with the owners' key, on the owner's
machine; duplicates, empty IDs and 57-bit collisions refused naming rows; the key file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from mpcnet import recordids
from mpcnet.errors import InputError
from mpcnet.recordids import hashed, new_key, normalise, read_key

KEY = bytes(range(32))


def test_spellings_of_one_id_hash_alike_and_keys_make_other_hashes() -> None:
    assert normalise("  AB-12\t") == normalise("ab-12") == normalise("ＡＢ-１２")  # NFKC
    a, b = hashed([" ab-12 ", "AB-12x"], KEY), hashed(["AB-12"], KEY)
    assert np.array_equal(a[0], b[0]) and not np.array_equal(a[1], b[0])
    assert not np.array_equal(hashed(["AB-12"], bytes(32)), b)
    assert (a[:, 0] < 2**57).all() and (a[:, 1] < 2**61).all()


def test_duplicates_and_empty_ids_are_refused_naming_rows() -> None:
    with pytest.raises(InputError, match="rows 2 and 4 have the same record ID"):
        hashed(["a", "B", "c", " b "], KEY, "f.csv")
    with pytest.raises(InputError, match="f.csv: row 3: the record ID is empty"):
        hashed(["a", "b", "  "], KEY, "f.csv")


def test_ids_whose_hashes_agree_in_hi_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """With hi cut to 4 bits here, 40 IDs must collide: the rows are named, with the remedy."""
    monkeypatch.setattr(recordids, "HI_BITS", 4)
    with pytest.raises(InputError, match=r"rows \d+ and \d+ agree in the first 4 bits.*id-key"):
        hashed([f"id{i}" for i in range(40)], KEY)


def test_a_key_file_is_made_once_private_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "ids.key"
    new_key(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and len(read_key(path)) == 32
    with pytest.raises(InputError, match="exists"):
        new_key(path)
    (tmp_path / "short.key").write_text("abcd\n")
    with pytest.raises(InputError, match="32 bytes"):
        read_key(tmp_path / "short.key")
    with pytest.raises(InputError, match="not a record-ID key file"):
        read_key(tmp_path / "missing.key")
