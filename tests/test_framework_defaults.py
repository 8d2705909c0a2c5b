"""Issue 25, training rows that leave their pipeline schedule or recompute unstated: the code base's own
default is what ran, not the planner's fastest option. nanotron has only 1F1B and all-forward-all-backward
pipeline engines (both idle (p−1)/m of the ideal step) and no selective recompute (recompute_layer
defaults to False: huggingface/nanotron src/nanotron/config/parallelism_config.py @19f88fbe)."""

from __future__ import annotations

import pytest

from bench import reference_serving, reference_sources as rs
from planner.physics.pipeline_schedule import bubble_fraction


def _row(row_id: str) -> dict:
    return next(r for d in rs.sources().values() for r in d["rows"] if r["id"] == row_id)


def test_a_nanotron_pipeline_runs_1f1b_without_recompute():
    row = rs.resolved(_row("nanotron-80p0b-16node"))  # 80B, TP 4 × PP 32, 256 micro-batches, schedule not stated
    assert row["schedule"] == "1f1b" and row["checkpointing"] == "none"
    assert rs.stated_schedules(row, 80) == [("1f1b", 1)]
    assert bubble_fraction("1f1b", 32, 256) == pytest.approx(31 / 256)


def test_the_planner_choice_is_kept_where_the_framework_has_several_schedules():
    row = rs.resolved(_row("mlm-weak-70b-768gpu"))  # Megatron-LM: 1F1B, interleaved, ... all possible
    assert row["schedule"] == "not stated" and len(rs.stated_schedules(row, 80)) > 1


def test_nanotron_rows_predicted_with_1f1b(catalog):
    """The 80B PP 32 cell was predicted with the fastest schedule the planner knows (interleaved or ZB-H1,
    which nanotron lacks): pinned to 1F1B its bubble is 31/256 of the compute and it predicts slower."""
    row = rs.resolved(_row("nanotron-80p0b-16node"))
    _, _, estimate = rs.predict(catalog, row)
    _, _, fastest = rs.predict(catalog, {**row, "schedule": "not stated", "checkpointing": "none"})
    assert estimate.achieved_tflops_per_device < fastest.achieved_tflops_per_device * 0.97


def test_a_run_averaged_with_its_warm_up_is_counted_not_compared(catalog):
    """DGX Cloud's HF Trainer LoRA rows publish train_samples_per_second over a 30- or 100-step run, warm-up
    included (8 -> 16 GPUs scales super-linearly, 1.247 -> 3.664 samples/s): not a steady-state throughput."""
    row = _row("dgxc-v2411-hf-llama2-70b-lora-8gpu")
    assert rs.why_not(row, catalog) == "throughput averaged over a short run with its warm-up, not steady state"
    assert reference_serving.skipped(catalog)["throughput averaged over a short run with its warm-up, not steady state"] == 13
