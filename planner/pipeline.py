"""The chain run end to end for one workload (issue 30): the spec's defaults and target (workload), each
type searched at the prices economics hands it (search ← economics.run_pricing, dependency inverted),
the survivors ranked under the one price rule (economics.price_rule), then the plan assembled from the
winner (report.assemble). planner/__init__.py's plan_workloads and `gpuplan frontier` run through here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from planner.economics.cost import deploy_target
from planner.economics.price_rule import rank_on_one_rule
from planner.economics.run_pricing import run_storage, type_prices
from planner.economics.storage import storage_refusal
from planner.hardware.catalog import Catalog
from planner.report.assemble import build_plan
from planner.search.candidates import Candidate, Miss
from planner.search.sweep import raise_infeasible
from planner.search.sweep import search_types as search_priced
from planner.search.sweep import search_types_and_twin
from planner.workload.defaults import interactive_defaults
from planner.workload.errors import SpecError
from planner.workload.plan import Plan
from planner.workload.spec import Workload

if TYPE_CHECKING:
    from planner.search.frontier import Frontier

ALTERNATIVES = 5


def plan_workload(w: Workload, catalog: Catalog) -> Plan:
    """The cheapest feasible candidate as the plan, the next best as alternatives, every other type rejected
    with its reason; nothing feasible raises InfeasibleError with the nearest misses."""
    w, defaulted = interactive_defaults(w)
    target = checked_target(w, catalog)
    feasible, misses = search_types(w, catalog, target)
    if not feasible:
        raise_infeasible(w, misses)
    rule = rank_on_one_rule(feasible, catalog, w.constraints.region, target)
    feasible.sort(key=lambda cand: cand.rank_key)
    chosen = feasible[0]
    plan = build_plan(w, chosen, catalog, target, feasible[1:1 + ALTERNATIVES], misses, feasible[1 + ALTERNATIVES:])
    plan.cost.ranking_rule = rule
    if w.kind == "inference":
        from planner.search.kv_sizing import kv_sizing_section  # serving only: a training plan never loads it

        plan.kv_sizing, kv_warnings = kv_sizing_section(w, chosen, chosen.deploy_target or target)
        plan.warnings += kv_warnings
    if defaulted:
        plan.warnings.insert(0, defaulted)
    return plan


def checked_target(w: Workload, catalog: Catalog) -> str:
    """The deploy target, once the spec's names are known to the catalog."""
    target = deploy_target(w.kind, w.constraints.deploy_target)
    if w.kind != "inference" and target == "sagemaker":
        raise SpecError("deploy_target sagemaker is for inference; training runs on EC2 clusters (use auto or ec2)",
                        path=f"{w.path}.constraints.deploy_target", file=w.file)
    if w.constraints.instance_types:
        unknown = [n for n in w.constraints.instance_types if catalog.instance(n) is None]
        if unknown:
            raise SpecError(f"unknown instance type(s) {_names(unknown)}; see `gpuplan catalog list`",
                            path=f"{w.path}.constraints.instance_types", file=w.file)
    if w.constraints.families:
        unknown = sorted(set(w.constraints.families) - catalog.families())
        if unknown:
            raise SpecError(f"unknown famil{'y' if len(unknown) == 1 else 'ies'} {_names(unknown)}; "
                            f"catalog families: {', '.join(sorted(catalog.families()))}",
                            path=f"{w.path}.constraints.families", file=w.file)
    if w.kind != "inference":
        _check_checkpoint_storage(w)
    return target


def _check_checkpoint_storage(w: Workload) -> None:
    """Checkpoint writes alone (no reads, the most nodes allowed) that need a file system beyond the quota
    are a spec that cannot be provisioned on any hardware: refuse it, naming the field."""
    refused = storage_refusal(run_storage(w, 0.0, w.constraints.max_nodes))
    if refused:
        raise SpecError(refused.removeprefix("storage: "), path=f"{w.path}.training.checkpoint_interval_minutes",
                        file=w.file)


def _names(names: list[str], most: int = 5) -> str:
    """A user's list echoed back: each name cut, at most `most` of them."""
    cut = [n if len(n) <= 40 else n[:37] + "..." for n in names[:most]]
    return ", ".join(cut) + (f" and {len(names) - most} more" if len(names) > most else "")


def search_types(w: Workload, catalog: Catalog, target: str,
                 collect: list[Candidate] | None = None) -> tuple[list[Candidate], dict[str, Miss]]:
    """Every type searched at its prices under the options the spec weighs (planner/search/sweep.py)."""
    return search_priced(w, catalog, target, type_prices(w, catalog), collect)


def corrected_points(w: Workload, pool: list[Candidate], catalog: Catalog, target, chosen_key: tuple,
                     correct: Callable[[Plan], Plan]) -> tuple[list[Plan], int]:
    """The frontier on corrected figures (a calibration: planner/physics/calibration.py apply). Factors differ
    per accelerator, so the sweep runs on every candidate's corrected plan, not on the uncorrected
    frontier. The plan `gpuplan plan` chooses stays a point: a calibration corrects figures, not the choice."""
    from planner.search.frontier import sweep_plans

    ranked = sorted(pool, key=lambda c: c.rank_key)
    plans = [correct(build_plan(w, c, catalog, target, [], {}, [])) for c in ranked]
    return sweep_plans(w, plans, ranked, chosen_key)


def frontier(w: Workload, catalog: Catalog, correct: Callable[[Plan], Plan] | None = None) -> "Frontier":
    """The cost–latency frontier (planner/search/frontier.py); `correct`: applied to every point's plan (a
    calibration), the one place a frontier is corrected. Imported late: `gpuplan plan` never loads it."""
    from planner.search.frontier import candidate_key, frontier_of, non_dominated, relaxed

    w, _ = interactive_defaults(w)  # the targets the plan is held to, marked on the chart
    target = checked_target(w, catalog)
    pool: list[Candidate] = []
    twin = relaxed(w)
    feasible, misses = search_types_and_twin(w, twin, catalog, target, type_prices(w, catalog),
                                             type_prices(twin, catalog), pool)
    if not feasible:
        raise_infeasible(w, misses)
    rank_on_one_rule(feasible, catalog, w.constraints.region, target)
    chosen = min(feasible, key=lambda c: c.rank_key)
    rank_on_one_rule(pool, catalog, w.constraints.region, target)
    # The relaxed pool holds every layout the constrained search could choose; it is kept as a point even
    # where the pool holds a no costlier, no slower layout (training's node patience can pass one over).
    chosen_key = candidate_key(chosen)
    if correct is None:
        points = non_dominated(pool, w, chosen_key)
        plans = [build_plan(w, c, catalog, target, [], {}, []) for c in points]
        index = [candidate_key(c) for c in points].index(chosen_key)
    else:
        plans, index = corrected_points(w, pool, catalog, target, chosen_key, correct)
    return frontier_of(w, plans, index)
