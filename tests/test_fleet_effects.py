"""Issue 28 effects: an FP8 KV cache reaches the engine, a prefix-hit share removes prefill work."""

from __future__ import annotations

import pytest

from components import settings
from planner.pipeline import plan_workload
from tests.conftest import workload


def _serve(catalog, engine="vllm", kv="fp8", **serving):
    return plan_workload(workload(kind="inference", model={"preset": "llama-3.1-8b"}, precision="bf16",
                                  serving={"engine": engine, "kv_cache_precision": kv, "concurrent_requests": 8,
                                           "max_context_tokens": 4096, "output_tokens": 256, **serving},
                                  constraints={"families": ["g6e", "p4de"]}), catalog)


@pytest.mark.parametrize("engine, name, value", [("vllm", "OPTION_KV_CACHE_DTYPE", "fp8"),
                                                 ("lmi", "OPTION_KV_CACHE_DTYPE", "fp8"),
                                                 ("tgi", "KV_CACHE_DTYPE", "fp8_e4m3fn")])
def test_fp8_kv_cache_reaches_the_engines_environment(catalog, engine, name, value):
    plan = _serve(catalog, engine)
    assert plan.model.kv_cache_precision == "fp8"
    env = settings.container_environment(plan, "meta-llama/Llama-3.1-8B-Instruct", 0.1, None, 256)
    assert env[name] == value
    style = settings.image_entry(plan)["style"]
    assert name in settings.engine_options()[style]["options"]


def test_a_16_bit_kv_cache_sets_nothing(catalog):
    env = settings.container_environment(_serve(catalog, kv="fp16"), None, 0.1)
    assert "OPTION_KV_CACHE_DTYPE" not in env


def test_an_engine_that_cannot_be_told_is_rejected(catalog):
    from planner.workload.errors import InfeasibleError

    with pytest.raises(InfeasibleError) as err:
        _serve(catalog, engine="tensorrt-llm")
    assert "cannot be told to keep a fp8 KV cache" in str(err.value)


def test_half_the_prompt_cached_lowers_ttft_at_long_prompts(catalog):
    """A 50 % prefix-hit share at 32k-token prompts halves the GEMM work and removes 3/4 of the causal
    attention work of the prefill: the first token comes well sooner (more than a third sooner here)."""
    # batch: the same layout either way, not one held to the interactive TTFT default (issue 27)
    long = {"max_context_tokens": 33000, "prompt_tokens": 32000, "output_tokens": 256, "concurrent_requests": 4,
            "mode": "batch"}

    def ttft(share):
        plan = plan_workload(workload(kind="inference", model={"preset": "llama-3.1-8b"},
                                      serving={**long, "prefix_hit_share": share},
                                      constraints={"instance_types": ["p5.4xlarge"], "deploy_target": "ec2"}), catalog)
        return plan.performance.time_to_first_token_s

    cold, warm = ttft(0.0), ttft(0.5)
    assert warm < 0.65 * cold


def test_prefill_removes_exactly_the_cached_work():
    from planner.hardware.catalog import bundled
    from planner.physics.performance import prefill_s
    from planner.workload.presets import presets

    cat = bundled()
    arch, accel = presets()["llama-3.1-8b"], cat.accelerator("H100-80GB")
    full = prefill_s(arch, accel, "bf16", 1, 1, 32000)
    half = prefill_s(arch, accel, "bf16", 1, 1, 32000, cached_tokens=16000)
    from planner.physics.prefill_compute import forward_gemm_factor

    from planner.physics import efficiency
    from planner.physics.elementwise import elementwise_bytes_per_token

    # the new tokens' GEMMs run at their own shape's rate (planner/physics/prefill_compute.py), attention at the share,
    # and each new token's norms, residual adds and activation stream through HBM (planner/physics/elementwise.py)
    # the input embedding is a lookup, not a GEMM; the LM head multiplies the prompt's last position only
    linear, head = 2 * (arch.matmul_params_per_token - arch.head_params), 2 * arch.head_params
    attention = 2 * arch.layers * arch.attention_heads * arch.head_dim
    shape = {t: forward_gemm_factor(arch, t, 1, accel, accel.peak_flops("bf16"), 2) for t in (16000, 32000)}
    rate = accel.peak_flops("bf16") * efficiency.prefill_efficiency(accel)
    per_token_s = elementwise_bytes_per_token(arch, 1, accel) / efficiency.effective_bandwidth(accel, "bf16")
    expected = ((((linear * 16000 + head) / shape[16000] + attention * (32000**2 - 16000**2)) / rate
                 + 16000 * per_token_s)
                / (((linear * 32000 + head) / shape[32000] + attention * 32000**2) / rate + 32000 * per_token_s))
    # compute-bound at 32k tokens: the weight stream, ~1/70 of the math, rounds the corner (efficiency.roofline_s) by
    # under 1e-5 of a part
    assert half / full == pytest.approx(expected, rel=1e-6)
