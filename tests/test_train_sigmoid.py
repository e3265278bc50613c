"""The secure sigmoid: its float form's error bound, and the private evaluation equals it."""

from __future__ import annotations

import numpy as np
import pytest

from mpcnet.net.local import run_local_sync
from mpcnet.plain.logreg import SIGMOID_ERROR, approximate
from mpcnet.schemes import registry
from mpcnet.train.sigmoid import SLOPE_BITS, sigmoid


def test_the_approximation_stays_within_its_stated_error_everywhere() -> None:
    z = np.linspace(-40, 40, 800_001)
    error = np.abs(approximate(z) - 1 / (1 + np.exp(-z)))
    assert error.max() <= SIGMOID_ERROR
    assert error.max() > SIGMOID_ERROR - 2e-4  # the bound is tight, not generous
    assert np.all(np.diff(approximate(z)) >= 0)  # monotone, so ranks of scores are kept
    np.testing.assert_allclose(approximate(-z), 1 - approximate(z), atol=1e-15)


@pytest.mark.parametrize("security", ["passive3", "active3", "active4"])
def test_the_private_sigmoid_is_the_float_one_in_fixed_point(security: str) -> None:
    f = 12
    z = np.r_[np.linspace(-9, 9, 301), -1e5, 1e5, 0.0, 1.65625, -3.96875]
    encoded = np.round(z * 2**f).astype(np.int64)
    info = registry.get(security)
    shares = info.share(encoded.view(np.uint64))

    async def party(engine):  # type: ignore[no-untyped-def]
        s = await info.scheme.setup(engine)
        (x,) = await s.input(shares[engine.party])
        return await s.output(await sigmoid(s, x, f))

    outs = run_local_sync(info.n_parties, party)
    got = info.reconstruct(dict(enumerate(outs))).view(np.int64) / 2 ** (f + SLOPE_BITS)
    # exact: the same piecewise-linear function of the encoded z, no rounding
    np.testing.assert_allclose(got, approximate(encoded / 2**f), rtol=0, atol=2**-(f + 8))
