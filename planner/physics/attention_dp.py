"""Data-parallel attention for MoE models with multi-head latent attention (DeepSeek-V2/V3/R1).

MLA caches one latent per token shared by every head, so tensor parallelism cannot split it: each TP
rank keeps the whole latent cache of every sequence (planner/physics/memory.py kv_shard_fraction).
With attention data parallelism every device of a replica is its own attention rank (TP 1) holding the
latent cache of its own sequences only, while the MoE layers run expert parallel over all the ranks,
with a dispatch and a combine all-to-all per MoE layer. Engines: SGLang `--enable-dp-attention`,
TensorRT-LLM `enable_attention_dp`, vLLM `--data-parallel-size N --enable-expert-parallel` (vLLM docs,
"Data Parallel Deployment": DP attention with EP for MLA models). Of the engines gpuplan deploys only
LMI's vLLM runs it (ATTENTION_DP_ENGINES).

Published effect sizes: SGLang v0.4 release blog (lmsys.org/blog/2024-12-04-sglang-v0-4): DP attention
for DeepSeek gives up to 1.9x decode throughput at large batch, by the KV room it frees; LMSYS "Deploying
DeepSeek with PD disaggregation and large-scale expert parallelism" (lmsys.org/blog/2025-05-05-large-
scale-ep): DP attention + EP 72 on 12 nodes of 8 H100, 22.3k output tokens/s per node at 2,000-token
inputs. Where the batch is small the replicated attention weights cost more reading than the KV saves,
and TP stays faster: the search compares both layouts on the same formulas.

Weights: a rank holds every weight outside the routed experts (MLA attention, dense-first layers, shared
experts, router, embeddings) whole, and 1/devices of the routed experts. For DeepSeek-V3/R1 the part
outside the routed experts is params − routed = 17.1 B of 671 B (routed_expert_share, from the published
params and active_params), of which MLA attention is 61 layers × 187.1 M = 11.4 B (per layer, config.json:
q_a 7168×1536, q_b 1536×128×192, kv_a 7168×576, kv_b 512×128×256, o 16384×7168)."""

from __future__ import annotations

import math

from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics import efficiency
from planner.physics.collectives import intra_node_bytes_per_s, latency_s
from planner.physics.elementwise import elementwise_s
from planner.physics import expert_parallel
from planner.physics.expert_parallel import ALL_TO_ALL_BYTES_PER_VALUE, routed_expert_bytes
from planner.physics.memory import (ACTIVATION_BYTES, LOGIT_BYTES, PREFILL_CHUNK_TOKENS, MemoryBreakdown,
                                    kv_bytes_per_sequence, lookup_weight_bytes, runtime_overhead_bytes,
                                    streamed_weight_bytes, weight_bytes)
from planner.physics.prefill_compute import prefill_compute_s
from planner.hardware.units import attention_precision, compute_precision
from planner.workload.presets import Architecture

# Engines (serving.engine values) whose image in components/data/images.yaml runs DP attention: LMI's vLLM
# passes any vLLM engine argument through option.<name> (djl-serving vllm_rb_properties.py: extra options
# that are EngineArgs fields), so data_parallel_size and enable_expert_parallel reach vLLM 0.15.1 (LMI 20).
# LMI's TensorRT-LLM 0.21 image builds TRT engines (no PyTorch-backend enable_attention_dp), TGI and the
# Neuron images have no DP attention.
ATTENTION_DP_ENGINES = ("auto", "vllm", "lmi")


def applies(arch: Architecture) -> bool:
    """DP attention pays where TP replicates the KV cache: MoE models with MLA."""
    return arch.is_mla and arch.is_moe


def rank_sequences(sequences: int, ranks: int) -> int:
    """The busiest rank's share of the replica's sequences (each request goes to one rank)."""
    return math.ceil(sequences / ranks)


def rank_weight_bytes(arch: Architecture, precision: str, ranks: int) -> float:
    """One rank's weights: everything outside the routed experts whole, 1/ranks of the routed experts."""
    routed = routed_expert_bytes(arch, precision)
    return weight_bytes(arch, precision) - routed + routed / ranks


def inference_memory(arch: Architecture, precision: str, kv_precision: str, ranks: int, sequences: int,
                     context_tokens: int) -> MemoryBreakdown:
    """Per-device memory at peak with `sequences` spread over `ranks` attention ranks: the rank's own
    sequences' whole latent cache, the workspace of a TP-1 forward pass (memory.inference_memory at tp 1)."""
    local = rank_sequences(sequences, ranks)
    kv = local * kv_bytes_per_sequence(arch, context_tokens, kv_precision)
    tokens = min(PREFILL_CHUNK_TOKENS, local * context_tokens)
    qkv_width = (arch.attention_heads + 2 * arch.kv_heads) * arch.head_dim
    per_token = 2 * arch.hidden_size + qkv_width + 3 * arch.ffn_hidden_size
    workspace = tokens * per_token * ACTIVATION_BYTES + local * arch.vocab_size * LOGIT_BYTES
    return MemoryBreakdown(weights=rank_weight_bytes(arch, precision, ranks), kv_cache=kv, activations=workspace,
                           overhead=runtime_overhead_bytes(ranks))


def kv_capacity_sequences(arch: Architecture, precision: str, kv_precision: str, ranks: int, context_tokens: int,
                          usable_bytes: float) -> int:
    """Sequences of `context_tokens` a replica of `ranks` devices holds: each rank fills what its weights,
    workspace and runtime leave with whole latent caches of its own sequences."""
    one = inference_memory(arch, precision, kv_precision, ranks, 1, context_tokens)
    free = usable_bytes - (one.total - one.kv_cache)
    return ranks * max(0, math.floor(free / one.kv_cache))


def all_to_all_s(arch: Architecture, tokens: int, ranks: int, itype: InstanceType, accel: Accelerator) -> float:
    """Dispatch + combine over every MoE layer for `tokens` tokens spread over `ranks` devices. A token's k
    expert copies land evenly on the ranks: (g − 1)/ranks of them on another device of its node (NVLink,
    g devices per node), the cross-node share by expert_parallel.all_to_all_s (the node's NICs)."""
    if ranks <= 1 or not arch.is_moe:
        return 0.0
    g = min(ranks, itype.accelerators_per_node)
    nodes = max(1, ranks // g)
    local = rank_sequences(tokens, ranks)
    intra_bytes = local * arch.active_experts * arch.hidden_size * ALL_TO_ALL_BYTES_PER_VALUE * (g - 1) / ranks
    one_way_s = intra_bytes / intra_node_bytes_per_s(accel) + latency_s(g, accel)
    return 2 * arch.moe_layers * one_way_s + expert_parallel.all_to_all_s(arch, tokens, nodes, itype, accel)


def mla_decode_attention_flops(arch: Architecture, context_tokens: float) -> float:
    """One decode token's attention FLOPs with MLA's weights absorbed (DeepSeek-V2 paper, arXiv 2405.04434
    §2.1.2: W_UK folds into the query and W_UV into the output, so attention runs on the latent itself, as
    FlashMLA and vLLM's MLA decode do): per head and cached position, a score over kv_lora_rank + rope values
    and a weighted sum of kv_lora_rank values, 2·(2·kv_lora_rank + qk_rope_head_dim) FLOPs (4.3× MHA's 4·head_dim
    for DeepSeek-V3)."""
    return 2 * arch.layers * arch.attention_heads * (2 * arch.kv_lora_rank + arch.qk_rope_head_dim) * context_tokens


def decode_step(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str, ranks: int, batch: int,
                context_tokens: float, itype: InstanceType):
    """One decode step of a replica of `ranks` attention ranks at `batch` sequences (performance.decode_step's
    roofline at TP 1): the busiest rank reads the weights outside the routed experts whole, 1/ranks of the
    experts the whole batch touches and its own sequences' latent caches; its FLOPs are its tokens' (the
    experts' work on all tokens spread evenly, their grouped GEMMs at their own share as in performance.decode_step);
    no TP all-reduce, a dispatch and a combine per MoE layer."""
    from planner.physics.performance import (DecodeStep, grouped_expert_gemm_s, grouped_expert_params,
                                             moe_weight_bytes_read, weight_gemms_per_step)

    local = rank_sequences(batch, ranks)
    read = moe_weight_bytes_read(arch, precision, batch)
    touched_experts = read - (streamed_weight_bytes(arch, precision) - routed_expert_bytes(arch, precision))
    weights = read - touched_experts * (1 - 1 / ranks)
    kv = local * kv_bytes_per_sequence(arch, int(context_tokens), kv_precision)
    stream_s = weights / efficiency.effective_bandwidth(accel, precision) + kv / efficiency.kv_bandwidth(accel)
    elementwise = elementwise_s(arch, 1, accel, local)
    linear_precision = compute_precision(precision, accel.supports.fp4)
    dense_params = arch.matmul_params_per_token - grouped_expert_params(arch, accel)
    expert_s = grouped_expert_gemm_s(arch, accel, linear_precision, batch / ranks)
    compute_s = (local * 2 * dense_params / (accel.peak_flops(linear_precision)
                                             * efficiency.decode_gemm_efficiency(accel, linear_precision))
                 + local * mla_decode_attention_flops(arch, context_tokens)
                 / (accel.peak_flops(attention_precision(linear_precision))
                    * efficiency.decode_attention_efficiency(accel)))
    comm_s = all_to_all_s(arch, batch, ranks, itype, accel)
    overhead_s = efficiency.decode_overhead_s(accel, weight_gemms_per_step(arch), arch.moe_layers)
    step_s = efficiency.roofline_s(accel, stream_s, compute_s) + expert_s + elementwise + comm_s + overhead_s
    return DecodeStep(step_s, stream_s + elementwise, compute_s + expert_s, comm_s, overhead_s)


def prefill_s(arch: Architecture, accel: Accelerator, precision: str, ranks: int, prompt_tokens: int,
              itype: InstanceType, cached_tokens: int = 0) -> float:
    """One prompt's prefill on its rank (performance.prefill_s at TP 1) while the other ranks prefill theirs:
    its attention and the weights outside the routed experts run on its rank alone, its routed-expert GEMMs
    are spread over the ranks (every rank serves the others' tokens likewise), and its tokens cross the
    all-to-all."""
    new_tokens = prompt_tokens - cached_tokens
    routed_active = expert_parallel.routed_active_params(arch)
    linear_flops = 2 * (arch.prompt_matmul_params(new_tokens) - new_tokens * routed_active * (1 - 1 / ranks))
    attention_flops = 2 * arch.layers * (prompt_tokens**2 - cached_tokens**2) * arch.attention_heads * arch.head_dim
    compute = prefill_compute_s(arch, accel, precision, 1, new_tokens, linear_flops, attention_flops)
    streamed = rank_weight_bytes(arch, precision, ranks) - lookup_weight_bytes(arch, precision)
    memory = streamed / efficiency.effective_bandwidth(accel, precision)
    elementwise = elementwise_s(arch, 1, accel, new_tokens)
    return (efficiency.roofline_s(accel, memory, compute) + elementwise
            + all_to_all_s(arch, new_tokens * ranks, ranks, itype, accel))


def tp_kv_capacity_sequences(arch: Architecture, precision: str, kv_precision: str, tp: int, context_tokens: int,
                             usable_bytes: float) -> int:
    """The same at TP `tp` (memory.inference_memory): every rank holds every sequence's whole latent."""
    from planner.physics.memory import inference_memory as tp_memory

    one = tp_memory(arch, precision, kv_precision, tp, 1, 1, context_tokens)
    return max(0, math.floor((usable_bytes - (one.total - one.kv_cache)) / one.kv_cache))


def why(arch: Architecture, precision: str, kv_precision: str, ranks: int, context_tokens: int,
        usable_bytes: float) -> str:
    """The plan's sentence: what DP attention holds against TP over the same devices."""
    dp = kv_capacity_sequences(arch, precision, kv_precision, ranks, context_tokens, usable_bytes)
    tp = tp_kv_capacity_sequences(arch, precision, kv_precision, ranks, context_tokens, usable_bytes)
    return (f"attention data-parallel over {ranks} GPUs (TP 1 each, experts EP {ranks}): each keeps only its own "
            f"sequences' MLA latent cache, {dp} sequences of {context_tokens} tokens per replica against {tp} at "
            f"TP {ranks}, which replicates the latent on every rank")
