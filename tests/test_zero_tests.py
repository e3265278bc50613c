"""active3's claims (mpcnet.schemes.zero_tests): each party's claim is what the next party
expects exactly when the shared t is zero, and a check stays pending from its first claim
until its digests are taken."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import shares128

from mpcnet.schemes import rep3
from mpcnet.schemes.zero_tests import Claims, zero_claim

U64 = np.uint64


@pytest.mark.parametrize("binary", [False, True], ids=["ring", "binary"])
def test_a_claim_matches_what_the_next_party_expects_exactly_for_zero(binary: bool) -> None:
    rng = np.random.default_rng(3)
    t = np.zeros(6, dtype=U64)
    t[4] = 1 << 40
    if binary:
        shares = rep3.share(t, binary=True)  # (slot, n)
    else:
        shares = shares128(t.astype(object), rng)  # (limb, slot, n)
    for party in range(3):
        claim, _ = zero_claim(shares[party], binary)
        _, expected = zero_claim(shares[(party + 1) % 3], binary)
        equal = claim == expected
        if not binary:
            equal = equal.all(axis=0)  # both limbs
        assert list(equal) == [True] * 4 + [False, True], (party, binary)


def test_a_check_is_pending_until_its_digests_are_taken() -> None:
    words = np.arange(4, dtype=U64)
    mine, next_party = Claims(("AND", "MAC")), Claims(("AND", "MAC"))
    assert not mine.pending
    mine.note("MAC", words, words + U64(1))
    next_party.note("MAC", words + U64(9), words)  # it expects what I claim
    assert mine.pending == {"MAC"}
    claims, _ = mine.take(("AND", "MAC"))
    _, expected = next_party.take(("MAC",))
    np.testing.assert_array_equal(claims["MAC"], expected["MAC"])
    assert not mine.pending and not next_party.pending
    fresh, _ = mine.take(("AND", "MAC"))  # afresh: the digest of nothing, per check
    assert not np.array_equal(fresh["AND"], fresh["MAC"])
    np.testing.assert_array_equal(fresh["MAC"], Claims(("MAC",)).take(("MAC",))[0]["MAC"])
