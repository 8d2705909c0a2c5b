"""Issue 28: the policy pack sizes the KV cache from the engine's own environment (OPTION_KV_CACHE_DTYPE
for LMI/vLLM, KV_CACHE_DTYPE for TGI), not from the gpuplan:serving tag's kv= value."""

from __future__ import annotations

from policies.facts import serving_facts
from tests.test_policies import mandatory, named, sign, stack


def _found(resources) -> list[str]:
    return [m for p, r, m in mandatory(resources) if p == "accelerator-memory-fits" and r == "chat-70b-config"]


def test_a_kv_fp8_tag_without_the_engine_variable_is_sized_at_16_bits():
    resources = stack()
    config = named(resources, "chat-70b-config")
    config.props["tags"] = sign({**config.props["tags"], "gpuplan:serving": "ctx=8192 kv=fp8 engine=vllm"})
    found = _found(resources)
    assert any("tag gpuplan:serving says kv=fp8 but the engine's KV cache is fp16" in m for m in found), found


def test_the_engine_variable_is_the_fact():
    resources = stack()
    env = named(resources, "chat-70b-model").props["primaryContainer"]["environment"]
    env["OPTION_KV_CACHE_DTYPE"] = "fp8"
    found = _found(resources)
    assert any("tag gpuplan:serving says kv=fp16 but the engine's KV cache is fp8" in m for m in found), found


def test_kv_dtype_values_map_to_precisions():
    assert serving_facts({"OPTION_KV_CACHE_DTYPE": "fp8"}).kv_cache_precision == "fp8"
    assert serving_facts({"KV_CACHE_DTYPE": "fp8_e4m3fn"}).kv_cache_precision == "fp8"
    assert serving_facts({"OPTION_KV_CACHE_DTYPE": "auto"}).kv_cache_precision is None
    assert serving_facts({}).kv_cache_precision is None
    bad = serving_facts({"OPTION_KV_CACHE_DTYPE": "int2"})
    assert bad.kv_cache_precision is None
    assert bad.problems == ("OPTION_KV_CACHE_DTYPE='int2' is not a KV cache dtype the engines document "
                            "(auto, fp8, fp8_e4m3, fp8_e5m2, fp8_e4m3fn)",)
