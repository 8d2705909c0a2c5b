"""A PlanSet's JSON written plan by plan (issue 29): the same bytes as planner.report.render_json, but
a file of 5,000 plans (~76 MB) never sits in memory as one string beside its models."""

from __future__ import annotations

from typing import TextIO

from planner.plan import PlanSet

INDENT = "    "  # a plan inside {"plans": [...]} sits two levels deep at indent 2


def write_json(plans: PlanSet, out: TextIO) -> None:
    """render_json(plans), written to `out` one plan at a time."""
    if not plans.plans:
        out.write(plans.model_dump_json(indent=2, ensure_ascii=True) + "\n")
        return
    # The document around the list, from the set without its plans: `{\n  "plans": [],\n  ...}`.
    head, tail = plans.model_copy(update={"plans": []}).model_dump_json(indent=2, ensure_ascii=True).split(
        '"plans": []', 1)
    out.write(head + '"plans": [\n')
    for i, plan in enumerate(plans.plans):
        text = plan.model_dump_json(indent=2, ensure_ascii=True)
        out.write((",\n" if i else "") + INDENT + text.replace("\n", "\n" + INDENT))
    out.write("\n  ]" + tail + "\n")
