"""Issue 28 effects: an FP8 KV cache reaches the engine, a prefix-hit share removes prefill work."""

from __future__ import annotations

import pytest

from components import settings
from planner.search import plan_workload
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
    from planner.errors import InfeasibleError

    with pytest.raises(InfeasibleError) as err:
        _serve(catalog, engine="tensorrt-llm")
    assert "cannot be told to keep a fp8 KV cache" in str(err.value)
