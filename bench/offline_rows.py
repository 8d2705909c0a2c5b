"""TensorRT-LLM perf-overview rows (trtllm-bench throughput, every request queued at once) in the
planner's terms: the engine settings trtllm-bench chooses, then planner/physics/offline_throughput.py.

The perf-overview (NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md, v0.17 @258c7540 and
v1.0 @00f37686) builds (v0.17) or runs (v1.0, PyTorch backend) with `--dataset` and no stated
max_batch_size / max_num_tokens: "trtllm-bench build uses high-level statistics of the dataset (average
ISL/OSL, max sequence length) and tuning heuristics to optimize engine build settings". Those
heuristics are tensorrt_llm/bench/build/tuning.py (calc_engine_setting, finetune_setting; read at
@04cba882), reproduced here: they estimate the requests whose ISL + OSL KV fits
0.95 × (memory of all GPUs − parameters × bytes per element), cap that at 4,096, round it up
(64 at least) for max_batch_size, and set max_num_tokens to the same requests × (1 + ISL/OSL), capped
at 32,768 and rounded up (2,048 at least). The runtime then admits what its real KV pool holds
(kv_cache_free_gpu_mem_fraction 0.95, the doc: "in majority of cases").
"""

from __future__ import annotations

import math

from planner.hardware.catalog import Accelerator
from planner.physics.offline_throughput import OfflineThroughput, offline_throughput
from planner.workload.presets import Architecture

KV_FREE_MEMORY_FRACTION = 0.95  # perf-overview: --kv_cache_free_gpu_mem_fraction 0.95 "in majority of cases"
TUNING_MAX_REQUESTS = 4096  # tuning.py finetune_setting: raw_bs = min(kv_cache_max_requests, 4096) / pp
TUNING_MAX_TOKENS = 32768  # tuning.py finetune_setting: raw_token capped at 32,768
# tuning.py BYTES_PER_ELEM: the heuristic's own bytes per weight element (NVFP4 without its block scales)
TUNING_BYTES_PER_ELEM = {"bf16": 2.0, "fp8": 1.0, "nvfp4": 0.5}
# The perf-overview's FP4 columns run NVIDIA ModelOpt FP4 checkpoints (nvidia/Llama-3.3-70B-Instruct-FP4,
# nvidia/Llama-3.1-405B-Instruct-FP4: "FP4 Models" list of the v1.0 doc): NVFP4 weights and activations.
PRECISIONS = {"fp4": "nvfp4", "fp8": "fp8", "fp16": "bf16", "bf16": "bf16"}
# KV cache dtype: v0.17 states it ("If you specify FP8 quantization, the KV cache will automatically be
# set to FP8"). The v1.0 rows leave it unstated; they run NVIDIA's ModelOpt checkpoints, whose
# hf_quant_config.json has kv_cache_quant_algo null, and trtllm-bench then picks FP8 KV for FP8 and NVFP4
# compute (TensorRT-LLM docs/source/performance/perf-benchmarking.md @04276b44, "Quantization in the PyTorch Flow":
# "FP8 | null | FP8 | Set to FP8 via benchmark", "NVFP4 | null | FP8 | Set to FP8 via benchmark").
UNSTATED_KV = {"nvfp4": "fp8", "fp8": "fp8", "bf16": "bf16"}


def is_trtllm_bench(row: dict) -> bool:
    """A trtllm-bench offline row (v0.17 engine flow or v1.0 PyTorch backend), not the v0.14 Triton table."""
    version = str(row.get("engine_version"))
    return (row.get("engine") == "tensorrt-llm" and row.get("load") == "offline-throughput"
            and (version == "0.17" or "trtllm-bench" in version))


def _round_up(value: float, step: int) -> int:
    return step * math.ceil(value / step)


def tuned_settings(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str, tp: int,
                   prompt_tokens: int, output_tokens: int) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) as trtllm-bench's tuning heuristic sets them (pp = 1)."""
    kv_heads = max(tp, arch.kv_heads)  # tuning.py: "each GPU in TP group has at least 1 kv head"
    per_token = 2 * arch.layers * kv_heads * arch.head_dim * (1.0 if kv_precision == "fp8" else 2.0)
    available = accel.memory_bytes * tp - arch.params * TUNING_BYTES_PER_ELEM[precision]
    requests = KV_FREE_MEMORY_FRACTION * available / (per_token * (prompt_tokens + output_tokens))
    raw_bs = min(requests, TUNING_MAX_REQUESTS)
    raw_tokens = min(raw_bs * (1 + prompt_tokens / output_tokens), TUNING_MAX_TOKENS)
    if raw_bs < 256:
        max_bs = max(64, _round_up(raw_bs, 32))
    else:
        max_bs = _round_up(raw_bs, 128 if raw_bs < 1024 else 256)
    if raw_tokens < 4096:
        max_tokens = max(2048, _round_up(raw_tokens, 256))
    else:
        max_tokens = _round_up(raw_tokens, 512 if raw_tokens < 8192 else 1024)
    return max_bs, max_tokens


def row_precisions(row: dict) -> tuple[str, str]:
    """(weights and compute, KV cache) precision of a trtllm-bench row in the planner's names."""
    precision = PRECISIONS[str(row["precision"]).lower()]
    stated = row.get("kv_precision")
    return precision, UNSTATED_KV[precision] if stated is None else ("fp8" if str(stated).startswith("fp8") else "bf16")


def predict_offline(arch: Architecture, accel: Accelerator, itype, row: dict) -> OfflineThroughput:
    """The planner's offline throughput for one trtllm-bench row, on trtllm-bench's own settings, for the run of
    `num_requests` the row states (the perf-overview's dataset size per ISL/OSL; None: steady state)."""
    precision, kv = row_precisions(row)
    tp, prompt, output = row["tp"], row["prompt_tokens"], row["output_tokens"]
    max_bs, max_tokens = tuned_settings(arch, accel, precision, kv, tp, prompt, output)
    return offline_throughput(arch, accel, precision, kv, tp, prompt, output, max_bs, max_tokens,
                              KV_FREE_MEMORY_FRACTION, itype, row.get("num_requests"))
