"""Private standardisation of D' columns of any magnitude, against numpy (StandardScaler)."""

from __future__ import annotations

import numpy as np
import pytest

from mpcnet.net.local import run_local_sync
from mpcnet.schemes import registry
from mpcnet.train.model import SCALE_OFFSET
from mpcnet.train.standardise import FEATURE_BITS, INV_BITS, RATIO_BITS, standardise


def _columns(m: int) -> np.ndarray:
    """Columns of every kind D' may hold: full-range, small spread around a large mean,
    constant, the largest magnitudes (2^37, negative), a normal one, small integers."""
    rng = np.random.default_rng(3)
    return np.stack([rng.integers(-2**30, 2**30, m), rng.normal(1000, 3, m).round(),
                     np.full(m, 77), rng.integers(0, 2, m) * 2**37 - 2**36,
                     (rng.normal(0, 1, m) * 2**20).round(), rng.integers(-5, 6, m),
                     -np.abs(rng.normal(0, 2**36, m)).round()], 1).astype(np.int64)


@pytest.mark.parametrize(("security", "tile_rows"), [("passive3", None), ("active3", None),
                                                     ("active4", None), ("passive3", 70),
                                                     ("active3", 70)])
def test_features_scale_and_mean_match_the_plaintext(security: str,
                                                     tile_rows: int | None) -> None:
    """In one go or a tile of rows at a time (the same statistics, summed over tiles)."""
    z = _columns(300)
    info = registry.get(security)
    shares = info.share(z.view(np.uint64))

    async def party(engine):  # type: ignore[no-untyped-def]
        s = await info.scheme.setup(engine)
        (x,) = await s.input(shares[engine.party])
        st = await standardise(s, x, tile_rows)
        return [await s.output(v) for v in (st.features, st.ratio, st.mantissa, st.exponent,
                                            st.constant)]

    outs = run_local_sync(info.n_parties, party)
    features, ratio, mantissa, exponent, constant = (
        info.reconstruct({i: o[j] for i, o in enumerate(outs)}).view(np.int64)
        for j in range(5))
    mean, scale = z.mean(0), z.std(0)
    varies = scale > 0
    np.testing.assert_array_equal(constant, (~varies).astype(np.int64))
    expected = np.where(varies, (z - mean) / np.where(varies, scale, 1), 0)
    # 8 fractional bits: the last truncation is probabilistic (floor or ceiling: up to one
    # unit, not half), and y = z 2^(38 - L) / 2^20 is rounded stochastically in the columns
    # whose low bits it drops (up to one unit of y, a standard deviation of at least 2^15
    # units of y here): through y_i, the mean and the scale, about 6 / sigma_y <= 2^-12
    assert np.abs(features / 2**FEATURE_BITS - expected).max() < 2 ** -FEATURE_BITS + 2 ** -12
    got_scale = mantissa / 2**INV_BITS * 2.0 ** (exponent - SCALE_OFFSET)
    np.testing.assert_allclose(got_scale[varies], scale[varies], rtol=1e-5)
    np.testing.assert_allclose((ratio / 2**RATIO_BITS)[varies], (mean / np.where(
        varies, scale, 1))[varies], rtol=1e-5, atol=2**-20)
    assert ratio[~varies].tolist() == [0]


def test_a_constant_column_of_large_values_is_always_constant() -> None:
    """Its y, rounded stochastically, takes two neighbouring values: a variance below 4 units
    of y^2 is constant (before, 3 of 8 runs gave such a column a scale and noise features)."""
    m = 64
    rng = np.random.default_rng(8)
    z = np.stack([np.full(m, 1_234_567_891), rng.integers(-2**30, 2**30, m)], 1)
    info = registry.get("passive3")
    for _ in range(8):
        shares = info.share(z.astype(np.int64).view(np.uint64))

        async def party(engine, shares=shares):  # type: ignore[no-untyped-def]
            s = await info.scheme.setup(engine)
            (x,) = await s.input(shares[engine.party])
            st = await standardise(s, x)
            return [await s.output(st.constant), await s.output(st.features)]

        outs = run_local_sync(info.n_parties, party)
        constant = info.reconstruct({i: o[0] for i, o in enumerate(outs)}).view(np.int64)
        features = info.reconstruct({i: o[1] for i, o in enumerate(outs)}).view(np.int64)
        assert constant.tolist() == [1, 0] and not features[:, 0].any()
