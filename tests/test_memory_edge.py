"""`constraints.confidence: likely` checks a training run's memory fit at the high edge of
memory.band (issue 25), and the plan says which edge decided."""

from __future__ import annotations

import pytest

from planner.physics.bands import memory_fit_factor, ratio_quantiles
from planner.workload.errors import InfeasibleError
from planner.pipeline import plan_workload
from tests.conftest import workload

LORA_8B = {"kind": "training", "model": {"preset": "llama-3.1-8b"},
           "training": {"tokens": 1e8, "method": "lora", "sequence_length": 4096, "activation_checkpointing": "none",
                        "global_batch_tokens": 4096 * 8},
           "layout": {"nodes": 1, "micro_batch": 1}, "constraints": {"instance_types": ["g6e.xlarge"]}}


def _spec(confidence: str, **training) -> dict:
    return {**LORA_8B, "training": {**LORA_8B["training"], **training},
            "constraints": {**LORA_8B["constraints"], "confidence": confidence}}


def test_fit_factor_is_the_high_edge_and_never_below_the_estimate():
    assert memory_fit_factor("gpu", "expected") == 1.0
    assert memory_fit_factor("gpu", "likely") == max(1.0, ratio_quantiles("gpu", "training peak memory")[1])
    # a LoRA or QLoRA run takes the adapter runs' class joined with full training's (tests/test_lora_memory.py):
    # never a lower edge than a full-training run's
    assert memory_fit_factor("gpu", "likely", adapters=True) >= memory_fit_factor("gpu", "likely")


def test_fits_at_the_estimate_but_not_at_the_high_edge(catalog):
    """LoRA on Llama 3.1 8B, one L40S, 4,096 tokens, no recompute: 38.2 GiB of 40.2 GiB usable fits the
    estimate; at the LoRA band's high edge (×q90) it does not, so `likely` refuses and says why."""
    expected = plan_workload(workload(**_spec("expected")), catalog)
    need, usable = expected.memory.required_per_device_bytes, expected.memory.usable_per_device_bytes
    assert need / 2**30 == pytest.approx(38.25, abs=0.01)
    assert need <= usable < need * memory_fit_factor("gpu", "likely", adapters=True)
    assert expected.memory.decided_at == "estimate"
    with pytest.raises(InfeasibleError) as err:
        plan_workload(workload(**_spec("likely")), catalog)
    factor = memory_fit_factor("gpu", "likely", adapters=True)
    assert f"needs {need * factor / 2**30:.1f} GiB per device" in str(err.value)
    assert f"(estimate × {factor:.2f}, the 80% band's high edge: confidence likely)" in str(err.value)


def test_likely_recomputes_to_fit_the_high_edge_and_says_so(catalog):
    likely = plan_workload(workload(**_spec("likely", activation_checkpointing="auto")), catalog)
    m = likely.memory
    assert likely.layout.activation_checkpointing != "none"
    assert m.required_per_device_bytes * memory_fit_factor("gpu", "likely", adapters=True) <= m.usable_per_device_bytes
    assert m.decided_at == "high edge of the 80% band (confidence: likely)"
