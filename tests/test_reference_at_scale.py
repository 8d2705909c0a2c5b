"""Issue 25: the training rows at scale are compared, not skipped. Narayanan et al. 2021's weak-scaling
table (32 to 3,072 A100) with the TP/PP of its Table 1, Megatron-LM's H100 weak scaling (to 6,144 GPUs)
and Llama 3 405B (8,192 and 16,384 H100), whose sources leave the micro-batch unstated: compared at the
micro-batch the planner picks at the published layout (bench/planner_choice.py). One row per source is
pinned, and the 405B runs plan at their published layout (no published run is refused)."""

from __future__ import annotations

import pytest

from bench import reference_sources as rs
from bench.planner_choice import PLANNER_CHOSEN, pinned_workload, planner_chosen_ids
from bench.reference_cases import all_rows
from planner.pipeline import plan_workload

NEW_SOURCES = ("narayanan2021-megatron-a100-weak-scaling", "megatron-lm-readme-h100-weak-scaling", "meta-llama3-herd-405b")


def _row(source: str, row_id: str) -> dict:
    return next(r for r in rs.sources()[source]["rows"] if r["id"] == row_id)


@pytest.fixture(scope="module")
def compared(catalog):
    return {r.id: r for r in all_rows(catalog)}


def test_narayanan_table_1_states_the_split_of_every_model_parallel_size():
    """arXiv 2104.04473 Table 1: TP 1, 2, 4 then 8; PP 1 up to 64 at 1T; dp = GPUs / (TP × PP)."""
    rows = rs.sources()["narayanan2021-megatron-a100-weak-scaling"]["rows"]
    assert [(r["tp"], r["pp"], r["dp"]) for r in rows] == [
        (1, 1, 32), (2, 1, 32), (4, 1, 32), (8, 1, 32), (8, 2, 32), (8, 4, 32), (8, 8, 24), (8, 16, 15),
        (8, 35, 9), (8, 64, 6)]
    assert all(r["tp"] * r["pp"] == r["model_parallel"] for r in rows)


def test_every_training_row_of_these_sources_is_compared(catalog):
    """Context parallelism included (planner/physics/context_parallel.py): Llama 3's CP 16 long-context row too."""
    reasons = {r["id"]: rs.why_not(r, catalog) for s in NEW_SOURCES for r in rs.sources()[s]["rows"]}
    assert [k for k, v in reasons.items() if v] == []
    assert len(planner_chosen_ids(catalog) & set(reasons)) == 22
    assert len(planner_chosen_ids(catalog)) == 22  # the DGX Cloud fine-tuning rows state theirs (recipe configs)


def test_narayanan_teraflops_are_converted_back_to_tokens_with_the_papers_eq_3(catalog):
    """137 TFLOP/s counted as 96·l·h²·(1 + s/6h + V/16lh) per token (four passes) is 1.7B's tokens/s;
    times the planner's 6N + 12·L·h·s it is ~107 model TFLOP/s, ¾ of the published hardware-like figure."""
    row = _row("narayanan2021-megatron-a100-weak-scaling", "nar21-1p7b-32gpu")
    arch = rs.row_architecture(row)
    per_token = 96 * 24 * 2304**2 * (1 + 2048 / (6 * 2304) + 51200 / (16 * 24 * 2304))
    assert rs.narayanan_eq3_flops_per_token(arch, 2048) == pytest.approx(per_token)
    accel = catalog.accelerator(catalog.instance("p4de.24xlarge").accelerator)
    assert rs.measured_tflops(row, arch, accel) == pytest.approx(107.36, abs=0.01)


# Predicted at the committed constants; before the non-GEMM traffic was measured, not fitted (Hopper's eager GEMM
# share 0.49 -> 0.53, fused 1.36 -> 1.26, FP8 0.86 -> 0.84): 494.52, 269.77, 552.46 and 610.61 for the rows it moved;
# before collectives across nodes were measured (planner/physics/collectives.py:
# slower leg, measured NIC hops; Hopper's eager GEMM share 0.58 -> 0.49, Ampere's 0.63 -> 0.67): 122.70, 495.39, 311.44,
# 552.84 and 611.05; before the training fit weighed every source the same (bench/calibrate.py): 123.39, 496.74, 296.74,
# 528.70 and 574.39 in the order below.
@pytest.mark.parametrize("row_id, predicted, measured, planners", [
    ("nar21-1t-3072gpu", 129.56, 122.30, True),        # A100, TP 8 × PP 64, micro-batch 1 (planner's)
    ("mlm-weak-462b-6144gpu", 495.38, 465.02, True),   # H100, TP 8 × PP 16 × DP 48 (DP buckets pay NIC hops)
    ("llama3-405b-16384gpu", 276.17, 405.65, True),    # H100, TP 8 × PP 16 × DP 128: fits only with full recompute;
    # interleaved over uneven stages (126 layers / 16), v up to 7 (issue 25): 269.38 at v 2
    # H100 LoRA, TP 2 × PP 4, v 20, micro-batch 1 (recipe); NeMo's adapters on the fused QKV only, no optimizer step on the frozen base: 453.58 on all seven
    ("dgxc-l3-70b-ft-lora-bf16-8gpu", 553.98, 564.99, False),
    # H100, PP 1 × DP 8 (recipe), was skipped; the distributed optimizer (ZeRO-1) NeMo trains with and the bf16
    # gradients its recipe reduces: 506.55 at ZeRO-0 with fp32 gradients
    ("dgxc-l3-8b-ft-sft-bf16-8gpu", 611.89, 677.99, False),
])
def test_one_row_per_new_source_is_pinned(compared, row_id, predicted, measured, planners):
    """Within 0.5 TFLOP/s of the figures at the committed constants (a change to the estimators moves them:
    re-pin with the reason). Re-pinned at the fourth issue-25 refit (Hopper GEMM share 0.43 -> 0.63, Ampere
    0.70 -> 0.60, 408 bytes of non-GEMM traffic per token and hidden unit): the H100 rows rose 26-35%. Re-pinned at
    the kernel stacks (issue 25): Megatron-Core and NeMo rows run fused (GEMM share 0.59 × 1.21, at most 0.70; cuDNN
    attention 0.46), the rest eager (0.59, FlashAttention-2 at 0.24 on Hopper); Ampere 0.56, 340 bytes of non-GEMM
    traffic, COMM_OVERLAP 0.95: the fused H100 rows rose 8-9%, the A100 rows fell 4%. Re-pinned when the input embedding
    became a lookup (no 6·V·h per token) and Megatron's GPT rows tied their embeddings: Hopper 0.57 × 1.23, Ampere 0.63,
    408 bytes, COMM_OVERLAP 1.0: the 1T A100 row rose 11%, the others moved -3% to +2%. Re-pinned when TP all-reduces
    took the bus bandwidth nccl-tests measures at their size (planner/data/collectives.yaml) and the refit that
    followed (Hopper 0.61 × 1.13, Ampere 0.64, COMM_OVERLAP 0.75): the rows moved -1.1% to +0.6%."""
    row = compared[row_id]
    assert row.predicted == pytest.approx(predicted, abs=0.5)
    assert row.measured == pytest.approx(measured, abs=0.5)
    assert ("(planner's)" in row.setup) == planners


def test_a_bloom_prequel_row_with_the_heads_its_section_states_is_pinned(compared):
    """bigscience tr11 chronicles-prequel.md: 181B (hidden 14,336, 72 layers, NHEADS 64) at DP 8 × TP 8 ×
    PP 6, micro-batch 4: 121.48 s per 2,048 × 2,048 tokens on 384 A100 (the source's step time)."""
    row = compared["bloom-prequel-181b-dp8-pp6-mbs4"]
    assert row.predicted == pytest.approx(122.86, abs=0.5)  # 116.65 before collectives across nodes were measured,
    # 108.28 before the kernel-stack refit, 104.13 before the lookup
    assert row.measured == pytest.approx(99.93, abs=0.5)


def test_every_row_at_the_planners_micro_batch_plans_for_a_user_at_the_default_confidence(catalog):
    """No published run is refused (issue 25): pinned to its layout, at constraints.confidence likely (memory
    must fit at the band's high edge), the planner plans every row whose micro-batch it chooses."""
    rows = {r["id"]: r for data in rs.sources().values() for r in data["rows"]}
    for row_id in sorted(planner_chosen_ids(catalog)):
        row = rows[row_id]
        instance = rs.INSTANCE_FOR[row["accelerator"]]
        arch = {k: v for k, v in row["architecture"].items() if k in rs.ARCH_FIELDS} if row.get("architecture") else None
        precision = row["precision"] if row["precision"] in ("bf16", "fp8", "fp16") else "bf16"
        plan = plan_workload(pinned_workload(row, instance, precision, arch, confidence="likely"), catalog)
        assert (plan.layout.tensor_parallel, plan.layout.pipeline_parallel, plan.layout.data_parallel) == \
            (row["tp"], row["pp"], row["dp"]), row_id
    assert PLANNER_CHOSEN == "micro-batch chosen by the planner"


@pytest.mark.parametrize("row_id, dp", [("llama3-405b-8192gpu", 64), ("llama3-405b-16384gpu", 128)])
def test_llama3_405b_plans_at_its_published_layout(catalog, row_id, dp):
    """Issue 25: "at 16,384 GPUs (405B, TP 8 × PP 16) the plan is refused on memory although the run
    happened". Pinned to TP 8 × PP 16 × DP, 2,048 sequences of 8,192, it plans, at micro-batch 1: with a
    pipeline of 16 stages the fewest, largest micro-batches (16 × 1 at DP 128) would leave a bubble of
    15 / 16 of the step, and the search times every micro-batch that fits."""
    row = _row("meta-llama3-herd-405b", row_id)
    plan = plan_workload(pinned_workload(row, "p5.48xlarge", "bf16", None, confidence="likely"), catalog)
    layout = plan.layout
    assert (layout.tensor_parallel, layout.pipeline_parallel, layout.data_parallel) == (8, 16, dp)
    assert plan.choice.nodes == row["gpus"] // 8
    assert layout.micro_batch == 1 and layout.microbatches == 2048 // dp
    assert plan.memory.required_per_device_bytes <= plan.memory.usable_per_device_bytes
