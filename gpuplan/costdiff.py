"""`gpuplan cost`: what a change to the workloads costs, as one report model with pure renderers
(Markdown for the pull-request comment, JSON for other tools, a plain table for terminals)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, Field

from gpuplan.check import CheckReport
from planner.buying_report import buying_summary
from planner.errors import InfeasibleError, SpecError
from planner.frontier import Frontier
from planner.frontier_report import mermaid as frontier_mermaid
from planner.plan import Plan, PlanSet
from planner.report import render_markdown as render_plans_markdown
from planner.spec import STACK_CATALOG_KEY, read_yaml

MARKER = "<!-- gpuplan-cost-comment -->"


class WorkloadCost(BaseModel):
    workload: str
    kind: str
    status: str  # changed | unchanged | added | removed
    before_usd_per_month: float | None
    after_usd_per_month: float | None
    change_usd_per_month: float
    change_percent: float | None
    before_instance_type: str | None
    before_nodes: int | None
    after_instance_type: str | None
    after_nodes: int | None
    unit: str  # usd_per_million_output_tokens | usd_per_training_run
    before_unit_cost: float | None
    after_unit_cost: float | None


class Assumptions(BaseModel):
    prices: list[str]  # "date: source"
    hours_per_month: list[float]
    purchase: list[str]
    regions: list[str]
    estimated_prices: bool


class CostDiff(BaseModel):
    base: str
    head: str
    before_usd_per_month: float
    after_usd_per_month: float
    change_usd_per_month: float
    change_percent: float | None
    changed: bool
    workloads: list[WorkloadCost]
    assumptions: Assumptions
    policies: CheckReport | None = None
    notes: list[str] = Field(default_factory=list)  # the base's workloads that could not be planned
    head_plans: PlanSet
    # head frontiers of the changed and added workloads: folded into the Markdown comment only
    frontiers: list[Frontier] = Field(default_factory=list, exclude=True)


def _unit(plan: Plan) -> tuple[str, float | None]:
    if plan.kind == "inference":
        return "usd_per_million_output_tokens", plan.cost.usd_per_million_output_tokens
    return "usd_per_training_run", plan.cost.usd_per_training_run


def _percent(before: float, after: float) -> float | None:
    return None if before == 0 else (after - before) / before * 100


def _same(a: Plan, b: Plan) -> bool:
    return (a.choice == b.choice and a.layout == b.layout and abs(a.cost.usd_per_month - b.cost.usd_per_month) < 0.005)


def compare(base: PlanSet, head: PlanSet, base_name: str, head_name: str,
            policies: CheckReport | None = None, notes: list[str] | None = None) -> CostDiff:
    before = {p.workload: p for p in base.plans}
    after = {p.workload: p for p in head.plans}
    rows = []
    for name in list(after) + [n for n in before if n not in after]:
        b, a = before.get(name), after.get(name)
        ref = a or b
        unit, _ = _unit(ref)
        b_usd = b.cost.usd_per_month if b else None
        a_usd = a.cost.usd_per_month if a else None
        status = "added" if b is None else "removed" if a is None else "unchanged" if _same(a, b) else "changed"
        rows.append(WorkloadCost(
            workload=name, kind=ref.kind, status=status, before_usd_per_month=b_usd, after_usd_per_month=a_usd,
            change_usd_per_month=(a_usd or 0) - (b_usd or 0),
            change_percent=_percent(b_usd, a_usd) if b_usd is not None and a_usd is not None else None,
            before_instance_type=b.choice.instance_type if b else None, before_nodes=b.choice.nodes if b else None,
            after_instance_type=a.choice.instance_type if a else None, after_nodes=a.choice.nodes if a else None,
            unit=unit, before_unit_cost=_unit(b)[1] if b else None, after_unit_cost=_unit(a)[1] if a else None))
    total_before = sum(p.cost.usd_per_month for p in base.plans)
    total_after = sum(p.cost.usd_per_month for p in head.plans)
    plans = head.plans or base.plans
    assumptions = Assumptions(
        prices=sorted({f"{p.cost.price_date}: {p.cost.price_source}" for p in plans}),
        hours_per_month=sorted({p.cost.hours_per_month for p in plans}),
        purchase=sorted({p.choice.purchase for p in plans}), regions=sorted({p.choice.region for p in plans}),
        estimated_prices=any(p.cost.price_estimated for p in plans))
    return CostDiff(base=base_name, head=head_name, before_usd_per_month=total_before, after_usd_per_month=total_after,
                    change_usd_per_month=total_after - total_before, change_percent=_percent(total_before, total_after),
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
    from planner import catalog as catalog_mod
    from planner.search import plan_workload
    from planner.spec import load_workloads

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
            plans.append(plan_workload(w, catalog))
        except InfeasibleError as exc:
            notes.append(f"base workload {w.name!r} had no feasible plan ({exc.summary}); it counts as added")
        except SpecError as exc:
            notes.append(f"base workload {w.name!r} cannot be planned ({named(exc)}); it counts as added")
    return PlanSet(plans=plans, catalog=spec.catalog or "bundled"), notes


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:,.0f}"


def _signed(value: float) -> str:
    return f"{'+' if value > 0 else '−' if value < 0 else '±'}${abs(value):,.0f}"


def _pct(value: float | None) -> str:
    return "" if value is None else f" ({'+' if value > 0 else ''}{value:.1f}%)"


def headline(diff: CostDiff) -> str:
    if not diff.changed:
        return f"Monthly cost unchanged at {_usd(diff.after_usd_per_month)}"
    if abs(diff.change_usd_per_month) < 0.5:
        return f"Monthly cost unchanged at {_usd(diff.after_usd_per_month)} (plans changed: see the table)"
    direction = "up" if diff.change_usd_per_month > 0 else "down" if diff.change_usd_per_month < 0 else "unchanged"
    return (f"Monthly cost {direction} by ${abs(diff.change_usd_per_month):,.0f}{_pct(diff.change_percent)}: "
            f"{_usd(diff.before_usd_per_month)} → {_usd(diff.after_usd_per_month)}")


def _choice(instance_type: str | None, nodes: int | None) -> str:
    return "–" if instance_type is None else f"{instance_type} × {nodes}"


def _unit_cell(row: WorkloadCost) -> str:
    label = "/1M output tokens" if row.unit == "usd_per_million_output_tokens" else "/training run"
    fmt = (lambda v: "–" if v is None else f"${v:,.2f}") if row.unit.endswith("tokens") else _usd
    return f"{fmt(row.before_unit_cost)} → {fmt(row.after_unit_cost)} {label}"


def mermaid_chart(diff: CostDiff) -> str:
    labels, values = [], []
    for row in diff.workloads:
        for when, value in (("before", row.before_usd_per_month), ("after", row.after_usd_per_month)):
            labels.append(f'"{row.workload} {when}"')
            values.append(f"{value or 0:.0f}")
    return "\n".join(["```mermaid", "xychart-beta", '    title "Monthly cost by workload, before and after (USD)"',
                      f"    x-axis [{', '.join(labels)}]", '    y-axis "USD per month"', f"    bar [{', '.join(values)}]",
                      "```"])


def render_markdown(diff: CostDiff) -> str:
    from gpuplan.check import render_markdown as render_policies

    status = {"added": "🆕 added", "removed": "🗑️ removed", "changed": "changed", "unchanged": "unchanged"}
    out = [MARKER, f"### 💰 gpuplan: {headline(diff)}", ""] + [f"> ⚠️ {note}" for note in diff.notes] + \
        ([""] if diff.notes else []) + [
           "| workload | status | before | after | change | instance × count | unit cost |",
           "|---|---|---:|---:|---:|---|---|"]
    for r in diff.workloads:
        choice = _choice(r.after_instance_type, r.after_nodes) if r.status != "removed" else \
            _choice(r.before_instance_type, r.before_nodes)
        if r.status == "changed" and (r.before_instance_type, r.before_nodes) != (r.after_instance_type, r.after_nodes):
            choice = f"{_choice(r.before_instance_type, r.before_nodes)} → {choice}"
        out.append(f"| `{r.workload}` | {status[r.status]} | {_usd(r.before_usd_per_month)} | {_usd(r.after_usd_per_month)} "
                   f"| {_signed(r.change_usd_per_month)}{_pct(r.change_percent)} | {choice} | {_unit_cell(r)} |")
    out += [f"| **total** | | **{_usd(diff.before_usd_per_month)}** | **{_usd(diff.after_usd_per_month)}** | "
            f"**{_signed(diff.change_usd_per_month)}{_pct(diff.change_percent)}** | | |", ""]
    buying = [f"- `{p.workload}`: {line}" for p in diff.head_plans.plans if (line := buying_summary(p))]
    if buying:
        out += ["**What to buy**", "", *buying, ""]
    if diff.policies is not None:
        out += [render_policies(diff.policies).rstrip(), ""]
    out += [mermaid_chart(diff), "", "<details><summary>Assumptions</summary>", ""]
    a = diff.assumptions
    out += [f"- purchase option: {', '.join(a.purchase)}; region: {', '.join(a.regions)}; hours per month: "
            f"{', '.join(f'{h:g}' for h in a.hours_per_month)}"]
    out += [f"- price {p}" for p in a.prices]
    if a.estimated_prices:
        out.append("- some SageMaker prices are estimates (EC2 price × the catalog's median ml.*/EC2 ratio)")
    for f in diff.frontiers:
        out += ["", "</details>", "", f"<details><summary>Cost–latency frontier: <code>{f.workload}</code> "
                f"({len(f.points)} plans)</summary>", "", frontier_mermaid(f)]
    out += ["", "</details>", "", "<details><summary>Full plans (head)</summary>", "",
            render_plans_markdown(diff.head_plans).rstrip(), "", "</details>", ""]
    return "\n".join(out)


def render_json(diff: CostDiff) -> str:
    return json.dumps(diff.model_dump(mode="json", exclude={"head_plans"}), indent=2) + "\n"


def render_table(diff: CostDiff) -> str:
    lines = [headline(diff), *[f"note: {note}" for note in diff.notes], ""]
    width = max([len(r.workload) for r in diff.workloads] + [8])
    lines.append(f"{'workload':<{width}}  {'status':<9} {'before':>10} {'after':>10} {'change':>10}  instance × count")
    for r in diff.workloads:
        lines.append(f"{r.workload:<{width}}  {r.status:<9} {_usd(r.before_usd_per_month):>10} "
                     f"{_usd(r.after_usd_per_month):>10} {_signed(r.change_usd_per_month):>10}  "
                     f"{_choice(r.after_instance_type, r.after_nodes) if r.status != 'removed' else _choice(r.before_instance_type, r.before_nodes)}")
    if diff.policies is not None:
        lines.append(f"\npolicies: {'passed' if diff.policies.passed else 'BLOCKED'} ({diff.policies.mandatory} mandatory, "
                     f"{diff.policies.advisory} advisory)")
    return "\n".join(lines) + "\n"


def guardrail_breach(diff: CostDiff, above_percent: float | None, above_usd: float | None) -> str | None:
    if above_usd is not None and diff.change_usd_per_month > above_usd:
        return f"monthly cost rises by ${diff.change_usd_per_month:,.0f}, above --fail-above-usd {above_usd:g}"
    if above_percent is not None and diff.change_usd_per_month > 0 and \
            (diff.change_percent is None or diff.change_percent > above_percent):
        pct = "from zero" if diff.change_percent is None else f"{diff.change_percent:.1f}%"
        return f"monthly cost rises {pct}, above --fail-above-percent {above_percent:g}"
    return None
