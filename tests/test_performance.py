"""Performance estimators against published measurements (bench/data/reference.yaml, fitting and
checking halves) and against their physical roofs."""

from __future__ import annotations

import pytest

from bench.accuracy import TARGETS, median_errors
from bench.reference_cases import all_rows
from planner.efficiency import effective_bandwidth
from planner.performance import decode_step, prefill_s, serving_estimate
from planner.training_time import model_flops_per_token
from planner.units import GB


@pytest.fixture(scope="module")
def rows(catalog):
    return all_rows(catalog)


@pytest.mark.parametrize("platform,metric", [("gpu", "training TFLOP/s"), ("gpu", "serving tokens/s"), ("gpu", "ITL"),
                                             ("gpu", "TTFT"), ("neuron", "serving tokens/s"), ("neuron", "ITL")])
def test_checking_half_meets_the_target(rows, platform, metric):
    """Rows never fitted: the honest error (issue 9 targets for GPUs, issue 10 for Neuron)."""
    assert median_errors(rows)[(platform, metric, "check")] <= TARGETS[(platform, metric)]


@pytest.mark.parametrize("metric", ["TTFT", "training sequences/s"])
def test_neuron_errors_that_miss_the_target_are_what_the_readme_states(rows, metric):
    """Two Neuron metrics miss issue 10's 15% on the checking half, and the README says so (18%).
    TTFT: AWS's tables put Llama-2-13B 4,096-token prompts at 334 ms on inf2 and 864 ms on trn1 (the
    same NeuronCores), and 2,048-token 70B prompts at 2.9× the 1,024-token ones; no roofline gives both.
    Training: two checking rows, one (Llama-2-13B at PP 8) 31% high. This pins the stated figure."""
    assert median_errors(rows)[("neuron", metric, "check")] <= 0.18


def test_every_gpu_row_within_40_percent(rows):
    worst = max((r for r in rows if r.platform == "gpu"), key=lambda r: abs(r.error))
    assert abs(worst.error) < 0.40, worst


def test_unseen_fp8_training_row_within_10_percent(rows):
    """NeMo's Llama-3-70B FP8 on 64 H100 (checking half): linear GEMMs in FP8, attention in BF16."""
    row = next(r for r in rows if r.id == "N-70B-FP8")
    assert row.predicted == pytest.approx(row.measured, rel=0.10)


def test_decode_never_beats_the_bandwidth_roof(catalog, arch):
    a100 = catalog.accelerator("A100-80GB")
    llama = arch["llama-2-7b"]
    step = decode_step(llama, a100, "bf16", "fp16", 1, 1, 1, 100)
    roof_tokens_per_s = a100.memory_bandwidth_gb_s * GB / (llama.params * 2)
    assert 1 / step.seconds < roof_tokens_per_s
    assert step.bound == "memory-bandwidth"
    assert effective_bandwidth(a100, "bf16") < a100.memory_bandwidth_gb_s * GB


def test_large_batch_decode_becomes_compute_bound(catalog, arch):
    h100 = catalog.accelerator("H100-80GB")
    step = decode_step(arch["llama-3-8b"], h100, "bf16", "fp8", 1, 1, 2048, 600)
    assert step.bound == "compute"


def test_model_flops_per_token_palm_definition(arch):
    llama = arch["llama-2-7b"]
    assert model_flops_per_token(llama, 4096) == 6 * llama.params + 12 * 32 * 4096 * 4096


def test_pipeline_parallelism_does_not_split_one_prompt(catalog, arch):
    """Issue 9: llama-3.1-8b, 120k prompts: PP 3 looked like a TTFT cure (8.9 s vs 26 s at PP 1).
    Stages run one prompt in turn, so PP adds hops and saves nothing."""
    h100, itype = catalog.accelerator("H100-80GB"), catalog.instance("p5.48xlarge")
    one = prefill_s(arch["llama-3.1-8b"], h100, "bf16", 1, 1, 120_000, itype)
    three = prefill_s(arch["llama-3.1-8b"], h100, "bf16", 1, 3, 120_000, itype)
    assert three >= one
    assert prefill_s(arch["llama-3.1-8b"], h100, "bf16", 2, 1, 120_000, itype) < one  # TP does split it


def test_ttft_grows_with_the_queue_of_other_prompts(catalog, arch):
    h100 = catalog.accelerator("H100-80GB")
    alone = serving_estimate(arch["llama-3.1-70b"], h100, "fp8", "fp16", 2, 1, 1, 5000, 500)
    busy = serving_estimate(arch["llama-3.1-70b"], h100, "fp8", "fp16", 2, 1, 50, 5000, 500)
    assert busy.time_to_first_token_s > 1.5 * alone.time_to_first_token_s
    # closed loop: 50 clients each take TTFT + 499 ITLs per 500-token answer
    assert busy.output_tokens_per_s_per_replica == pytest.approx(
        50 * 500 / (busy.time_to_first_token_s + 499 * busy.inter_token_latency_s))
