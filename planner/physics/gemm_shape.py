"""How much of the large-GEMM rate a transformer layer's GEMMs reach at their actual shapes.

The fitted per-generation share (efficiency.GEMM_EFFICIENCY_BY_GENERATION) is what big GEMMs sustain;
smaller ones lose more, for two physical reasons (NVIDIA Deep Learning Performance Guide, "Matrix
Multiplication Background", docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication):
- tile and wave quantisation: the output M×N is cut into tiles (256×128 is the most efficient tile the
  guide names), one tile per SM at a time; the last wave runs part-empty, so the GEMM takes
  ceil(tiles / SMs) waves of full-tile time;
- the roofline: arithmetic intensity M·N·K / (M·K + K·N + M·N) FLOP per 2-byte element moved; below
  peak ÷ bandwidth the GEMM is bound by HBM, not the tensor cores.
Each linear layer runs three GEMMs per micro-batch (forward, input gradient, weight gradient: Narayanan
et al. 2021, §3.2), with M = tokens of the micro-batch, and the TP split narrowing N (column-parallel)
or K (row-parallel) (Shoeybi et al. 2019). The factor is the time-weighted mean over those GEMMs.
A prompt's MoE layers run their routed experts as grouped GEMMs instead: each touched expert over its share of the
tokens and its own weights, all in one kernel whose tiles share the waves (forward_gemms, GROUPED_GEMM_FACTOR; a
training step's MoE GEMMs keep layer_gemms' shapes).
"""

from __future__ import annotations

import math
from functools import lru_cache

from planner.hardware.catalog import Accelerator
from planner.workload.presets import Architecture

# Streaming multiprocessors per GPU (NVIDIA architecture whitepapers: A100 108, A10G/A10 80 (GA102),
# L4 58 and L40S 142 (AD104/AD102), H100 SXM and H200 132, B200 148).
SMS = {"A100-40GB": 108, "A100-80GB": 108, "A10G": 80, "L4": 58, "L40S": 142, "H100-80GB": 132,
       "H200-141GB": 132, "B200": 148}
TILE_M, TILE_N = 256, 128  # the guide's most efficient tile (elements of the output)
# A MoE layer's grouped expert GEMM (vLLM's Triton fused_moe, TensorRT-LLM's MoE plugin) against a dense GEMM of the
# same tiles: its rate where the tiles, not the weight stream, bound it. Measured, not fitted on any reference row:
# vLLM's benchmark_moe.py timing Mixtral-8x7B's experts at TP 2 on H100 in BF16 with the tuned config vLLM ships,
# 1,024 and 1,536 tokens (vLLM PR #24700, bench/data/moe_kernels/vllm-fused-moe-kernel-times.yaml;
# bench/moe_kernel_check.py prefill_factor): 0.68 and 0.75 of the rate the tiles below give at Hopper's prefill share
# (0.71 while that share was 0.66).
# Checked on DeepSeek-V2-Lite's 64 experts (top-6) on A100 at 4,096 tokens (vLLM PR #40542), which took no part:
# +1.2%. Prefill only: decode keeps the routed experts' share measured on whole benchmark_latency runs
# (efficiency.MOE_GROUPED_GEMM_EFFICIENCY; docs/calibration-log.md, tenth session, on why).
GROUPED_GEMM_FACTOR = 0.72
# The M tiles a grouped expert kernel picks among (vLLM's fused_moe configs: BLOCK_SIZE_M 16-128 by the rows per
# expert, BLOCK_SIZE_N 128 the most common), so an expert's few rows are not padded to cuBLAS's 128.
GROUPED_TILES = ((128, 128), (64, 128), (32, 128), (16, 128))


def touched_expert_share(arch: Architecture, batch: int) -> float:
    """Share of the E routed experts that `batch` independently routed tokens touch per layer, k each: 1 - (1 - k/E)^b
    (1 for a model whose every expert runs for every token). E is `experts`, the routed ones: shared experts sit beside
    them and run for every token (models.yaml; expert_parallel.routed_expert_share)."""
    k = arch.active_experts
    if not arch.is_moe or k >= arch.experts:
        return 1.0
    return 1 - (1 - k / arch.experts) ** batch


def routed_groups(arch: Architecture, tokens: int) -> tuple[int, int]:
    """(experts, rows each) of a layer's routed-expert grouped GEMMs over `tokens` tokens: the experts they touch
    (touched_expert_share), each over an even router's share of the tokens' k routings."""
    touched = max(1, round(arch.experts * touched_expert_share(arch, max(1, tokens))))
    return touched, max(1, math.ceil(tokens * arch.active_experts / touched))


def grouped_expert_shapes(arch: Architecture, rows: int, tp: int) -> tuple[tuple[int, int, int], ...]:
    """(M, N, K) of one routed expert's two GEMMs over `rows` rows: the fused gate-up (2·ffn/tp wide) and the down
    projection (ffn/tp deep), SwiGLU experts as fused_moe runs them (w1 [E, 2N, K], w2 [E, K, N])."""
    f = max(1, arch.ffn_hidden_size // tp)
    return (rows, 2 * f, arch.hidden_size), (rows, arch.hidden_size, f)


def grouped_gemm_time_s(groups: int, m: int, n: int, k: int, sms: int | None, bandwidth_gb_s: float,
                        peak_flops: float, element_bytes: float) -> float:
    """Seconds of `groups` experts' M×K·K×N GEMMs in one grouped kernel: their shared tile waves at
    GROUPED_GEMM_FACTOR of `peak_flops`, against the stream of their operands (gemm_time_s)."""
    return gemm_time_s(m, n, k, sms, bandwidth_gb_s, peak_flops * GROUPED_GEMM_FACTOR, element_bytes, GROUPED_TILES,
                       groups)


def gemm_shape_factor(m: int, n: int, k: int, accel: Accelerator, peak_flops: float, element_bytes: float = 2) -> float:
    """Achieved ÷ ideal rate of one M×K·K×N GEMM: wave-quantised compute time against its HBM time."""
    return _shape_factor(m, n, k, SMS.get(accel.name), accel.memory_bandwidth_gb_s, peak_flops, element_bytes)


def _shape_factor(m: int, n: int, k: int, sms: int | None, bandwidth_gb_s: float, peak_flops: float,
                  element_bytes: float) -> float:
    if m <= 0 or n <= 0 or k <= 0:
        return 1.0
    return 2.0 * m * n * k / peak_flops / gemm_time_s(m, n, k, sms, bandwidth_gb_s, peak_flops, element_bytes)


def gemm_time_s(m: int, n: int, k: int, sms: int | None, bandwidth_gb_s: float, peak_flops: float,
                element_bytes: float, tiles: tuple[tuple[int, int], ...] = ((TILE_M, TILE_N),),
                groups: int = 1) -> float:
    """Seconds of one M×K·K×N GEMM at the peak rate: its tile waves (the best of `tiles`, as cuBLAS's
    heuristic picks a tile per shape) against the HBM time of its operands. `groups` GEMMs of one shape launched as
    one grouped kernel (a MoE layer's experts, each its own weight and its own M rows) share their waves."""
    ideal_s = 2.0 * groups * m * n * k / peak_flops
    if sms:
        compute_s = min(ideal_s * math.ceil(groups * math.ceil(m / tm) * math.ceil(n / tn) / sms) * sms * tm * tn
                        / (groups * m * n) for tm, tn in tiles)
    else:  # an accelerator without a published SM count: the roofline only
        compute_s = ideal_s
    memory_s = element_bytes * groups * (m * k + k * n + m * n) / (bandwidth_gb_s * 1e9)
    return max(compute_s, memory_s)


def layer_gemms(arch: Architecture, tokens: int, tp: int) -> list[tuple[int, int, int]]:
    """(M, N, K) of one layer's forward GEMMs per micro-batch: QKV and MLP-up column-parallel (N/tp),
    attention output and MLP-down row-parallel (K/tp)."""
    q = arch.attention_heads * arch.head_dim
    qkv = q + 2 * arch.kv_heads * arch.head_dim
    h, f = arch.hidden_size, arch.ffn_hidden_size
    return [(tokens, max(1, qkv // tp), h), (tokens, h, max(1, q // tp)),
            (tokens, max(1, f // tp), h), (tokens, h, max(1, f // tp))]


def forward_gemms(arch: Architecture, tokens: int,
                  tp: int) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int, int]]]:
    """One layer's forward GEMMs over `tokens` prompt tokens: the dense ones' (M, N, K), layer_gemms for a dense model,
    and the grouped ones' (groups, M, N, K). A MoE layer's routed experts run as one grouped GEMM per projection (vLLM's
    fused_moe, TensorRT-LLM's MoE plugin), each touched expert over its share of the tokens' routings (an even
    router's) and its own weights (routed_groups); its shared experts run for every token as one MLP of their summed
    width (DeepSeekMoE's shared_experts module)."""
    dense = layer_gemms(arch, tokens, tp)
    if not arch.is_moe:
        return dense, []
    groups, rows = routed_groups(arch, tokens)
    routed = [(groups, m, n, k) for m, n, k in grouped_expert_shapes(arch, rows, tp)]
    width = max(1, arch.shared_experts * arch.ffn_hidden_size // tp)
    shared = [(tokens, width, arch.hidden_size), (tokens, arch.hidden_size, width)] if arch.shared_experts else []
    return dense[:2] + shared, routed


def passes(m: int, n: int, k: int) -> tuple[tuple[int, int, int], ...]:
    """A linear layer's three GEMMs per micro-batch from its forward M×K·K×N: forward, input gradient
    (M×N·N×K) and weight gradient (K×M·M×N) (Narayanan et al. 2021, §3.2)."""
    return (m, n, k), (m, k, n), (k, n, m)


def layer_gemm_factor(arch: Architecture, tokens: int, tp: int, accel: Accelerator, peak_flops: float,
                      element_bytes: float = 2) -> float:
    """Time-weighted shape factor over forward, input-gradient (M×N·N×K) and weight-gradient (K×M·M×N)
    GEMMs of the layer, each weighted by its FLOPs (operands of `element_bytes`: 1 for FP8). Neuron
    compiles its own tiling (no SM waves): 1."""
    if accel.is_neuron:
        return 1.0
    # The training search asks this for thousands of layouts but only a few (tokens, TP) pairs (issue 29):
    # one evaluation per distinct set of the numbers it reads, so a repeat is the same float.
    return _layer_factor(tuple(layer_gemms(arch, tokens, tp)), SMS.get(accel.name), accel.memory_bandwidth_gb_s,
                         peak_flops, element_bytes)


@lru_cache(maxsize=4096)
def _layer_factor(gemms: tuple[tuple[int, int, int], ...], sms: int | None, bandwidth_gb_s: float, peak_flops: float,
                  element_bytes: float) -> float:
    work = time = 0.0
    for m, n, k in gemms:
        for shape in passes(m, n, k):
            flops = shape[0] * shape[1] * shape[2]
            work += flops
            time += flops / _shape_factor(*shape, sms, bandwidth_gb_s, peak_flops, element_bytes)
    return work / time if time else 1.0
