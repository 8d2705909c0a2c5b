"""Decode attention whose kernel gives each (sequence, KV head) one thread block: how long its KV stream takes.

TensorRT-LLM's generation-phase attention (masked MHA, and XQA for MQA/GQA) runs "a single CUDA thread-block per
head" unless multi-block mode splits a long sequence over several blocks; the mode was an opt-in flag ("it is worth
testing that mode when batch_size * num_heads is less than the number of multi-processors on the GPU",
NVIDIA/TensorRT-LLM docs/source/advanced/gpt-attention.md @5a211b91) and later releases turn it on by default
(tensorrt_llm/bench PerformanceOptions and the runtime's `multi_block_mode: bool = True`). Without it, a step of
`sequences` sequences at TP has sequences × ceil(kv_heads / tp) blocks per rank, each streaming its head's whole KV
cache alone: at one sequence a TP 8 rank of a GQA model has one block for its one KV head, and its attention takes
one block's time per position and query head × the positions × the query heads sharing that KV head, whatever the
GPU's bandwidth (a batch whose blocks outnumber the GPU's SMs is held by the bandwidth roof first). So the step
grows with the context at the same rate at every TP (NIM's Llama 3 70B at one client: 4.9 ms from 300 to 7,500
tokens at TP 4 and at TP 8 on H100), which a KV stream at the bandwidth roof does not (0.1 ms). The engines plans
deploy split the sequence (TensorRT-LLM's multi-block mode on by default, FlashAttention's and FlashInfer's split-KV
decode in vLLM and TGI), so no plan pays it; a published row that ran unsplit says so (`decode_attention: unsplit`).
"""

from __future__ import annotations

import math

# Nanoseconds one thread block spends per query head per cached position (its QK dot and PV update for one position of
# its KV head, for each of the query heads that share it). Measured, not fitted: the difference between TensorRT-LLM
# 0.9's one-sequence Llama 2 70B steps at 3,072 and 192 positions, whose other terms cancel (bench/attention_check.py:
# 1.20 ns on A100 at TP 2, 1.21 on H100 at TP 4, 16-bit KV). A block's time goes by positions and query heads, not by
# the device's bandwidth: A100 and H100 take the same, and a model with one query head per KV head (masked MHA: the
# sweep's Llama 2 7B and 13B) never runs short of its bandwidth roof. NIM's one-client runs are its held-out check.
UNSPLIT_ATTENTION_NS_PER_HEAD_POSITION = 1.205


def unsplit_attention_s(layers: float, context_tokens: float, heads: int, kv_heads: int, tp: int) -> float:
    """Seconds of one stage's decode attention when each (sequence, KV head) is one thread block: the blocks run side
    by side, each through `layers` layers of `context_tokens` positions for the query heads that share its KV head."""
    query_heads_per_block = math.ceil(heads / tp) / math.ceil(kv_heads / tp)
    return layers * context_tokens * query_heads_per_block * UNSPLIT_ATTENTION_NS_PER_HEAD_POSITION * 1e-9
