"""active3's commitments and coin (mpcnet.schemes.commitment): a commitment binds its terms
and its salt, a relayed digest that does not match aborts, and the coin's two holders of a key
must agree."""

from __future__ import annotations

import numpy as np
import pytest

from mpcnet.errors import CheatingDetected
from mpcnet.schemes.commitment import check_commitment, coin_seed, commitment

U64 = np.uint64


def test_a_commitment_binds_its_terms_and_its_salt() -> None:
    terms = np.arange(12, dtype=U64).reshape(3, 4)
    digest = commitment(b"salt", terms)
    changed = terms.copy()
    changed[2, 3] ^= U64(1)
    assert not np.array_equal(digest, commitment(b"salt", changed))
    assert not np.array_equal(digest, commitment(b"pepper", terms))
    check_commitment(terms, digest, b"salt", "AND", "triple terms", (1, 2, 0))
    with pytest.raises(CheatingDetected, match="triple terms of party 2 do not match their "
                                                "digest relayed by party 0") as caught:
        check_commitment(changed, digest, b"salt", "AND", "triple terms", (1, 2, 0))
    assert caught.value.check == "AND"


def test_the_coin_is_the_xor_of_the_three_keys_outputs_and_its_holders_must_agree() -> None:
    mine = (np.array([1, 2], dtype=U64), np.array([4, 8], dtype=U64))
    third = np.array([16, 32], dtype=U64)
    assert coin_seed(mine, (third, third.copy()), 0) == np.array([21, 42], dtype=U64).tobytes()
    with pytest.raises(CheatingDetected) as caught:
        coin_seed(mine, (third, third ^ U64(1)), 0)
    assert caught.value.check == "coin"
