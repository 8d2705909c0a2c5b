"""Plan output a reader can take in (issue 27, item 7): rejections grouped by reason, commitments that
dwarf a short run left out of the human renderings unless asked for, and the training method named."""

from __future__ import annotations

import re

from planner.workload.plan import Plan, PlanSet, Rejection

# A commitment (Reserved Instance, Savings Plan) that commits more than this many times the run it is
# quoted for is not a way to buy that run: it is hidden from the table and Markdown (--all-options shows it).
DWARF_FACTOR = 10.0
# Reasons that name the type's own family or type: the same rule, said once per group.
_BY_REQUEST = ((re.compile(r"^family \S+ not in constraints\.families$"), "outside constraints.families"),
               (re.compile(r"^not in constraints\.instance_types$"), "outside constraints.instance_types"))


def _rule(reason: str) -> str:
    for pattern, rule in _BY_REQUEST:
        if pattern.match(reason):
            return rule
    return reason


def grouped_rejections(rejected: list[Rejection]) -> list[tuple[str, list[str]]]:
    """(reason, instance types) in first-seen order; the request's own filters grouped as one rule."""
    groups: dict[str, list[str]] = {}
    for r in rejected:
        groups.setdefault(_rule(r.reason), []).append(r.instance_type)
    return list(groups.items())


def committed_usd(o) -> float:
    return o.usd_per_hour * 8760 * (o.commitment_years or 0)


def dwarfing(p: Plan) -> list:
    """Commitment options whose committed total is over DWARF_FACTOR × the chosen run's cost."""
    run = p.cost.usd_per_training_run
    if p.kind == "inference" or not run:
        return []
    return [o for o in p.purchase_options if o.commitment_years and committed_usd(o) > DWARF_FACTOR * run]


def readable(plans: PlanSet) -> PlanSet:
    """The plans as the table and Markdown show them: dwarfing commitments left out, and said so."""
    out = []
    for p in plans.plans:
        hidden = dwarfing(p)
        if not hidden:
            out.append(p)
            continue
        kept = [o for o in p.purchase_options if o not in hidden]
        note = (f"{len(hidden)} commitment option(s) hidden: each commits over {DWARF_FACTOR:g}× this "
                f"${p.cost.usd_per_training_run:,.0f} run (smallest ${min(map(committed_usd, hidden)):,.0f}); "
                "--all-options lists them")
        out.append(p.model_copy(update={"purchase_options": kept, "warnings": [*p.warnings, note]}))
    return plans.model_copy(update={"plans": out})


def method_text(p: Plan) -> str:
    """'full training, eager kernels', 'LoRA rank 16, fused kernels' for training plans; empty for serving."""
    if not p.training_method:
        return ""
    name = {"lora": "LoRA", "qlora": "QLoRA", "full": "full fine-tuning" if p.kind == "fine-tuning" else "full training"}
    text = name.get(p.training_method, p.training_method)
    text = f"{text} rank {p.lora_rank}" if p.training_method in ("lora", "qlora") and p.lora_rank else text
    return f"{text}, {p.training_kernels} kernels" if p.training_kernels else text
