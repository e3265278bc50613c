"""active3's output test (mpcnet.schemes.freivalds): the public vector comes from the coin,
and the residual z r - x (y r) is a sharing of zero for the right z and of E r for errors E."""

from __future__ import annotations

import numpy as np
from conftest import opened128, shares128

from mpcnet import ring128
from mpcnet.schemes.freivalds import freivalds_vector, residual


def test_the_vector_is_the_coins_and_only_the_coins() -> None:
    r = freivalds_vector(b"seed", 3)
    assert r.shape == (2, 3, 1) and r.dtype == np.uint64
    np.testing.assert_array_equal(r, freivalds_vector(b"seed", 3))
    assert not np.array_equal(r, freivalds_vector(b"other seed", 3))


def test_the_residual_is_zero_exactly_for_the_right_product() -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(-2**40, 2**40, (4, 5)).astype(object)
    y = rng.integers(0, 2, (5, 3)).astype(object)
    r = freivalds_vector(b"coin", 3)
    r_int = ring128.to_int(r)  # (3, 1)
    w = shares128(x @ (y @ r_int), rng)  # x (y r), as the MAC'd product gives it
    error = np.zeros((4, 3), dtype=object)
    error[1, 2] = 1 << 63
    for e in (np.zeros((4, 3), dtype=object), error):
        z = shares128(x @ y + e, rng)
        u = opened128([residual(z[p], r, w[p]) for p in range(3)])
        np.testing.assert_array_equal(u, (e @ r_int) % (1 << 128))
    assert opened128([residual(shares128(x @ y + error, rng)[p], r, w[p])
                      for p in range(3)])[1, 0] != 0
