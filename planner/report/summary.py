"""`gpuplan plan --format summary`: one line per workload (what `make demo` prints); the full plan
is the table, markdown or JSON format."""

from __future__ import annotations

from planner.workload.plan import PlanSet


def render_summary(plans: PlanSet) -> str:
    rows = [("workload", "kind", "plan", "target", "purchase", "$/h", "cost")]
    for p in plans.plans:
        c = p.choice
        total = (f"${p.cost.usd_per_training_run:,.0f}/run" if p.cost.usd_per_training_run is not None
                 else f"${p.cost.usd_per_month:,.0f}/month")
        rows.append((p.workload, p.kind, f"{c.instance_type} × {c.nodes}", c.deploy_target, c.purchase,
                     f"{p.cost.usd_per_hour:,.2f}", total))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() + "\n" for row in rows)
