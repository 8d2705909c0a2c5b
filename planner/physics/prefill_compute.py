"""How fast a GPU runs a prompt's prefill: a share of dense peak per GPU generation, at prefill's shapes.

Prefill is a forward pass over the prompt's tokens: the same cuBLAS GEMMs as a training forward, with
M = the tokens prefilled together. It sustains a share of dense peak per CUDA generation
(efficiency.PREFILL_EFFICIENCY_BY_GENERATION, its priors the training rows' GEMM share: Hopper reaches
a lower share of its higher peak than Ampere), times the tile/wave and roofline factor of its forward
GEMMs (NVIDIA Deep Learning Performance Guide, "Matrix Multiplication Background"): a 128-token prompt's
GEMMs sit near the HBM roof, a few-hundred-token one's lose part of a last wave. A MoE layer's routed experts run as
grouped GEMMs, each touched expert over its share of the tokens, at the grouped kernel's measured share of that rate
(gemm_shape.forward_gemms, GROUPED_GEMM_FACTOR).

The attention core (QKᵀ and P·V, causal: half of 4·s²·heads·head_dim per layer) runs FlashAttention's
forward in 16-bit whatever the weights' precision; FlashAttention-2 reaches 50-73% of A100's dense
peak in the forward (Dao 2023, arXiv 2307.08691, abstract and Fig. 4), the range of the Ampere GEMM
share, and FlashAttention-3 75% of H100's (Shah et al. 2024, arXiv 2407.08608), so attention runs at
the same share as the GEMMs, without their shape factor. This replaces one prefill share of peak for
every generation, which put prefill on H100 at the Ampere share and left NIM's 5,000-token H100
prompts 35-43% fast.
"""

from __future__ import annotations

from planner.hardware.catalog import Accelerator
from planner.hardware.units import BYTES_PER_PARAM, attention_precision, compute_precision
from planner.physics import efficiency
from planner.physics.gemm_shape import SMS, forward_gemms, gemm_time_s, grouped_gemm_time_s
from planner.workload.presets import Architecture


# CTA tiles cuBLAS/CUTLASS choose among for a GEMM's output (NVIDIA Deep Learning Performance Guide,
# "Matrix Multiplication Background", §2.2: 256×128, 128×128 and 128×64 among the tiles it lists):
# training's large-M GEMMs are modelled at the largest; a prompt's M of a few hundred tokens gets the
# tile that wastes the least of its last wave, as cuBLAS's heuristic picks per shape.
TILES = ((256, 128), (128, 128), (128, 64))


def forward_gemm_factor(arch: Architecture, tokens: int, tp: int, accel: Accelerator, peak_flops: float,
                        element_bytes: float) -> float:
    """Achieved ÷ ideal rate of one layer's forward GEMMs (QKV, attention output, MLP up, MLP down) with
    M = `tokens` (a MoE layer's experts grouped, each over its routed share: gemm_shape.forward_gemms),
    FLOP-weighted: gemm_shape.gemm_time_s of each at the per-shape tile above, a grouped one's at
    gemm_shape.grouped_gemm_time_s."""
    sms, bandwidth = SMS.get(accel.name), accel.memory_bandwidth_gb_s
    dense, grouped = forward_gemms(arch, max(1, int(tokens)), tp)
    work = 2.0 * (sum(m * n * k for m, n, k in dense) + sum(g * m * n * k for g, m, n, k in grouped))
    time = (sum(gemm_time_s(m, n, k, sms, bandwidth, peak_flops, element_bytes, TILES) for m, n, k in dense)
            + sum(grouped_gemm_time_s(*gemm, sms, bandwidth, peak_flops, element_bytes) for gemm in grouped))
    return work / peak_flops / time if time else 1.0


def prefill_compute_s(arch: Architecture, accel: Accelerator, precision: str, tp: int, tokens: int,
                      linear_flops: float, attention_flops: float) -> float:
    """Seconds per TP rank for `linear_flops` of weight GEMMs over `tokens` prompt tokens and
    `attention_flops` of causal attention (both for the whole TP group). Neuron compiles its own
    tiling: one share of peak (efficiency.NEURON_PREFILL_EFFICIENCY) as before."""
    linear_precision = compute_precision(precision, accel.supports.fp4)
    if accel.is_neuron:
        return (linear_flops + attention_flops) / tp / (accel.peak_flops(linear_precision)
                                                        * efficiency.NEURON_PREFILL_EFFICIENCY)
    gemm = efficiency.prefill_efficiency(accel)
    linear_peak = accel.peak_flops(linear_precision)
    shape = forward_gemm_factor(arch, tokens, tp, accel, linear_peak, min(2.0, max(BYTES_PER_PARAM[precision], 1.0)))
    fp8 = efficiency.prefill_fp8_factor(accel) if linear_precision == "fp8" else 1.0
    linear_s = linear_flops / tp / (linear_peak * min(1.0, gemm * shape * fp8))
    attention_s = attention_flops / tp / (accel.peak_flops(attention_precision(linear_precision)) * gemm)
    return linear_s + attention_s
