"""MoE decode pays its routed experts' grouped GEMMs on top of their weight stream (issue 25: every MoE source ran
slower than estimated). The share efficiency.MOE_GROUPED_GEMM_EFFICIENCY is measured on vLLM benchmark_latency runs
that are not reference rows (bench/moe_kernel_check.py), never fitted on the accuracy table's sources."""

from __future__ import annotations

import math

import pytest

from bench import moe_kernel_check
from planner.hardware.units import compute_precision
from planner.physics import efficiency
from planner.physics.expert_parallel import routed_active_params
from planner.physics.performance import decode_step
from planner.workload.presets import presets


def _expert_s(arch, accel, batch: int, tp: int, share: float) -> float:
    peak = accel.peak_flops(compute_precision("bf16", accel.supports.fp4))
    return batch * 2 * routed_active_params(arch) / tp / (peak * share)


def test_a_token_multiplies_k_of_the_routed_experts():
    mixtral = presets()["mixtral-8x7b"]
    # 2 of 8 SwiGLU experts of 3 x 4096 x 14336 in each of 32 layers
    assert routed_active_params(mixtral) == pytest.approx(2 * 3 * 4096 * 14336 * 32, rel=1e-3)
    assert routed_active_params(presets()["llama-3-8b"]) == 0.0


def test_the_expert_gemms_add_their_time_to_the_step_at_the_measured_share(catalog, monkeypatch):
    arch, a100 = presets()["mixtral-8x7b"], catalog.accelerator("A100-80GB")
    steps = {}
    for share in (0.5, 0.25):
        monkeypatch.setattr(efficiency, "MOE_GROUPED_GEMM_EFFICIENCY", share)
        steps[share] = decode_step(arch, a100, "bf16", "bf16", 2, 1, 32, 1025)
    # the rest of the step does not depend on the share: halving it adds exactly the experts' time once more
    assert steps[0.25].seconds - steps[0.5].seconds == pytest.approx(_expert_s(arch, a100, 32, 2, 0.5))
    assert steps[0.25].compute_s - steps[0.5].compute_s == pytest.approx(_expert_s(arch, a100, 32, 2, 0.5))


def test_a_dense_model_and_a_neuron_graph_pay_nothing_for_experts(catalog, monkeypatch):
    dense, h100 = presets()["llama-3-8b"], catalog.accelerator("H100-80GB")
    _, core = catalog.sharded(catalog.instance("inf2.48xlarge"))
    mixtral = presets()["mixtral-8x7b"]
    before = (decode_step(dense, h100, "bf16", "bf16", 1, 1, 64, 1024).seconds,
              decode_step(mixtral, core, "bf16", "bf16", 24, 1, 8, 1024).seconds)
    monkeypatch.setattr(efficiency, "MOE_GROUPED_GEMM_EFFICIENCY", 0.01)
    after = (decode_step(dense, h100, "bf16", "bf16", 1, 1, 64, 1024).seconds,
             decode_step(mixtral, core, "bf16", "bf16", 24, 1, 8, 1024).seconds)
    assert after == before


def test_the_committed_share_is_the_one_measured_on_the_kernel_runs(catalog):
    assert 0 < efficiency.MOE_GROUPED_GEMM_EFFICIENCY <= 1
    assert moe_kernel_check.measured_share(catalog) == efficiency.MOE_GROUPED_GEMM_EFFICIENCY


def test_the_fit_runs_growth_is_within_ten_percent_and_was_half_missing_without_it(catalog):
    fit = moe_kernel_check.growths(catalog, efficiency.MOE_GROUPED_GEMM_EFFICIENCY, "fit")
    assert len(fit) == 4 and max(abs(g.error) for g in fit) < 0.10
    without = moe_kernel_check.growths(catalog, moe_kernel_check.NO_EXPERT_COST, "fit")
    assert moe_kernel_check.median_abs_error(without) > 0.40


def test_the_check_runs_move_toward_what_was_measured(catalog):
    """Runs that took no part (Mixtral-8x7B at TP 2 on A100 and TP 8 on H100): every point's predicted growth moves
    toward the measured one, the median |error| 36.5% -> 31.2% at the share 0.21. Since a prompt's experts run as
    grouped GEMMs (tests/test_moe_prefill.py) the TP 2 run's growth, whose batches prefill 1,000-token prompts, is
    within 7% (5% before a prompt's LM head ran on its last position only and the refit that followed, 35.5% -> 30.2%
    then); the TP 8 one's stays 56-62% short (48.5% -> 43.2% before, 45.2% -> 39.9% before Hopper's
    prefill share was fitted on Hopper first tokens; 44.4% -> 39.5% at 0.23 before the stream's share and per-kernel
    cost were measured, 44.7% -> 39.6% at 0.22 before the refit that read LMDeploy's first tokens as TurboMind emits
    them); the rest of its growth is not explained."""
    at = moe_kernel_check.growths(catalog, efficiency.MOE_GROUPED_GEMM_EFFICIENCY, "check")
    without = moe_kernel_check.growths(catalog, moe_kernel_check.NO_EXPERT_COST, "check")
    assert len(at) == 6 and [g.batch for g in at] == [16, 32, 64, 16, 32, 64]
    assert all(abs(a.error) < abs(w.error) for a, w in zip(at, without))
    assert moe_kernel_check.median_abs_error(at) == pytest.approx(0.312, abs=0.002)
    assert moe_kernel_check.median_abs_error(without) == pytest.approx(0.365, abs=0.002)
    assert max(abs(g.error) for g in at[:3]) < 0.07
    assert all(-0.62 < g.error < -0.55 for g in at[3:])


def test_the_growth_is_counted_from_the_batch_that_touches_nine_in_ten_experts():
    by_model = {r["model"]: moe_kernel_check.base_batch(r) for r in moe_kernel_check.runs()}
    assert by_model == {"mixtral-8x22b": 8, "mixtral-8x7b": 8}
    assert math.isinf(moe_kernel_check.NO_EXPERT_COST)


def test_attention_data_parallel_pays_the_same_expert_gemms_spread_over_its_ranks(catalog, monkeypatch):
    """DeepSeek-R1 at DP attention over 8 H200s: the experts' work on all 64 tokens is spread evenly over the ranks,
    so halving the share adds exactly one more 64/8 tokens' grouped GEMMs, as it does for the TP path."""
    from planner.physics import attention_dp

    r1, p5en = presets()["deepseek-r1"], catalog.instance("p5en.48xlarge")
    h200 = catalog.accelerator(p5en.accelerator)
    steps = {}
    for share in (0.5, 0.25):
        monkeypatch.setattr(efficiency, "MOE_GROUPED_GEMM_EFFICIENCY", share)
        steps[share] = attention_dp.decode_step(r1, h200, "fp8", "fp16", 8, 64, 2250, p5en)
    peak = h200.peak_flops(compute_precision("fp8", h200.supports.fp4))
    one = 64 / 8 * 2 * routed_active_params(r1) / (peak * 0.5)
    assert steps[0.25].seconds - steps[0.5].seconds == pytest.approx(one)
    assert steps[0.25].compute_s - steps[0.5].compute_s == pytest.approx(one)
