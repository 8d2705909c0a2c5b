"""Expert parallelism (EP) for MoE training, as Megatron-Core runs it: the EP group is carved out of
the data-parallel ranks (rank order TP innermost, then EP, then the rest of DP), so each device keeps
1/(tp·pp·ep) of the routed experts while attention and the dense layers stay split TP × PP only; the
routed experts' gradients reduce, and ZeRO shards their states, over the expert-data-parallel group of
dp/ep ranks. Each MoE layer moves every token's hidden state to its k experts and back (dispatch and
combine all-to-alls) in the forward pass and again in the backward pass.

An EP group that stays inside one scale-up domain (a node's NVLink, or the 72 GPUs of a GB200 NVL72
UltraServer, which the catalog models as one node) rides NVLink; one that spans nodes sends the
cross-node share of its traffic over the node's NICs (EFA).

Sources: Megatron-Core MoE README (github.com/NVIDIA/Megatron-LM megatron/core/transformer/moe:
EP, expert-data-parallel group, all-to-all token dispatcher with sequence parallelism); DeepSeek-V3
technical report (arXiv 2412.19437) §3.2.2 (training with 64-way EP over 8 nodes, dispatch + combine
per MoE layer, forward and backward); Rajbhandari et al. 2022, DeepSpeed-MoE §5 (EP carved out of DP)."""

from __future__ import annotations

import dataclasses

from planner.physics import efficiency
from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics.collectives import inter_node_bytes_per_s, intra_node_bytes_per_s, latency_s
from planner.physics.expert_parallel import ALL_TO_ALL_BYTES_PER_VALUE, routed_active_params, routed_expert_share
from planner.workload.presets import Architecture


def routed_expert_count(arch: Architecture) -> int:
    """`experts` counts the routed experts; shared ones run beside them on every token (models.yaml)."""
    return arch.experts


def expert_parallel_applies(arch: Architecture, method: str) -> bool:
    """Whether EP is a degree of freedom: full training of a model with routed experts."""
    return arch.is_moe and method == "full" and routed_expert_share(arch) > 0


def ep_options(arch: Architecture, method: str, dp: int, pinned_devices: int | None = None,
               tp: int = 1) -> tuple[int, ...]:
    """EP degrees (in DP ranks) a layout can take: 1 (TP-only experts) and every degree that divides
    both the DP ranks and the routed experts (Megatron-Core places whole experts on a rank). Full
    training only: LoRA's frozen experts have no gradients or optimizer states to spread.
    A pin (layout.expert_parallel, in devices = TP × EP) keeps only its degree."""
    if not expert_parallel_applies(arch, method):
        options = (1,)
    else:
        routed = routed_expert_count(arch)
        options = tuple(e for e in range(1, dp + 1) if dp % e == 0 and routed % e == 0)
    if pinned_devices is None:
        return options
    return tuple(e for e in options if e * tp == pinned_devices)


def expert_work(work, arch: Architecture):
    """(dense part, routed-expert part) of a full-training TrainingWork: same bytes per parameter,
    parameters and gathered bytes split by the routed experts' share."""
    share = routed_expert_share(arch)
    dense = dataclasses.replace(work, trainable_params=work.trainable_params * (1 - share),
                                gathered_weight_bytes=work.gathered_weight_bytes * (1 - share))
    expert = dataclasses.replace(work, trainable_params=work.trainable_params * share,
                                 gathered_weight_bytes=work.gathered_weight_bytes * share)
    return dense, expert


def all_to_all_step_s(arch: Architecture, itype: InstanceType, accel: Accelerator, tp: int, pp: int, ep: int,
                      micro_batch: int, microbatches: int, seq: int, checkpointing: str) -> float:
    """Dispatch + combine all-to-alls of one training step on the busiest pipeline stage.

    Per micro-batch a rank dispatches its s·b/t tokens (sequence parallelism splits them over TP) to k
    experts; (ep-1)/ep of the copies leave the rank, and of those the peers on other nodes ride the
    NICs. Forward and backward each do dispatch + combine (4 all-to-alls per MoE layer); full
    recompute reruns the forward's two. Exposed: the token dispatcher waits on it (no overlap)."""
    if ep <= 1 or not arch.is_moe:
        return 0.0
    apn = itype.accelerators_per_node
    tokens = seq * micro_batch / tp
    leaving_bytes = tokens * arch.active_experts * arch.hidden_size * ALL_TO_ALL_BYTES_PER_VALUE * (ep - 1) / ep
    group_devices = tp * ep
    if group_devices <= apn:  # inside one NVLink domain (a node, or a whole NVL72 UltraServer)
        one_way_s = leaving_bytes / intra_node_bytes_per_s(accel)
    else:
        peers_here = max(1, apn // tp)  # EP ranks of this group on the same node
        off_node = (ep - peers_here) / (ep - 1)
        one_way_s = (leaving_bytes * off_node / inter_node_bytes_per_s(itype)
                     + leaving_bytes * (1 - off_node) / intra_node_bytes_per_s(accel))
    one_way_s += latency_s(ep, accel)
    passes = 4 + (2 if checkpointing == "full" else 0)
    moe_layers_here = -(-arch.moe_layers // pp)
    return microbatches * moe_layers_here * passes * one_way_s


def ep_text(ep: int) -> str:
    """How a layout names its EP degree in messages (nothing for TP-only experts)."""
    return f" (experts over EP {ep} of the DP ranks)" if ep > 1 else ""


def ep_pin_miss(arch: Architecture, pinned_devices: int, tp: int, dp: int) -> str:
    return (f"layout.expert_parallel {pinned_devices} devices is not TP {tp} × an EP degree that divides both the "
            f"{dp} data-parallel ranks and the {routed_expert_count(arch)} routed experts (full training only)")


def expert_weight_traffic_s(arch: Architecture, accel: Accelerator, linear_precision: str, work, tp: int, pp: int,
                            ep: int, micro_batch: int, microbatches: int, seq: int, checkpointing: str) -> float:
    """Time the routed experts' GEMMs spend past their compute roof, per step (the roofline per GEMM:
    max(FLOPs / rate, bytes / bandwidth), whose FLOP side training_time already counts).

    A device holds routed/(tp·pp·ep) expert parameters and every micro-batch reads them in the
    forward and again in the backward (dgrad), and in full training its fp32 gradient accumulator is
    read and written by the wgrad GEMM (Megatron's gradient-accumulation fusion); full recompute reads
    them once more. LoRA's frozen experts are only read.
    Their FLOPs are those of the s·b tokens' k active experts over tp·pp, whatever ep is: EP gathers
    ep ranks' tokens onto 1/ep of the experts, so each expert GEMM gets ep times the rows. With E/k
    experts per active one, TP-only layouts give an expert s·b·k/E rows, under H100's ridge point
    (~295 FLOP/byte at BF16) for DeepSeek-V3's 256 experts: memory-bound, the effect that makes
    EP pay (GShard, Lepikhin et al. 2020 §2.2; DeepSpeed-MoE §5)."""
    share = routed_expert_share(arch)
    if share <= 0:
        return 0.0
    local_params = arch.params * share / (tp * pp * ep)
    weight_reads = 3 if checkpointing == "full" else 2
    grad_traffic = 2 * work.grad_bytes if work.method == "full" else 0.0
    weight_bytes_per_param = work.gathered_weight_bytes / arch.params  # 16-bit, or NF4 for a QLoRA base
    bytes_per_microbatch = local_params * (weight_reads * weight_bytes_per_param + grad_traffic)
    active_routed = routed_active_params(arch)
    passes = 8 if checkpointing == "full" else 6  # FLOPs per parameter per token: 2 forward + 4 backward (+2)
    flops_per_microbatch = passes * seq * micro_batch * active_routed / (tp * pp)
    rate = (accel.peak_flops(linear_precision)
            * efficiency.training_linear_efficiency(accel, work.kernels, linear_precision))
    memory_s = bytes_per_microbatch / (accel.memory_bandwidth_gb_s * 1e9)
    return microbatches * max(0.0, memory_s - flops_per_microbatch / rate)
