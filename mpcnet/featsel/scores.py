"""Layer: featsel. The private feature scores an analyst can choose, all from the mean split.

Every score here is a function of the same oblivious counts (the mean split of Protocol 2 of
Li, Dowsley, De Cock 2021, lines 1-11: ``mpcnet.featsel.msgini.class_counts``), turned into
shared fractions Q/D that are higher for better features and compared exactly by the same
top-k (pi_FILTER-FS, Protocol 1), so the choice of score changes neither the selection
machinery nor what is revealed (nothing but D'):

- ``ms-gini``: the paper's mean-split Gini impurity (``mpcnet.featsel.msgini``),
- ``chi2``: the chi-square statistic of the split against the class (``mpcnet.featsel.chi2``),
- ``mi``: the mutual information of the split with the class (``mpcnet.featsel.mi``).

Each has its exact plaintext reference in ``mpcnet.plain.scores.SCORE_FRACTIONS``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mpcnet.errors import InputError
from mpcnet.featsel import chi2, mi, msgini
from mpcnet.ops.fraction import Fractions, LimbPlan
from mpcnet.schemes.base import Scheme, Shared

OfCounts = Callable[[Scheme, Shared, Shared, Shared, int, LimbPlan], Awaitable[Fractions]]


@dataclass(frozen=True)
class Score:
    """How one score turns the counts (b, B, class sizes) of m rows into fractions."""

    name: str
    limb_plan: Callable[[int, int, int], LimbPlan | None]  # (m, n_classes, tie range)
    check_rows: Callable[[int, int], None]  # (m, n_classes): refuse what is not exact
    of_counts: OfCounts  # (scheme, b, B, class sizes, m, plan)


SCORES = {
    "ms-gini": Score("ms-gini", lambda m, n, ties: msgini.limb_plan(m, ties),
                     lambda m, n: msgini.check_rows(m), msgini.fractions_of_counts),
    "chi2": Score("chi2", chi2.limb_plan, chi2.check_rows, chi2.fractions_of_counts),
    "mi": Score("mi", mi.limb_plan, lambda m, n: msgini.check_rows(m), mi.fractions_of_counts),
}
DEFAULT_SCORE = "ms-gini"


def score(name: str) -> Score:
    """The score called ``name``, or a clear error naming the known ones."""
    if name not in SCORES:
        raise InputError(f"unknown score {name!r}; available: {', '.join(SCORES)}")
    return SCORES[name]
