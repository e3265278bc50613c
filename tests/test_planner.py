"""The top-k planner: its choices for the paper's shapes and for many features, its refusals."""

from __future__ import annotations

import pytest

from mpcnet.errors import InputError
from mpcnet.featsel.msgini import limb_plan
from mpcnet.ops import planner


def _choose(setting: str, m: int, p: int, k: int, budget: int = 2 << 30,
            method: str | None = None) -> planner.TopkPlan:
    return planner.choose(setting, p, k, lambda ties: limb_plan(m, ties), budget, method)


@pytest.mark.parametrize("setting", sorted(planner.COSTS))
def test_the_paper_shapes_are_ranked_and_many_features_go_through_the_network(
        setting: str) -> None:
    for m, p, k in [(126, 310, 103), (632, 120, 12), (8378, 122, 67)]:
        plan = _choose(setting, m, p, k)
        assert plan.method == "ranking" and plan.stages == 1
        assert plan.comparisons == p * (p - 1) // 2
    wide = _choose(setting, 1000, 20_000, 50)
    assert wide.method == "network" and "ranking ruled out" in wide.alternative
    assert wide.comparisons < 20_000 * 20 and wide.stages == 84


def test_the_limb_plan_follows_the_method() -> None:
    """The network breaks ties inside the tested value, which needs more room: SpeedDating's
    fractions are whole for the ranking, two limbs for the network."""
    assert _choose("passive3", 8378, 122, 67, method="ranking").limbs.levels == 1
    assert _choose("passive3", 8378, 122, 67, method="network").limbs.levels == 3
    assert _choose("passive3", 10**7, 100, 10).limbs.levels >= 5


def test_a_forced_method_that_cannot_run_is_refused() -> None:
    with pytest.raises(InputError, match="unknown top-k method"):
        _choose("passive3", 100, 10, 2, method="bubble")


def test_figures_name_the_choice() -> None:
    figures = _choose("active3", 632, 120, 12).figures()
    assert figures["method"] == "ranking" and figures["comparisons"] == 7140
    assert "network ~" in str(figures["alternative"])
