"""Issue 28: the models of 2025-26 (parameter counts from each config.json, MLA KV cache) and the new fleet
(Blackwell, Trainium2, g6f, g7e) in the catalog and in plans."""

from __future__ import annotations

import pytest

from planner.physics.memory import inference_memory, kv_bytes_per_sequence, kv_bytes_per_token
from planner.workload.presets import presets
from planner.pipeline import plan_workload
from planner.hardware.units import GIB, MXFP4_BYTES_PER_PARAM, NVFP4_BYTES_PER_PARAM
from tests.conftest import workload


# ---- parameter totals from the published config.json fields (the arithmetic, per architecture family) ----

def llama_dense(c):
    h, L, v = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    hd = c.get("head_dim") or h // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    attn = h * q + 2 * h * kv + q * h + (2 * hd if c.get("qk_norm") else 0)
    mlp = 3 * h * c["intermediate_size"]
    emb = v * h * (1 if c.get("tie_word_embeddings") else 2)
    return L * (attn + mlp + 2 * h) + emb + h

def qwen3_moe(c, active=False):
    h, L, v = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    hd = c["head_dim"]; q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    attn = h * q + 2 * h * kv + q * h + 2 * hd
    e = c["num_experts_per_tok"] if active else c["num_experts"]
    moe = e * 3 * h * c["moe_intermediate_size"] + c["num_experts"] * h
    return L * (attn + moe + 2 * h) + v * h * 2 + h

def gpt_oss(c, active=False):
    h, L, v, hd = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    attn = (h * q + q) + 2 * (h * kv + kv) + (q * h + h) + c["num_attention_heads"]  # biases, sinks
    f = c["intermediate_size"]
    e = c["experts_per_token"] if active else c["num_local_experts"]
    expert = h * 2 * f + 2 * f + f * h + h  # gate_up (fused) + bias, down + bias
    moe = e * expert + c["num_local_experts"] * h + c["num_local_experts"]  # router weight + bias
    return L * (attn + moe + 2 * h) + v * h * 2 + h

def deepseek_v3(c, active=False):
    h, L, v, H = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["num_attention_heads"]
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    attn = (h * c["q_lora_rank"] + c["q_lora_rank"] + c["q_lora_rank"] * H * qk
            + h * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) + c["kv_lora_rank"]
            + c["kv_lora_rank"] * H * (c["qk_nope_head_dim"] + c["v_head_dim"]) + H * c["v_head_dim"] * h)
    dense = 3 * h * c["intermediate_size"]
    e = c["num_experts_per_tok"] if active else c["n_routed_experts"]
    moe = (e + c["n_shared_experts"]) * 3 * h * c["moe_intermediate_size"] + c["n_routed_experts"] * (h + 1)
    k = c["first_k_dense_replace"]
    return k * (attn + dense + 2 * h) + (L - k) * (attn + moe + 2 * h) + v * h * 2 + h

def llama4_text(c, active=False):
    h, L, v, hd = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    attn = h * q + 2 * h * kv + q * h
    step = c["interleave_moe_layer_step"]
    moe_layers = L // step
    e = c["num_experts_per_tok"] if active else c["num_local_experts"]
    moe = (e + 1) * 3 * h * c["intermediate_size"] + c["num_local_experts"] * h  # routed + shared + router
    dense = 3 * h * c["intermediate_size_mlp"]
    return L * (attn + 2 * h) + moe_layers * moe + (L - moe_layers) * dense + v * h * 2 + h

CONFIGS = {
 "llama-3.3-70b": (llama_dense, dict(hidden_size=8192, num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8, intermediate_size=28672, vocab_size=128256)),
 "qwen3-8b": (llama_dense, dict(hidden_size=4096, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=12288, vocab_size=151936, qk_norm=True)),
 "qwen3-32b": (llama_dense, dict(hidden_size=5120, num_hidden_layers=64, num_attention_heads=64, num_key_value_heads=8, head_dim=128, intermediate_size=25600, vocab_size=151936, qk_norm=True)),
 "mistral-small-3": (llama_dense, dict(hidden_size=5120, num_hidden_layers=40, num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=32768, vocab_size=131072)),
 "gemma-3-27b": (llama_dense, dict(hidden_size=5376, num_hidden_layers=62, num_attention_heads=32, num_key_value_heads=16, head_dim=128, intermediate_size=21504, vocab_size=262208, tie_word_embeddings=True, qk_norm=True)),
 "qwen3-30b-a3b": (qwen3_moe, dict(hidden_size=2048, num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128, moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8, vocab_size=151936)),
 "qwen3-235b-a22b": (qwen3_moe, dict(hidden_size=4096, num_hidden_layers=94, num_attention_heads=64, num_key_value_heads=4, head_dim=128, moe_intermediate_size=1536, num_experts=128, num_experts_per_tok=8, vocab_size=151936)),
 "gpt-oss-120b": (gpt_oss, dict(hidden_size=2880, num_hidden_layers=36, num_attention_heads=64, num_key_value_heads=8, head_dim=64, intermediate_size=2880, num_local_experts=128, experts_per_token=4, vocab_size=201088)),
 "gpt-oss-20b": (gpt_oss, dict(hidden_size=2880, num_hidden_layers=24, num_attention_heads=64, num_key_value_heads=8, head_dim=64, intermediate_size=2880, num_local_experts=32, experts_per_token=4, vocab_size=201088)),
 "deepseek-v3": (deepseek_v3, dict(hidden_size=7168, num_hidden_layers=61, num_attention_heads=128, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, intermediate_size=18432, moe_intermediate_size=2048, n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8, first_k_dense_replace=3, vocab_size=129280)),
 "llama-4-scout": (llama4_text, dict(hidden_size=5120, num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128, intermediate_size=8192, intermediate_size_mlp=16384, num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=1, vocab_size=202048)),
 "llama-4-maverick": (llama4_text, dict(hidden_size=5120, num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128, intermediate_size=8192, intermediate_size_mlp=16384, num_local_experts=128, num_experts_per_tok=1, interleave_moe_layer_step=2, vocab_size=202048)),
}
ACTIVE = {"qwen3_moe", "gpt_oss", "deepseek_v3", "llama4_text"}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_params_follow_the_published_config(name):
    count, config = CONFIGS[name]
    arch = presets()[name]
    assert arch.params == count(config)
    if count.__name__ in ACTIVE:
        assert arch.active_params == count(config, active=True)


def test_totals_match_the_published_headline_figures():
    """The config arithmetic lands on each vendor's own total: DeepSeek-V3 671B (report §1, MTP excluded),
    gpt-oss-120b 116.83B and 20.91B (model card Table 1), Qwen3-235B-A22B, Llama 4 Maverick 400B."""
    p = presets()
    assert p["deepseek-v3"].params == 671_026_419_200
    assert round(p["gpt-oss-120b"].params / 1e9, 2) == 116.83
    assert round(p["gpt-oss-20b"].params / 1e9, 2) == 20.91
    assert round(p["qwen3-235b-a22b"].params / 1e9) == 235 and round(p["qwen3-235b-a22b"].active_params / 1e9) == 22
    assert round(p["llama-4-maverick"].params / 1e9) == 401 and round(p["llama-4-maverick"].active_params / 1e9) == 17
    assert p["deepseek-r1"].params == p["deepseek-v3"].params


def test_deepseek_v3_kv_bytes_per_token_follow_mla():
    """MLA caches kv_lora_rank + qk_rope_head_dim = 512 + 64 values per layer per token, not
    2 × 128 heads × 128 = 32,768: 61 × 576 × 2 B = 70,272 B at bf16, 57× less than MHA would."""
    arch = presets()["deepseek-v3"]
    assert kv_bytes_per_token(arch, "bf16") == 61 * (512 + 64) * 2 == 70_272
    assert kv_bytes_per_token(arch, "fp8") == 35_136
    assert kv_bytes_per_sequence(arch, 1000, "bf16") == 70_272_000


def test_mla_latent_cache_is_replicated_on_every_tp_rank():
    arch = presets()["deepseek-v3"]
    one = inference_memory(arch, "fp8", "bf16", 1, 1, 4, 8192).kv_cache
    eight = inference_memory(arch, "fp8", "bf16", 8, 1, 4, 8192).kv_cache
    assert eight == one == 4 * 8192 * 70_272


def test_sliding_window_patterns_cap_the_local_layers():
    """gpt-oss alternates 128-token windows with global layers (18 of 36 windowed); Gemma 3 has five
    1,024-token local layers per global one (52 of 62)."""
    oss = presets()["gpt-oss-120b"]
    assert kv_bytes_per_sequence(oss, 8192, "bf16") == 2 * 8 * 64 * 2 * (18 * 8192 + 18 * 128)
    gemma = presets()["gemma-3-27b"]
    assert kv_bytes_per_sequence(gemma, 32768, "bf16") == 2 * 16 * 128 * 2 * (10 * 32768 + 52 * 1024)


def test_fp4_formats_carry_their_block_scales():
    assert MXFP4_BYTES_PER_PARAM == 4.25 / 8  # E2M1 + one E8M0 scale per 32
    assert NVFP4_BYTES_PER_PARAM == 4.5 / 8  # E2M1 + one E4M3 scale per 16


def test_new_models_are_listed(cli_runner=None):
    from typer.testing import CliRunner

    from gpuplan.cli import app

    out = CliRunner().invoke(app, ["models"])
    assert out.exit_code == 0
    for name in CONFIGS:
        assert name in out.output
    assert "deepseek-r1" in out.output


SERVE = {"max_context_tokens": 8192, "prompt_tokens": 1024, "output_tokens": 256, "concurrent_requests": 4}


def _plan(catalog, preset, precision, types, **constraints):
    return plan_workload(workload(kind="inference", model={"preset": preset}, precision=precision, serving=SERVE,
                                  constraints={"instance_types": types, "deploy_target": "ec2", **constraints}),
                         catalog)


def test_gpt_oss_120b_mxfp4_plans_on_one_80gb_h100(catalog):
    plan = _plan(catalog, "gpt-oss-120b", "mxfp4", ["p5.4xlarge"])
    assert (plan.choice.instance_type, plan.choice.nodes, plan.layout.tensor_parallel) == ("p5.4xlarge", 1, 1)
    assert plan.memory.per_device_bytes["weights"] < 64 * GIB


@pytest.mark.parametrize("itype", ["p6-b200.48xlarge", "p5.48xlarge"])
def test_llama_405b_fp8_plans_on_one_eight_gpu_node(catalog, itype):
    plan = _plan(catalog, "llama-3.1-405b", "fp8", [itype])
    assert (plan.choice.instance_type, plan.choice.nodes, plan.layout.tensor_parallel) == (itype, 1, 8)


def test_blackwell_serves_405b_faster_than_hopper(catalog):
    b200 = _plan(catalog, "llama-3.1-405b", "fp8", ["p6-b200.48xlarge"])
    h100 = _plan(catalog, "llama-3.1-405b", "fp8", ["p5.48xlarge"])
    assert b200.performance.inter_token_latency_s < h100.performance.inter_token_latency_s


def test_deepseek_r1_plans_on_one_p5en(catalog):
    plan = _plan(catalog, "deepseek-r1", "fp8", ["p5en.48xlarge"])
    assert (plan.choice.instance_type, plan.choice.nodes) == ("p5en.48xlarge", 1)


def test_llama_4_maverick_plans(catalog):
    plan = _plan(catalog, "llama-4-maverick", "fp8", ["p5en.48xlarge", "p6-b200.48xlarge"])
    assert plan.choice.nodes == 1 and plan.layout.tensor_parallel == 8


def test_nvfp4_needs_blackwell(catalog):
    plan = _plan(catalog, "gpt-oss-120b", "nvfp4", ["p5.4xlarge", "p6-b200.48xlarge"])
    assert plan.choice.instance_type == "p6-b200.48xlarge"
    assert "no FP4 tensor cores" in {r.instance_type: r.reason for r in plan.rejected}["p5.4xlarge"]


def test_unpriced_types_carry_a_reason(catalog):
    for name in ("p5e.48xlarge", "trn2.48xlarge", "u-p6e-gb200x72", "u-trn2x64"):
        itype = catalog.instance(name)
        assert itype.prices == {} and "Capacity Blocks" in itype.no_price_reason or "no on-demand" in itype.no_price_reason
    b200 = catalog.instance("p6-b200.48xlarge").price("us-east-1", "ec2")
    assert (b200.on_demand, b200.date) == (113.9328, "2025-11-30")
    assert catalog.instance("u-p6e-gb200x72").accelerators_per_node == 72  # one NVLink domain


def test_catalog_list_shows_new_types_with_dates_or_reasons():
    from typer.testing import CliRunner

    from gpuplan.cli import app

    out = CliRunner().invoke(app, ["catalog", "list", "--region", "us-east-1"]).output
    assert "p6-b200.48xlarge" in out and "2025-11-30" in out and "g7e.48xlarge" in out
    assert "p5e.48xlarge: no Linux on-demand price" in out
