"""Published training runs whose source states the layout (TP, PP, DP, GPUs), the global batch and the
sequence but not the micro-batch (Megatron-LM's weak-scaling tables, Narayanan et al. 2021 Table 1,
Llama 3 405B, Meta's Table 4): compared at the micro-batch the PLANNER's own search picks when a user
pins that layout, as a user who pins the layout leaves the micro-batch (and an unstated recompute mode)
to the planner. bench/accuracy.py counts these rows apart ("micro-batch chosen by the planner").

The choice is planner.pipeline.plan_workload on the pinned spec, made once per row at the committed
constants of planner/physics/efficiency.py (snapshotted when this module is imported, before any refit):
a leave-one-source-out refit then predicts the row at that micro-batch with its own constants. A row the
planner refuses at its published layout raises InfeasibleError: the "no published run is refused"
acceptance (issue 25) is tested on it, never skipped.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from functools import cache

from planner.physics import efficiency

PLANNER_CHOSEN = "micro-batch chosen by the planner"
# The constants as committed: uppercase names of planner/physics/efficiency.py, copied at import.
_COMMITTED = {name: copy.deepcopy(value) for name, value in vars(efficiency).items() if name.isupper()}
# The token budget only prices the run; no deadline, so it never decides the layout.
STEPS_PRICED = 1000


def unstated_micro_batch(row: dict) -> bool:
    """The source states everything the planner needs but the micro-batch (global batch and DP included)."""
    return row.get("micro_batch") is None and all(isinstance(row.get(k), int) for k in ("global_batch", "dp", "tp", "pp"))


@contextmanager
def _committed_constants():
    saved = {name: getattr(efficiency, name) for name in _COMMITTED}
    try:
        for name, value in _COMMITTED.items():
            setattr(efficiency, name, copy.deepcopy(value))
        yield
    finally:
        for name, value in saved.items():
            setattr(efficiency, name, value)


def pinned_workload(row: dict, instance_type: str, precision: str, architecture: dict | None,
                    confidence: str = "expected"):
    """The spec a user writes to reproduce the row: its model, precision, sequence, global batch and
    layout (nodes, TP, PP, DP, a stated ZeRO stage and recompute mode) pinned, on the published part's node.
    confidence expected: the accuracy compares the planner's estimate, not the 80% band's edge (with
    `likely`, the user's default, memory must fit at the band's high edge, ×1.42 on GPUs, which forces
    full recompute on runs that ran with less: tests/test_reference_at_scale.py plans those too)."""
    from planner.workload.spec import parse_workloads

    method = row.get("method", "full")
    training = {"method": method, "sequence_length": row["seq"], "global_batch_tokens": row["global_batch"] * row["seq"],
                "tokens": STEPS_PRICED * row["global_batch"] * row["seq"]}
    if str(row.get("checkpointing")) in ("none", "selective", "full"):
        training["activation_checkpointing"] = row["checkpointing"]
    layout = {"nodes": row["gpus"] // 8, "tensor_parallel": row["tp"], "pipeline_parallel": row["pp"],
              "data_parallel": row["dp"]}
    if (row.get("cp") or 1) > 1:  # the sequence split over CP ranks (planner/physics/context_parallel.py)
        layout["context_parallel"] = row["cp"]
    if isinstance(row.get("zero"), int):
        layout["zero_stage"] = row["zero"]
    spec = {"name": row["id"], "kind": "training" if method == "full" else "fine-tuning",
            "model": {"preset": row["model"]} if row.get("model") else {"architecture": architecture},
            "precision": precision, "training": training, "layout": layout,
            "constraints": {"instance_types": [instance_type], "max_nodes": max(1, row["gpus"] // 8),
                            "confidence": confidence}}
    return parse_workloads({"workloads": [spec]}, "bench/planner_choice.py").workloads[0]


@cache
def planner_choice(row_id: str) -> tuple[int, str]:
    """(micro-batch, recompute mode) of the planner's plan for the row pinned at its published layout."""
    from bench.reference_sources import ARCH_FIELDS, INSTANCE_FOR, sources
    from planner.hardware.catalog import bundled
    from planner.pipeline import plan_workload
    from planner.search.tables import clear_search_tables

    row = next(r for data in sources().values() for r in data["rows"] if r["id"] == row_id)
    precision = row["precision"] if row["precision"] in ("bf16", "fp8", "fp16") else "bf16"
    arch = {k: v for k, v in row["architecture"].items() if k in ARCH_FIELDS} if row.get("architecture") else None
    w = pinned_workload(row, INSTANCE_FOR[row["accelerator"]], precision, arch)
    with _committed_constants():
        clear_search_tables()  # its tables hold no answer found at other constants
        plan = plan_workload(w, bundled())
        clear_search_tables()
    return plan.layout.micro_batch, plan.layout.activation_checkpointing


def with_planner_choice(row: dict) -> dict:
    """The row with the planner's micro-batch, and its recompute mode where the source states none."""
    mb, checkpointing = planner_choice(row["id"])
    stated = str(row.get("checkpointing")) in ("none", "selective", "full")
    return {**row, "micro_batch": mb, "checkpointing": row["checkpointing"] if stated else checkpointing,
            "micro_batch_source": PLANNER_CHOSEN}


def planner_chosen_ids(catalog) -> set[str]:
    """Training rows compared at the planner's micro-batch (bench/accuracy.py counts them apart)."""
    from bench.reference_sources import sources, why_not

    return {r["id"] for data in sources().values() for r in data["rows"]
            if "seq" in r and why_not(r, catalog) is None and r.get("micro_batch") is None}
