"""Layer: featsel. pi_FILTER-FS (Protocol 1 of Li, Dowsley, De Cock, 2021).

Lines 1-8 (k sequential argmins building T) are replaced by the constant-round ranking of
``mpcnet.ops.topk``, which yields the same T; line 9 (D' = D x T) is one matrix product whose
communication is m x k ring elements (``output_matmul``: D' is only output, so an active scheme
may check it without authenticating it). T is 0/1, so D' needs no truncation and is exact.
"""

from __future__ import annotations

from mpcnet.schemes.base import Scheme, Shared


async def filter_fs(s: Scheme, data: Shared, selection: Shared) -> Shared:
    """Protocol 1, line 9: the m x k reduced matrix D' = D x T."""
    with s.engine.phase("product"):
        return await s.output_matmul(data, selection)
