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


def gemm_shape_factor(m: int, n: int, k: int, accel: Accelerator, peak_flops: float, element_bytes: float = 2) -> float:
    """Achieved ÷ ideal rate of one M×K·K×N GEMM: wave-quantised compute time against its HBM time."""
    return _shape_factor(m, n, k, SMS.get(accel.name), accel.memory_bandwidth_gb_s, peak_flops, element_bytes)


def _shape_factor(m: int, n: int, k: int, sms: int | None, bandwidth_gb_s: float, peak_flops: float,
                  element_bytes: float) -> float:
    if m <= 0 or n <= 0 or k <= 0:
        return 1.0
    return 2.0 * m * n * k / peak_flops / gemm_time_s(m, n, k, sms, bandwidth_gb_s, peak_flops, element_bytes)


def gemm_time_s(m: int, n: int, k: int, sms: int | None, bandwidth_gb_s: float, peak_flops: float,
                element_bytes: float, tiles: tuple[tuple[int, int], ...] = ((TILE_M, TILE_N),)) -> float:
    """Seconds of one M×K·K×N GEMM at the peak rate: its tile waves (the best of `tiles`, as cuBLAS's
    heuristic picks a tile per shape) against the HBM time of its operands."""
    ideal_s = 2.0 * m * n * k / peak_flops
    if sms:
        compute_s = min(ideal_s * math.ceil(math.ceil(m / tm) * math.ceil(n / tn) / sms) * sms * tm * tn / (m * n)
                        for tm, tn in tiles)
    else:  # an accelerator without a published SM count: the roofline only
        compute_s = ideal_s
    memory_s = element_bytes * (m * k + k * n + m * n) / (bandwidth_gb_s * 1e9)
    return max(compute_s, memory_s)


def layer_gemms(arch: Architecture, tokens: int, tp: int) -> list[tuple[int, int, int]]:
    """(M, N, K) of one layer's forward GEMMs per micro-batch: QKV and MLP-up column-parallel (N/tp),
    attention output and MLP-down row-parallel (K/tp)."""
    q = arch.attention_heads * arch.head_dim
    qkv = q + 2 * arch.kv_heads * arch.head_dim
    h, f = arch.hidden_size, arch.ffn_hidden_size
    return [(tokens, max(1, qkv // tp), h), (tokens, h, max(1, q // tp)),
            (tokens, max(1, f // tp), h), (tokens, h, max(1, f // tp))]


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
