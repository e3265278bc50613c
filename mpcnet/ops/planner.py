"""Layer: ops. Choosing how a job ranks its fractions: all pairs at once, or a network.

Both methods give exactly the same T (same set, same order, same tie rule), so the choice is
only about cost, and it depends on public numbers only (m through the limb plan, p, k, the
setting), never on data. The cost model counts, per server:

- sign tests: each costs about the same in every protocol here (one ``compare.msb`` value),
- products: the ring products of limbs, swaps and conversions,
- rounds: each costs a round trip plus the per-round work of the engine,

weighted by per-setting constants (seconds per test, per product and per round), estimated
from the job figures of ``bench.network`` and ``bench.large`` on the development machine;
``python -m bench.planner`` measures the unit costs in-process and sets the planner's choice
beside both methods measured, so the constants can be checked and refitted. Memory
decides first: the ranking keeps p(p-1)/2 comparisons alive at once, so it is ruled out when
their sign tests would not fit the memory budget; the network runs a stage (and its final
equality tests) in pieces that fit it (``TopkPlan.batch``), at the cost of more rounds. A piece's
tests are counted at ``PIECE_OVERHEAD`` times ``Costs.test_bytes``: a round's payload is held
again by the transport (frames, TLS records, the peers' replies), which the in-process figure
does not see; measured over TLS, 1,000 x 20,000 under active3 peaked at 2.57 GB per server with
pieces sized at the in-process figure alone, for a 2 GiB budget (bench.large).

The paper's k sequential argmins (Protocol 1) are not a third choice: the network with K = 1
is that tournament, and for k > 1 the network needs fewer stages (log^2 K / 2 + log(p/K) log K
against k log p) for fewer comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from mpcnet.errors import InputError
from mpcnet.ops.fraction import LimbPlan
from mpcnet.ops.network import schedule


@dataclass(frozen=True)
class Costs:
    """Measured unit costs of one setting (``bench.planner``)."""

    test_s: float  # seconds per sign test (msb) per server
    product_s: float  # seconds per ring product
    round_s: float  # seconds per round
    test_bytes: int  # peak bytes per sign test in flight, its check records included


COSTS = {
    "passive3": Costs(test_s=1.1e-6, product_s=1.0e-7, round_s=1.5e-3, test_bytes=260),
    "active3": Costs(test_s=9.0e-6, product_s=1.5e-6, round_s=4.0e-3, test_bytes=2700),
    "active4": Costs(test_s=2.8e-6, product_s=3.0e-7, round_s=2.5e-3, test_bytes=500),
}

PIECE_OVERHEAD = 2
FIXED_BYTES = 256 << 20
"""The interpreter, the ranking of the scores and the rest of a job's small state."""
_TEST_ROUNDS = 8  # compare.msb
_CONVERT_ROUNDS = 2  # convert.bit_to_arith


@dataclass(frozen=True)
class TopkPlan:
    """The chosen method and what it is expected to cost (shown in the job figures)."""

    method: str  # "ranking" or "network"
    limbs: LimbPlan
    comparisons: int
    stages: int
    rounds: int
    estimate_s: float
    alternative: str  # the other method's estimate, or why it was ruled out
    batch: int  # the network's comparisons at once (memory), 0 for the ranking

    def figures(self) -> dict[str, object]:
        return {"method": self.method, "comparisons": self.comparisons, "stages": self.stages,
                "levels": self.limbs.levels, "rounds_estimate": self.rounds,
                "seconds_estimate": round(self.estimate_s, 3), "alternative": self.alternative}


def _ranking(p: int, k: int, limbs: LimbPlan, costs: Costs) -> tuple[TopkPlan, int]:
    pairs = p * (p - 1) // 2
    tests = pairs * limbs.tests_per_comparison() + p * k
    cross = limbs.num_limbs * limbs.den_limbs * p * p
    products = cross + pairs + p * k
    rounds = 1 + 2 * (_TEST_ROUNDS + _CONVERT_ROUNDS) + math.ceil(math.log2(limbs.levels))
    estimate = tests * costs.test_s + products * costs.product_s + rounds * costs.round_s
    memory = (pairs * limbs.tests_per_comparison() + cross) * costs.test_bytes
    return TopkPlan("ranking", limbs, pairs, 1, rounds, estimate, "", 0), memory


def _network(p: int, k: int, limbs: LimbPlan, costs: Costs, memory_budget: int) -> TopkPlan:
    plan = schedule(p, k)
    batch = max(1024, memory_budget // (PIECE_OVERHEAD * costs.test_bytes
                                        * limbs.tests_per_comparison()))
    per_compare = 2 * limbs.num_limbs * limbs.den_limbs + limbs.num_limbs + limbs.den_limbs + 2
    tests = plan.comparisons * limbs.tests_per_comparison() + 2 * p * k
    products = plan.comparisons * per_compare + 2 * p * k
    per_stage = 1 + _TEST_ROUNDS + math.ceil(math.log2(limbs.levels)) + _CONVERT_ROUNDS + 1
    pieces = sum(-(-first.size // batch) for first, _ in plan.stages)
    rounds = pieces * per_stage + -(-2 * p * k // batch) * (_TEST_ROUNDS + 1 + _CONVERT_ROUNDS)
    estimate = tests * costs.test_s + products * costs.product_s + rounds * costs.round_s
    return TopkPlan("network", limbs, plan.comparisons, len(plan.stages), rounds, estimate, "",
                    batch)


def choose(setting: str, p: int, k: int, limb_plan: Callable[[int], LimbPlan | None],
           memory_budget: int, method: str | None = None) -> TopkPlan:
    """The cheaper method that fits ``memory_budget`` bytes (or the one named by ``method``).
    ``limb_plan(tie_range)`` lays out the fractions (None: they cannot be compared exactly
    with that tie range)."""
    costs = COSTS[setting]
    options: dict[str, TopkPlan] = {}
    notes: dict[str, str] = {}
    ranking_limbs = limb_plan(1)
    if ranking_limbs is not None:
        ranking, memory = _ranking(p, k, ranking_limbs, costs)
        if memory <= memory_budget or method == "ranking":
            options["ranking"] = ranking
        else:
            notes["ranking"] = (f"ranking ruled out: {memory / 2**20:,.0f} MiB of comparisons "
                                f"over the {memory_budget / 2**20:,.0f} MiB budget")
    network_limbs = limb_plan(schedule(p, k).padded)
    if network_limbs is not None:
        options["network"] = _network(p, k, network_limbs, costs, memory_budget)
    else:
        notes["network"] = "network ruled out: too many features to break ties exactly"
    if method is not None:
        if method not in ("ranking", "network"):
            raise InputError(f"unknown top-k method {method!r}: ranking or network")
        if method not in options:
            raise InputError(notes.get(method, f"{method} cannot compare these fractions "
                                               "exactly"))
        chosen = options[method]
    elif not options:
        raise InputError("; ".join(notes.values()))
    else:
        chosen = min(options.values(), key=lambda o: o.estimate_s)
    others = [f"{o.method} ~{o.estimate_s:.2f} s" for o in options.values() if o is not chosen]
    alternative = "; ".join(others + list(notes.values()))
    return TopkPlan(chosen.method, chosen.limbs, chosen.comparisons, chosen.stages,
                    chosen.rounds, chosen.estimate_s, alternative, chosen.batch)
