"""Plaintext reference layer: every feature score and the top-k selection, computed in the clear.

The MPC protocols in mpcnet/featsel must reproduce these results (exactly for MS-GINI, whose
split test, counts and score comparison are all on integers; Li, Dowsley, De Cock 2021,
Protocols 1-3). Used by tests and experiments, never on a server.
"""

from mpcnet.plain.scores import (
    gini_best_split,
    msgini_fraction,
    msgini_scores,
    mutual_information,
    pearson,
)
from mpcnet.plain.select import reduce, selection_matrix, topk_fraction, topk_scores

__all__ = [
    "gini_best_split",
    "msgini_fraction",
    "msgini_scores",
    "mutual_information",
    "pearson",
    "reduce",
    "selection_matrix",
    "topk_fraction",
    "topk_scores",
]
