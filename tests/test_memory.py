"""Memory estimators against exact formulas and the published figures (ZeRO paper B1, Korthikanti B2, KV-cache statements C2)."""

from __future__ import annotations

import pytest

from planner.physics.memory import (TrainingSetup, activation_bytes_per_layer, inference_memory, kv_bytes_per_sequence,
                                    kv_bytes_per_token, lora_params, training_memory, weight_bytes, zero_model_states)
from planner.hardware.units import GIB, INT4_BYTES_PER_PARAM
from planner.workload.presets import presets


@pytest.mark.parametrize("preset, expected", [
    ("llama-2-7b", 524_288),   # I-09
    ("llama-2-70b", 327_680),  # I-10
    ("llama-3-8b", 131_072),   # I-11
    ("llama-3-70b", 327_680),  # I-12
    ("mistral-7b", 131_072),   # I-13
])
def test_kv_bytes_per_token_exact(arch, preset, expected):
    assert kv_bytes_per_token(arch[preset], "fp16") == expected


def test_kv_opt13b_matches_vllm_paper(arch):
    # I-06: "800 KB" per token, "as much as 1.6 GB" for one 2048-token request
    assert kv_bytes_per_token(arch["opt-13b"], "fp16") == 2 * 5120 * 40 * 2 == 819_200
    assert kv_bytes_per_sequence(arch["opt-13b"], 2048, "fp16") == pytest.approx(1.6e9, rel=0.05)


def test_kv_llama2_7b_4096_tokens_is_2_gib(arch):
    # I-07: 1 * 4096 * 2 * 32 * 4096 * 2 bytes
    assert kv_bytes_per_sequence(arch["llama-2-7b"], 4096, "fp16") == 2 * GIB


def test_sliding_window_caps_kv(arch):
    mistral = arch["mistral-7b"]
    assert kv_bytes_per_sequence(mistral, 32768, "fp16") == kv_bytes_per_sequence(mistral, 4096, "fp16")
    gemma = arch["gemma-2-9b"]  # half its layers are local (window 4096)
    full = 2 * 8 * 256 * 2 * 8192
    assert kv_bytes_per_sequence(gemma, 8192, "bf16") == 21 * full + 21 * full / 2


def test_fp8_kv_halves_bytes(arch):
    assert kv_bytes_per_token(arch["llama-3-70b"], "fp8") == 163_840


def test_zero_model_states_reproduce_zero_paper_figure_1():
    # M-01: Ψ = 7.5B, N_d = 64, K = 12 → 120 GB, 31.4 GB, 16.6 GB, 1.9 GB per device
    psi, nd = 7.5e9, 64
    expected = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
    for stage, gb in expected.items():
        assert sum(zero_model_states(psi, nd, stage)) / 1e9 == pytest.approx(gb, abs=0.05)
    assert sum(zero_model_states(psi, nd, 1)) == 2 * psi + 2 * psi + 12 * psi / nd


def test_full_training_accounting_16_or_18_bytes(arch):
    llama = arch["llama-2-7b"]
    fp16 = TrainingSetup("full", "fp16", "adamw", "auto", 16, 2048)
    bf16 = TrainingSetup("full", "bf16", "adamw", "auto", 16, 2048)
    states_16 = training_memory(llama, fp16, 1, 1, 1, 0, 1, 1, "full", True)
    states_18 = training_memory(llama, bf16, 1, 1, 1, 0, 1, 1, "full", True)
    assert states_16.weights + states_16.gradients + states_16.optimizer == 16 * llama.params
    assert states_18.weights + states_18.gradients + states_18.optimizer == 18 * llama.params


def test_korthikanti_activation_formulas(arch):
    gpt3 = arch["gpt-3-175b"]
    s, b, h, a = 2048, 1, 12288, 96
    assert 5 * a * s / h == 80  # the paper's worked value for GPT-3
    none = activation_bytes_per_layer(s, b, gpt3, 8, "none", flash_attention=False)
    selective = activation_bytes_per_layer(s, b, gpt3, 8, "selective", flash_attention=False)
    full = activation_bytes_per_layer(s, b, gpt3, 8, "full", flash_attention=False)
    assert none == s * b * h * (34 / 8 + 80 / 8)
    assert selective == s * b * h * 34 / 8
    assert full == 2 * s * b * h / 8
    assert 1 - selective / none == pytest.approx(0.70, abs=0.01)  # "saves 70%" for GPT-3
    mtnlg = arch["mt-nlg-530b"]
    ratio = activation_bytes_per_layer(2048, 1, mtnlg, 8, "selective", False) / \
        activation_bytes_per_layer(2048, 1, mtnlg, 8, "none", False)
    assert 1 - ratio == pytest.approx(0.65, abs=0.01)  # "saves 65%" for MT-NLG
    # Unparallelised: sbh(34 + 5as/h)
    assert activation_bytes_per_layer(s, b, gpt3, 1, "none", False) == s * b * h * (34 + 80)
    # FlashAttention never stores the s×s scores
    assert activation_bytes_per_layer(s, b, gpt3, 1, "none", True) == s * b * h * 34


def test_weights_70b_bf16_do_not_fit_one_80gb_device(arch):
    weights = weight_bytes(arch["llama-3.1-70b"], "bf16")
    assert weights == pytest.approx(141.1e9, rel=0.001)  # domain.md: ~141 GB
    assert weights > 80 * GIB


def test_int4_keeps_embeddings_in_16_bit(arch):
    llama = arch["llama-2-7b"]
    embedding = 2 * 32000 * 4096
    assert weight_bytes(llama, "int4") == (llama.params - embedding) * INT4_BYTES_PER_PARAM + embedding * 2


def test_inference_peak_memory_divides_by_tp(arch):
    llama = arch["llama-3-70b"]
    one = inference_memory(llama, "bf16", "fp16", 1, 1, 32, 8192)
    eight = inference_memory(llama, "bf16", "fp16", 8, 1, 32, 8192)
    assert eight.weights == one.weights / 8
    assert eight.kv_cache == one.kv_cache / 8 == 32 * 8192 * 327_680 / 8
    assert one.kv_cache == 32 * 8192 * 327_680  # every sequence at full context at once


def test_kv_replicates_when_tp_exceeds_kv_heads(arch):
    qwen = arch["qwen2.5-7b"]  # 4 KV heads
    four = inference_memory(qwen, "bf16", "fp16", 4, 1, 8, 4096)
    eight = inference_memory(qwen, "bf16", "fp16", 8, 1, 8, 4096)  # heads replicate, not split further
    assert eight.kv_cache == four.kv_cache


def test_lora_adapters_count(arch):
    llama = arch["llama-2-7b"]
    # r·(d_in + d_out) over q, k, v, o (4096→4096) and gate, up, down (4096↔11008), 32 layers
    per_layer = 4 * (4096 + 4096) + 3 * (4096 + 11008)
    assert lora_params(llama, 16) == 16 * per_layer * 32


def test_qlora_7b_fits_in_roughly_8_to_16_gb(arch):
    setup = TrainingSetup("qlora", "bf16", "adamw", "auto", 16, 2048)
    mem = training_memory(arch["llama-2-7b"], setup, 1, 1, 1, 0, 1, 1, "full", True)
    assert 4e9 < mem.weights < 5e9  # NF4 base + bf16 embeddings
    assert 6e9 <= mem.total <= 16e9  # domain.md: "a 7B model fine-tunes in roughly 8-16 GB"


def test_per_operator_checkpointing_keeps_input_attention_and_every_other_matmul():
    """torchtitan's op SAC on Llama 3.1 8B, micro-batch 2 × 8,192: 2 B × s·b × (4h + kv·d + f) per layer."""
    from planner.physics.memory import activation_bytes_per_layer
    arch = presets()["llama-3.1-8b"]
    per_layer = activation_bytes_per_layer(8192, 2, arch, 1, "op", True)
    assert per_layer == 2 * 8192 * 2 * (4 * 4096 + 8 * 128 + 14336)
    assert per_layer < activation_bytes_per_layer(8192, 2, arch, 1, "selective", True)


def test_state_precision_per_code_base():
    """Full training of 1e9 parameters on one device: Megatron's mixed 18 B/param, FSDP2's fp32-sharded
    16 B, bf16-true 8 B; host-offloaded optimizer leaves the weights only."""
    from dataclasses import replace
    from planner.physics.memory import training_model_states
    arch = presets()["llama-3.1-8b"]
    mixed = TrainingSetup("full", "bf16", "adamw", "auto", 16, 2048)
    per_param = {s: sum(training_model_states(arch, replace(mixed, states=s), 1, 1, 1, 0)) / arch.params
                 for s in ("mixed", "fp32-sharded", "bf16")}
    assert per_param == pytest.approx({"mixed": 18.0, "fp32-sharded": 16.0, "bf16": 8.0})
    offloaded = replace(mixed, states="bf16", offload_optimizer=True)
    assert sum(training_model_states(arch, offloaded, 1, 1, 8, 3)) == pytest.approx(arch.params * 2 / 8)


def test_quoted_8b_fsdp_run_fits_its_96_gb_card():
    """Issue 25: Llama 3.1 8B, FSDP over 8, micro-batch 2 × 8,192, torchtitan op SAC, peaked at 82.4 GiB
    on a 96 GB H100; the Korthikanti selective set with 18 B/param needed 96.5 GiB and was refused."""
    from dataclasses import replace
    from planner.physics.memory import training_memory
    arch = presets()["llama-3.1-8b"]
    setup = replace(TrainingSetup("full", "bf16", "adamw", "auto", 16, 8192), states="fp32-sharded")
    need = training_memory(arch, setup, 1, 1, 8, 3, 2, 1, "op", True).total / GIB
    assert need == pytest.approx(65.5, abs=0.1)
    assert need < 96e9 * 0.9 / GIB


def test_bitsandbytes_through_0_43_1_keeps_each_base_matmuls_input():
    """bitsandbytes' MatMul4Bit kept its input for the backward through 0.43.1 (`ctx.tensors = (A, B)`), a frozen
    nn.Linear does not: per layer 2 B × s·b × (3h + f), for Llama 2 7B at 2 × 512 tokens 47.7 MB, 1.42 GiB over 32
    layers (LitGPT's pinned 0.42.0). From 0.43.2 it keeps the weight only (`ctx.tensors = (None, B)`, PR #1270), as
    torchao's NF4 (torchtune) does: the planner's default, and a LoRA's activations. Under full recompute only the
    layer being recomputed keeps them."""
    from dataclasses import replace
    from planner.physics.adapter_memory import quantized_base_input_bytes_per_layer
    llama = presets()["llama-2-7b"]
    per_layer = quantized_base_input_bytes_per_layer(512, 2, llama, 1)
    assert per_layer == 2 * 1024 * (3 * 4096 + 11008) == 47_710_208
    qlora = TrainingSetup("qlora", "bf16", "adamw", "auto", 32, 512)
    assert qlora.nf4_kernels == "bitsandbytes"

    def activations(setup, checkpointing):
        return training_memory(llama, setup, 1, 1, 1, 0, 2, 4, checkpointing, True).activations

    legacy, torchao = replace(qlora, nf4_kernels="bitsandbytes-0.43.1"), replace(qlora, nf4_kernels="torchao")
    lora = replace(qlora, method="lora")
    assert activations(legacy, "none") - activations(qlora, "none") == pytest.approx(32 * per_layer)
    # beside a LoRA's, a QLoRA step holds only the dequantized copy of the matrix it multiplies (4,096 × 11,008 × 2 B)
    assert activations(qlora, "none") == activations(torchao, "none") == activations(lora, "none") + 2 * 4096 * 11008
    assert activations(legacy, "full") - activations(qlora, "full") == pytest.approx(per_layer)


def test_lightnings_loop_runs_a_forward_beside_the_previous_steps_kept_inputs(monkeypatch):
    """bitsandbytes 0.42.0 keeps MatMul4Bit's input as a ctx attribute (`ctx.tensors = (A, B)`), which the backward
    does not free (torch PyNode::release_variables clears save_for_backward's tensors only), and LitGPT's loop rebinds
    the step's logits, whose grad_fn holds the graph, only when the next forward returns: that forward peaks beside
    the previous micro-batch's kept inputs, one more set of 2 B × s·b × (3h + f) a layer (1.53 GB for Llama 2 7B at
    2 × 512 tokens). A LoRA step frees its saved tensors in the backward and does not; under full recompute the
    layer being recomputed keeps one set."""
    from dataclasses import replace
    from planner.physics import adapter_memory, memory
    from planner.physics.adapter_memory import NF4_STACKS, quantized_base_input_bytes_per_layer
    llama = presets()["llama-2-7b"]
    per_layer = quantized_base_input_bytes_per_layer(512, 2, llama, 1)
    lightning = NF4_STACKS["lightning-bitsandbytes-0.42"]
    assert lightning.keeps_inputs and lightning.kept_inputs_outlive_step
    assert not any(s.kept_inputs_outlive_step for name, s in NF4_STACKS.items() if name != "lightning-bitsandbytes-0.42")
    setup = TrainingSetup("qlora", "bf16", "adamw", "auto", 32, 512, nf4_kernels="lightning-bitsandbytes-0.42")

    def activations(checkpointing):
        return training_memory(llama, setup, 1, 1, 1, 0, 2, 4, checkpointing, True).activations

    outliving = activations("none"), activations("full")
    monkeypatch.setitem(memory.NF4_STACKS, "lightning-bitsandbytes-0.42",
                        replace(lightning, kept_inputs_outlive_step=False))
    assert adapter_memory.NF4_STACKS is memory.NF4_STACKS
    assert outliving[0] - activations("none") == pytest.approx(32 * per_layer) == pytest.approx(1.527e9, rel=1e-3)
    assert outliving[1] == activations("full")


def test_a_qlora_step_holds_the_16_bit_copy_of_the_matrix_it_multiplies():
    """Every NF4 stack dequantizes a weight for its matmul, forward and backward: PEFT on bitsandbytes 0.43.2+ (the
    plans' stack; transformers keeps the head 16-bit) holds 2 B × h × f of Llama 3 8B's largest block matrix. Under
    Lightning's BitsandbytesPrecision (LitGPT) every nn.Linear is NF4, the 128,256 × 4,096 head included, quantized
    from fp16, so bitsandbytes 0.42.0 dequantizes to fp16 and casts to the bf16 input: 2 + 2 B an element at once,
    2.1 GB; an fp16 run casts nothing. LitGPT's fused q, k, v is Llama 2 7B's largest block matrix (h × 3h > h × f)."""
    from planner.physics.adapter_memory import NF4_STACKS, dequantized_weight_bytes
    llama3, llama2 = presets()["llama-3-8b"], presets()["llama-2-7b"]
    assert dequantized_weight_bytes(llama3, NF4_STACKS["bitsandbytes"], "bf16", False, 1) == 2 * 4096 * 14336
    assert dequantized_weight_bytes(llama3, NF4_STACKS["bitsandbytes"], "bf16", False, 2) == 4096 * 14336
    lightning = NF4_STACKS["lightning-bitsandbytes-0.42"]
    assert dequantized_weight_bytes(llama3, lightning, "bf16", True, 1) == 4 * 128256 * 4096 == 2_101_346_304
    assert dequantized_weight_bytes(llama3, lightning, "fp16", True, 1) == 2 * 128256 * 4096
    assert dequantized_weight_bytes(llama2, NF4_STACKS["torchao"], "bf16", True, 1) == 2 * 4096 * 3 * 4096
    assert dequantized_weight_bytes(llama2, NF4_STACKS["torchao"], "bf16", False, 1) == 2 * 4096 * 11008


def test_a_stack_that_quantizes_the_head_stores_it_in_nf4():
    """transformers keeps an untied LM head 16-bit beside the NF4 blocks; Lightning swaps it for an NF4 linear too,
    which saves (2 − 0.516) B on each of Llama 3 8B's 525 M head parameters: 0.78 GB. The input table stays 16-bit."""
    from dataclasses import replace
    from planner.hardware.units import NF4_BYTES_PER_PARAM
    from planner.physics.memory import base_weight_bytes
    llama3 = presets()["llama-3-8b"]
    peft = TrainingSetup("qlora", "bf16", "adamw", "auto", 16, 512)
    lightning = replace(peft, nf4_kernels="lightning-bitsandbytes-0.42")
    saved = base_weight_bytes(llama3, peft) - base_weight_bytes(llama3, lightning)
    assert saved == pytest.approx((2 - NF4_BYTES_PER_PARAM) * 128256 * 4096)
    assert base_weight_bytes(llama3, replace(peft, nf4_kernels="torchao")) == base_weight_bytes(llama3, peft)


def test_nf4_without_double_quantization_keeps_a_fp32_absmax_per_64_weights():
    """QLoRA's recipe quantizes the NF4 blocks' absmax too (4.127 bits a weight); bitsandbytes without
    compress_statistics, Lightning's `bnb.nf4` (every LitGPT qlora.yaml) and transformers' default keep a fp32
    absmax per 64 weights, 4.5 bits: 0.047 B more on each of Llama 3 8B's 6.98 G quantized parameters, 0.33 GB."""
    from dataclasses import replace
    from planner.hardware.units import NF4_BYTES_PER_PARAM, NF4_SINGLE_QUANT_BYTES_PER_PARAM
    from planner.physics.memory import base_weight_bytes
    assert NF4_SINGLE_QUANT_BYTES_PER_PARAM == 0.5625 and NF4_BYTES_PER_PARAM == pytest.approx(0.5159, abs=1e-4)
    llama3 = presets()["llama-3-8b"]
    dq = TrainingSetup("qlora", "bf16", "adamw", "auto", 16, 512)
    assert dq.nf4_double_quant
    extra = base_weight_bytes(llama3, replace(dq, nf4_double_quant=False)) - base_weight_bytes(llama3, dq)
    assert extra == pytest.approx((0.5625 - NF4_BYTES_PER_PARAM) * (llama3.params - llama3.embedding_params))
    assert 0.32e9 < extra < 0.34e9
    lora = replace(dq, method="lora")
    assert base_weight_bytes(llama3, replace(lora, nf4_double_quant=False)) == base_weight_bytes(llama3, lora)


@pytest.mark.parametrize("row_id, published_gib", [
    ("litgpt-a10g-llama-2-7b-qlora", 12.74), ("litgpt-a10g-llama-3-8b-qlora", 16.21),
    ("litgpt-a10g-mistral-7b-qlora", 13.31), ("litgpt-a10g-llama-3p2-1b-qlora", 5.15),
    ("litgpt-a10g-llama-3p2-3b-qlora", 9.59)])
def test_litgpt_qlora_peaks_within_a_fifth(catalog, row_id, published_gib):
    """LitGPT's QLoRA peaks on one A10G (config hub @00af8b0): with bitsandbytes' kept inputs, the configs' own
    adapters (q and v, dropout 0.05: tests/test_lora_memory.py), Lightning's NF4 head with its fp16-to-bf16
    dequantized copy, its single-quantized NF4 (`bnb.nf4`) and the previous step's kept inputs beside each forward,
    the planner is within 6% of each, as of the LoRA rows of the same configs (7-17% under while it charged one set
    of kept inputs, 9-20% with double quantization too, 17-22% before the head)."""
    from bench.reference_sources import memory_rows
    predicted = dict(memory_rows(catalog, lambda row_id, metric, source, setup, need, published, **kw: (row_id, need)))
    assert abs(predicted[row_id] / published_gib - 1) < 0.06
