"""Plaintext reference layer: every feature score and the top-k selection, computed in the clear.

The MPC protocols in mpcnet/featsel must reproduce these results exactly for the private scores
(MS-GINI, chi2 and MI of the mean split, the correlation, the best split: their tests, counts
and fractions are all on integers; Li, Dowsley, De Cock 2021, Protocols 1-3). Used by tests and
experiments, never on a server.
"""

from mpcnet.plain.scores import (
    chi2_fraction,
    gini_best_split,
    gini_fraction,
    mi_fraction,
    msgini_fraction,
    msgini_scores,
    mutual_information,
    pearson,
    score_fraction,
)
from mpcnet.plain.select import reduce, selection_matrix, topk_fraction, topk_scores

__all__ = [
    "chi2_fraction",
    "gini_best_split",
    "gini_fraction",
    "mi_fraction",
    "msgini_fraction",
    "msgini_scores",
    "mutual_information",
    "pearson",
    "reduce",
    "score_fraction",
    "selection_matrix",
    "topk_fraction",
    "topk_scores",
]
