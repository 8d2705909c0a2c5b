"""Issue 28: MoE expert parallelism in the training search (planner/physics/expert_training.py)."""

from __future__ import annotations

import pytest

from planner.hardware.catalog import with_overlay
from planner.physics.collectives import inter_node_bytes_per_s, intra_node_bytes_per_s, latency_s
from planner.physics.expert_parallel import routed_expert_share
from planner.physics.expert_training import all_to_all_step_s, ep_options, expert_weight_traffic_s
from planner.physics.memory import TrainingSetup, training_model_states
from planner.report.markdown import layout_text
from planner.pipeline import plan_workload
from planner.physics.training_time import training_work
from tests.conftest import workload


def _train(catalog, preset, types, max_nodes=64, layout=None, confidence="likely", **training):
    return plan_workload(workload(kind="training", model={"preset": preset}, training={"tokens": 1e11, **training},
                                  constraints={"instance_types": types, "max_nodes": max_nodes,
                                               "confidence": confidence},
                                  layout=layout or {}), catalog)


def _nvl72(catalog):
    """The UltraServer carries no public price (Capacity Blocks only): a rate card overlay prices it."""
    t = catalog.instance("u-p6e-gb200x72")
    overlay = {"instance_types": [{**t.model_dump(exclude={"prices", "no_price_reason"}),
                                   "prices": {"us-east-1": {"ec2": {"on_demand": 1008.0, "source": "my rate card",
                                                                    "date": "2026-11-01"}}}}]}
    return with_overlay(catalog, overlay, "o.yaml")


def test_deepseek_v3_training_plan_spreads_its_experts(catalog):
    # at the estimate (confidence: expected): 64 nodes, TP 2 × PP 32 × DP 8, experts over EP 8. At the band's
    # high memory edge only TP 8 fits at PP 32 × DP 2, and EP across nodes' EFA no longer pays there.
    plan = _train(catalog, "deepseek-v3", ["p5.48xlarge"], confidence="expected")
    assert plan.layout.expert_parallel > plan.layout.tensor_parallel
    assert "experts over EP" in layout_text(plan)
    assert not any("no expert parallelism" in w for w in plan.warnings)


def test_expert_parallelism_beats_the_tp_only_layout_it_was_searched_against(catalog):
    """Pin the winner's TP, PP and nodes with experts TP-only (expert_parallel = TP): the run costs more.
    Judged at the estimate, where the winner spreads its experts (see the test above)."""
    ep = _train(catalog, "deepseek-v3", ["p5.48xlarge"], confidence="expected")
    assert ep.layout.expert_parallel > ep.layout.tensor_parallel
    pins = {"nodes": ep.choice.nodes, "tensor_parallel": ep.layout.tensor_parallel,
            "pipeline_parallel": ep.layout.pipeline_parallel}
    tp_only = _train(catalog, "deepseek-v3", ["p5.48xlarge"], layout={**pins, "expert_parallel": ep.layout.tensor_parallel},
                     confidence="expected")
    assert tp_only.layout.expert_parallel == tp_only.layout.tensor_parallel
    assert tp_only.cost.usd_per_training_run > ep.cost.usd_per_training_run
    assert tp_only.performance.training_tokens_per_s < ep.performance.training_tokens_per_s


def test_deepseek_v3_on_gb200_nvl72_keeps_tp_and_ep_inside_the_domain(catalog):
    # at the estimate (confidence: expected): 4 nodes, TP 4 × PP 4 × DP 18, experts over EP 8. At the band's
    # high memory edge the 8-node fit is PP 16 × DP 9, whose DP admits no EP above TP.
    plan = _train(_nvl72(catalog), "deepseek-v3", ["u-p6e-gb200x72"], max_nodes=8, confidence="expected")
    assert plan.layout.expert_parallel > plan.layout.tensor_parallel
    assert plan.layout.expert_parallel <= 72


def test_nvl72_all_to_all_rides_nvlink_not_efa_by_hand(catalog, arch):
    """TP 4 × EP 16 = 64 GPUs: inside the 72-GPU NVLink domain. Per micro-batch a rank dispatches
    4096·1/4 tokens × 8 experts × 7168 × 2 B × 15/16 over NVLink5 (1.8 TB/s both ways → 720 GB/s one
    way at 80%), 4 passes × 58 MoE layers."""
    v3, gb200 = arch["deepseek-v3"], catalog.accelerator("GB200")
    nvl72, b200 = catalog.instance("u-p6e-gb200x72"), catalog.instance("p6-b200.48xlarge")
    leaving = 4096 / 4 * 8 * 7168 * 2 * 15 / 16
    assert intra_node_bytes_per_s(gb200) == pytest.approx(720e9)
    by_hand = 58 * 4 * (leaving / 720e9 + latency_s(16, gb200))
    assert all_to_all_step_s(v3, nvl72, gb200, 4, 1, 16, 1, 1, 4096, "none") == pytest.approx(by_hand)
    # the same 64 GPUs as 8 p6-b200 nodes: 14 of 15 peers sit behind the node's EFA (3.2 Tb/s per 8 GPUs)
    b200_gpu = catalog.accelerator(b200.accelerator)
    efa = inter_node_bytes_per_s(b200)
    assert efa == pytest.approx(3200e9 / 8 / 8 * 0.8)
    across = 58 * 4 * (leaving * 14 / 15 / efa + leaving / 15 / intra_node_bytes_per_s(b200_gpu) + latency_s(16, b200_gpu))
    assert all_to_all_step_s(v3, b200, b200_gpu, 4, 1, 16, 1, 1, 4096, "none") == pytest.approx(across)
    assert across > 10 * by_hand


def test_ep_splits_only_the_routed_experts_states(arch):
    """Full bf16 AdamW: 18 B/param. EP 8 divides the routed share by 8, the rest (attention, shared
    expert, dense-first layers, embeddings) stays split by TP × PP only."""
    v3 = arch["deepseek-v3"]
    setup = TrainingSetup("full", "bf16", "adamw", "fp32", 16, 4096)
    w1, g1, o1 = training_model_states(v3, setup, 4, 8, 16, 0)
    w8, g8, o8 = training_model_states(v3, setup, 4, 8, 16, 0, ep=8)
    routed = v3.params * routed_expert_share(v3) / 32
    assert w1 - w8 == pytest.approx(routed * 2 * 7 / 8)
    assert g1 + o1 - g8 - o8 == pytest.approx(routed * 16 * 7 / 8)


def test_expert_gemms_under_the_ridge_point_are_memory_bound_by_hand(catalog, arch):
    """DeepSeek-V3, TP 4 × PP 16, micro-batch 1 × 4096: a TP-only expert gets 4096·8/256 = 128 rows,
    under H100's ridge point. Bytes per micro-batch: local routed params × (2 reads × 2 B + fp32
    grad read + write); FLOPs: 6 · 4096 · routed·8/256 / 64 at the fitted GEMM rate."""
    from planner.physics import efficiency
    v3, h100 = arch["deepseek-v3"], catalog.accelerator("H100-80GB")
    work = training_work(v3, TrainingSetup("full", "bf16", "adamw", "fp32", 16, 4096))
    routed = v3.params * routed_expert_share(v3)
    memory_s = routed / 64 * (2 * 2 + 2 * 4) / (h100.memory_bandwidth_gb_s * 1e9)
    compute_s = 6 * 4096 * routed * 8 / 256 / 64 / (h100.peak_flops("bf16") * efficiency.gemm_efficiency(h100))
    assert memory_s > compute_s
    assert expert_weight_traffic_s(v3, h100, "bf16", work, 4, 16, 1, 1, 10, 4096, "none") == \
        pytest.approx(10 * (memory_s - compute_s))
    # EP 8: 1/8 of the weights for the same FLOPs, back under the compute roof
    assert expert_weight_traffic_s(v3, h100, "bf16", work, 4, 16, 8, 1, 10, 4096, "none") == 0.0


def test_ep_degrees_divide_the_dp_ranks_and_the_experts(arch):
    assert ep_options(arch["deepseek-v3"], "full", 12) == (1, 2, 4)
    assert ep_options(arch["deepseek-v3"], "lora", 12) == (1,)
    assert ep_options(arch["llama-3.1-8b"], "full", 8) == (1,)
    assert ep_options(arch["deepseek-v3"], "full", 16, pinned_devices=32, tp=4) == (8,)


def test_expert_parallel_pin_that_no_layout_takes_is_a_near_miss(catalog):
    from planner.workload.errors import InfeasibleError
    with pytest.raises(InfeasibleError, match="layout.expert_parallel 24 devices"):
        _train(catalog, "deepseek-v3", ["p5.48xlarge"], layout={"expert_parallel": 24, "tensor_parallel": 8})
