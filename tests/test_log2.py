"""t log2 t of shared counts (mpcnet.ops.log2) and its fixed-point reference (mpcnet.plain.log2)."""

from __future__ import annotations

import numpy as np
from conftest import opened, run_protocol

from mpcnet.ops.log2 import t_log2_t
from mpcnet.plain.log2 import COUNT_BITS, LOG_ERROR, LOG_FRACTION_BITS
from mpcnet.plain.log2 import t_log2_t as plain_t_log2_t


def test_the_reference_is_t_log2_t_within_the_bound_for_every_count() -> None:
    t = np.arange(1, 1 << COUNT_BITS, dtype=np.int64)
    error = plain_t_log2_t(t) / (t * 2.0**LOG_FRACTION_BITS) - np.log2(t)
    assert np.abs(error).max() <= LOG_ERROR
    assert np.abs(error).max() > LOG_ERROR / 2  # the bound is not loose by a factor of 2
    assert plain_t_log2_t(np.array([0]))[0] == 0
    assert int(plain_t_log2_t(np.array([(1 << COUNT_BITS) - 1]))[0]) < 1 << 62


def test_private_equals_the_reference_on_edges_and_random_counts(scheme: str) -> None:
    rng = np.random.default_rng(5)
    powers = 1 << np.arange(COUNT_BITS, dtype=np.int64)
    t = np.concatenate([[0, 1, 2, 3, (1 << COUNT_BITS) - 1], powers, powers[1:] - 1,
                        powers + 1, rng.integers(0, 1 << COUNT_BITS, 200)]).astype(np.int64)

    async def body(s, t):  # type: ignore[no-untyped-def]
        return await s.open(await t_log2_t(s, t))

    got = opened(run_protocol(scheme, {"t": t}, body)).view(np.int64)
    np.testing.assert_array_equal(got, plain_t_log2_t(t))
