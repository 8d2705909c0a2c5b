"""The chosen plan runs as fast as it says (issue 9): every case quoted in the issue, with the plan
that is chosen now, not only the corrected number."""

from __future__ import annotations

import pytest

from planner.search.candidates import Candidate
from planner.hardware.catalog import with_overlay
from planner.physics import collectives
from planner.physics.collectives import COLLECTIVE_EFFICIENCY, group_collective_s, nvlink_share, ring_s
from planner.workload.errors import InfeasibleError
from planner.physics.memory import TrainingSetup, training_memory, training_model_states
from planner.pipeline import plan_workload
from planner.physics.training_time import TrainingLayout, training_step, training_work
from tests.conftest import workload

LLAMA2_13B_RUN = dict(kind="training", model={"preset": "llama-2-13b"},
                      training={"tokens": 3e11, "sequence_length": 4096, "global_batch_tokens": 4e6,
                                "deadline_hours": 720},
                      constraints={"max_nodes": 64})


def test_zero3_gathers_every_micro_batch_over_one_efa_link(catalog, arch):
    """p5.4xlarge × 24, ZeRO-3, 21 micro-batches: ~100 GB per micro-batch over one 100 Gbps link."""
    itype, a13 = catalog.instance("p5.4xlarge"), arch["llama-2-13b"]
    setup = TrainingSetup("full", "bf16", "adamw", "auto", 16, 4096)
    layout = TrainingLayout(1, 1, 24, 3, 2, 21, "none")
    state = sum(training_model_states(a13, setup, 1, 1, 24, 3))
    step = training_step(a13, itype, catalog.accelerator("H100-80GB"), "bf16", 4096, layout, state,
                         training_work(a13, setup))
    # by hand: 2 gathers of 2 B/param + a reduce-scatter of 4 B/param, 23/24 of it, at 10 GB/s
    per_microbatch_s = 8 * a13.params * 23 / 24 / (100e9 / 8 * COLLECTIVE_EFFICIENCY)
    assert step.step_time_s >= 21 * per_microbatch_s * 0.5  # half may hide behind compute, no more
    assert step.step_time_s > 150 and step.bound == "communication"


def test_13b_run_now_picks_full_nodes(catalog):
    # B200 and H100 nodes, whole or single-GPU: since the issue-25 refit p4d × 16 ties B200 × 3 to 3 significant
    # figures of $/run over the whole catalog and p5.4xlarge drops out of the top alternatives
    spec = {**LLAMA2_13B_RUN, "constraints": {**LLAMA2_13B_RUN["constraints"], "families": ["p6-b200", "p5"]}}
    plan = plan_workload(workload(**spec), catalog)
    # 2 × 8 × B200 at $227.93/h finish in 386 h ($87,957/run) at the fourth issue-25 refit's constants, under
    # 4 × p5.48xlarge ($94,166/run) and 48 × p5.4xlarge ($110,461/run); 3 B200 nodes before it
    assert (plan.choice.instance_type, plan.choice.nodes) == ("p6-b200.48xlarge", 2)
    assert plan.performance.time_to_train_s <= 720 * 3600
    single_gpu = next(a for a in plan.alternatives if a.instance_type == "p5.4xlarge")
    assert single_gpu.reason.startswith("costlier:") and single_gpu.nodes > 2


def test_zero3_memory_holds_gathered_blocks(arch):
    a = arch["llama-3.1-405b"]
    setup = TrainingSetup("full", "bf16", "adamw", "auto", 16, 8192)
    sharded = training_memory(a, setup, 8, 1, 64, 3, 1, 8, "full", True)
    block = (a.params - a.embedding_params) / a.layers / 8
    states = training_model_states(a, setup, 8, 1, 64, 3)
    assert sharded.weights - states[0] == pytest.approx(2 * block * 2)  # this block and the prefetched next, bf16
    assert sharded.gradients - states[1] == pytest.approx(block * 4)  # one block's fp32 gradients, unsharded


def test_inter_node_collective_is_hierarchical(catalog):
    """16 GPUs on two p5.48xlarge: the whole buffer over NVLink at the bus bandwidth nccl-tests measures at 1 GB
    on 8 H100s (planner/data/collectives.yaml) and a 2-node ring on 1/8 of it through the node's 3,200 Gbps
    shared by its 8 GPUs, pipelined (the slower leg's time), and the NIC hops: the flat ring's 2·15, or the tree's
    2·log2(2) levels where cheaper."""
    itype, h100 = catalog.instance("p5.48xlarge"), catalog.accelerator("H100-80GB")
    size = 1e9
    nvlink_s = 2 * 7 / 8 * size / (900e9 / 2 * nvlink_share(900, size))
    assert nvlink_share(900, size) > 0.95  # NVLink SHARP: past the ring's 80% at 1 GB
    nic_share = 3200e9 / 8 / 8 * COLLECTIVE_EFFICIENCY
    hops = min(2 * 15 * collectives.INTER_NODE_RING_STEP_S, 2 * collectives.INTER_NODE_TREE_LEVEL_S)
    expected = max(nvlink_s, ring_s(size / 8, 2, nic_share)) + hops
    assert group_collective_s(size, 16, 8, h100, itype) == pytest.approx(expected)
    flat = ring_s(size, 16, nic_share)
    assert group_collective_s(size, 16, 8, h100, itype) < flat / 4


def test_fp8_training_is_not_fp8_peak_times_a_gemm_efficiency(catalog):
    """llama-3-8b fp8 seq 8192 on 8 × H100 used to claim 1,100 TFLOP/s (55.6% MFU). NeMo measured
    14,451 tokens/s/GPU (reference N-8B-FP8) = 882 TFLOP/s under this planner's FLOP definition, on NeMo's fused
    kernels (training.kernels: fused; the eager default plans it at 624)."""
    w = workload(kind="training", model={"preset": "llama-3-8b"}, precision="fp8",
                 training={"tokens": 1e11, "sequence_length": 8192, "kernels": "fused"},
                 constraints={"instance_types": ["p5.48xlarge"], "max_nodes": 1})
    perf = plan_workload(w, catalog).performance
    assert perf.achieved_tflops_per_device == pytest.approx(882, rel=0.12)
    assert perf.model_flops_utilization < 0.5


def test_concurrency_is_a_ceiling_never_rounded_up(catalog):
    """llama-3.1-70b, 20 concurrent requests, 3,000 tok/s: 60 nodes used to claim 3,133 tok/s by
    putting 60 requests in flight. 20 sequences cannot stream 3,000 tok/s: exit 1, nearest misses."""
    # checked at the estimate: at the likely edge the interactive TTFT/ITL defaults are the nearest misses,
    # hiding the throughput misses this test is about
    w = workload(kind="inference", model={"preset": "llama-3.1-70b"},
                 serving={"concurrent_requests": 20, "target_output_tokens_per_s": 3000},
                 constraints={"confidence": "expected"})
    with pytest.raises(InfeasibleError) as err:
        plan_workload(w, catalog)
    assert "with 20 requests in flight" in str(err.value)


def test_replicas_share_the_concurrency(catalog):
    w = workload(kind="inference", model={"preset": "llama-3.1-8b"},
                 serving={"concurrent_requests": 10, "target_output_tokens_per_s": 300},
                 # at the estimate: 3 × g6e.xlarge's 395 tokens/s drop to 186 at the likely edge since issue 25
                 constraints={"instance_types": ["g6e.xlarge"], "confidence": "expected"}, layout={"replicas": 3})
    plan = plan_workload(w, catalog)
    assert plan.layout.replicas == 3 and plan.layout.batch_per_replica == 4  # 4 + 3 + 3
    assert plan.layout.sequences_in_flight == 10


def test_pinned_replicas_must_fit_the_pinned_nodes(catalog):
    """Issue 11's probe: replicas 8 on one g6e.xlarge overstated throughput 8×."""
    w = workload(kind="inference", model={"preset": "llama-3.1-8b"}, serving={"concurrent_requests": 16},
                 constraints={"instance_types": ["g6e.xlarge"]}, layout={"replicas": 8, "nodes": 1})
    with pytest.raises(InfeasibleError) as err:
        plan_workload(w, catalog)
    assert "layout.replicas 8 do not fit 1 node(s)" in str(err.value)


def test_sagemaker_replica_fits_one_instance(catalog):
    """405B used to be planned as TP 8 × PP 2 over two ml.p4de instances, which cannot start."""
    w = workload(kind="inference", model={"preset": "llama-3.1-405b"},
                 serving={"max_context_tokens": 8192, "concurrent_requests": 8})
    plan = plan_workload(w, catalog)
    assert plan.choice.deploy_target == "sagemaker" and plan.layout.pipeline_parallel == 1
    assert plan.layout.tensor_parallel <= plan.choice.accelerators_per_node
    with pytest.raises(InfeasibleError):  # 810 GB of weights do not fit one 8 × 80 GB instance
        plan_workload(workload(kind="inference", model={"preset": "llama-3.1-405b"},
                               serving={"max_context_tokens": 8192, "concurrent_requests": 8},
                               constraints={"families": ["p4de"]}), catalog)


def test_long_prompts_do_not_buy_ttft_with_pipeline_stages(catalog):
    w = workload(kind="inference", model={"preset": "llama-3.1-8b"},
                 serving={"max_context_tokens": 128000, "prompt_tokens": 120000, "output_tokens": 256,
                          "concurrent_requests": 1, "max_time_to_first_token_ms": 10000},
                 constraints={"deploy_target": "ec2"})
    plan = plan_workload(w, catalog)
    assert plan.layout.pipeline_parallel == 1
    assert plan.performance.time_to_first_token_s <= 10


def _overlay(catalog, tmp_names):
    base = catalog.instance("g6e.xlarge").model_dump()
    types = [{**base, "name": name, "prices": {}, "usd_per_hour": 2.0} for name in tmp_names]
    return with_overlay(catalog, {"instance_types": types}, "overlay.yaml")


def test_ties_never_go_to_catalog_order(catalog):
    merged = _overlay(catalog, ["zz-node", "aa-node"])  # zz listed first
    w = workload(kind="inference", model={"preset": "llama-3.1-8b"}, serving={"concurrent_requests": 4},
                 constraints={"instance_types": ["zz-node", "aa-node"], "deploy_target": "ec2"})
    plan = plan_workload(w, merged)
    assert plan.choice.instance_type == "aa-node"
    assert plan.choice.reason.startswith("ties zz-node × 1 on cost ($2.00/h)")
    assert plan.alternatives[0].reason.startswith("same cost ($2.00/h) but equal on every criterion")


def test_tie_break_order_nodes_then_hops_then_headroom(catalog):
    itype, accel = catalog.instance("p5.48xlarge"), catalog.accelerator("H100-80GB")

    def cand(nodes, tp, memory_total):
        from planner.physics.memory import MemoryBreakdown
        return Candidate(itype, accel, None, nodes, tp, 1, 1, 1, MemoryBreakdown(weights=memory_total), 70e9, None,
                         55.04 * nodes, 100.0)
    assert cand(1, 8, 10e9).rank_key < cand(3, 1, 10e9).rank_key  # fewer nodes
    assert cand(1, 1, 10e9).rank_key < cand(1, 8, 10e9).rank_key  # fewer hops
    assert cand(1, 8, 10e9).rank_key < cand(1, 8, 20e9).rank_key  # more headroom


def test_alternatives_show_the_figure_that_ranks_them(catalog):
    plan = plan_workload(workload(**LLAMA2_13B_RUN), catalog)
    figures = [a.ranking_usd for a in plan.alternatives]
    ranked = [float(f"{f:.3g}") for f in figures]  # Candidate.rank_key: equal to 3 significant figures ties
    assert ranked == sorted(ranked) and all(a.ranked_by == "usd_per_training_run" for a in plan.alternatives)
    assert all(a.ranking_usd == pytest.approx(a.usd_per_training_run) for a in plan.alternatives)
    # no alternative is cheaper in the ranked figure, which ties costs equal to 3 significant figures
    # (Candidate.rank_key): p4d × 16 at $105,037/run ties B200 × 3 at $105,115/run and loses on nodes
    assert all(float(f"{f:.3g}") >= float(f"{plan.cost.usd_per_training_run:.3g}") for f in figures)
    for r in plan.rejected:
        if r.reason.startswith("feasible but"):
            assert "/run vs $" in r.reason  # never an hourly figure beside a run cost


def test_qlora_pays_for_nf4_dequantisation(catalog):
    common = dict(kind="fine-tuning", model={"preset": "llama-2-7b"},
                  constraints={"instance_types": ["g6e.xlarge"], "max_nodes": 1},
                  layout={"micro_batch": 1, "zero_stage": 0})
    lora = plan_workload(workload(**common, training={"method": "lora", "tokens": 1e7, "sequence_length": 2048,
                                                      "activation_checkpointing": "full"}), catalog)
    qlora = plan_workload(workload(**common, training={"method": "qlora", "tokens": 1e7, "sequence_length": 2048,
                                                       "activation_checkpointing": "full"}), catalog)
    assert qlora.performance.training_tokens_per_s < 0.97 * lora.performance.training_tokens_per_s
    assert not any("dequantisation" in warning for warning in qlora.warnings)


def test_overlay_node_with_a_network_and_no_efa_key_trains_across_nodes(catalog):
    """design.md's on-prem DGX overlay: inter_node_gbps 1600, no efa key."""
    merged = with_overlay(catalog, {"instance_types": [{
        "name": "onprem-dgx-a100", "family": "dgx", "accelerator": "A100-80GB", "accelerators_per_node": 8,
        "inter_node_gbps": 1600, "usd_per_hour": 20}]}, "overlay.yaml")
    w = workload(kind="training", model={"preset": "llama-3-70b"},
                 training={"tokens": 2e11, "sequence_length": 4096, "deadline_hours": 720},
                 constraints={"instance_types": ["onprem-dgx-a100"], "deploy_target": "ec2"})
    plan = plan_workload(w, merged)
    assert plan.choice.nodes > 1
    assert catalog.instance("g5.xlarge").multi_node is False  # AWS types still need EFA
