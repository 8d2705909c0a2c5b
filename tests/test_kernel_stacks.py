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
    """Llama 3 8B at 8k tokens on one p5: 0.49 MFU eager, 0.63 fused (published: IBM FMS's 7B FSDP on H100 0.45,
    NVIDIA DGX Cloud's 8B on NeMo 0.63): the fused step 1.29x faster since the training fit weighs every source the
    same (FUSED_KERNELS_FACTOR 1.13 -> 1.15; 1.25x before, 1.32x before the refit with measured all-reduce
    curves, FUSED_KERNELS_FACTOR 1.23 -> 1.13; 1.29x before the embedding-lookup refit); the
    same step on A100s either way."""
    eager, fused = _step(catalog, "p5.48xlarge", "eager"), _step(catalog, "p5.48xlarge", "fused")
    assert eager.step_time_s / fused.step_time_s == pytest.approx(1.29, abs=0.02)
    assert fused.model_flops_utilization < efficiency.GEMM_KERNEL_ROOF["bf16"]
    assert _step(catalog, "p4d.24xlarge", "eager").step_time_s == _step(catalog, "p4d.24xlarge", "fused").step_time_s


def test_reference_rows_carry_their_stack(catalog):
    """Megatron-Core and NeMo rows are fused, every other code base eager."""
    rows = {r["id"]: r for data in reference_sources.sources().values() for r in data["rows"]}
    assert reference_sources.kernels(rows["dgxc-l31-8b-pretrain-bf16-8gpu"]) == "fused"
    assert reference_sources.kernels(rows["mlm-weak-7p1b-96gpu"]) == "fused"
    assert reference_sources.kernels(rows["nanotron-8p86b-1node"]) == "eager"
    assert reference_sources.kernels(rows["fms-fsdp-7b-h100-96gpu"]) == "eager"
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
    assert "training.kernels" in result.output and "'eager' or 'fused'" in result.output
    assert "Traceback" not in result.output


def test_markdown_and_json_show_the_stack(tmp_path):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{
        "name": "t", "kind": "training", "model": {"preset": "llama-3-8b"}, "precision": "bf16",
        "training": {"tokens": 1e9, "kernels": "fused"}, "constraints": {"instance_types": ["p5.48xlarge"]}}]})
    markdown = runner.invoke(app, ["plan", str(path), "--format", "markdown"])
    assert markdown.exit_code == 0 and "full training, fused kernels" in markdown.output
    plan = json.loads(runner.invoke(app, ["plan", str(path), "--format", "json"]).output)
    assert plan["plans"][0]["training_kernels"] == "fused"
