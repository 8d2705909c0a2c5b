"""Performance estimators against published measurements (reference-public.md A3, A9, D5)
and against their physical roofs."""

from __future__ import annotations

import statistics

import pytest

from bench.reference_cases import DECODE_CASES, TRAINING_CASES, predict_decode, predict_training
from planner.performance import decode_step, effective_bandwidth, model_flops_per_token
from planner.units import GB


@pytest.mark.parametrize("case", DECODE_CASES, ids=lambda c: c.id)
def test_batch1_decode_within_30_percent(catalog, case):
    predicted = predict_decode(catalog, case)
    assert predicted == pytest.approx(case.measured, rel=0.30)


def test_decode_median_error_under_20_percent(catalog):
    errors = [abs(predict_decode(catalog, c) / c.measured - 1) for c in DECODE_CASES]
    assert statistics.median(errors) < 0.20


@pytest.mark.parametrize("case", TRAINING_CASES, ids=lambda c: c.id)
def test_training_mfu_within_50_percent(catalog, case):
    assert predict_training(catalog, case) == pytest.approx(case.measured, rel=0.50)


def test_training_median_error_under_10_percent(catalog):
    errors = [abs(predict_training(catalog, c) / c.measured - 1) for c in TRAINING_CASES]
    assert statistics.median(errors) < 0.10


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
