"""Issue 25, training kernel stacks (training.kernels): the same layout runs faster on Transformer Engine's fused
kernels (Megatron-Core, NeMo) than on PyTorch modules with FlashAttention-2, on Hopper. Left out, NVIDIA's DGX Cloud
rows were predicted 20% slow and nanotron's 24% fast by one shared GEMM share (LOSO signed medians)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bench import kernel_check, reference_sources
from gpuplan.cli import app
from planner.physics import efficiency
from planner.physics.memory import TrainingSetup, training_model_states
from planner.physics.training_time import TrainingLayout, training_step, training_work
from planner.pipeline import plan_workload
from planner.workload.presets import presets
from tests.conftest import workload, write_yaml

runner = CliRunner()


@pytest.fixture(scope="module")
def h100(catalog):
    return catalog.accelerator("H100-80GB")


@pytest.fixture(scope="module")
def a100(catalog):
    return catalog.accelerator("A100-80GB")


def test_fused_linear_share_by_hand(h100, a100):
    """Hopper: the generation's share × FUSED_KERNELS_FACTOR, never past the measured roofs (0.70 BF16, 0.71 FP8);
    Ampere: no stack difference."""
    share = efficiency.gemm_efficiency(h100)
    assert efficiency.training_linear_efficiency(h100, "eager", "bf16") == share
    assert efficiency.training_linear_efficiency(h100, "fused", "bf16") == pytest.approx(
        min(share * efficiency.FUSED_KERNELS_FACTOR, 0.70))
    assert efficiency.training_linear_efficiency(h100, "fused", "fp8") == pytest.approx(min(
        share * efficiency.FUSED_KERNELS_FACTOR * efficiency.FP8_GEMM_EFFICIENCY_FACTOR, 0.71))
    assert efficiency.training_linear_efficiency(a100, "fused", "bf16") == efficiency.gemm_efficiency(a100)
    assert efficiency.training_linear_efficiency(a100, "fused", "bf16") == \
        efficiency.training_linear_efficiency(a100, "eager", "bf16")


def test_roofs_are_measured(catalog, h100):
    """BF16: the largest share under which every H100 BF16 reference row's layer GEMMs, after the planner's shape
    factor, run no faster than measured (0.705, rounded down); FP8: the 8192³ GEMM's share of FP8 peak."""
    data = kernel_check.run()
    square = data["square_tflops"]
    rows = [r for r in kernel_check.reference_layer_shapes(catalog) if r["accel"] == "H100-80GB" and r["prec"] == "bf16"]
    factors = kernel_check.row_layer_factors(data, rows)
    square_share = square["bf16-8192"] * 1e12 / h100.peak_flops("bf16")
    lowest = min(square_share * factors[r["id"]] / r["planner_factor"] for r in rows)
    assert lowest == pytest.approx(0.705, abs=0.001)
    assert efficiency.GEMM_KERNEL_ROOF["bf16"] == efficiency.GEMM_KERNEL_ROOF["fp16"] == 0.70 <= lowest
    assert efficiency.GEMM_KERNEL_ROOF["fp8"] == pytest.approx(square["fp8-8192"] * 1e12 / h100.peak_flops("fp8"),
                                                               abs=0.005)


def test_hopper_attention_is_the_measured_kernel(h100, a100):
    """FlashAttention-2 and cuDNN fused attention, fwd+bwd causal, medians of the eight measured shapes."""
    shares = kernel_check.attention_shares(kernel_check.run(), h100.peak_flops("bf16"))
    assert efficiency.HOPPER_ATTENTION_EFFICIENCY["eager"] == pytest.approx(shares["FLASH_ATTENTION"], abs=0.005)
    assert efficiency.HOPPER_ATTENTION_EFFICIENCY["fused"] == pytest.approx(shares["CUDNN_ATTENTION"], abs=0.005)
    assert efficiency.training_attention_efficiency(h100, "eager") == 0.24
    assert efficiency.training_attention_efficiency(a100, "eager") == efficiency.gemm_efficiency(a100)


def _step(catalog, instance_type: str, kernels: str, precision: str = "bf16"):
    """Llama 3 8B on one node at DP 8, ZeRO-1, micro-batch 1 × 16, sequence 8,192."""
    arch = presets()["llama-3-8b"]
    itype = catalog.instance(instance_type)
    accel = catalog.accelerator(itype.accelerator)
    setup = TrainingSetup("full", precision, "adamw", "auto", 16, 8192, kernels=kernels)
    state = sum(training_model_states(arch, setup, 1, 1, 8, 1))
    return training_step(arch, itype, accel, precision, 8192, TrainingLayout(1, 1, 8, 1, 1, 16, "selective"), state,
                         training_work(arch, setup))


def test_fused_steps_faster_on_hopper_only(catalog):
    """Llama 3 8B at 8k tokens on one p5: 0.44 MFU eager, 0.47 compiled, 0.63 fused (published: IBM FMS's compiled 7B
    FSDP on H100 0.45, NVIDIA DGX Cloud's 8B on NeMo 0.63): the fused step 1.37x faster since the non-GEMM traffic is
    measured, not fitted (Hopper's eager share 0.49 -> 0.53, FUSED_KERNELS_FACTOR 1.36 -> 1.26); 1.44x since collectives across nodes
    are measured and Hopper's eager GEMM share was refitted 0.58 -> 0.49 (FUSED_KERNELS_FACTOR 1.15 -> 1.36: the
    fused share moved less); 1.29x since the training fit weighs every source the same (FUSED_KERNELS_FACTOR 1.13 ->
    1.15; 1.25x before, 1.32x before the refit with measured all-reduce curves, 1.29x before the embedding-lookup
    refit); the same step on A100s either way."""
    eager, fused = _step(catalog, "p5.48xlarge", "eager"), _step(catalog, "p5.48xlarge", "fused")
    assert eager.step_time_s / fused.step_time_s == pytest.approx(1.37, abs=0.02)
    assert fused.model_flops_utilization < efficiency.GEMM_KERNEL_ROOF["bf16"]
    assert _step(catalog, "p4d.24xlarge", "eager").step_time_s == _step(catalog, "p4d.24xlarge", "fused").step_time_s


def test_reference_rows_carry_their_stack(catalog):
    """Megatron-Core and NeMo rows are fused, every other code base eager."""
    rows = {r["id"]: r for data in reference_sources.sources().values() for r in data["rows"]}
    assert reference_sources.kernels(rows["dgxc-l31-8b-pretrain-bf16-8gpu"]) == "fused"
    assert reference_sources.kernels(rows["mlm-weak-7p1b-96gpu"]) == "fused"
    assert reference_sources.kernels(rows["nanotron-8p86b-1node"]) == "eager"
    assert reference_sources.kernels(rows["fms-fsdp-7b-h100-96gpu"]) == "compiled"
    assert reference_sources.kernels(rows["tt-8b-8gpu-fsdp"]) == "eager"
    assert reference_sources.kernels(rows["tt-8b-8gpu-fsdp-compile"]) == "compiled"
    assert reference_sources.kernels(rows["torchtune-l32-3b-a100-packed"]) == "eager"
    assert reference_sources.kernels(rows["torchtune-l32-3b-a100-compile"]) == "compiled"
    row = reference_sources.resolved(rows["dgxc-l31-8b-pretrain-bf16-8gpu"])
    assert reference_sources.training_inputs(catalog, row)["setup"].kernels == "fused"


def test_plan_says_which_stack_and_fused_trains_sooner(catalog):
    spec = {"kind": "training", "model": {"preset": "llama-3-8b"}, "precision": "bf16",
            "training": {"tokens": 2e10, "sequence_length": 8192},
            "constraints": {"instance_types": ["p5.48xlarge"], "confidence": "expected"},
            "layout": {"nodes": 1, "tensor_parallel": 1, "pipeline_parallel": 1, "micro_batch": 1}}
    eager = plan_workload(workload(**spec), catalog)
    fused = plan_workload(workload(**{**spec, "training": {**spec["training"], "kernels": "fused"}}), catalog)
    assert (eager.training_kernels, fused.training_kernels) == ("eager", "fused")
    assert fused.performance.time_to_train_s < eager.performance.time_to_train_s / 1.15
    assert fused.cost.usd_per_training_run < eager.cost.usd_per_training_run


def test_cli_names_the_field_and_its_choices(tmp_path):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{
        "name": "t", "kind": "training", "model": {"preset": "llama-3-8b"},
        "training": {"tokens": 1e9, "kernels": "turbo"}}]})
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2
    assert "training.kernels" in result.output and "'eager', 'compiled' or 'fused'" in result.output
    assert "Traceback" not in result.output


def test_markdown_and_json_show_the_stack(tmp_path):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{
        "name": "t", "kind": "training", "model": {"preset": "llama-3-8b"}, "precision": "bf16",
        "training": {"tokens": 1e9, "kernels": "fused"}, "constraints": {"instance_types": ["p5.48xlarge"]}}]})
    markdown = runner.invoke(app, ["plan", str(path), "--format", "markdown"])
    assert markdown.exit_code == 0 and "full training, fused kernels" in markdown.output
    plan = json.loads(runner.invoke(app, ["plan", str(path), "--format", "json"]).output)
    assert plan["plans"][0]["training_kernels"] == "fused"


def test_compiled_stack_moves_no_elementwise_traffic(catalog):
    """torch.compile keeps the eager stack's GEMMs and FlashAttention-2 and fuses the elementwise kernels between
    them: the compiled step is the eager one less its non-GEMM time (COMPILED_NONMATMUL_SHARE of it kept), the same
    on Ampere and Hopper."""
    from planner.physics.training_time import step_parts
    arch, itype = presets()["llama-3-8b"], catalog.instance("p5.48xlarge")
    accel = catalog.accelerator(itype.accelerator)
    layout = TrainingLayout(1, 1, 8, 1, 1, 16, "selective")
    eager, compiled = (step_parts(arch, itype, accel, "bf16", 8192, layout, training_work(
        arch, TrainingSetup("full", "bf16", "adamw", "auto", 16, 8192, kernels=k))) for k in ("eager", "compiled"))
    assert compiled.matmul_s == eager.matmul_s
    assert compiled.nonmatmul_s == pytest.approx(eager.nonmatmul_s * efficiency.COMPILED_NONMATMUL_SHARE)
    # 204 B per token per hidden unit, 32 layers of 4,096, at 3.35 TB/s: 16 micro-batches of 8,192 tokens a device a
    # step
    assert eager.nonmatmul_s == pytest.approx(16 * 8192 * efficiency.NONMATMUL_BYTES_PER_TOKEN_HIDDEN * 32 * 4096
                                              / 3.35e12)
    assert _step(catalog, "p4d.24xlarge", "compiled").step_time_s < _step(catalog, "p4d.24xlarge", "eager").step_time_s


def test_published_compile_speedups_are_not_overstated(catalog):
    """torchtitan's Tables 1 and 3 (Llama 3.1 8B, FSDP on 8 and 128 H100s) ran the same layout eager and compiled:
    1.157x and 1.162x tokens/s. The planner's compiled step is 1.07x faster: the measured per-layer saving, less
    than the whole run gained (torchtune's 3B on one A100: 1.27x)."""
    rows = {r["id"]: r for r in reference_sources.sources()["torchtitan-benchmarks"]["rows"]}
    for eager_id in ("tt-8b-8gpu-fsdp", "tt-8b-128gpu-fsdp"):
        eager, compiled = rows[eager_id], rows[eager_id + "-compile"]
        published = compiled["tokens_per_s_per_gpu"] / eager["tokens_per_s_per_gpu"]
        predicted = (reference_sources.predict(catalog, {**compiled, "accelerator": "H100-SXM-80GB"})[2].tokens_per_s
                     / reference_sources.predict(catalog, {**eager, "accelerator": "H100-SXM-80GB"})[2].tokens_per_s)
        assert published == pytest.approx(1.16, abs=0.005)
        assert 1.03 < predicted < published


def test_a_row_states_its_own_network(catalog):
    """IBM's H100 cluster had 800 Gb/s between nodes, a p5 3,200: its FSDP rows are compared on their own network."""
    rows = {r["id"]: r for r in reference_sources.sources()["ibm-fms-fsdp-throughput"]["rows"]}
    row = rows["fms-fsdp-70b-h100-96gpu"]
    assert reference_sources.row_instance(catalog, row).inter_node_gbps == 800
    assert reference_sources.row_instance(catalog, {**row, "inter_node_gbps": None}).inter_node_gbps == 3200
    slow = reference_sources.predict(catalog, row)[2].tokens_per_s
    fast = reference_sources.predict(catalog, {**row, "inter_node_gbps": None})[2].tokens_per_s
    assert slow < fast
