"""Issue 28 (h28a), item 1: attention data parallelism for MLA MoE serving (planner/physics/attention_dp.py).
DeepSeek-R1 FP8 on p5en.48xlarge (8 × H200, 141 GB): each GPU keeps only its own sequences' latent cache
instead of every sequence's, so far more sequences fit; the search takes it where it wins, keeps TP where TP
is faster, and the engine is told (vLLM through LMI: data_parallel_size, enable_expert_parallel)."""

from __future__ import annotations

import base64

import pytest

from planner.physics import attention_dp
from planner.physics.memory import inference_memory, kv_bytes_per_sequence
from planner.physics.performance import serving_estimate
from planner.pipeline import plan_workload
from tests.conftest import workload
from tests.pulumi_harness import run_program
from tests.test_fleet_deploy import _mandatory, _resources, _stack


def _spec(concurrent: int, **serving) -> dict:
    return {"kind": "inference", "model": {"preset": "deepseek-r1"}, "precision": "fp8",
            "serving": {"concurrent_requests": concurrent, "max_context_tokens": 8192, "prompt_tokens": 2000,
                        "output_tokens": 500, **serving},
            "constraints": {"instance_types": ["p5en.48xlarge"], "deploy_target": "ec2"}}


def test_deepseek_r1_rank_weights_replicate_everything_but_the_routed_experts(arch, catalog):
    r1 = arch["deepseek-r1"]
    # routed experts: (671.03 B − 37.55 B active) / (1 − 8/256) = 653.93 B; the rest (MLA attention 11.4 B, shared
    # experts, 3 dense layers, router, embeddings) is 17.10 B, whole on every rank at FP8 (embeddings 16-bit)
    per_rank = attention_dp.rank_weight_bytes(r1, "fp8", 8)
    assert per_rank == pytest.approx(99.129e9, rel=1e-4)
    tp8 = inference_memory(r1, "fp8", "fp16", 8, 1, 1, 8192).weights
    assert tp8 == pytest.approx(84.110e9, rel=1e-4) and per_rank - tp8 == pytest.approx(15.02e9, rel=1e-3)


def test_kv_capacity_with_dp_attention_beats_tp8_on_p5en(arch, catalog):
    """Per sequence of 8,192 tokens: 61 layers × (512 + 64) latent values × 2 B = 575.7 MB on every TP rank,
    on one DP rank only. Usable 90% of 141 GB: TP 8 holds 85, DP attention 8 × 58 = 464."""
    r1 = arch["deepseek-r1"]
    usable = catalog.accelerator(catalog.instance("p5en.48xlarge").accelerator).memory_bytes * 0.9
    assert kv_bytes_per_sequence(r1, 8192, "fp16") == 61 * 576 * 8192 * 2
    assert attention_dp.tp_kv_capacity_sequences(r1, "fp8", "fp16", 8, 8192, usable) == 85
    assert attention_dp.kv_capacity_sequences(r1, "fp8", "fp16", 8, 8192, usable) == 464


def test_high_concurrency_plans_dp_attention_on_one_node_and_says_why(catalog):
    plan = plan_workload(workload(**_spec(256)), catalog)
    lay = plan.layout
    assert (plan.choice.instance_type, plan.choice.nodes) == ("p5en.48xlarge", 1)
    assert (lay.tensor_parallel, lay.attention_data_parallel, lay.expert_parallel, lay.batch_per_replica) == (1, 8, 8, 256)
    assert ("attention data-parallel over 8 GPUs (TP 1 each, experts EP 8): each keeps only its own sequences' MLA "
            "latent cache, 464 sequences of 8192 tokens per replica against 85 at TP 8") in plan.choice.reason
    # at the estimate TP 8's KV needs 2 nodes (at the band's slow edge its ITL needs 4: 4 replicas of 64)
    spec = _spec(256)
    pinned = plan_workload(workload(**{**spec, "layout": {"tensor_parallel": 8},
                                       "constraints": {**spec["constraints"], "confidence": "expected"}}), catalog)
    assert pinned.layout.attention_data_parallel is None and pinned.choice.nodes == 2
    assert plan.cost.usd_per_hour < pinned.cost.usd_per_hour


def test_decode_at_64_sequences_is_faster_with_dp_attention(arch, catalog):
    r1, h200, p5en = arch["deepseek-r1"], catalog.accelerator(catalog.instance("p5en.48xlarge").accelerator), catalog.instance("p5en.48xlarge")
    tp = serving_estimate(r1, h200, "fp8", "fp16", 8, 1, 64, 2000, 500, p5en)
    dp = serving_estimate(r1, h200, "fp8", "fp16", 8, 1, 64, 2000, 500, p5en, attention_dp=True)
    assert dp.inter_token_latency_s < tp.inter_token_latency_s
    # 1.112 before the rounded roofline, 1.098 before the GDDR refit, 1.109 before the PCIe-collectives refit, 1.140
    # before the fourth issue-25 refit, 1.144 before the routed experts' grouped GEMMs (both layouts pay them, spread
    # over the same 8 GPUs), 1.141 before the weight stream's share and per-kernel cost were measured, 1.121 while TP
    # paid a fitted barrier skew, 1.107 before a prompt's experts ran as grouped GEMMs (TP 8 prefills each prompt's
    # 256 experts over all its tokens, DP attention one rank's prompt)
    assert dp.output_tokens_per_s_per_replica / tp.output_tokens_per_s_per_replica == pytest.approx(1.129, abs=0.01)
    plan = plan_workload(workload(**_spec(64)), catalog)
    assert plan.layout.attention_data_parallel == 8 and plan.choice.nodes == 1


def test_low_concurrency_keeps_tp_where_it_is_faster(arch, catalog):
    r1, h200, p5en = arch["deepseek-r1"], catalog.accelerator(catalog.instance("p5en.48xlarge").accelerator), catalog.instance("p5en.48xlarge")
    tp = serving_estimate(r1, h200, "fp8", "fp16", 8, 1, 4, 2000, 500, p5en)
    dp = serving_estimate(r1, h200, "fp8", "fp16", 8, 1, 4, 2000, 500, p5en, attention_dp=True)
    assert tp.inter_token_latency_s < dp.inter_token_latency_s  # 15 GB more weights read per step, little KV saved
    plan = plan_workload(workload(**_spec(4)), catalog)
    assert (plan.layout.tensor_parallel, plan.layout.attention_data_parallel) == (8, None)


def test_engines_without_dp_attention_keep_tp(catalog):
    plan = plan_workload(workload(**_spec(256, engine="tgi")), catalog)
    assert plan.layout.attention_data_parallel is None and plan.layout.tensor_parallel == 8


def test_gqa_models_never_get_dp_attention(arch):
    assert not attention_dp.applies(arch["llama-3.1-70b"]) and not attention_dp.applies(arch["qwen3-235b-a22b"])
    assert attention_dp.applies(arch["deepseek-v3"])


def _deployed(concurrent: int):
    stack = run_program(_stack({"name": "r1", **_spec(concurrent)}, {"r1": {"hfModelId": "deepseek-ai/DeepSeek-R1"}}))
    [template] = stack.of_type("ec2/launchTemplate:LaunchTemplate")
    script = base64.b64decode(template.inputs["userData"]).decode()
    env = script.split("cat > /etc/gpuplan/serving.env <<'EOF'\n", 1)[1].split("\nEOF", 1)[0].splitlines()
    return stack, script, env


def test_dp_attention_reaches_the_engine_environment_on_ec2():
    stack, script, env = _deployed(256)
    assert {"OPTION_TENSOR_PARALLEL_DEGREE=1", "OPTION_DATA_PARALLEL_SIZE=8", "OPTION_ENABLE_EXPERT_PARALLEL=true",
            "OPTION_MAX_ROLLING_BATCH_SIZE=32"} <= set(env)  # max_num_seqs per DP rank: 256 / 8
    assert script.count("docker run") == 1 and "--gpus '\"device=0,1,2,3,4,5,6,7\"'" in script
    assert _mandatory(_resources(stack)) == []  # the pack sizes the DP ranks as the plan did


def test_policy_blocks_dp_flags_removed_from_the_engine():
    stack, _, _ = _deployed(256)
    resources = _resources(stack)
    [template] = [r for r in resources if r.type == "aws:ec2/launchTemplate:LaunchTemplate"]
    script = base64.b64decode(template.props["userData"]).decode()
    script = script.replace("OPTION_DATA_PARALLEL_SIZE=8\n", "").replace("OPTION_MAX_ROLLING_BATCH_SIZE=32", "OPTION_MAX_ROLLING_BATCH_SIZE=256")
    template.props["userData"] = base64.b64encode(script.encode()).decode()
    found = [m for p, _, m in _mandatory(resources) if p == "accelerator-memory-fits"]
    assert any("adp=8 but the engine's attention data-parallel size is 1" in m for m in found), found


def test_dp_attention_reaches_the_sagemaker_container_environment(catalog):
    from components.settings import container_environment

    plan = plan_workload(workload(**{**_spec(256), "constraints": {"instance_types": ["p5en.48xlarge"]}}), catalog)
    assert plan.choice.deploy_target == "sagemaker" and plan.layout.attention_data_parallel == 8
    env = container_environment(plan, "deepseek-ai/DeepSeek-R1", 0.10)
    assert (env["OPTION_TENSOR_PARALLEL_DEGREE"], env["OPTION_DATA_PARALLEL_SIZE"], env["OPTION_ENABLE_EXPERT_PARALLEL"],
            env["OPTION_MAX_ROLLING_BATCH_SIZE"]) == ("1", "8", "true", "32")
    tgi = plan.model_copy(update={"engine": "tgi"})
    with pytest.raises(ValueError, match="attention data-parallel over 8 ranks, which engine tgi"):
        container_environment(tgi, "deepseek-ai/DeepSeek-R1", 0.10)
