"""Issue 28, finished: the fleet's prices are explained where a region has none."""

from __future__ import annotations

from typer.testing import CliRunner

from gpuplan.cli import app


def test_catalog_list_says_where_p6_b300_has_a_price():
    """p6-b300.48xlarge is priced in us-west-2 only (vantage 2025-11-30): us-east-1 says so, not a bare dash."""
    out = CliRunner().invoke(app, ["catalog", "list"]).output
    row = next(line for line in out.splitlines() if line.startswith(" p6-b300.48xlarge"))
    assert row.rstrip().endswith("only in us-west-2")
    west = CliRunner().invoke(app, ["catalog", "list", "--region", "us-west-2"]).output
    row = next(line for line in west.splitlines() if line.startswith(" p6-b300.48xlarge"))
    assert "142.4160" in row and "2025-11-30" in row


# --- MoE expert parallelism (planner/physics/expert_parallel.py) ---------------------------------------------------

import pytest  # noqa: E402

from planner.hardware.catalog import bundled  # noqa: E402
from planner.physics import efficiency  # noqa: E402
from planner.physics.expert_parallel import all_to_all_s, routed_expert_bytes  # noqa: E402
from planner.physics.memory import inference_memory  # noqa: E402
from planner.workload.presets import presets  # noqa: E402
from planner.report.markdown import layout_text  # noqa: E402
from planner.pipeline import plan_workload  # noqa: E402
from tests.conftest import workload  # noqa: E402

R1_SERVING = {"max_context_tokens": 8192, "prompt_tokens": 1024, "output_tokens": 256, "concurrent_requests": 64}


def _r1(constraints: dict, layout: dict | None = None):
    return plan_workload(workload(kind="inference", model={"preset": "deepseek-r1"}, precision="fp8",
                                  serving=R1_SERVING, constraints=constraints, layout=layout or {}), bundled())


def test_deepseek_r1_spreads_experts_over_one_p5en_node():
    plan = _r1({"instance_types": ["p5en.48xlarge"]})
    assert (plan.choice.instance_type, plan.choice.nodes) == ("p5en.48xlarge", 1)
    # attention data-parallel over the 8 GPUs (planner/physics/attention_dp.py): ITL 29.7 ms since the refit that read
    # LMDeploy's first tokens as TurboMind emits them (HBM share 0.87 -> 0.85, per-step cost 2.4 -> 2.0 ms, expert
    # GEMM share 0.22 -> 0.23); 29.6 ms since the routed experts' grouped GEMMs (28.9 ms since the measured all-reduce
    # curves) (29.0 ms since the rounded roofline efficiency.roofline_s; 28.7 ms at the GDDR refit, 28.5 ms before it,
    # 28.3 ms before the PCIe refit)
    assert (plan.layout.tensor_parallel, plan.layout.attention_data_parallel, plan.layout.expert_parallel) == (1, 8, 8)
    # 29.7 ms before the weight stream's share and per-kernel cost were measured (HBM 0.92 + 6.8 us a GEMM); 29.5 ms
    # before each of the 58 MoE layers paid its router's and its shared expert's two GEMM tails (+1.18 ms); 30.7 ms
    # before their token-sorting kernels (58 x 7.2 us, efficiency.MOE_ALIGN_KERNEL_S); 31.1 ms before every serving
    # source weighed the same in the fit (decode step cost 1.7 -> 1.5 ms); 30.9 ms while the fit read 20 rows a source;
    # 31.0 ms before the refit since Hopper's prefill share is fitted on Hopper first tokens (KV share 0.84 ->
    # 0.78, step cost 1.6 -> 1.8 ms); 31.1 ms before a prompt's 256 experts ran as grouped GEMMs (each decode step
    # shares the GPUs with the other sequences' 2,000-token prefills); 33.0 ms before a prompt's LM head multiplied its
    # last position only and the refit that followed (Hopper's prefill share 0.66 -> 0.65)
    assert plan.performance.inter_token_latency_s == pytest.approx(0.032945, rel=1e-3)


def test_deepseek_r1_across_p5_nodes_uses_expert_parallelism_not_pipeline_stages():
    """Issue 28: on 80 GB H100s R1 needs two nodes; it used to plan PP 2, now EP 16 over both nodes (TP 8 per node
    when TP is pinned; by default attention runs data-parallel over all 16 GPUs, faster still)."""
    dp = _r1({"instance_types": ["p5.48xlarge"], "deploy_target": "ec2"})
    assert (dp.choice.nodes, dp.layout.tensor_parallel, dp.layout.attention_data_parallel, dp.layout.expert_parallel) \
        == (2, 1, 16, 16)
    assert layout_text(dp).startswith("attention DP 16 (TP 1 each) × PP 1 × EP 16, 1 replica(s)")
    # 32.8 ms before the refit since Hopper's prefill share is fitted on Hopper first tokens (KV share 0.84 -> 0.78,
    # step cost 1.6 -> 1.8 ms); 33.0 ms before a prompt's experts ran as grouped GEMMs; 34.17 ms before a prompt's LM
    # head multiplied its last position only
    assert dp.performance.inter_token_latency_s == pytest.approx(0.034105, rel=1e-3)
    # 0.032704 while the fit read 20 rows a source, 0.032904 before every serving source weighed the same, 0.032486 before the MoE layers' token-sorting kernels, 0.031291 before the MoE layers' router and shared-expert GEMM tails, 0.030931 before the routed experts' grouped GEMMs, 0.030783 before the rounded roofline, 0.030685 before the
    # GDDR refit
    plan = _r1({"instance_types": ["p5.48xlarge"], "deploy_target": "ec2"}, {"tensor_parallel": 8})
    assert (plan.choice.nodes, plan.layout.tensor_parallel, plan.layout.pipeline_parallel,
            plan.layout.expert_parallel) == (2, 8, 1, 16)
    pp = _r1({"instance_types": ["p5.48xlarge"], "deploy_target": "ec2"}, {"pipeline_parallel": 2})
    assert pp.layout.pipeline_parallel == 2 and pp.layout.expert_parallel == 8
    assert layout_text(plan).startswith("TP 8 × PP 1 × EP 16, 1 replica(s)")
    assert layout_text(pp).startswith("TP 8 × PP 2, 1 replica(s)")
    # PP's two stages take turns each decode step; EP's two nodes read their halves of the experts at once (figures
    # from the refit constants with the per-step decode cost: framework overhead + TP barrier skew (not modelled since
    # the MoE layers pay their routing kernels); GDDR refit: 37.9
    # ms for EP, 45.9 ms for PP before it; rounded roofline: 38.5 ms for EP, 46.5 ms for PP before it; measured
    # all-reduce curves and elementwise kernels: 39.3 ms for EP, 47.2 ms for PP before them; the routed experts'
    # grouped GEMMs: 40.0 ms for EP, 47.8 ms for PP before them) 40.4 ms for EP and 48.6 ms for PP before the weight
    # stream's share and per-kernel cost were measured (HBM 0.92 + 6.8 us a GEMM); 39.7 ms for EP and 46.4 ms for PP
    # before each MoE layer paid its router's and shared expert's GEMM tails (58 x 3 x 6.8 us; PP's LM head once a
    # step); 40.9 and 47.5 ms before the token-sorting kernels (+0.42 ms) and without the TP barrier skew (-0.24 ms);
    # 41.1 and 47.7 ms before the KV stream's share went 0.77 -> 0.71 (vLLM V0's host loop read on its own rows);
    # 41.2 and 47.9 ms before every serving source weighed the same in the fit; 40.9 ms before Hopper's prefill share
    # was fitted on Hopper first tokens (KV share 0.84 -> 0.78, step cost 1.6 -> 1.8 ms); 41.1 and 47.8 ms before a
    # prompt's experts ran as grouped GEMMs (TP 8 splits each of R1's 256 experts 8 ways, ~63 rows each of a 2,000-token
    # prompt: the decode steps share the GPUs with slower prefills); 47.01 ms before a prompt's LM head multiplied its
    # last position only
    assert plan.performance.inter_token_latency_s == pytest.approx(0.046914, rel=1e-3)
    # 47.3 ms before Hopper's prefill share was fitted on Hopper first tokens (step cost 1.6 -> 1.8 ms)
    assert pp.performance.inter_token_latency_s == pytest.approx(0.051524, rel=1e-3)  # 0.051602 before a prompt's LM head ran once


def test_all_to_all_cost_by_hand():
    """16 tokens over 2 p5 nodes: each node's 8 tokens × top-8 × 7168 × 2 B, half of it leaving, over a
    device's share of 3,200 Gb/s (×0.8), plus a 16-rank latency; dispatch + combine on 58 MoE layers."""
    r1, p5 = presets()["deepseek-r1"], bundled().instance("p5.48xlarge")
    h100 = bundled().accelerator("H100-80GB")
    leaving = 8 * 8 * 7168 * 2 / 2
    one_way = leaving / 8 / (3200e9 / 8 / 8 * 0.8) + (15e-6 + 15 * 1.5e-6)
    assert r1.moe_layers == 58
    assert all_to_all_s(r1, 16, 2, p5, h100) == pytest.approx(2 * 58 * one_way)
    assert all_to_all_s(r1, 16, 1, p5, h100) == 0.0


def test_expert_parallelism_halves_the_experts_a_device_holds():
    r1 = presets()["deepseek-r1"]
    one = inference_memory(r1, "fp8", "bf16", 8, 1, 16, 8192)
    two = inference_memory(r1, "fp8", "bf16", 8, 1, 16, 8192, ep_nodes=2)
    assert one.weights - two.weights == pytest.approx(routed_expert_bytes(r1, "fp8") / 16)
    assert two.kv_cache == pytest.approx(one.kv_cache / 2)  # DP attention: 8 of the 16 sequences per node


def test_expert_parallel_pin_on_a_dense_model_is_refused(tmp_path):
    spec = tmp_path / "w.yaml"
    spec.write_text("workloads:\n- name: w\n  kind: inference\n  model: {preset: llama-3.1-8b}\n"
                    "  layout: {expert_parallel: 8}\n")
    result = CliRunner().invoke(app, ["plan", str(spec)])
    assert result.exit_code == 2
    assert "layout.expert_parallel applies to MoE models (experts > 1); this model is dense" in result.output


# --- Speculative decoding (planner/physics/speculative.py) ---------------------------------------------------------

from planner.physics.performance import decode_step  # noqa: E402
from planner.physics.speculative import expected_tokens_per_step  # noqa: E402


def _chat_70b(concurrent: int, speculate: bool):
    serving = {"concurrent_requests": concurrent}
    if speculate:
        serving |= {"speculative_draft": "llama-3.1-8b", "speculative_acceptance_rate": 0.8}
    return plan_workload(workload(kind="inference", model={"preset": "llama-3.1-70b"}, serving=serving,
                                  constraints={"instance_types": ["p5.48xlarge"], "deploy_target": "ec2"},
                                  layout={"tensor_parallel": 8, "replicas": 1, "pipeline_parallel": 1}), bundled())


def test_expected_tokens_per_step_follows_leviathan_eq_1():
    assert expected_tokens_per_step(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2) == pytest.approx(3.3616)
    assert expected_tokens_per_step(1e-9, 4) == pytest.approx(1.0)


def test_a_draft_model_shortens_inter_token_latency_at_batch_one_by_hand():
    """One sequence: no other prefills share the step, so ITL = (target pass over 5 positions, its TP
    all-reduces and its fixed per-step cost + 4 draft steps, each with its own per-step cost) / 3.36
    tokens. 13.5 ms plain, 9.6 ms speculated (1.40×: the per-step framework cost and kernel tails
    are paid by every draft step too, so the gain sits below Leviathan's and Chen's 1.9-3.4×)."""
    plain, fast = _chat_70b(1, False), _chat_70b(1, True)
    p = presets()
    h100 = bundled().accelerator("H100-80GB")
    target = decode_step(p["llama-3.1-70b"], h100, "bf16", "fp16", 8, 1, 1, 1024 + 128)
    draft = decode_step(p["llama-3.1-8b"], h100, "bf16", "fp16", 8, 1, 1, 1024 + 128)
    verify_s = efficiency.roofline_s(h100, target.memory_s, 5 * target.compute_s)  # the rounded roofline's corner
    by_hand = (verify_s + target.communication_s + target.overhead_s + 4 * draft.seconds) / 3.3616
    assert fast.performance.inter_token_latency_s == pytest.approx(by_hand, rel=1e-4)
    # figures from the refit constants with the per-step decode cost (efficiency.decode_overhead_s; PCIe-collectives
    # refit of issue 25: 13.585 ms plain before it; all-reduce curves: 13.787 ms before them; GDDR refit: 13.279 ms
    # before it; rounded roofline: 13.622 before it; 13.744 before the refit that read LMDeploy's first tokens as
    # TurboMind emits them) 13.485 ms before the weight stream's share and per-kernel cost were measured; 13.943 ms
    # before the TP barrier skew (2 us a barrier, 160 a step at TP 8) went out of the model; 13.623 ms before every
    # serving source weighed the same; 13.423 ms while the fit read 20 rows a source (step cost 1.5 -> 1.6 ms); 13.521
    # ms before the refit since Hopper's prefill share is fitted on Hopper first tokens (KV share 0.84 -> 0.78,
    # step cost 1.6 -> 1.8 ms)
    assert plain.performance.inter_token_latency_s == pytest.approx(0.013723, rel=1e-3)
    # 10.008 ms speculated before the rounded roofline, 9.871 ms before the refit that raised the per-step cost to
    # 2.4 ms, 10.271 ms before the refit that read LMDeploy's first tokens as TurboMind emits them (per-step cost 2.0 ms)
    # 9.737 ms before then, 10.043 ms before the TP barrier skew went out of the model, 9.795 ms before every serving
    # source weighed the same, 9.498 ms while the fit read 20 rows a source, 9.645 ms before Hopper's prefill share was
    # fitted on Hopper first tokens (step cost 1.6 -> 1.8 ms)
    assert fast.performance.inter_token_latency_s == pytest.approx(0.009944, rel=1e-3)
    # the draft's weights sit on every device beside the target's: 16 GB of 8B bf16 over TP 8
    assert fast.memory.per_device_bytes["weights"] - plain.memory.per_device_bytes["weights"] == \
        pytest.approx(presets()["llama-3.1-8b"].params * 2 / 8, rel=0.02)


def test_speculation_gains_shrink_as_the_batch_fills_the_compute():
    """The verify pass computes k+1 positions per sequence: free while memory-bound, paid once the batch
    makes the step compute-bound (vLLM's measured slowdown at high load). At batch 1 the gain is ~1.35×
    (each draft step pays the fixed per-step decode cost); at 128 sequences speculation no longer pays."""
    gains = [_chat_70b(c, False).performance.inter_token_latency_s / _chat_70b(c, True).performance.inter_token_latency_s
             for c in (1, 16, 64, 128)]
    assert gains == sorted(gains, reverse=True) and gains[0] > 1.3 and gains[-1] < 1.1


def test_a_draft_with_another_vocabulary_is_refused(tmp_path):
    spec = tmp_path / "w.yaml"
    spec.write_text("workloads:\n- name: w\n  kind: inference\n  model: {preset: llama-3.1-70b}\n"
                    "  serving: {speculative_draft: mistral-7b}\n")
    result = CliRunner().invoke(app, ["plan", str(spec)])
    assert result.exit_code == 2 and "serving.speculative_draft: mistral-7b has vocabulary 32,000" in result.output
    spec.write_text("workloads:\n- name: w\n  kind: inference\n  model: {preset: llama-3.1-70b}\n"
                    "  serving: {speculative_draft: tiny-llama}\n")
    result = CliRunner().invoke(app, ["plan", str(spec)])
    assert result.exit_code == 2 and "speculative_draft: unknown preset" in result.output


# --- Deployment of the new fleet ----------------------------------------------------------------------------

import copy  # noqa: E402

import botocore.session  # noqa: E402

from tests.pulumi_harness import run_program, stack_config  # noqa: E402


def test_sagemaker_hosting_matches_botocores_instance_type_enum():
    enum = set(botocore.session.get_session().get_service_model("sagemaker")
               .shape_for("ProductionVariantInstanceType").enum)
    for t in bundled().instance_types:
        assert t.sagemaker_hosting == (f"ml.{t.name}" in enum), t.name


def _deploy(instance_type: str, kind: str, region: str = "us-east-1", precision: str = "bf16"):
    cfg = copy.deepcopy(stack_config())
    cfg["aws:region"] = region
    if kind == "inference":
        w = {"name": "svc", "kind": "inference", "precision": precision, "model": {"preset": "llama-3.1-8b"},
             "serving": {"concurrent_requests": 4}, "constraints": {"instance_types": [instance_type]}}
        cfg["gpuplan:deployments"] = {"svc": {"modelDataUrl": "s3://my-models/llama/"}}
    else:
        w = {"name": "trn", "kind": "training", "model": {"preset": "llama-3.1-8b"}, "training": {"tokens": 1e9},
             "constraints": {"instance_types": [instance_type]}}
        cfg["gpuplan:deployments"] = {}
    cfg["gpuplan:workloads"] = [w]
    rec = run_program(cfg)
    return {str(v["instanceType"]) for r in rec.resources for v in r.inputs.get("productionVariants", [])} | \
        {str(r.inputs["instanceType"]) for r in rec.resources if "instanceType" in r.inputs}


@pytest.mark.parametrize("instance_type, kind, region, precision, expected", [
    ("p6-b200.48xlarge", "inference", "us-east-1", "bf16", "ml.p6-b200.48xlarge"),
    ("p6-b200.48xlarge", "training", "us-east-1", "bf16", "p6-b200.48xlarge"),
    ("p6-b300.48xlarge", "inference", "us-west-2", "bf16", "ml.p6-b300.48xlarge"),
    ("p6-b300.48xlarge", "training", "us-west-2", "bf16", "p6-b300.48xlarge"),
    ("g7e.2xlarge", "inference", "us-east-1", "bf16", "ml.g7e.2xlarge"),
    ("g7e.48xlarge", "training", "us-east-1", "bf16", "g7e.48xlarge"),
])
def test_each_priced_new_type_deploys_under_mocks(instance_type, kind, region, precision, expected):
    """g6f is left out: SageMaker has no ml.g6f and this program serves on SageMaker only; trn2 and the
    UltraServers carry no price, so nothing plans onto them without a catalog overlay."""
    assert expected in _deploy(instance_type, kind, region, precision)
