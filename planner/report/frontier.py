"""Renderers for a Frontier: table, JSON, Markdown with a mermaid chart. Pure functions of the model,
pinned by golden files; the chart file (matplotlib, an optional extra) is drawn in gpuplan/chart.py."""

from __future__ import annotations

import json

from planner.search.frontier import Frontier
from planner.workload.plan import Plan


def pins(p: Plan) -> dict:
    """What to put in the spec to get exactly this point back from `gpuplan plan`."""
    lay = p.layout
    layout = {"nodes": p.choice.nodes, "tensor_parallel": lay.tensor_parallel, "pipeline_parallel": lay.pipeline_parallel}
    if p.kind != "inference":
        layout["data_parallel"] = lay.data_parallel
    return {"constraints": {"instance_types": [p.choice.instance_type]}, "layout": layout}


def ranked_usd_per_month(p: Plan) -> float:
    """A serving plan's monthly cost as it was ranked: under the one price rule (planner/economics/price_rule.py) its
    instances at the rule's figure, else what it is charged."""
    cost = p.cost
    if cost.ranking_usd_per_hour is None or cost.instances_usd_per_hour is None:
        return cost.usd_per_month
    return cost.usd_per_month + (cost.ranking_usd_per_hour - cost.instances_usd_per_hour) * cost.hours_per_month


def values(f: Frontier, p: Plan) -> list[float]:
    """The point's coordinates on f.axes (cost as ranked, so the planner's choice is the cheapest point)."""
    perf = p.performance
    if f.kind == "inference":
        return [ranked_usd_per_month(p), perf.inter_token_latency_s * 1e3, perf.time_to_first_token_s * 1e3]
    cost = p.cost
    return [cost.usd_per_training_run, perf.time_to_train_s / 3600]


def _layout(p: Plan) -> str:
    lay = p.layout
    unit = " cores" if lay.tensor_parallel_unit == "NeuronCore" else ""
    text = f"TP {lay.tensor_parallel}{unit} × PP {lay.pipeline_parallel}"
    return f"{text}, {lay.replicas} replica(s)" if p.kind == "inference" else f"{text} × DP {lay.data_parallel}"


def rows(f: Frontier) -> list[list[str]]:
    out = []
    for i, p in enumerate(f.points):
        v = values(f, p)
        mark = "★" if i == f.chosen else ""
        plan = f"{p.choice.instance_type} × {p.choice.nodes}"
        if f.kind == "inference":
            out.append([f"{i + 1}{mark}", plan, _layout(p), f"${v[0]:,.0f}", f"{v[1]:,.1f}", f"{v[2]:,.0f}",
                        f"{p.performance.output_tokens_per_s_per_replica:,.0f}"])
        else:
            out.append([f"{i + 1}{mark}", plan, _layout(p), f"${v[0]:,.0f}", f"{v[1]:,.1f}"])
    return out


def header(f: Frontier) -> list[str]:
    if f.kind == "inference":
        ranked = any(ranked_usd_per_month(p) != p.cost.usd_per_month for p in f.points)
        return ["#", "plan", "layout", "$/month as ranked (one price rule)" if ranked else "$/month", "ITL ms",
                "TTFT ms", "tok/s per replica"]
    return ["#", "plan", "layout", "$/run", "time to train h"]


def _targets(f: Frontier) -> str:
    if not f.targets:
        return "no latency target in the spec"
    labels = {"inter_token_latency_ms": ("inter-token latency", "ms"), "time_to_first_token_ms": ("time to first token", "ms"),
              "time_to_train_h": ("time to train", "h")}
    return "targets: " + ", ".join(f"{labels[k][0]} ≤ {v:g} {labels[k][1]}" for k, v in f.targets.items())


def render_table(frontiers: list[Frontier]) -> str:
    blocks = []
    for f in frontiers:
        grid = [header(f), *rows(f)]
        widths = [max(len(r[i]) for r in grid) for i in range(len(grid[0]))]
        lines = [f"{f.workload} ({f.kind}): {len(f.points)} plans on the frontier; ★ = the plan gpuplan chooses; "
                 f"{_targets(f)}"]
        lines += ["  " + "  ".join(c.ljust(w) if j < 3 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths)))
                  for r in grid]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def render_json(frontiers: list[Frontier]) -> str:
    data = {"frontiers": [{**f.model_dump(mode="json"), "pins": [pins(p) for p in f.points]} for f in frontiers]}
    return json.dumps(data, indent=2) + "\n"


def mermaid(f: Frontier) -> str:
    """xychart-beta: the frontier's latency (or time to train) against its points, cheapest first."""
    axis = 1
    name = {"inference": "inter-token latency (ms)", "training": "time to train (h)"}[f.kind]
    target_key = f.axes[axis]
    ys = [round(values(f, p)[axis], 1) for p in f.points]
    labels = ", ".join(f'"{i + 1}{"*" if i == f.chosen else ""}"' for i in range(len(f.points)))
    lines = ["```mermaid", "xychart-beta", f'    title "{f.workload}: {name} by plan, cheapest first (* chosen)"',
             f"    x-axis [{labels}]", f'    y-axis "{name}"', f"    line [{', '.join(f'{y:g}' for y in ys)}]"]
    if target_key in f.targets:
        lines.append(f"    line [{', '.join(f'{f.targets[target_key]:g}' for _ in ys)}]")
    return "\n".join(lines + ["```"])


def render_markdown(frontiers: list[Frontier]) -> str:
    out = []
    for f in frontiers:
        out += [f"## {f.workload}: cost–latency frontier ({f.kind}, {len(f.points)} plans)", "",
                f"★ = the plan `gpuplan plan` chooses; {_targets(f)}. Pin a point with its row's instance type and "
                "layout (`--format json` gives the pins).", "", mermaid(f), "",
                "| " + " | ".join(header(f)) + " |", "|" + "---|" * len(header(f))]
        out += ["| " + " | ".join(r) + " |" for r in rows(f)]
        out.append("")
    return "\n".join(out)
