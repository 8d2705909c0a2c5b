"""Performance estimators against their physical roofs (the published measurements: test_accuracy.py)."""

from __future__ import annotations

import pytest

from planner.physics.efficiency import effective_bandwidth
from planner.physics.performance import decode_step, prefill_s, serving_estimate
from planner.physics.training_time import model_flops_per_token
from planner.hardware.units import GB


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
