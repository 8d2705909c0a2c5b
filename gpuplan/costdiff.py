"""`gpuplan cost`: what a change to the workloads costs, as one report model (the renderers are in
gpuplan/cost_comment.py). Serving costs recur per month; a training run is paid once."""

from __future__ import annotations

import os
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, Field

from gpuplan.check import CheckReport
from planner.workload.errors import InfeasibleError, SpecError
from planner.search.frontier import Frontier
from planner.workload.plan import Plan, PlanSet
from planner.workload.spec import STACK_CATALOG_KEY, read_yaml

MARKER = "<!-- gpuplan-cost-comment -->"


class WorkloadCost(BaseModel):
    """One workload before and after. Serving is priced per month (it runs every hour); training per
    run (it runs once, for its wall-clock time): `cost_unit` says which, and no figure mixes the two."""
    workload: str
    kind: str
    status: str  # changed | unchanged | added | removed
    cost_unit: str  # usd_per_month (serving) | usd_per_training_run (training)
    before_usd: float | None
    after_usd: float | None
    change_usd: float
    change_percent: float | None
    before_instance_type: str | None
    before_nodes: int | None
    after_instance_type: str | None
    after_nodes: int | None
    unit: str  # usd_per_million_output_tokens | hours_per_training_run
    before_unit_cost: float | None
    after_unit_cost: float | None


class KindTotal(BaseModel):
    """One kind's total on each side: serving in USD per month, training in USD per run (one run of each)."""
    base: float
    head: float
    change: float
    change_percent: float | None
    workloads: int  # on either side


class Assumptions(BaseModel):
    prices: list[str]  # "date: source"
    hours_per_month: list[float]
    purchase: list[str]
    regions: list[str]
    estimated_prices: bool


class CostDiff(BaseModel):
    base: str
    head: str
    serving_usd_per_month: KindTotal
    training_usd_per_run: KindTotal
    changed: bool
    workloads: list[WorkloadCost]
    assumptions: Assumptions
    policies: CheckReport | None = None
    notes: list[str] = Field(default_factory=list)  # the base's workloads that could not be planned
    head_plans: PlanSet
    # head frontiers of the changed and added workloads: folded into the Markdown comment only
    frontiers: list[Frontier] = Field(default_factory=list, exclude=True)


def is_serving(kind: str) -> bool:
    return kind == "inference"


def _usd_of(plan: Plan) -> float:
    """Serving: USD per month; training: USD per run under the chosen purchase."""
    if is_serving(plan.kind):
        return plan.cost.usd_per_month
    return plan.cost.usd_per_training_run or 0.0


def _unit(plan: Plan) -> tuple[str, float | None]:
    if is_serving(plan.kind):
        return "usd_per_million_output_tokens", plan.cost.usd_per_million_output_tokens
    seconds = plan.performance.wall_clock_s or plan.performance.time_to_train_s
    return "hours_per_training_run", None if seconds is None else seconds / 3600


def _percent(before: float, after: float) -> float | None:
    return None if before == 0 else (after - before) / before * 100


def _same(a: Plan, b: Plan) -> bool:
    return a.choice == b.choice and a.layout == b.layout and abs(_usd_of(a) - _usd_of(b)) < 0.005


def _total(rows: list[WorkloadCost]) -> KindTotal:
    before = sum(r.before_usd or 0 for r in rows)
    after = sum(r.after_usd or 0 for r in rows)
    return KindTotal(base=before, head=after, change=after - before, change_percent=_percent(before, after),
                     workloads=len(rows))


def compare(base: PlanSet, head: PlanSet, base_name: str, head_name: str,
            policies: CheckReport | None = None, notes: list[str] | None = None) -> CostDiff:
    before = {p.workload: p for p in base.plans}
    after = {p.workload: p for p in head.plans}
    rows = []
    for name in list(after) + [n for n in before if n not in after]:
        b, a = before.get(name), after.get(name)
        ref = a or b
        unit, _ = _unit(ref)
        b_usd = _usd_of(b) if b else None
        a_usd = _usd_of(a) if a else None
        status = "added" if b is None else "removed" if a is None else "unchanged" if _same(a, b) else "changed"
        rows.append(WorkloadCost(
            workload=name, kind=ref.kind, status=status,
            cost_unit="usd_per_month" if is_serving(ref.kind) else "usd_per_training_run",
            before_usd=b_usd, after_usd=a_usd, change_usd=(a_usd or 0) - (b_usd or 0),
            change_percent=_percent(b_usd, a_usd) if b_usd is not None and a_usd is not None else None,
            before_instance_type=b.choice.instance_type if b else None, before_nodes=b.choice.nodes if b else None,
            after_instance_type=a.choice.instance_type if a else None, after_nodes=a.choice.nodes if a else None,
            unit=unit, before_unit_cost=_unit(b)[1] if b else None, after_unit_cost=_unit(a)[1] if a else None))
    plans = head.plans or base.plans
    assumptions = Assumptions(
        prices=sorted({f"{p.cost.price_date}: {p.cost.price_source}" for p in plans}),
        hours_per_month=sorted({p.cost.hours_per_month for p in plans if is_serving(p.kind)}),
        purchase=sorted({p.choice.purchase for p in plans}), regions=sorted({p.choice.region for p in plans}),
        estimated_prices=any(p.cost.price_estimated for p in plans))
    return CostDiff(base=base_name, head=head_name,
                    serving_usd_per_month=_total([r for r in rows if is_serving(r.kind)]),
                    training_usd_per_run=_total([r for r in rows if not is_serving(r.kind)]),
                    changed=any(r.status != "unchanged" for r in rows), workloads=rows, assumptions=assumptions,
                    policies=policies, notes=notes or [], head_plans=head)


@contextmanager
def base_from_git(head: Path, ref: str) -> Iterator[tuple[Path | None, str]]:
    """The head file as it was at `ref`, with the catalog overlay it names at that ref, in a scratch
    directory laid out as the repository is (so relative paths resolve as they did there). Yields the
    file (None when it did not exist at `ref`: every workload is then added) and the scratch prefix
    that error messages replace with `ref:`."""
    head = head.resolve()
    try:
        top = Path(_git(head.parent, "rev-parse", "--show-toplevel").strip()).resolve()
        _git(top, "rev-parse", "--verify", f"{ref}^{{commit}}")
    except (subprocess.CalledProcessError, FileNotFoundError):
        raise SpecError(f"cannot read git ref {ref!r} (is this a git checkout with that ref fetched?)",
                        path="--base-ref") from None
    relative = head.relative_to(top).as_posix()
    with tempfile.TemporaryDirectory(prefix="gpuplan-base-") as scratch:
        base = _git_file(top, ref, relative, Path(scratch))
        if base is not None:
            overlay = _catalog_named(base)
            if overlay:
                named = os.path.normpath(Path(relative).parent / overlay)
                if not named.startswith(".."):
                    _git_file(top, ref, Path(named).as_posix(), Path(scratch))
        yield base, scratch + os.sep


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _git_file(top: Path, ref: str, relative: str, scratch: Path) -> Path | None:
    shown = subprocess.run(["git", "show", f"{ref}:{relative}"], cwd=top, capture_output=True)
    if shown.returncode != 0:
        return None
    target = scratch / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(shown.stdout)
    return target


def _catalog_named(path: Path) -> str | None:
    """The overlay a workload or stack file names (catalog: / gpuplan:catalog), if it reads."""
    try:
        data = read_yaml(path)
    except SpecError:
        return None
    if isinstance(data, dict) and isinstance(data.get("config"), dict):
        data = {"catalog": data["config"].get(STACK_CATALOG_KEY)}
    named = data.get("catalog") if isinstance(data, dict) else None
    return named if isinstance(named, str) else None


def plan_base(path: Path | None, scratch: str = "", shown_as: str = "") -> tuple[PlanSet, list[str]]:
    """Plan the base side with its own catalog overlay. A base that cannot be read, or a workload in it
    with no feasible plan, is the state before the change, not a failure of it: it becomes a note and
    its workloads count as added."""
    from planner import plan_shared
    from planner.hardware import catalog as catalog_mod
    from planner.workload.spec import load_workloads

    def named(exc: SpecError) -> str:
        if scratch and exc.file.startswith(scratch):
            exc.file = shown_as + exc.file.removeprefix(scratch)
        if scratch:  # the scratch copy's path means nothing to a reader: it is the repository at the ref
            exc.message = exc.message.replace(scratch.rstrip(os.sep), f"the repository at {shown_as.rstrip(':')}")
        return str(exc)

    if path is None:
        return PlanSet(plans=[]), []
    try:
        spec = load_workloads(path, scratch or None)  # the scratch tree is the repository at the ref
        catalog = catalog_mod.load(spec.catalog)
    except SpecError as exc:
        return PlanSet(plans=[]), [f"the base cannot be planned ({named(exc)}); its workloads count as added"]
    plans, notes = [], []
    for w in spec.workloads:
        try:
            plans.append(plan_shared(w, catalog, spec.catalog))  # the head's unchanged workloads reuse it
        except InfeasibleError as exc:
            notes.append(f"base workload {w.name!r} had no feasible plan ({exc.summary}); it counts as added")
        except SpecError as exc:
            notes.append(f"base workload {w.name!r} cannot be planned ({named(exc)}); it counts as added")
    return PlanSet(plans=plans, catalog=spec.catalog or "bundled"), notes


def guardrail_breach(diff: CostDiff, above_percent: float | None, above_usd: float | None) -> str | None:
    """The first guardrail a kind crosses: serving's monthly cost and training's cost per run are judged
    apart, each against the same --fail-above-usd and --fail-above-percent."""
    for total, what, per in ((diff.serving_usd_per_month, "serving cost", "/month"),
                             (diff.training_usd_per_run, "training run cost", "/run")):
        if above_usd is not None and total.change > above_usd:
            return f"{what} rises by ${total.change:,.0f}{per}, above --fail-above-usd {above_usd:g}"
        if above_percent is not None and total.change > 0 and \
                (total.change_percent is None or total.change_percent > above_percent):
            pct = "from zero" if total.change_percent is None else f"{total.change_percent:.1f}%"
            return f"{what} rises {pct} (${total.base:,.0f} → ${total.head:,.0f}{per}), above --fail-above-percent {above_percent:g}"
    return None
