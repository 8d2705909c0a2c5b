"""How many sequences an engine keeps resident when their KV cache outgrows the device, and what a
static batch that does not fit costs: it runs in waves.

An engine (vLLM, TensorRT-LLM, LMDeploy) takes a fixed share of device memory, keeps the weights
and its workspace, and fills the rest with KV blocks; a request that finds no room waits until a
running one finishes. With identical requests (a static benchmark batch, ignore_eos) the residents
finish together, so b requests run as ceil(b / m) waves of at most m: the later waves' requests
wait out the earlier waves before their first token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from planner.hardware.catalog import Accelerator
from planner.physics.memory import inference_memory
from planner.workload.presets import Architecture

# Share of device memory the engine allocates (weights, workspace, KV blocks): vLLM's default
# gpu_memory_utilization 0.9 (vLLM engine arguments) and TensorRT-LLM's default
# kv_cache_free_gpu_mem_fraction 0.9 (TensorRT-LLM KvCacheConfig docs).
ENGINE_MEMORY_SHARE = 0.9


def resident_sequences(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str, tp: int,
                       context_tokens: int, memory_share: float = ENGINE_MEMORY_SHARE,
                       free_fraction: float = 1.0) -> int:
    """Sequences of `context_tokens` whose KV fits beside the weights, workspace and runtime (≥ 1: an
    engine that cannot hold one sequence does not start, and the published run did). Engines state the
    pool two ways: vLLM as a share of the whole memory (`memory_share`, gpu_memory_utilization),
    TensorRT-LLM as a share of what is free once the model is loaded (`free_fraction`,
    kv_cache_free_gpu_mem_fraction)."""
    one = inference_memory(arch, precision, kv_precision, tp, 1, 1, context_tokens)
    free = accel.memory_bytes * memory_share - (one.total - one.kv_cache)
    return max(1, math.floor(free * free_fraction / one.kv_cache)) if one.kv_cache > 0 else 1 << 30


@dataclass(frozen=True)
class StaticBatch:
    output_tokens_per_s: float
    time_to_first_token_s: float  # mean over the batch's requests
    inter_token_latency_s: float  # mean over the batch's requests
    waves: int


def static_batch(batch: int, resident: int, output_tokens: int, first_token_s: Callable[[int], float],
                 step_s: Callable[[int], float]) -> StaticBatch:
    """`batch` identical requests, at most `resident` at once: each wave of k prefills its k prompts
    together (first_token_s(k)), then decodes output_tokens − 1 lock-step tokens (step_s(k) each)."""
    start, ttft_sum, itl_sum, done = 0.0, 0.0, 0.0, 0
    waves = 0
    while done < batch:
        k = min(resident, batch - done)
        first, step = first_token_s(k), step_s(k)
        ttft_sum += k * (start + first)
        itl_sum += k * step
        start += first + (output_tokens - 1) * step
        done += k
        waves += 1
    return StaticBatch(batch * output_tokens / start, ttft_sum / batch, itl_sum / batch, waves)
