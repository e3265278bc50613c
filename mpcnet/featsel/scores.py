"""Layer: featsel. The private feature scores an analyst can choose.

Every score turns per-block statistics of the data into shared fractions Q/D that are higher
for better features, compared exactly by the same top-k (pi_FILTER-FS, Protocol 1 of Li,
Dowsley, De Cock 2021), so the choice changes neither the selection machinery nor what is
revealed (nothing but D'):

- ``ms-gini``: the paper's mean-split Gini impurity (Protocol 2, ``mpcnet.featsel.msgini``),
- ``chi2``: the chi-square statistic of the same mean split against the class
  (``mpcnet.featsel.chi2``),
- ``mi``: the mutual information of the same mean split with the class (``mpcnet.featsel.mi``),
- ``pcc``: the squared correlation with the class, or the correlation ratio for n classes
  (``mpcnet.featsel.pcc``),
- ``gini``: the Gini impurity of the best split over all thresholds, CART's (GI in the
  paper's Table I; ``mpcnet.featsel.gini``: each column sorted obliviously).

The first three share the split's class counts (``mpcnet.featsel.msgini.class_counts``, which
needs the column sums first when a column is read in tiles); the statistics of ``pcc`` are sums
that need no mean. Statistics add up over tiles of rows, except those of ``gini``, which needs
whole columns. Each score has its exact plaintext
reference in ``mpcnet.plain.scores.SCORE_FRACTIONS``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mpcnet.errors import InputError
from mpcnet.featsel import chi2, gini, mi, msgini, pcc
from mpcnet.fixedpoint import VALUE_BITS
from mpcnet.ops.fraction import Fractions, LimbPlan
from mpcnet.schemes.base import Scheme, Shared

Statistics = Callable[[Scheme, Shared, Shared, Shared | None, int], Awaitable[tuple[Shared, ...]]]
OfStatistics = Callable[[Scheme, tuple[Shared, ...], Shared, int, LimbPlan], Awaitable[Fractions]]


@dataclass(frozen=True)
class Score:
    """How one score is computed for m rows and n classes."""

    name: str
    limb_plan: Callable[[int, int, int], LimbPlan | None]  # (m, n_classes, tie range)
    check_rows: Callable[[int, int], None]  # (m, n_classes): refuse what is not exact
    statistics: Statistics  # (scheme, rows, their labels, column sums or None, m)
    of_statistics: OfStatistics  # (scheme, summed statistics, class sizes, m, plan)
    uses_mean: bool  # the statistics need the column sums over all m rows
    cell_cost: int  # bytes held per cell while scoring, in sign tests (``featsel.layout``)
    value_bits: int | None = None  # the widest encoded values it handles (None: any stored)
    feature_bytes: Callable[[str, int, int], int] = lambda setting, m, n: 0  # per feature,
    # once the statistics are summed (``featsel.layout.layout``'s ``per_feature``)
    whole_columns: bool = False  # the statistics need every row of a column at once
    authenticate_data: bool = True  # False: the statistics only add and compare the data,
    # so an active scheme may input it without MACs (``Scheme.input``)
    pipelined: bool = True  # the statistics and their fractions neither open nor checkpoint,
    # so they may run beside the next block's input and the previous block's checkpoint
    # (``gini_fs``)


async def _split_counts(s: Scheme, data: Shared, labels: Shared, column_sums: Shared | None,
                        m: int) -> tuple[Shared, ...]:
    assert column_sums is not None
    counts = msgini.class_counts(s, data, labels, column_sums, m)
    del data  # class_counts frees the block once it is done with it
    return await counts


def _of_counts(of_counts: Callable[..., Awaitable[Fractions]]) -> OfStatistics:
    async def run(s: Scheme, stats: tuple[Shared, ...], sizes: Shared, m: int,
                  plan: LimbPlan) -> Fractions:
        b, above = stats
        return await of_counts(s, b, above, sizes, m, plan)
    return run


def _rows(name: str) -> Callable[[int, int], None]:
    return lambda m, n: msgini.check_rows(m, name)


def _mean_split(name: str, limb_plan: Callable[[int, int, int], LimbPlan | None],
                of_counts: Callable[..., Awaitable[Fractions]],
                feature_bytes: Callable[[str, int, int], int] = lambda setting, m, n: 0
                ) -> Score:
    return Score(name, limb_plan, _rows(name), _split_counts, _of_counts(of_counts), True, 1,
                 feature_bytes=feature_bytes, authenticate_data=False)


SCORES = {
    "ms-gini": _mean_split("ms-gini", lambda m, n, ties: msgini.limb_plan(m, ties),
                           msgini.fractions_of_counts),
    "chi2": _mean_split("chi2", chi2.limb_plan, chi2.fractions_of_counts, chi2.feature_bytes),
    "mi": _mean_split("mi", mi.limb_plan, mi.fractions_of_counts, mi.feature_bytes),
    "pcc": Score("pcc", pcc.limb_plan, _rows("pcc"), pcc.statistics,
                 pcc.fractions_of_statistics, False, pcc.CELL_COST, VALUE_BITS,
                 pcc.feature_bytes),
    "gini": Score("gini", lambda m, n, ties: msgini.limb_plan(m, ties), _rows("gini"),
                  gini.statistics, gini.of_statistics, False, gini.CELL_COST,
                  feature_bytes=gini.feature_bytes, whole_columns=True, pipelined=False),
}
DEFAULT_SCORE = "ms-gini"


def score(name: str) -> Score:
    """The score called ``name``, or a clear error naming the known ones."""
    if name not in SCORES:
        raise InputError(f"unknown score {name!r}; available: {', '.join(SCORES)}")
    return SCORES[name]
