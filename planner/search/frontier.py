"""The cost–latency frontier: every plan no other plan beats on every axis at the spec's traffic.

Serving: monthly cost, inter-token latency and time to first token (the spec's latency targets are
what the frontier explores, so they are dropped; throughput target, budget and filters stay).
Training: cost per run and time to train (the deadline is dropped the same way). Each point is a full
plan from the planner's own search, so its layout can be pinned in the spec as it stands. The search and
the plans come from the orchestrator (planner/pipeline.py frontier); this module sweeps and shapes them."""

from __future__ import annotations

from pydantic import BaseModel

from planner.search.candidates import Candidate
from planner.workload.plan import Plan
from planner.workload.spec import Workload


class Frontier(BaseModel):
    workload: str
    kind: str
    axes: list[str]  # minimised, in order; the first is the cost the planner ranks by
    points: list[Plan]  # cheapest first
    chosen: int  # index of the plan `gpuplan plan` chooses
    targets: dict[str, float]  # the spec's own targets on the axes (ms or h), marked on the chart


def relaxed(w: Workload) -> Workload:
    if w.kind == "inference":
        serving = w.serving.model_copy(update={"max_inter_token_latency_ms": None, "max_time_to_first_token_ms": None})
        return w.model_copy(update={"serving": serving})
    return w.model_copy(update={"training": w.training.model_copy(update={"deadline_hours": None})})


def axes_of(c: Candidate, w: Workload) -> tuple[float, ...]:
    """(ranking cost, latency axes...); the cost rounded as the planner's rank key rounds it."""
    cost = float(f"{c.ranked:.3g}")
    if w.kind == "inference":
        return cost, c.perf.inter_token_latency_s, c.perf.time_to_first_token_s
    return cost, w.training.tokens / c.perf.tokens_per_s


def candidate_key(c: Candidate) -> tuple:
    """What names a point: its type and layout."""
    return c.itype.name, c.nodes, c.tp, c.pp, c.dp


def non_dominated(pool: list[Candidate], w: Workload, chosen_key: tuple | None = None) -> list[Candidate]:
    """Sweep cheapest first (ties by the planner's rank key): a point stays unless an already kept,
    no costlier point is no worse on every latency axis. Among equal costs the planner's tie-break
    decides, so the chosen plan is on the frontier; it is kept even where a layout the training search's
    node patience passed over beats it (as corrected_points keeps it)."""
    kept: list[tuple[tuple[float, ...], Candidate]] = []
    for cand in sorted(pool, key=lambda c: c.rank_key):
        point = axes_of(cand, w)
        if any(all(k <= p for k, p in zip(keep[1:], point[1:])) for keep, _ in kept) and candidate_key(cand) != chosen_key:
            continue
        kept.append((point, cand))
    return [cand for _, cand in kept]


def plan_axes(p: Plan, w: Workload) -> tuple[float, ...]:
    """axes_of, read from a (corrected) plan's figures."""
    if w.kind == "inference":
        perf = p.performance
        cost = p.cost.usd_per_hour
        if p.cost.ranking_usd_per_hour is not None and p.cost.instances_usd_per_hour is not None:
            cost += p.cost.ranking_usd_per_hour - p.cost.instances_usd_per_hour  # the one price rule's figure
        return float(f"{cost:.3g}"), perf.inter_token_latency_s, perf.time_to_first_token_s
    return float(f"{p.cost.usd_per_training_run:.3g}"), p.performance.time_to_train_s


def sweep_plans(w: Workload, plans: list[Plan], ranked: list[Candidate], chosen_key: tuple) -> tuple[list[Plan], int]:
    """The frontier on the (corrected) plans of `ranked`, cheapest first: non_dominated's sweep read from
    each plan's own figures; the chosen plan stays a point. Returns the points and the chosen one's index."""
    keys = [candidate_key(c) for c in ranked]
    axes = [plan_axes(p, w) for p in plans]
    kept: list[int] = []
    for i in sorted(range(len(plans)), key=lambda i: (axes[i][0], i)):
        dominated = any(all(k <= a for k, a in zip(axes[j][1:], axes[i][1:])) for j in kept)
        if keys[i] in (keys[j] for j in kept) or (dominated and keys[i] != chosen_key):
            continue
        kept.append(i)
    return [plans[i] for i in kept], [keys[i] for i in kept].index(chosen_key)


def frontier_of(w: Workload, plans: list[Plan], chosen: int) -> Frontier:
    """The frontier's points with its axes and the spec's own targets on them."""
    if w.kind == "inference":
        s = w.serving
        axes = ["usd_per_month", "inter_token_latency_ms", "time_to_first_token_ms"]
        targets = {k: v for k, v in (("inter_token_latency_ms", s.max_inter_token_latency_ms),
                                     ("time_to_first_token_ms", s.max_time_to_first_token_ms)) if v}
    else:
        axes = ["usd_per_training_run", "time_to_train_h"]
        targets = {"time_to_train_h": w.training.deadline_hours} if w.training.deadline_hours else {}
    return Frontier(workload=w.name, kind=w.kind, axes=axes, points=plans, chosen=chosen, targets=targets)
