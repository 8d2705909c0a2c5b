"""The input embedding is a lookup: a token gathers one row of an untied table, so no pass multiplies the table or
reads it whole (Megatron's FLOP count has the LM head's V·h and no input-embedding term, Narayanan et al. 2021
§5.1). MFU keeps its definition (6·N over every parameter); the time the devices take does not count the table."""

from __future__ import annotations

import pytest

from planner.physics.memory import streamed_weight_bytes, weight_bytes
from planner.physics.performance import decode_step, moe_weight_bytes_read
from planner.physics.training_time import executed_flops_per_token, model_flops_per_token
from planner.workload.presets import Architecture

LLAMA3_8B_TABLE = 128_256 * 4_096  # vocab × hidden, untied (its LM head is a second such matrix)


def test_untied_table_is_held_but_not_streamed(arch):
    llama = arch["llama-3.1-8b"]
    assert llama.lookup_params == LLAMA3_8B_TABLE
    assert streamed_weight_bytes(llama, "bf16") == weight_bytes(llama, "bf16") - 2 * LLAMA3_8B_TABLE
    # quantised weights keep the table 16-bit (weight_bytes), so 2 bytes per entry come off, not half a byte
    assert streamed_weight_bytes(llama, "int4") == weight_bytes(llama, "int4") - 2 * LLAMA3_8B_TABLE
    assert moe_weight_bytes_read(llama, "bf16", 1) == streamed_weight_bytes(llama, "bf16")


def test_a_tied_table_is_the_lm_head_and_is_streamed(arch):
    gemma = arch["gemma-2-9b"]
    assert gemma.tied_embeddings and gemma.lookup_params == 0
    assert streamed_weight_bytes(gemma, "bf16") == weight_bytes(gemma, "bf16")
    assert gemma.matmul_params_per_token == gemma.params


def test_decode_at_batch_1_reads_the_weights_less_the_table(catalog, arch):
    """Llama 3.1 8B bf16 on one H100 at batch 1: the step's weight stream is 16.06 GB less the 1.05 GB table."""
    h100, llama = catalog.accelerator("H100-80GB"), arch["llama-3.1-8b"]
    step = decode_step(llama, h100, "bf16", "bf16", 1, 1, 1, 1)
    bandwidth = h100.memory_bandwidth_gb_s * 1e9
    from planner.physics import efficiency
    weights_s = (2 * llama.params - 2 * LLAMA3_8B_TABLE) / (bandwidth * efficiency.MEMORY_BANDWIDTH_EFFICIENCY)
    assert step.memory_s == pytest.approx(weights_s, rel=1e-3)  # + one position's KV, 131 kB


def test_training_runs_the_lm_head_but_not_the_lookup(arch):
    llama = arch["llama-3.1-8b"]
    assert model_flops_per_token(llama, 8192) == 6 * llama.params + 12 * 32 * 4096 * 8192  # MFU's definition
    assert executed_flops_per_token(llama, 8192) == model_flops_per_token(llama, 8192) - 6 * LLAMA3_8B_TABLE
    assert executed_flops_per_token(llama, 8192, "lora") == 4 * (llama.params - LLAMA3_8B_TABLE) + 12 * 32 * 4096 * 8192


def test_a_model_no_bigger_than_its_table_is_refused():
    with pytest.raises(ValueError, match="input embedding table .* tied_embeddings"):
        Architecture(params=1e8, layers=2, hidden_size=4096, attention_heads=32, kv_heads=8, head_dim=128,
                     ffn_hidden_size=14336, vocab_size=128_256)
