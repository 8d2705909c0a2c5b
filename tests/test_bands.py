"""Every prediction carries its 80% band from unseen sources, and `constraints.confidence: likely`
checks deadlines and latency targets at the band's slow edge (planner/physics/bands.py)."""

from __future__ import annotations

import pytest

from planner.physics.bands import ratio_quantiles, slow_edge, slow_factor
from planner.workload.errors import SpecError
from planner.report.markdown import performance_lines
from planner.pipeline import plan_workload
from tests.conftest import workload

TRAIN = {"kind": "training", "model": {"preset": "llama-3.1-8b"}, "training": {"tokens": 2.0e10},
         "constraints": {"families": ["p5"], "confidence": "expected"}}
SERVE = {"kind": "inference", "model": {"preset": "llama-3.1-8b"},
         "serving": {"prompt_tokens": 512, "output_tokens": 256, "concurrent_requests": 16},
         "constraints": {"instance_types": ["g6e.xlarge"], "confidence": "expected"}}


def _with(base: dict, section: str, **fields) -> dict:
    return {**base, section: {**base[section], **fields}}


def test_training_band_is_the_loso_deciles_of_its_class(catalog):
    perf = plan_workload(workload(**TRAIN), catalog).performance
    q10, q90 = ratio_quantiles("gpu", "training TFLOP/s")
    assert perf.band["achieved_tflops_per_device"] == pytest.approx([perf.achieved_tflops_per_device * q10,
                                                                    perf.achieved_tflops_per_device * q90])
    assert perf.band["time_to_train_s"] == pytest.approx([perf.time_to_train_s / q90, perf.time_to_train_s / q10])
    assert perf.decided_at == "estimate"


def test_memory_band_is_the_published_peaks_over_the_prediction(catalog):
    memory = plan_workload(workload(**TRAIN), catalog).memory
    q10, q90 = ratio_quantiles("gpu", "training peak memory")
    assert memory.band["required_bytes"] == pytest.approx([memory.required_per_device_bytes * q10,
                                                          memory.required_per_device_bytes * q90])
    assert ratio_quantiles("neuron", "training peak memory") is None  # no Neuron peak published: no band


def test_serving_band_and_the_rendered_interval(catalog):
    plan = plan_workload(workload(**SERVE), catalog)
    perf = plan.performance
    q10, q90 = ratio_quantiles("gpu", "ITL")
    assert perf.band["inter_token_latency_s"] == pytest.approx([perf.inter_token_latency_s * q10,
                                                               perf.inter_token_latency_s * q90])
    low, high = perf.band["inter_token_latency_s"]
    assert f"inter-token latency {perf.inter_token_latency_s * 1e3:,.1f} ms ({low * 1e3:,.1f}–{high * 1e3:,.1f} ms)" \
        in performance_lines(plan)[1]


def test_likely_deadline_holds_at_the_slow_edge(catalog):
    """A deadline between the estimate and the band's slow edge: `expected` meets it on the layout
    the estimate says is fast enough; `likely` must buy a faster one, and says which edge decided."""
    base = plan_workload(workload(**TRAIN), catalog).performance.wall_clock_s
    slow = slow_factor("gpu", "training", "likely")
    assert slow > 1.05
    deadline_h = base * (1 + slow) / 2 / 3600
    expected = plan_workload(workload(**_with(TRAIN, "training", deadline_hours=deadline_h)), catalog)
    likely_spec = _with(_with(TRAIN, "training", deadline_hours=deadline_h), "constraints", confidence="likely")
    likely = plan_workload(workload(**likely_spec), catalog)
    assert expected.performance.wall_clock_s == pytest.approx(base)
    assert likely.performance.wall_clock_s * slow <= deadline_h * 3600 < base * slow
    assert likely.choice.nodes > expected.choice.nodes
    assert likely.performance.decided_at.startswith("slow edge")


def test_likely_latency_target_buys_headroom_the_estimate_does_not(catalog):
    ttft_s = plan_workload(workload(**SERVE), catalog).performance.time_to_first_token_s
    slow_ms = slow_edge("gpu", "TTFT", "likely", ttft_s) * 1e3
    assert slow_ms > ttft_s * 1e3 * 1.05
    target = (ttft_s * 1e3 + slow_ms) / 2
    expected = plan_workload(workload(**_with(SERVE, "serving", max_time_to_first_token_ms=target)), catalog)
    likely = plan_workload(workload(**_with(_with(SERVE, "serving", max_time_to_first_token_ms=target),
                                            "constraints", confidence="likely")), catalog)
    assert expected.performance.time_to_first_token_s * 1e3 <= target
    assert slow_edge("gpu", "TTFT", "likely", likely.performance.time_to_first_token_s) * 1e3 <= target
    assert likely.choice.nodes > expected.choice.nodes
    assert likely.performance.decided_at.startswith("slow edge")


def test_confidence_is_checked_at_the_boundary():
    with pytest.raises(SpecError, match="confidence"):
        workload(**_with(TRAIN, "constraints", confidence="sure"))
