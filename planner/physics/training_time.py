"""Training step time from the roofline: GEMMs at the tensor rate they run at, non-matmul traffic at
HBM bandwidth, the pipeline bubble, and every collective the layout implies counted where it
happens (per micro-batch for ZeRO-2/3 and FSDP) over the link it crosses (NVLink inside a node,
the node's shared NICs across nodes). Nothing is predicted above a roof: every efficiency ≤ 1."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from planner.physics import efficiency
from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics.context_parallel import cp_step_s
from planner.physics.collectives import (group_collective_s, inter_node_bytes_per_s, intra_node_bytes_per_s,
                                        intra_node_ring_s)
from planner.physics.fp8_casts import fp8_cast_bytes_per_token
from planner.physics.expert_training import all_to_all_step_s, expert_weight_traffic_s, expert_work
from planner.physics.gemm_shape import layer_gemm_factor
from planner.physics.lora_traffic import adapter_traffic_s
from planner.physics.memory import TrainingSetup, base_weight_bytes, gradient_bytes, lora_params, weight_bytes_per_param
from planner.physics.pipeline_schedule import bubble_fraction, p2p_factor
from planner.workload.presets import Architecture
from planner.hardware.units import NF4_BYTES_PER_PARAM, compute_precision


@dataclass(frozen=True)
class TrainingLayout:
    tp: int
    pp: int
    dp: int
    zero: int
    micro_batch: int
    microbatches: int
    checkpointing: str
    schedule: str = "1f1b"  # planner.physics.pipeline_schedule.SCHEDULES
    virtual_stages: int = 1  # model chunks per device under the interleaved schedule
    ep: int = 1  # MoE: DP ranks the routed experts are split over (planner/physics/expert_training.py)
    cp: int = 1  # context parallelism: ranks each sequence is split over (planner/physics/context_parallel.py)


@dataclass(frozen=True)
class TrainingWork:
    """What the step moves besides activations: the weights a ZeRO-3 gather brings in (whole model,
    bytes, frozen base included), the trainable parameters and the bytes their gradients reduce in."""
    method: str
    gathered_weight_bytes: float
    trainable_params: float
    grad_bytes: float
    updated_param_bytes: float  # per trainable parameter, as ZeRO-1/2 all-gathers them after the update
    base_params: float  # frozen parameters that QLoRA dequantises on every matmul (0 otherwise)
    dp_bucket_bytes: float | None = None  # gradient bucket of ZeRO-0/1/2 collectives; None: Megatron's (dp_buckets)
    lora_targets: str = "all"  # the matrices LoRA adapts (lora_traffic.LORA_TARGETS)
    kernels: str = "eager"  # the training kernel stack: eager, compiled or fused (workload.sections.TrainingSection)


def training_work(arch: Architecture, setup: TrainingSetup) -> TrainingWork:
    """Full training reduces gradients in their accumulation precision (fp32 for bf16, the 18 B/param
    accounting) and all-gathers 16-bit weights; LoRA/QLoRA train fp32 adapters on a frozen base."""
    if setup.method == "full":
        return TrainingWork("full", base_weight_bytes(arch, setup), arch.params,
                            gradient_bytes(setup.precision, setup.grad_precision), weight_bytes_per_param(setup), 0.0,
                            kernels=setup.kernels)
    base = arch.params - arch.embedding_params if setup.method == "qlora" else 0.0
    return TrainingWork(setup.method, base_weight_bytes(arch, setup), lora_params(arch, setup.lora_rank, setup.lora_targets),
                        4.0, 4.0, base, lora_targets=setup.lora_targets, kernels=setup.kernels)


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
    return linear_flops_per_token(arch, method) + attention_flops_per_token(arch, seq)


def linear_flops_per_token(arch: Architecture, method: str = "full") -> float:
    return _passes(method) * arch.params_per_token


def attention_flops_per_token(arch: Architecture, seq: int) -> float:
    """The attention core's 12·L·h·s of the MFU definition (fwd + bwd, the causal mask's half counted)."""
    return 12 * arch.layers * arch.hidden_size * seq


def executed_linear_flops_per_token(arch: Architecture, method: str = "full") -> float:
    """linear_flops_per_token as the devices run it: MFU's 6·N counts every parameter, but a token gathers its row of
    an untied input embedding table and multiplies none of it (Architecture.matmul_params_per_token; Megatron's FLOP
    count, Narayanan et al. 2021 §5.1, has the LM head's 6·V·h and no input-embedding term)."""
    return _passes(method) * arch.matmul_params_per_token


def executed_flops_per_token(arch: Architecture, seq: int, method: str = "full") -> float:
    """model_flops_per_token as the devices run it (executed_linear_flops_per_token)."""
    return executed_linear_flops_per_token(arch, method) + attention_flops_per_token(arch, seq)


def _passes(method: str) -> int:
    """FLOPs per parameter per token: 2 forward + 4 backward; a LoRA backward skips the frozen weights' gradients."""
    return 6 if method == "full" else 4


def recompute_flops_per_token(arch: Architecture, seq: int, checkpointing: str) -> tuple[float, float]:
    """Extra forward work as (linear, attention): full recompute reruns every layer's forward
    (2·N + 4·L·h·s); selective reruns the attention core only (4·L·h·s) (Korthikanti §5)."""
    attention = 4 * arch.layers * arch.hidden_size * seq
    extra = {"full": (2 * arch.matmul_params_per_token, attention), "selective": (0.0, attention)}
    return extra.get(checkpointing, (0.0, 0.0))


def _matmul_s_per_token(arch: Architecture, accel: Accelerator, precision: str, method: str, seq: int,
                        layout: TrainingLayout, kernels: str = "eager") -> float:
    """Time per token a device processes in the GEMMs. Linear layers run at the precision's tensor rate (FP8 where
    trained in FP8), at the share big GEMMs reach on the kernel stack times their shapes' factor (tile/wave
    quantisation, roofline: planner/physics/gemm_shape.py); the attention core (QKᵀ, softmax·V) stays in 16-bit, as
    Transformer Engine and Megatron run it, at its kernel's rate. It reads only TP, the micro-batch and the recompute
    mode of the layout, so the search computes it once per (TP, micro-batch, recompute) (step_parts' memo)."""
    checkpointing = layout.checkpointing
    linear_precision = compute_precision(precision)
    shape = layer_gemm_factor(arch, seq * layout.micro_batch // layout.cp, layout.tp, accel, accel.peak_flops(linear_precision),
                              1 if linear_precision == "fp8" else 2)
    linear_efficiency = shape * efficiency.training_linear_efficiency(accel, kernels, linear_precision)
    extra_linear, extra_attention = recompute_flops_per_token(arch, seq, checkpointing)
    attention_flops = attention_flops_per_token(arch, seq)
    linear = executed_linear_flops_per_token(arch, method) + extra_linear
    # FlashAttention skips the masked half of causal attention: the hardware does half of the
    # 12·L·h·s that the MFU definition counts (Dao 2023, FlashAttention-2 §3.1).
    attention = (attention_flops + extra_attention) / (2 if accel.supports.flash_attention else 1)
    return (linear / (accel.peak_flops(linear_precision) * linear_efficiency)
            + attention / _attention_flops_per_s(accel, precision, kernels))


def _dequantise_s(work: TrainingWork, accel: Accelerator, layout: TrainingLayout) -> float:
    """QLoRA dequantises the NF4 base to bf16 before every matmul that uses it (bitsandbytes): per
    pass it reads the NF4 weights, writes bf16 and the GEMM reads them back. Passes per micro-batch:
    forward and input-gradient backward, plus the forward again under full recompute."""
    if work.base_params <= 0:
        return 0.0
    passes = 3 if layout.checkpointing == "full" else 2
    bytes_per_pass = work.base_params / (layout.tp * layout.pp) * (NF4_BYTES_PER_PARAM + 2 + 2)
    return layout.microbatches * passes * bytes_per_pass / efficiency.effective_bandwidth(accel, "bf16")


def dp_traffic_memo(work: TrainingWork, itype: InstanceType, accel: Accelerator, tp: int, pp: int, dp_ranks: int,
                    zero: int, ep: int, arch: Architecture, memo: dict) -> tuple[float, float]:
    """_dp_traffic_s over `dp_ranks` ranks that hold the same weights (CP folded into DP), kept in step_parts'
    memo by the fields it reads: TP, PP, DP, ZeRO and EP (the search's layout ceiling reads it too)."""
    key = ("dp", tp, pp, dp_ranks, zero, ep)
    if (traffic := memo.get(key)) is None:
        layout = TrainingLayout(tp, pp, dp_ranks, zero, 1, 1, "none", ep=ep)  # the fields _dp_traffic_s reads
        traffic = memo[key] = _dp_traffic_s(work, itype, accel, layout, arch)
    return traffic


def exposed_dp_s(traffic: tuple[float, float], compute_s: float, microbatches: int, overlap: float) -> float:
    """Exposed data-parallel communication of a step from its (per micro-batch, per step) collectives
    (_dp_traffic_s). Per micro-batch: ZeRO-3/FSDP all-gather the weights in the forward and again in the
    backward and reduce-scatter gradients; ZeRO-2 reduce-scatters gradients (DeepSpeed). Once per step: ZeRO-0
    all-reduces gradients (DDP accumulates locally), ZeRO-1 reduce-scatters them and all-gathers the updated
    weights, ZeRO-2 all-gathers the weights. Per-micro-batch traffic overlaps that micro-batch's compute;
    per-step traffic the last backward. With expert parallelism the routed experts' share reduces over the
    dp/ep expert-data-parallel ranks, each holding 1/ep of them (planner/physics/expert_training.py).
    `overlap`: the share that hides behind compute (efficiency.comm_overlap)."""
    per_microbatch, per_step = traffic
    compute_per_microbatch = compute_s / microbatches
    exposed = microbatches * max(0.0, per_microbatch - overlap * compute_per_microbatch)
    exposed += max(0.0, per_step - overlap * compute_per_microbatch * 2 / 3)
    return exposed


def _dp_traffic_s(work: TrainingWork, itype: InstanceType, accel: Accelerator, layout: TrainingLayout,
                  arch: Architecture) -> tuple[float, float]:
    """(per micro-batch, per step) data-parallel collective time of the dense and the expert weights: it
    reads only TP, PP, DP, ZeRO and EP of the layout, so the search computes it once per those (step_parts' memo)."""
    if layout.ep > 1:
        dense, experts = expert_work(work, arch)
        expert_layout = replace(layout, tp=layout.tp * layout.ep, dp=layout.dp // layout.ep, ep=1)
        parts = [_dp_collectives_s(dense, itype, accel, replace(layout, ep=1), arch.layers),
                 _dp_collectives_s(experts, itype, accel, expert_layout, arch.layers)]
    else:
        parts = [_dp_collectives_s(work, itype, accel, layout, arch.layers)]
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def _dp_collectives_s(work: TrainingWork, itype: InstanceType, accel: Accelerator,
                      layout: TrainingLayout, arch_layers: int) -> tuple[float, float]:
    """(per micro-batch, per step) data-parallel collective time before any overlap."""
    tp, pp, dp = layout.tp, layout.pp, layout.dp
    if dp <= 1:
        return 0.0, 0.0
    layers = math.ceil(arch_layers / pp)
    per_node = max(1, itype.accelerators_per_node // tp)  # Megatron rank order: TP innermost, then DP

    def coll(bytes_: float, phases: int, calls: int = 1) -> float:
        return group_collective_s(bytes_, dp, per_node, accel, itype, phases, calls)

    shard = tp * pp
    grads = work.trainable_params * work.grad_bytes / shard
    updated = work.trainable_params * work.updated_param_bytes / shard
    gathered = work.gathered_weight_bytes / shard
    # only the chosen stage's collectives are timed (the search times thousands of layouts);
    # ZeRO-3/FSDP gather and reduce-scatter layer by layer: one collective per layer of the stage;
    # ZeRO-0/1/2 one per gradient bucket (dp_buckets)
    calls = dp_buckets(work, shard, dp)
    if layout.zero == 3:
        per_microbatch, per_step = 2 * coll(gathered, 1, layers) + coll(grads, 1, layers), 0.0
    elif layout.zero == 2:
        per_microbatch, per_step = coll(grads, 1, calls), coll(updated, 1, calls)
    elif layout.zero == 1:
        per_microbatch, per_step = 0.0, coll(grads, 1, calls) + coll(updated, 1, calls)
    else:
        per_microbatch, per_step = 0.0, coll(grads, 2, calls)
    return per_microbatch, per_step


def dp_buckets(work: TrainingWork, shard: int, dp: int) -> int:
    """Collectives a rank's gradients are reduced in: data parallelism issues one per bucket, as the backward
    fills them. Megatron's default bucket is max(40M, 1M·dp) parameters (megatron/core/distributed/
    distributed_data_parallel.py, `bucket_size`); PyTorch DDP's `bucket_cap_mb` is 25 MiB
    (work.dp_bucket_bytes where a code base runs it)."""
    params = work.trainable_params / shard
    if work.dp_bucket_bytes:
        return max(1, math.ceil(params * work.grad_bytes / work.dp_bucket_bytes))
    return max(1, math.ceil(params / max(40e6, 1e6 * dp)))


@dataclass(frozen=True)
class StepParts:
    """The parts of a step that no pipeline schedule changes: the search times several schedules of one
    layout (1F1B, interleaved, ...) and computes these once for all of them (issue 29)."""
    devices: int
    tokens: int
    peak: float
    bandwidth: float
    matmul_s: float
    nonmatmul_s: float
    experts_s: float
    adapters_s: float  # LoRA adapters' unfused-kernel traffic (planner/physics/lora_traffic.py)
    compute_s: float
    tp_s: float
    pp_link: float
    dp_s: float
    ep_s: float
    flops_per_token: float  # model_flops_per_token: MFU's numerator
    cp_s: float = 0.0  # exposed context-parallel ring time (planner/physics/context_parallel.py)


def step_parts(arch: Architecture, itype: InstanceType, accel: Accelerator, precision: str, seq: int,
               layout: TrainingLayout, work: TrainingWork, memo: dict | None = None) -> StepParts:
    """Compute, TP, DP and EP time of a layout; reads neither layout.schedule nor layout.virtual_stages.
    `memo`: a dict kept for one (arch, itype, accel, precision, seq, work), in which the pieces that read
    only part of the layout are kept by that part (the search times thousands of layouts of one type;
    a kept piece is the very float a new evaluation would give)."""
    memo = {} if memo is None else memo
    tp, pp, dp, m, b, ck = layout.tp, layout.pp, layout.dp, layout.microbatches, layout.micro_batch, layout.checkpointing
    cp = layout.cp  # each rank of a CP group runs seq/cp tokens of every sequence (context_parallel.py)
    devices = tp * pp * dp * cp
    tokens = m * b * dp * seq
    peak, bandwidth, intra, flops_per_token = _fixed(arch, accel, precision, seq, work, memo)
    matmul_s = tokens / devices * _matmul_per_token_memo(arch, accel, precision, work, seq, tp, b, ck, memo, cp)
    nonmatmul_s = tokens / devices * _nonmatmul_bytes_per_token(arch, accel, precision, ck, work) / bandwidth
    experts_s = expert_weight_traffic_s(arch, accel, compute_precision(precision), work, tp, pp, layout.ep, b, m,
                                        seq // cp, ck)
    adapters_s = adapter_traffic_s(arch, work.method, ck, tokens / devices,
                                   efficiency.effective_bandwidth(accel, "bf16"), work.lora_targets)
    compute_s = matmul_s + nonmatmul_s + _dequantise_s(work, accel, layout) + experts_s + adapters_s

    apn = itype.accelerators_per_node
    # TP: 4 all-reduces of s·b·h activations per layer per micro-batch (2 forward, 2 backward), +2 on recompute.
    reduces = 4 + (2 if ck == "full" else 0)
    tp_s = m * math.ceil(arch.layers / pp) * reduces * _tp_reduce_s(arch, itype, accel, seq, tp, b, memo, cp)
    # PP: activations cross stage boundaries over the NICs once stages span nodes (step_from_parts).
    pp_link = inter_node_bytes_per_s(itype) if devices > apn else intra
    # gradients reduce over the DP × CP ranks, which all hold the same weights (context_parallel.py)
    dp_s = exposed_dp_s(dp_traffic_memo(work, itype, accel, tp, pp, dp * cp, layout.zero, layout.ep, arch, memo),
                        compute_s, m, efficiency.comm_overlap(accel)) if dp * cp > 1 else 0.0
    ep_s = all_to_all_step_s(arch, itype, accel, tp, pp, layout.ep, b, m, seq // cp, ck)
    cp_s = cp_step_s(arch, itype, accel, seq, tp, pp, cp, b, m, ck,
                     _attention_flops_per_s(accel, precision, work.kernels)) if cp > 1 else 0.0
    return StepParts(devices, tokens, peak, bandwidth, matmul_s, nonmatmul_s, experts_s, adapters_s, compute_s, tp_s,
                     pp_link, dp_s, ep_s, flops_per_token, cp_s)


def _nonmatmul_bytes_per_token(arch: Architecture, accel: Accelerator, precision: str, checkpointing: str,
                               work: TrainingWork) -> float:
    """HBM bytes a token moves outside the GEMMs (the device's share: ÷ TP·PP as tokens/devices does): norms,
    activations, residuals (NONMATMUL_BYTES_PER_TOKEN_HIDDEN, 4/3 of it under full recompute, the share a compiled
    stack still moves of it) and, in FP8, the casts of every GEMM's operands (planner/physics/fp8_casts.py)."""
    passes = 4 / 3 if checkpointing == "full" else 1.0
    return (passes * efficiency.nonmatmul_bytes_per_token_hidden(accel, work.kernels) * arch.layers * arch.hidden_size
            + fp8_cast_bytes_per_token(arch, precision, checkpointing, work.method))


def _attention_flops_per_s(accel: Accelerator, precision: str, kernels: str) -> float:
    """The attention core's rate (_matmul_s_per_token, the CP ring's overlap): 16-bit, FP8 training too, at its
    kernel's share (efficiency.training_attention_efficiency)."""
    linear = compute_precision(precision)
    return (accel.peak_flops("bf16" if linear == "fp8" else linear)
            * efficiency.training_attention_efficiency(accel, kernels))


def _fixed(arch: Architecture, accel: Accelerator, precision: str, seq: int, work: TrainingWork,
           memo: dict) -> tuple[float, float, float, float]:
    """(peak FLOP/s, HBM bytes/s, intra-node bytes/s, model FLOPs per token): the same for every layout."""
    if (fixed := memo.get("fixed")) is None:
        fixed = memo["fixed"] = (accel.peak_flops(compute_precision(precision)), accel.memory_bandwidth_gb_s * 1e9,
                                 intra_node_bytes_per_s(accel), model_flops_per_token(arch, seq, work.method))
    return fixed


def _matmul_per_token_memo(arch: Architecture, accel: Accelerator, precision: str, work: TrainingWork, seq: int,
                           tp: int, micro_batch: int, checkpointing: str, memo: dict, cp: int = 1) -> float:
    key = ("matmul", tp, micro_batch, checkpointing, cp)
    if (per_token_s := memo.get(key)) is None:
        # the fields it reads: TP, micro-batch, recompute, CP
        layout = TrainingLayout(tp, 1, 1, 0, micro_batch, 1, checkpointing, cp=cp)
        per_token_s = memo[key] = _matmul_s_per_token(arch, accel, precision, work.method, seq, layout, work.kernels)
    return per_token_s


def _tp_reduce_s(arch: Architecture, itype: InstanceType, accel: Accelerator, seq: int, tp: int, micro_batch: int,
                 memo: dict, cp: int = 1) -> float:
    """One TP all-reduce of a micro-batch's (s/cp)·b·h activations, at the bus bandwidth NCCL reaches at that size
    inside a node (collectives.intra_node_ring_s). A TP group wider than the node (published
    runs only: the search keeps TP inside it) all-reduces over the NICs too (planner/physics/collectives.py)."""
    if (reduce_s := memo.get(("tp", tp, micro_batch, cp))) is None:
        activation_bytes = seq // cp * micro_batch * arch.hidden_size * 2
        apn = itype.accelerators_per_node
        reduce_s = memo["tp", tp, micro_batch, cp] = (intra_node_ring_s(activation_bytes, tp, accel) if tp <= apn
                                                  else group_collective_s(activation_bytes, tp, apn, accel, itype))
    return reduce_s


def device_s_per_token_floor(arch: Architecture, itype: InstanceType, accel: Accelerator, precision: str, seq: int,
                             work: TrainingWork, tp: int, pp: int, micro_batch: int, checkpointing: str,
                             memo: dict, cp: int = 1) -> tuple[float, float]:
    """(compute, TP) device-seconds per token that any layout of this TP, PP, micro-batch and recompute is at
    least charged by step_parts, whatever its DP, ZeRO, EP or schedule. With tokens = m·b·dp·s and devices
    = tp·pp·dp·cp: compute_s = tokens/devices × (matmul + non-matmul per token) + experts, adapters and
    dequantisation (each ≥ 0); tp_s = m·⌈L/pp⌉·reduces·r = tokens/devices × tp·pp·cp·⌈L/pp⌉·reduces·r / (b·s).
    A step is compute × (1 + bubble) + tp_s + terms ≥ 0 (step_from_parts): the search's run floor
    (planner/search/step_floor.py)."""
    _, bandwidth, _, _ = _fixed(arch, accel, precision, seq, work, memo)
    matmul = _matmul_per_token_memo(arch, accel, precision, work, seq, tp, micro_batch, checkpointing, memo, cp)
    nonmatmul = _nonmatmul_bytes_per_token(arch, accel, precision, checkpointing, work) / bandwidth
    reduces = 4 + (2 if checkpointing == "full" else 0)
    tp_reduce_s = _tp_reduce_s(arch, itype, accel, seq, tp, micro_batch, memo, cp)
    return matmul + nonmatmul, tp * pp * cp * math.ceil(arch.layers / pp) * reduces * tp_reduce_s / (micro_batch * seq)


def step_from_parts(parts: StepParts, arch: Architecture, seq: int, layout: TrainingLayout,
                    local_state_bytes: float, work: TrainingWork, schedule: tuple[str, int] | None = None
                    ) -> TrainingEstimate:
    """The step of `layout` under its pipeline schedule (or `schedule`, (name, v), in its stead: the search
    times every schedule of one layout), from its schedule-free parts."""
    tp, pp, m, b = layout.tp, layout.pp, layout.microbatches, layout.micro_batch
    name, v = schedule or (layout.schedule, layout.virtual_stages)
    compute_s = parts.compute_s
    bubble_s = compute_s * bubble_fraction(name, pp, m, v)
    # PP: activations cross each stage boundary forward and back (v times as many boundaries when
    # interleaved).
    crossings = 2 * m * p2p_factor(name, v)
    pp_s = crossings * (seq // layout.cp) * b * arch.hidden_size * 2 / tp / parts.pp_link if pp > 1 else 0.0
    tp_s, dp_s, ep_s, cp_s = parts.tp_s, parts.dp_s, parts.ep_s, parts.cp_s
    optimizer_s = 2 * _optimizer_state_bytes(local_state_bytes, work, layout) / parts.bandwidth
    step = compute_s + bubble_s + tp_s + pp_s + dp_s + ep_s + cp_s + optimizer_s
    comm = tp_s + pp_s + dp_s + ep_s + cp_s
    bound = ("communication" if comm > compute_s else
             ("compute" if parts.matmul_s >= parts.nonmatmul_s + parts.experts_s + parts.adapters_s else "memory-bandwidth"))
    tokens_per_s = parts.tokens / step
    achieved = parts.flops_per_token * tokens_per_s / parts.devices
    return TrainingEstimate(step, parts.tokens, tokens_per_s, achieved / 1e12, achieved / parts.peak, bound)


def _optimizer_state_bytes(local_state_bytes: float, work: TrainingWork, layout: TrainingLayout) -> float:
    """The states the optimizer step reads and writes once: all of a device's for full training; with LoRA/QLoRA the
    adapters' only, as the frozen base (whole model over TP·PP, and over the DP × CP ranks under ZeRO-3, as
    memory.training_model_states holds it) takes no update."""
    if work.method == "full":
        return local_state_bytes
    frozen = work.gathered_weight_bytes / (layout.tp * layout.pp * (layout.dp * layout.cp if layout.zero >= 3 else 1))
    return max(0.0, local_state_bytes - frozen)


def training_step(arch: Architecture, itype: InstanceType, accel: Accelerator, precision: str, seq: int,
                  layout: TrainingLayout, local_state_bytes: float, work: TrainingWork) -> TrainingEstimate:
    """Step time = compute + pipeline bubble + exposed communication + optimizer update."""
    parts = step_parts(arch, itype, accel, precision, seq, layout, work)
    return step_from_parts(parts, arch, seq, layout, local_state_bytes, work)
