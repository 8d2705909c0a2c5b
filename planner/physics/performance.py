"""Serving throughput and latency from the roofline: decode steps and prefill.

Every estimate is time = work ÷ (roof × efficiency) with efficiency ≤ 1 (planner/physics/efficiency.py), so
nothing is predicted above a physical roof (memory bandwidth, peak FLOP/s, link speed); each result
says which roof binds. Training step time lives in planner/physics/training_time.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from planner.physics import efficiency
from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics.closed_loop import prefill_wait_s
from planner.physics.collectives import inter_node_bytes_per_s, intra_node_bytes_per_s, intra_node_ring_s
from planner.physics.elementwise import elementwise_s
from planner.physics.gemm_shape import touched_expert_share
from planner.physics.expert_parallel import all_to_all_s, routed_active_params, routed_expert_bytes, tokens_per_node
from planner.physics.memory import (attention_padding_params, kv_bytes_per_sequence, kv_shard_fraction,
                                    lookup_weight_bytes, sharded_weight_bytes, streamed_weight_bytes)
from planner.workload.presets import Architecture
from planner.physics.prefill_compute import prefill_compute_s
from planner.physics.prefix import prefix_cached_tokens
from planner.physics.speculative import Speculation, seconds_per_token
from planner.physics.unsplit_attention import unsplit_attention_s
from planner.hardware.units import BYTES_PER_PARAM, attention_precision, compute_precision


def moe_weight_bytes_read(arch: Architecture, precision: str, batch: int) -> float:
    """Weights streamed per decode step: every dense weight (not the input embedding's table, of which a token
    gathers a row: memory.streamed_weight_bytes), plus the experts the batch touches.
    A batch touches touched_expert_share of the routed experts per layer."""
    total = streamed_weight_bytes(arch, precision)
    expert_bytes = routed_expert_bytes(arch, precision)  # 0 for a dense model or one whose every expert always runs
    return total - expert_bytes + expert_bytes * touched_expert_share(arch, batch)


def grouped_expert_params(arch: Architecture, accel: Accelerator) -> float:
    """Parameters a decode token multiplies in the routed experts' grouped GEMMs (k of the E routed experts): on a GPU
    they run at their own share (grouped_expert_gemm_s), not the decode GEMM share. A Neuron graph is compiled for its
    batch and keeps them with the rest: 0 there, and for a dense model."""
    return 0.0 if accel.is_neuron else routed_active_params(arch)


def grouped_expert_gemm_s(arch: Architecture, accel: Accelerator, linear_precision: str, tokens: float) -> float:
    """Seconds of the routed experts' grouped GEMMs for `tokens` decode tokens' share on one device: 2 FLOPs per
    parameter at efficiency.MOE_GROUPED_GEMM_EFFICIENCY of peak, on top of (not under) the experts' weight stream."""
    return tokens * 2 * grouped_expert_params(arch, accel) / (
        accel.peak_flops(linear_precision) * efficiency.MOE_GROUPED_GEMM_EFFICIENCY)


def weight_gemms_per_step(arch: Architecture) -> int:
    """Weight GEMMs one decode step launches, each paying efficiency.GEMM_KERNEL_TAIL_S (vLLM's LlamaDecoderLayer and
    MixtralMoE / DeepseekV2MoE forwards): per layer the attention's fused QKV and output projections and the MLP's fused
    gate-up and down projections, which a MoE layer runs as the routed experts' two grouped GEMMs after its router's
    own GEMM (hidden → experts), with its shared experts' gate-up and down beside them; the LM head once a step, on
    the last pipeline stage. Multi-head latent attention's extra down- and up-projections are counted as GQA's two."""
    shared = 2 if arch.shared_experts else 0
    return 4 * arch.layers + arch.moe_layers * (1 + shared) + 1


def step_fixed_s(arch: Architecture, accel: Accelerator, pp: int = 1) -> float:
    """What every engine step pays whatever tokens it carries, a decode step or a prompt's own prefill step: each
    pipeline stage's framework step cost and each of its weight GEMMs' measured tail (efficiency.decode_overhead_s).
    A prompt's GEMMs at a few hundred tokens stream their weights near the HBM roof as a decode step's do, so they pay
    the same pipeline fill and drain; its step schedules, launches and samples a token as a decode step does."""
    return pp * efficiency.decode_overhead_s(accel, weight_gemms_per_step(arch) / pp, arch.moe_layers / pp)


@dataclass(frozen=True)
class DecodeStep:
    seconds: float
    memory_s: float
    compute_s: float
    communication_s: float
    overhead_s: float = 0.0  # fixed per-step cost no roof covers (efficiency.decode_overhead_s)

    @property
    def bound(self) -> str:
        roofs = {"memory-bandwidth": self.memory_s, "compute": self.compute_s,
                 "communication": self.communication_s}
        return max(roofs, key=roofs.get)


def decode_step(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str,
                tp: int, pp: int, batch: int, context_tokens: float,
                ep_nodes: int = 1, itype: InstanceType | None = None,
                routed_sequences: int | None = None, unsplit_attention: bool = False,
                optimum_nxd: bool = False) -> DecodeStep:
    """One decode step for `batch` sequences at `context_tokens` each (domain.md): per stage, the GEMMs'
    roofline of weight bytes ÷ achieved bandwidth and FLOPs ÷ achieved peak, then attention's of KV bytes ÷
    its bandwidth and FLOPs ÷ achieved peak (each corner rounded: efficiency.roofline_s), + TP all-reduces; a
    token passes
    every stage in turn. With expert parallelism over `ep_nodes` nodes (planner/physics/expert_parallel.py)
    a device reads 1/ep_nodes of the touched experts, a node attends for its share of the batch, and
    each MoE layer adds a dispatch and a combine all-to-all across the nodes. `routed_sequences` is how many of the
    sequences route their tokens independently (None: all of them); copies of one prompt decoded greedily route
    alike, so a batch of them touches one sequence's experts. A MoE step's routed experts run as grouped GEMMs whose
    math adds to their weight stream (grouped_expert_gemm_s), on GPUs. `unsplit_attention`: a published run whose
    attention kernel gave each sequence's KV head one thread block (planner/physics/unsplit_attention.py).
    `optimum_nxd`: token generation compiled by optimum-neuron's NxD backend (decode_attention_efficiency)."""
    padding = attention_padding_params(arch, tp) * BYTES_PER_PARAM[precision]
    read = moe_weight_bytes_read(arch, precision, batch if routed_sequences is None else min(batch, routed_sequences))
    local = tokens_per_node(batch, ep_nodes)
    if ep_nodes > 1:
        touched_experts = read - (streamed_weight_bytes(arch, precision) - routed_expert_bytes(arch, precision))
        read -= touched_experts * (1 - 1 / ep_nodes)
    weights = (read / tp + padding) / pp
    kv = local * kv_bytes_per_sequence(arch, int(context_tokens), kv_precision) * kv_shard_fraction(arch, tp) / pp
    weights_s, kv_s = weights / efficiency.effective_bandwidth(accel, precision), kv / efficiency.kv_bandwidth(accel)
    if unsplit_attention:  # one thread block per (sequence, KV head) streams its KV alone (unsplit_attention.py)
        kv_s = max(kv_s, unsplit_attention_s(arch.layers / pp, context_tokens, arch.attention_heads, arch.kv_heads, tp))
    attention_flops = 4 * arch.layers * arch.attention_heads * arch.head_dim * context_tokens
    linear_precision = compute_precision(precision, accel.supports.fp4)
    grouped = grouped_expert_params(arch, accel)
    expert_s = grouped_expert_gemm_s(arch, accel, linear_precision, batch / (tp * pp * ep_nodes))
    gemm_s = batch * 2 * (arch.matmul_params_per_token - grouped) / (tp * pp * ep_nodes) / (
        accel.peak_flops(linear_precision) * efficiency.decode_gemm_efficiency(accel, linear_precision))
    attention_peak = accel.peak_flops(attention_precision(linear_precision)) or accel.peak_flops(linear_precision)
    attention_s = (batch * attention_flops / (tp * pp * ep_nodes)
                   / (attention_peak * efficiency.decode_attention_efficiency(accel, optimum_nxd)))
    elementwise = elementwise_s(arch, tp, accel, local) / pp
    memory_s, compute_s = weights_s + kv_s + elementwise, gemm_s + attention_s + expert_s
    activation = local * arch.hidden_size * 2
    comm_s = 2 * arch.layers / pp * intra_node_ring_s(activation, tp, accel) if tp > 1 else 0.0
    if ep_nodes > 1 and itype is not None:
        comm_s += all_to_all_s(arch, batch, ep_nodes, itype, accel)
    overhead_s = step_fixed_s(arch, accel, pp) / pp
    # Per-kernel roofline (Williams et al., "Roofline", CACM 2009, per kernel): a layer's GEMMs (weight
    # stream vs their FLOPs) and its attention kernel (KV stream vs its FLOPs) run one after another on
    # the stream, so each is bound by its own roof (its corner rounded, efficiency.roofline_s: near the ridge a kernel
    # reaches neither roof) and the step is their sum. At large batch the GEMMs
    # turn compute-bound while attention stays KV-bound: one max over the totals would overlap them.
    stage_s = (efficiency.roofline_s(accel, weights_s, gemm_s) + efficiency.roofline_s(accel, kv_s, attention_s)
               + expert_s + elementwise + comm_s + overhead_s)
    return DecodeStep(stage_s * pp, memory_s * pp, compute_s * pp, comm_s * pp, overhead_s * pp)


def prefill_s(arch: Architecture, accel: Accelerator, precision: str, tp: int, pp: int, prompt_tokens: int,
              itype: InstanceType | None = None, prompts: int = 1, cached_tokens: int = 0, ep_nodes: int = 1) -> float:
    """Time to run `prompts` prompts (one batch) through the model. Causal attention does half of
    4·L·s²·H·hd. Pipeline stages run one prompt one after another, so PP shortens nothing here (only
    TP splits the work); each stage boundary adds a hop of the prompt's activations. A prefix of
    `cached_tokens` already in the KV cache (prefix caching) is not recomputed: the new tokens' GEMMs
    cover s − c tokens and their causal attention 2·L·(s² − c²)·H·hd (positions c..s attend to all before). The LM
    head multiplies only each prompt's last position, the one whose next token is sampled (vLLM's LogitsProcessor on
    the sampled indices, TensorRT-LLM without gather_context_logits, TGI, transformers-neuronx's ln_lm_head at
    last_token_id): a prompt's other positions need no logits."""
    padded_heads = math.ceil(arch.attention_heads / tp) * tp  # a rank computes its padded heads too
    new_tokens = prompt_tokens - cached_tokens
    padding = attention_padding_params(arch, tp) * tp * new_tokens
    linear_flops = prompts * 2 * (arch.prompt_matmul_params(new_tokens) + padding)
    attention_flops = prompts * 2 * arch.layers * (prompt_tokens**2 - cached_tokens**2) * padded_heads * arch.head_dim
    compute = prefill_compute_s(arch, accel, precision, tp, prompts * new_tokens, linear_flops, attention_flops)
    # the input embedding's table is gathered, not read (memory.lookup_weight_bytes)
    resident = (sharded_weight_bytes(arch, precision, tp) - lookup_weight_bytes(arch, precision) / tp
                - routed_expert_bytes(arch, precision) / tp * (1 - 1 / ep_nodes))
    memory = resident / efficiency.effective_bandwidth(accel, precision)
    elementwise = elementwise_s(arch, tp, accel, prompts * new_tokens)
    activations = prompts * new_tokens * arch.hidden_size * 2
    comm = 2 * arch.layers * intra_node_ring_s(activations, tp, accel) if tp > 1 else 0.0
    if ep_nodes > 1 and itype is not None:  # a prompt attends on its node; its tokens' experts sit on all
        comm += all_to_all_s(arch, prompts * new_tokens * ep_nodes, ep_nodes, itype, accel)
    if pp > 1:
        hop = inter_node_bytes_per_s(itype) if itype is not None else intra_node_bytes_per_s(accel)
        comm += (pp - 1) * activations / tp / hop
    return efficiency.roofline_s(accel, memory, compute) + elementwise + comm


@dataclass(frozen=True)
class CompiledShapes:
    """What a graph compiled ahead of time runs whatever the live request (planner/physics/replica_serving.py):
    the decode step at `batch` sequences attending over `decode_context_tokens` positions (the mean
    token-generation bucket), each prompt encoded at `prefill_tokens` (its context-encoding bucket); `optimum_nxd`:
    compiled by optimum-neuron's NxD backend (decode_step)."""
    batch: int
    prefill_tokens: int
    decode_context_tokens: float
    optimum_nxd: bool = False


@dataclass(frozen=True)
class ServingEstimate:
    output_tokens_per_s_per_replica: float
    time_to_first_token_s: float
    inter_token_latency_s: float
    bound: str


def _step_and_prefill(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str, tp: int, pp: int,
                      batch: int, prompt_tokens: int, mean_context: float, itype: InstanceType | None, cached: int,
                      ep_nodes: int, compiled: CompiledShapes | None, attention_dp: bool,
                      unsplit_attention: bool) -> tuple[DecodeStep, float]:
    """serving_estimate's decode step of the batch and one prompt's prefill: DP attention's ranks
    (planner/physics/attention_dp.py: tp·ep_nodes ranks at TP 1), or a compiled graph's shapes, or the live ones."""
    if attention_dp and itype is not None:
        from planner.physics import attention_dp as dp

        return (dp.decode_step(arch, accel, precision, kv_precision, tp * ep_nodes, batch, mean_context, itype),
                dp.prefill_s(arch, accel, precision, tp * ep_nodes, prompt_tokens, itype, cached))
    step = decode_step(arch, accel, precision, kv_precision, tp, pp, max(batch, compiled.batch) if compiled else batch,
                       compiled.decode_context_tokens if compiled else mean_context, ep_nodes, itype,
                       unsplit_attention=unsplit_attention, optimum_nxd=bool(compiled and compiled.optimum_nxd))
    return step, prefill_s(arch, accel, precision, tp, pp, max(prompt_tokens, compiled.prefill_tokens if compiled else 0),
                           itype, cached_tokens=cached, ep_nodes=ep_nodes)


def serving_estimate(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str, tp: int,
                     pp: int, batch: int, prompt_tokens: int, output_tokens: int,
                     itype: InstanceType | None = None, prefix_hit_share: float = 0.0,
                     ep_nodes: int = 1, speculation: Speculation | None = None,
                     compiled: CompiledShapes | None = None, attention_dp: bool = False,
                     host_step_s: Callable[[int], float] | None = None,
                     unsplit_attention: bool = False, prefill_floor_s: float = 0.0,
                     in_process: bool = False) -> ServingEstimate:
    """Continuous batching at `batch` sequences per replica, at the typical request.

    Each decode step emits one token per sequence; meanwhile batch/output_tokens sequences finish and
    are replaced, and the other sequences' prefills share the device (chunked prefill), which
    lengthens every step a sequence waits through.
    Each of the `batch` clients waits TTFT (queueing included) and then output_tokens-1 steps, so a replica
    delivers batch·output_tokens tokens every TTFT + (output_tokens-1)·ITL (a closed loop).
    Graphs compiled ahead of time (Neuron) run the shapes of `compiled` instead of the live ones.
    `host_step_s(k)`: host seconds an engine step of k sequences adds where the engine's loop does not overlap
    the GPU (a published run of vLLM's V0 engine: bench/engine_loop.py); None for the engines plans deploy.
    `unsplit_attention`: a published run whose decode attention ran one thread block per sequence and KV head (decode_step).
    `prefill_floor_s`: the least a prefill step lasts where a published run's engine launched it from the host kernel
    by kernel (vLLM V0 ran prompts without a CUDA graph: bench/engine_loop.py); 0 for the engines plans deploy.
    `in_process`: a published run that called its engine in-process, not through an HTTP endpoint as a plan's clients
    do: no request overhead (efficiency.REQUEST_OVERHEAD_S).
    """
    mean_context = prompt_tokens + output_tokens / 2
    step, prefill = _step_and_prefill(arch, accel, precision, kv_precision, tp, pp, batch, prompt_tokens, mean_context,
                                      itype, prefix_cached_tokens(prompt_tokens, prefix_hit_share, accel), ep_nodes,
                                      compiled, attention_dp, unsplit_attention)
    # the other sequences sharing its device (its rank's own under DP attention) interleave their prefills
    peers = -(-batch // (tp * ep_nodes)) if attention_dp and itype is not None else batch
    # The step that runs the prompt pays a step's fixed cost (step_fixed_s) once; shared with the others' decodes
    # (below) its share of it is already in theirs, so the prompt adds 1/peers of it: all of it when alone.
    own_step = max(prefill + step.overhead_s / peers, prefill_floor_s)
    prefill = max(prefill, prefill_floor_s)
    if host_step_s is not None:  # each decode step of the batch, and the prompt's own prefill step, wait on the host
        host_s = host_step_s(batch)
        step = replace(step, seconds=step.seconds + host_s, overhead_s=step.overhead_s + host_s)
        prefill += host_step_s(1)
        own_step += host_step_s(1)
    step_s = step.seconds
    if speculation is not None:  # planner/physics/speculative.py: k draft steps + one k+1-position target pass per step
        draft = decode_step(speculation.draft, accel, precision, kv_precision, tp, pp, batch, mean_context)
        step_s = seconds_per_token(step.memory_s, step.compute_s, step.communication_s + step.overhead_s,
                                   draft.seconds, speculation, accel)
    inter_token = step_s + (peers - 1) / output_tokens * prefill  # the others' prefills; its own is in TTFT
    # The first token comes out of the prompt's own prefill. A new prompt first queues behind the
    # other clients' prefills (planner/physics/closed_loop.py: the `peers` clients form a closed loop
    # whose think time is the rest of each request); the prefill then shares its step with the others' decodes.
    shared_step_s = step_s * (peers - 1) / peers
    overhead_s = 0.0 if in_process else efficiency.request_overhead_s(accel)
    wait = prefill_wait_s(peers, prefill, overhead_s + shared_step_s + (output_tokens - 1) * inter_token)
    first_token = overhead_s + wait + own_step + shared_step_s
    request_s = first_token + (output_tokens - 1) * inter_token
    return ServingEstimate(batch * output_tokens / request_s, first_token, inter_token, step.bound)
