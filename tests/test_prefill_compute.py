"""Issue 25, GPU prefill: training's GEMM share per generation at prefill's own shapes (TTFT)."""

from __future__ import annotations

import pytest

from bench import calibrate
from bench.reference_cases import _serving_rows, all_rows, Row
from bench import reference_serving
from planner.hardware.catalog import bundled
from planner.physics import efficiency
from planner.physics.performance import prefill_s
from planner.physics.prefill_compute import forward_gemm_factor, prefill_compute_s
from planner.workload.presets import presets


@pytest.fixture
def catalog():
    return bundled()


def _ttft(catalog, row_id: str) -> Row:
    rows = [r for r in _serving_rows(catalog) + reference_serving.serving_rows(catalog, Row)
            if r.id == row_id and r.metric == "TTFT"]
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize(("row_id", "bound"), [
    ("NIM-70B/c1", 0.20),  # 5,000-token prompt, 70B FP8 TP 2 on H100: was 35% fast
    # 500-token prompt: was 32% fast; +38% slow at the fourth issue-25 refit, whose per-request overhead
    # (REQUEST_OVERHEAD_S, 23 ms) is half of this 48 ms first token
    ("NIM-70B/short-c1", 0.40),
    ("lmdeploy-a100-llama-2-7b-tp1-bs1-2048-128", 0.15),  # was 18.5% fast
    ("lmdeploy-a100-llama-2-70b-tp4-bs1-2048-128", 0.15),  # was 22.1% fast
])
def test_long_prompt_ttft_on_gpus_is_near_the_published(catalog, row_id, bound):
    """A single prefill share of peak for every GPU generation put H100 prefill at A100's share."""
    assert abs(_ttft(catalog, row_id).error) < bound


def test_prefill_runs_at_the_generations_gemm_share_times_its_shape(catalog, monkeypatch):
    monkeypatch.setattr(efficiency, "PREFILL_EFFICIENCY_BY_GENERATION", {"8": 0.8, "9": 0.5})
    arch = presets()["llama-3-8b"]
    for name, share in (("A100-80GB", 0.8), ("H100-80GB", 0.5)):
        accel = catalog.accelerator(name)
        peak = accel.peak_flops("bf16")
        shape = forward_gemm_factor(arch, 4096, 2, accel, peak, 2)
        got = prefill_compute_s(arch, accel, "bf16", 2, 4096, 6e13, 4e12)
        assert got == pytest.approx(6e13 / 2 / (peak * share * shape) + 4e12 / 2 / (peak * share))


def test_fp8_prefill_keeps_attention_in_16_bit(catalog, monkeypatch):
    monkeypatch.setattr(efficiency, "FP8_GEMM_EFFICIENCY_FACTOR", 1.0)
    h100, arch = catalog.accelerator("H100-80GB"), presets()["llama-3-8b"]
    attention_only = prefill_compute_s(arch, h100, "fp8", 1, 4096, 0.0, 1e13)
    assert attention_only == pytest.approx(1e13 / (h100.peak_flops("bf16") * efficiency.prefill_efficiency(h100)))


def test_short_prompts_lose_to_the_hbm_roof_and_the_last_wave(catalog):
    arch, a100 = presets()["llama-2-7b"], catalog.accelerator("A100-80GB")
    peak = a100.peak_flops("bf16")
    factors = [forward_gemm_factor(arch, t, 1, a100, peak, 2) for t in (16, 128, 2048)]
    assert factors[0] < factors[1] < factors[2] <= 1.0
    # 16 tokens: at most the HBM roof's share, 2·16 FLOP per 2-byte weight element read
    assert factors[0] <= 16 / (peak / (a100.memory_bandwidth_gb_s * 1e9))


@pytest.mark.parametrize("name", ["A10G", "A100-80GB", "H100-80GB", "H200-141GB", "L4", "B200"])
def test_prefill_is_never_faster_than_the_peak(catalog, name):
    accel, arch = catalog.accelerator(name), presets()["llama-3-8b"]
    for tokens in (1, 37, 128, 550, 2048, 8192):
        flops = 2 * arch.params_per_token * tokens
        for precision in ("bf16", "int4") + (("fp8",) if accel.supports.fp8 else ()):
            assert prefill_s(arch, accel, precision, 1, 1, tokens) >= flops / accel.peak_flops(
                "fp8" if precision == "fp8" else "bf16")


def test_prompt_queueing_is_a_closed_loop_with_no_fitted_constant():
    """The wait before a prefill is mean-value analysis of the closed loop (planner/physics/closed_loop.py):
    no arrival-variability constant for the TTFT rows to tune."""
    assert not hasattr(efficiency, "PROMPT_ARRIVAL_VARIABILITY")
    assert not any("ARRIVAL" in name for name in calibrate.ALL_PARAMETERS)


def test_serving_constants_leave_training_alone(catalog, monkeypatch):
    """Prefill's share is a table of its own: changing it moves no training row."""
    before = [r.predicted for r in all_rows(catalog, "gpu") if r.metric == "training TFLOP/s"]
    monkeypatch.setattr(efficiency, "PREFILL_EFFICIENCY_BY_GENERATION", {"8": 0.3, "9": 0.3})
    assert [r.predicted for r in all_rows(catalog, "gpu") if r.metric == "training TFLOP/s"] == before
    assert _ttft(catalog, "NIM-70B/c1").error > 0.3


def test_a_generation_without_a_prefill_share_takes_its_training_gemm_share(catalog, monkeypatch):
    """Blackwell (and Turing) have no first token in a fit: prefill runs a training forward's GEMMs, so such a part
    prefills at its generation's training GEMM share (the lowest fitted, Hopper's eager one, at B200's measured share of its peak), the prior the
    prefill table started from. Before the eighth session it took the lowest prefill share, which moved B200's
    prefill with every refit of Hopper's (0.47 -> 0.65 would have taken its held-out tokens/s 9.0% -> 16.9%)."""
    b200, h100 = catalog.accelerator("B200"), catalog.accelerator("H100-80GB")
    training = efficiency.GEMM_EFFICIENCY_BY_GENERATION["9"] * 0.75 / 0.80  # at its measured share of its peak
    assert efficiency.prefill_efficiency(b200) == efficiency.gemm_efficiency(b200) == pytest.approx(training)
    monkeypatch.setitem(efficiency.PREFILL_EFFICIENCY_BY_GENERATION, "9", 0.31)
    assert efficiency.prefill_efficiency(h100) == 0.31
    assert efficiency.prefill_efficiency(b200) == pytest.approx(training)


def test_hoppers_fp8_prefill_runs_at_the_measured_fp8_over_bf16_share(catalog):
    """One H100's 8192³ GEMMs: FP8 0.71 of its peak, BF16 0.79 of its (bench/kernel_check.py): 0.90. Ada keeps the
    training fit's 1.14 (its one check, the sweep's L40S FP8 first tokens, +11% at 1.14 and +23% at 0.90); Blackwell
    takes the lowest (Hopper's measured one); a 16-bit prefill has no factor."""
    arch = presets()["llama-3-8b"]
    assert efficiency.prefill_fp8_factor(catalog.accelerator("H100-80GB")) == 0.9
    assert efficiency.prefill_fp8_factor(catalog.accelerator("H200-141GB")) == 0.9
    assert efficiency.prefill_fp8_factor(catalog.accelerator("L40S")) == 1.14
    assert efficiency.prefill_fp8_factor(catalog.accelerator("B200")) == 0.9
    h100 = catalog.accelerator("H100-80GB")
    shape = forward_gemm_factor(arch, 4096, 1, h100, h100.peak_flops("fp8"), 1.0)
    linear_only = prefill_compute_s(arch, h100, "fp8", 1, 4096, 6e13, 0.0)
    share = efficiency.prefill_efficiency(h100)
    assert linear_only == pytest.approx(6e13 / (h100.peak_flops("fp8") * share * shape * 0.9))
