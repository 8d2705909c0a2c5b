"""Offline maximum throughput: every request queued at t = 0, served by in-flight (continuous) batching.

The vendor tables that publish "max throughput" (TensorRT-LLM's perf-overview, trtllm-bench throughput)
queue thousands of identical requests at once and report output tokens/s of the whole run. No client
waits on another, so there is no fixed concurrency: the engine decides how many sequences run.

Derivation (issue 28). In-flight batching (TensorRT-LLM docs, "In-flight Batching", and Yu et al.,
Orca, OSDI 2022) retires a sequence the step it finishes and admits a queued request into its slot;
with `guaranteed_no_evict` (trtllm-bench's scheduler policy) a request is admitted only when KV blocks
for its whole ISL + OSL are free. Chunked context ("Chunked Context" in the TensorRT-LLM docs; Agrawal
et al., Sarathi, arXiv 2308.16369) splits the admitted prompts into the steps' token budget
(max_num_tokens), beside the decodes. So the engine holds B sequences resident:

    B = min(sequences whose ISL + OSL KV fits the KV pool, max_batch_size,
            max_num_tokens ÷ (1 + ISL/OSL))

the last because in steady state B/OSL sequences finish per step and their B/OSL successors' ISL prompt
tokens must fit the step with its B decode tokens. During one request's lifetime of OSL steps the B
slots turn over once: the engine decodes B·OSL tokens at the mean context ISL + OSL/2 and prefills B
prompts of ISL, so

    lifetime = OSL · t_decode(B, ISL + OSL/2) + t_prefill(B prompts of ISL)
    output tokens/s = B · OSL / lifetime

(prefill and decode work add: at this batch both run compute-bound on the same tensor cores; while
decode is memory-bound a fused step could hide part of the chunk under the weight read, which this
sum does not credit, so it errs low, never above a roof). The per-step and prefill times are
planner/physics/performance.py's decode_step and prefill_s; at these batches decode_step's GEMMs are
compute-bound while its attention streams KV, and it sums the two kernels' rooflines (issue 28: one
max over the totals put H200's 70B TP1 128/2048 row 30% fast).

A run of N requests is finite (issue 25). Its requests are identical and start together, so the B slots
turn over in rounds: N // B full rounds at B sequences, then one round of the r = N mod B left, whose
steps run at batch r (faster, but r·OSL tokens for a whole request's lifetime), and

    run = (N // B) · lifetime(B) + lifetime(r)        output tokens/s = N · OSL / run

which is the steady rate when B divides N and less otherwise: 1,500 requests at B = 647 (405B FP4 on
four B200s, 1000/2000) are two rounds of 647 and one of 206. The perf-overview states N per ISL/OSL
("Preparing a Dataset": 30,000 at 128/128 down to 1,000 at 20,000/2,000). Chunked context staggers
each round's admissions by the token budget, which the rounds leave out: a step-by-step simulation of
the scheduler (bench/offline_run_check.py) is within 0.15% of them at the median published row and
slower by up to 5% where one round holds nearly all of a run's requests (1,500 in 1,581 slots).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics.kv_capacity import resident_sequences
from planner.physics.performance import DecodeStep, decode_step, prefill_s
from planner.workload.presets import Architecture


def kv_pool_sequences(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str, tp: int,
                      context_tokens: int, free_memory_fraction: float) -> int:
    """Sequences of `context_tokens` whose KV fits the pool an engine carves out of the memory left
    free once weights, workspace and runtime are loaded (TensorRT-LLM's kv_cache_free_gpu_mem_fraction
    is a share of that free memory, KvCacheConfig docs). At least 1: the published run started."""
    return resident_sequences(arch, accel, precision, kv_precision, tp, context_tokens, memory_share=1.0,
                              free_fraction=free_memory_fraction)


@dataclass(frozen=True)
class OfflineThroughput:
    output_tokens_per_s: float
    batch: int  # sequences resident in steady state
    binding: str  # which limit sets the batch: kv-memory | max-batch-size | max-num-tokens
    lifetime_s: float  # one request's admission to last token in steady state
    step: DecodeStep  # one decode step of the B sequences at the mean context
    prefill_s: float  # the B prompts' prefill, spread over the lifetime
    run_s: float | None = None  # a finite run's N requests, first admission to last token (None: steady state)

    @property
    def decode_step_s(self) -> float:
        return self.step.seconds


def steady_batch(kv_sequences: int, max_batch_size: int, max_num_tokens: int, prompt_tokens: int,
                 output_tokens: int) -> tuple[int, str]:
    """B and the limit that sets it (see the module docstring)."""
    token_bound = max(1, math.floor(max_num_tokens / (1 + prompt_tokens / output_tokens)))
    limits = {"kv-memory": kv_sequences, "max-batch-size": max_batch_size, "max-num-tokens": token_bound}
    binding = min(limits, key=limits.get)
    return limits[binding], binding


def round_lifetime_s(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str, tp: int,
                     prompt_tokens: int, output_tokens: int, sequences: int,
                     itype: InstanceType | None = None) -> tuple[float, DecodeStep, float]:
    """(lifetime, decode step, prefill) of one round of `sequences` requests: OSL decode steps at the mean
    context ISL + OSL/2 and the round's prompts (module docstring)."""
    step = decode_step(arch, accel, precision, kv_precision, tp, 1, sequences, prompt_tokens + output_tokens / 2,
                       itype=itype)
    prefill = prefill_s(arch, accel, precision, tp, 1, prompt_tokens, itype, prompts=sequences)
    return output_tokens * step.seconds + prefill, step, prefill


def offline_throughput(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str, tp: int,
                       prompt_tokens: int, output_tokens: int, max_batch_size: int, max_num_tokens: int,
                       free_memory_fraction: float, itype: InstanceType | None = None,
                       requests: int | None = None) -> OfflineThroughput:
    """Output tokens/s of one TP group with every request queued: of a run of `requests` (its rounds), or in
    steady state when None (module docstring)."""
    if requests is not None and requests < 1:
        raise ValueError(f"requests must be at least 1 (got {requests}): a run serves at least one request")
    kv = kv_pool_sequences(arch, accel, precision, kv_precision, tp, prompt_tokens + output_tokens,
                           free_memory_fraction)
    batch, binding = steady_batch(kv, max_batch_size, max_num_tokens, prompt_tokens, output_tokens)
    lifetime, step, prefill = round_lifetime_s(arch, accel, precision, kv_precision, tp, prompt_tokens,
                                               output_tokens, batch, itype)
    if requests is None:
        return OfflineThroughput(batch * output_tokens / lifetime, batch, binding, lifetime, step, prefill)
    full_rounds, left = divmod(requests, batch)
    run = full_rounds * lifetime
    if left:
        run += round_lifetime_s(arch, accel, precision, kv_precision, tp, prompt_tokens, output_tokens, left,
                                itype)[0]
    return OfflineThroughput(requests * output_tokens / run, batch, binding, lifetime, step, prefill, run)
