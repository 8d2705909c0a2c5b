"""Renderers of `gpuplan cost`: Markdown for the pull-request comment (escaped, under GitHub's size
limit), JSON for other tools, a plain table for terminals. Serving reads per month, training per run."""

from __future__ import annotations

import json

from gpuplan.costdiff import MARKER, CostDiff, KindTotal, WorkloadCost, is_serving
from planner.report.buying import buying_summary
from planner.report.frontier import mermaid as frontier_mermaid
from planner.report.mdsafe import md_code, md_text
from planner.report.markdown import render_markdown as render_plans_markdown

# GitHub refuses an issue or pull-request comment body over 65,536 characters (the API's 422
# "Body is too long (maximum is 65536 characters)"); keep a margin for the workflow's own lines.
MAX_COMMENT_CHARS = 65_000


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:,.0f}"


def _signed(value: float) -> str:
    return f"{'+' if value > 0 else '−' if value < 0 else '±'}${abs(value):,.0f}"


def _pct(value: float | None) -> str:
    return "" if value is None else f" ({'+' if value > 0 else ''}{value:.1f}%)"


def _per(kind_or_unit: str) -> str:
    return "/month" if kind_or_unit in ("inference", "usd_per_month") else "/run"


def _kind_headline(total: KindTotal, label: str, per: str) -> str:
    if abs(total.change) < 0.5:
        return f"{label} unchanged at {_usd(total.head)}{per}"
    return f"{label} {_signed(total.change)}{per}{_pct(total.change_percent)}"


def headline(diff: CostDiff) -> str:
    kinds = [(diff.serving_usd_per_month, "Serving", "serving", "/month"),
             (diff.training_usd_per_run, "Training runs", "training runs", "")]
    present = [k for k in kinds if k[0].workloads]
    if not diff.changed:
        return "Cost unchanged: " + " · ".join(f"{lower} {_usd(t.head)}{per}" for t, _, lower, per in present)
    return " · ".join(_kind_headline(t, label, per) for t, label, _, per in present)


def _choice(instance_type: str | None, nodes: int | None) -> str:
    return "–" if instance_type is None else f"{md_text(instance_type)} × {nodes}"


def _row_choice(r: WorkloadCost) -> str:
    choice = _choice(r.after_instance_type, r.after_nodes) if r.status != "removed" else \
        _choice(r.before_instance_type, r.before_nodes)
    if r.status == "changed" and (r.before_instance_type, r.before_nodes) != (r.after_instance_type, r.after_nodes):
        choice = f"{_choice(r.before_instance_type, r.before_nodes)} → {choice}"
    return choice


def _unit_cell(row: WorkloadCost) -> str:
    if row.unit == "usd_per_million_output_tokens":
        fmt = lambda v: "–" if v is None else f"${v:,.2f}"  # noqa: E731
        return f"{fmt(row.before_unit_cost)} → {fmt(row.after_unit_cost)} /1M output tokens"
    hours = lambda v: "–" if v is None else f"{v:,.1f} h"  # noqa: E731
    return f"{hours(row.before_unit_cost)} → {hours(row.after_unit_cost)} wall clock per run"


def _money(value: float | None, per: str) -> str:
    return "–" if value is None else f"{_usd(value)}{per}"


def _chart(rows: list[WorkloadCost], title: str, axis: str) -> list[str]:
    labels, values = [], []
    for row in rows:
        for when, value in (("before", row.before_usd), ("after", row.after_usd)):
            labels.append(f'"{row.workload.replace(chr(34), "")} {when}"')
            values.append(f"{value or 0:.0f}")
    return ["```mermaid", "xychart-beta", f'    title "{title}"', f"    x-axis [{', '.join(labels)}]",
            f'    y-axis "{axis}"', f"    bar [{', '.join(values)}]", "```", ""]


def mermaid_charts(diff: CostDiff) -> list[str]:
    serving = [r for r in diff.workloads if is_serving(r.kind)]
    training = [r for r in diff.workloads if not is_serving(r.kind)]
    out: list[str] = []
    if serving:
        out += _chart(serving, "Serving cost per month by workload, before and after (USD)", "USD per month")
    if training:
        out += _chart(training, "Training cost per run by workload, before and after (USD)", "USD per run")
    return out


def _table(diff: CostDiff) -> list[str]:
    status = {"added": "🆕 added", "removed": "🗑️ removed", "changed": "changed", "unchanged": "unchanged"}
    out = ["| workload | status | before | after | change | instance × count | unit cost |",
           "|---|---|---:|---:|---:|---|---|"]
    for r in diff.workloads:
        per = _per(r.cost_unit)
        out.append(f"| {md_code(r.workload)} | {status[r.status]} | {_money(r.before_usd, per)} | "
                   f"{_money(r.after_usd, per)} | {_signed(r.change_usd)}{per}{_pct(r.change_percent)} | "
                   f"{_row_choice(r)} | {_unit_cell(r)} |")
    for total, label, per in ((diff.serving_usd_per_month, "serving", "/month"),
                              (diff.training_usd_per_run, "training runs", "/run")):
        if total.workloads:
            out.append(f"| **{label}** | | **{_usd(total.base)}{per}** | **{_usd(total.head)}{per}** | "
                       f"**{_signed(total.change)}{per}{_pct(total.change_percent)}** | | |")
    return out + [""]


def _assumptions(diff: CostDiff) -> list[str]:
    a = diff.assumptions
    hours = f"; serving hours per month: {', '.join(f'{h:g}' for h in a.hours_per_month)}" if a.hours_per_month else ""
    out = [f"- purchase option: {', '.join(a.purchase)}; region: {', '.join(a.regions)}{hours}",
           "- serving is priced per month (it runs every hour); each training workload per run (one run, "
           "for its wall-clock time): the two are never added together"]
    out += [f"- price {md_text(p)}" for p in a.prices]
    if a.estimated_prices:
        out.append("- some SageMaker prices are estimates (EC2 price × the catalog's median ml.*/EC2 ratio)")
    return out


def _sections(diff: CostDiff) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The comment's fixed head, and its folded details in the order they are given up when too long."""
    from gpuplan.check import render_markdown as render_policies

    head = [MARKER, f"### 💰 gpuplan: {headline(diff)}", ""] + [f"> ⚠️ {md_text(n)}" for n in diff.notes] + \
        ([""] if diff.notes else []) + _table(diff)
    buying = [f"- {md_code(p.workload)}: {md_text(line)}" for p in diff.head_plans.plans if (line := buying_summary(p))]
    if buying:
        head += ["**What to buy**", "", *buying, ""]
    if diff.policies is not None:
        head += [render_policies(diff.policies).rstrip(), ""]
    head += mermaid_charts(diff)
    head += ["<details><summary>Assumptions</summary>", "", *_assumptions(diff), "", "</details>", ""]
    folded: list[tuple[str, list[str]]] = []
    for f in diff.frontiers:
        folded.append((f"the cost–latency frontier of {md_code(f.workload)}",
                       [f"<details><summary>Cost–latency frontier: <code>{md_text(f.workload)}</code> ({len(f.points)} plans)"
                        "</summary>", "", frontier_mermaid(f), "", "</details>", ""]))
    folded.append(("the full plans (run `gpuplan plan` on the head)",
                   ["<details><summary>Full plans (head)</summary>", "",
                    render_plans_markdown(diff.head_plans).rstrip(), "", "</details>", ""]))
    return head, folded


def render_markdown(diff: CostDiff, limit: int = MAX_COMMENT_CHARS) -> str:
    """The comment, its folded details dropped from the largest down until it fits GitHub's limit."""
    head, folded = _sections(diff)
    kept = list(folded)
    left_out: list[str] = []

    def text() -> str:
        note = [f"> ✂️ left out to stay under GitHub's comment limit: {'; '.join(left_out)}", ""] if left_out else []
        return "\n".join(head + note + [line for _, lines in kept for line in lines])

    while len(text()) > limit and kept:
        biggest = max(kept, key=lambda item: len("\n".join(item[1])))
        kept.remove(biggest)
        left_out.append(biggest[0])
    body = text()
    if len(body) > limit:  # the table alone is too long: cut it at a line and say so
        cut = body[: limit - 200].rsplit("\n", 1)[0]
        body = cut + "\n\n> ✂️ the comment is cut here to stay under GitHub's limit; run `gpuplan cost` for the rest\n"
    return body


def render_json(diff: CostDiff) -> str:
    return json.dumps(diff.model_dump(mode="json", exclude={"head_plans"}), indent=2) + "\n"


def render_table(diff: CostDiff) -> str:
    lines = [headline(diff), *[f"note: {note}" for note in diff.notes], ""]
    width = max([len(r.workload) for r in diff.workloads] + [8])
    lines.append(f"{'workload':<{width}}  {'status':<9} {'before':>16} {'after':>16} {'change':>16}  instance × count")
    for r in diff.workloads:
        per = _per(r.cost_unit)
        choice = _choice(r.after_instance_type, r.after_nodes) if r.status != "removed" else \
            _choice(r.before_instance_type, r.before_nodes)
        lines.append(f"{r.workload:<{width}}  {r.status:<9} {_money(r.before_usd, per):>16} "
                     f"{_money(r.after_usd, per):>16} {_signed(r.change_usd) + per:>16}  {choice}")
    if diff.policies is not None:
        lines.append(f"\npolicies: {'passed' if diff.policies.passed else 'BLOCKED'} ({diff.policies.mandatory} mandatory, "
                     f"{diff.policies.advisory} advisory)")
    return "\n".join(lines) + "\n"
