"""Throughput and latency from the roofline: decode and prefill for serving, step time for training.

Every estimate is time = work ÷ (roof × efficiency) with efficiency ≤ 1, so nothing is predicted
above a physical roof (memory bandwidth, peak FLOP/s, link speed); each result says which roof binds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.catalog import Accelerator, InstanceType
from planner.memory import kv_bytes_per_sequence, kv_shard_fraction, weight_bytes
from planner.presets import Architecture
from planner.units import compute_precision

# --- calibration constants (few, named, each from a published measurement) -----------------------
# Achieved share of peak HBM bandwidth when streaming weights in decode: gpt-fast measured
# 1,397 GB/s for Llama-2-7B bf16 on one A100-80GB (2,039 GB/s peak) = 0.685 (reference D5, P-34);
# domain.md gives 65-85% as the measured range.
MEMORY_BANDWIDTH_EFFICIENCY = 0.70
# Weight-only quantised kernels dequantise on the fly and reach less of the roof (gpt-fast, P-35..P-38:
# int8 at 0.77-0.95 and int4 at 0.62-0.79 of the bf16 rate's bandwidth).
QUANTISED_BANDWIDTH_FACTOR = {"int8": 0.80, "int4": 0.62}
# Share of peak tensor FLOP/s that a model's GEMMs sustain end to end (sustained clocks under load,
# tile quantisation, kernel gaps). One value for every accelerator: fitted to the 13 training rows of
# reference A3 (Korthikanti) and A9 (MosaicML) together with the non-matmul traffic below, whose
# bandwidth share is what makes an H100 reach a lower MFU than an A100 (bench/accuracy.py).
GEMM_EFFICIENCY = 0.65
# Prefill runs whole prompts through the GEMMs with less fusion than training; vLLM-class engines
# reach 50-70% of peak on long prompts. The midpoint.
PREFILL_EFFICIENCY = 0.60
# Non-matmul traffic per layer in training, bytes per token per hidden unit: Korthikanti's 34 B of
# stored activations (reference B2) are written in the forward and read back in the backward, and the
# norms, residual adds, activation functions and dropout read and write them again: 6 passes, fitted
# with GEMM_EFFICIENCY above.
NONMATMUL_BYTES_PER_TOKEN_HIDDEN = 6 * 34
# NCCL ring collectives reach ~80% of the link's one-way bandwidth (nccl-tests bus bandwidth:
# ~235 of 300 GB/s on NVLink3, ~370 of 450 on NVLink4).
COLLECTIVE_EFFICIENCY = 0.80
# Small-message all-reduce latency fitted to gpt-fast's TP scaling (P-39, P-40: 17-29 µs per
# all-reduce for TP 2-8): a fixed cost plus one per extra rank.
ALLREDUCE_BASE_S = 15e-6
ALLREDUCE_PER_RANK_S = 1.5e-6
# Megatron's interleaved 1F1B schedule with 3 model chunks per device, as Korthikanti §6 ran it.
VIRTUAL_PIPELINE_STAGES = 3


def link_bytes_per_s(accel: Accelerator) -> float:
    """One-way per-device bandwidth inside a node (vendor NVLink figures add both directions)."""
    return accel.intra_node_gb_s * 1e9 / 2 * COLLECTIVE_EFFICIENCY


def network_bytes_per_s(itype: InstanceType) -> float:
    """Per-device share of the instance's EFA/ENA bandwidth between nodes."""
    return itype.inter_node_gbps * 1e9 / 8 / itype.accelerators_per_node * COLLECTIVE_EFFICIENCY


def allreduce_s(bytes_: float, ranks: int, bandwidth: float) -> float:
    """Ring all-reduce: each rank moves 2(n-1)/n of the buffer (Patarasuk & Yuan 2009)."""
    if ranks <= 1:
        return 0.0
    return ALLREDUCE_BASE_S + ALLREDUCE_PER_RANK_S * (ranks - 1) + 2 * (ranks - 1) / ranks * bytes_ / bandwidth


def effective_bandwidth(accel: Accelerator, precision: str) -> float:
    return accel.memory_bandwidth_gb_s * 1e9 * MEMORY_BANDWIDTH_EFFICIENCY * QUANTISED_BANDWIDTH_FACTOR.get(precision, 1.0)


def moe_weight_bytes_read(arch: Architecture, precision: str, batch: int) -> float:
    """Weights streamed per decode step: every dense weight, plus the experts the batch touches.
    With E experts and k per token, a batch touches E·(1 - (1 - k/E)^b) experts per layer."""
    total = weight_bytes(arch, precision)
    if not arch.is_moe:
        return total
    routed = arch.experts - arch.shared_experts if arch.shared_experts else arch.experts
    k = arch.active_experts
    expert_share = (arch.params - arch.params_per_token) / (arch.params * (1 - k / routed))
    expert_bytes = total * min(1.0, expert_share)
    touched = routed * (1 - (1 - k / routed) ** batch)
    return total - expert_bytes + expert_bytes * touched / routed


@dataclass(frozen=True)
class DecodeStep:
    seconds: float
    memory_s: float
    compute_s: float
    communication_s: float

    @property
    def bound(self) -> str:
        roofs = {"memory-bandwidth": self.memory_s, "compute": self.compute_s,
                 "communication": self.communication_s}
        return max(roofs, key=roofs.get)


def decode_step(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str,
                tp: int, pp: int, batch: int, context_tokens: float) -> DecodeStep:
    """One decode step for `batch` sequences at `context_tokens` each (domain.md):
    max(bytes moved ÷ achieved bandwidth, FLOPs ÷ achieved peak) + TP all-reduces, per stage, × stages."""
    weights = moe_weight_bytes_read(arch, precision, batch) / (tp * pp)
    kv = batch * kv_bytes_per_sequence(arch, int(context_tokens), kv_precision) * kv_shard_fraction(arch, tp) / pp
    memory_s = (weights + kv) / effective_bandwidth(accel, precision)
    attention_flops = 4 * arch.layers * arch.attention_heads * arch.head_dim * context_tokens
    flops = batch * (2 * arch.params_per_token + attention_flops) / (tp * pp)
    compute_s = flops / (accel.peak_flops(compute_precision(precision)) * GEMM_EFFICIENCY)
    activation = batch * arch.hidden_size * 2
    comm_s = 2 * arch.layers / pp * allreduce_s(activation, tp, link_bytes_per_s(accel)) if tp > 1 else 0.0
    stage_s = max(memory_s, compute_s) + comm_s
    return DecodeStep(stage_s * pp, memory_s * pp, compute_s * pp, comm_s * pp)


def prefill_s(arch: Architecture, accel: Accelerator, precision: str, tp: int, pp: int, prompt_tokens: int) -> float:
    """Time to run one prompt through the model: causal attention does half of 4·L·s²·H·hd."""
    flops = 2 * arch.params_per_token * prompt_tokens + \
        2 * arch.layers * prompt_tokens**2 * arch.attention_heads * arch.head_dim
    compute = flops / (tp * pp) / (accel.peak_flops(compute_precision(precision)) * PREFILL_EFFICIENCY)
    memory = weight_bytes(arch, precision) / (tp * pp) / effective_bandwidth(accel, precision) * pp
    comm = 2 * arch.layers * allreduce_s(prompt_tokens * arch.hidden_size * 2, tp, link_bytes_per_s(accel)) if tp > 1 else 0.0
    return max(compute, memory) + comm


@dataclass(frozen=True)
class ServingEstimate:
    output_tokens_per_s_per_replica: float
    time_to_first_token_s: float
    inter_token_latency_s: float
    bound: str


def serving_estimate(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str, tp: int,
                     pp: int, batch: int, prompt_tokens: int, output_tokens: int) -> ServingEstimate:
    """Continuous batching at `batch` sequences per replica, at the typical request.

    Each decode step emits one token per sequence; meanwhile batch/output_tokens sequences finish and
    are replaced, and their prefills share the GPU (chunked prefill), which lengthens every step.
    """
    mean_context = prompt_tokens + output_tokens / 2
    step = decode_step(arch, accel, precision, kv_precision, tp, pp, batch, mean_context)
    prefill = prefill_s(arch, accel, precision, tp, pp, prompt_tokens)
    effective_step = step.seconds + batch / output_tokens * prefill
    return ServingEstimate(batch / effective_step, prefill + step.seconds, effective_step, step.bound)


@dataclass(frozen=True)
class TrainingLayout:
    tp: int
    pp: int
    dp: int
    zero: int
    micro_batch: int
    microbatches: int
    checkpointing: str


@dataclass(frozen=True)
class TrainingEstimate:
    step_time_s: float
    tokens_per_step: float
    tokens_per_s: float
    achieved_tflops_per_device: float
    model_flops_utilization: float
    bound: str


def model_flops_per_token(arch: Architecture, seq: int, method: str = "full") -> float:
    """6·N + 12·L·h·s (PaLM's MFU definition, Chowdhery et al. 2022 App. B; design.md). A LoRA
    backward skips the frozen weights' gradients, so 4·N instead of 6·N."""
    dense = (4 if method != "full" else 6) * arch.params_per_token
    return dense + 12 * arch.layers * arch.hidden_size * seq


def recompute_flops_per_token(arch: Architecture, seq: int, checkpointing: str) -> float:
    """Extra forward work: full recompute reruns every layer's forward (2·N + 4·L·h·s);
    selective reruns the attention core (4·L·h·s) (Korthikanti §5)."""
    attention = 4 * arch.layers * arch.hidden_size * seq
    return {"full": 2 * arch.params_per_token + attention, "selective": attention}.get(checkpointing, 0.0)


def training_step(arch: Architecture, itype: InstanceType, accel: Accelerator, precision: str, method: str,
                  seq: int, layout: TrainingLayout, local_state_bytes: float,
                  trainable_params: float) -> TrainingEstimate:
    """Step time = compute + pipeline bubble + exposed communication + optimizer update."""
    tp, pp, dp, m, b = layout.tp, layout.pp, layout.dp, layout.microbatches, layout.micro_batch
    devices = tp * pp * dp
    tokens = m * b * dp * seq
    model_flops = model_flops_per_token(arch, seq, method)
    hw_flops = model_flops + recompute_flops_per_token(arch, seq, layout.checkpointing)
    peak = accel.peak_flops(compute_precision(precision))
    bandwidth = accel.memory_bandwidth_gb_s * 1e9
    matmul_s = hw_flops * tokens / devices / (peak * GEMM_EFFICIENCY)
    passes = 4 / 3 if layout.checkpointing == "full" else 1.0
    nonmatmul_s = passes * NONMATMUL_BYTES_PER_TOKEN_HIDDEN * arch.layers * arch.hidden_size * tokens / devices / bandwidth
    compute_s = matmul_s + nonmatmul_s
    bubble_s = compute_s * (pp - 1) / (m * (VIRTUAL_PIPELINE_STAGES if pp > 1 else 1))

    intra, inter = link_bytes_per_s(accel), network_bytes_per_s(itype)
    apn = itype.accelerators_per_node
    # TP: 4 all-reduces of s·b·h activations per layer per micro-batch (2 forward, 2 backward), +2 on recompute.
    reduces = 4 + (2 if layout.checkpointing == "full" else 0)
    tp_s = m * math.ceil(arch.layers / pp) * reduces * allreduce_s(seq * b * arch.hidden_size * 2, tp, intra)
    # PP: activations cross each stage boundary forward and back, over EFA once stages span nodes.
    pp_link = inter if tp * pp > apn else intra
    pp_s = 2 * m * seq * b * arch.hidden_size * 2 / tp / pp_link if pp > 1 else 0.0
    # DP: gradient all-reduce (ZeRO-3: all-gather weights twice + reduce-scatter = 1.5× the volume),
    # overlapped with backward compute; over EFA once the data-parallel group leaves the node.
    trainable = trainable_params / (tp * pp)
    dp_link = inter if devices > apn and dp > 1 and tp * pp < devices else intra
    dp_comm = allreduce_s(trainable * 2, dp, dp_link) * (1.5 if layout.zero >= 3 else 1.0)
    backward_s = compute_s * 2 / 3 / (1 if layout.zero >= 3 else m)
    dp_s = max(0.0, dp_comm - backward_s)
    optimizer_s = 2 * local_state_bytes / bandwidth
    step = compute_s + bubble_s + tp_s + pp_s + dp_s + optimizer_s
    comm = tp_s + pp_s + dp_s
    bound = "communication" if comm > compute_s else ("compute" if matmul_s >= nonmatmul_s else "memory-bandwidth")
    tokens_per_s = tokens / step
    achieved = model_flops * tokens_per_s / devices
    return TrainingEstimate(step, tokens, tokens_per_s, achieved / 1e12, achieved / peak, bound)
