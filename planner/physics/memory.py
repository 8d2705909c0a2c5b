"""Per-device memory: inference (weights, KV cache, workspace, runtime) and training (model states
under ZeRO, TP and PP; activations per Korthikanti et al.; LoRA and QLoRA). Bytes throughout."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.physics.adapter_memory import (NF4_STACKS, adapter_dropout_bytes_per_layer, dequantized_weight_bytes,
                                            quantized_base_input_bytes_per_layer, sixteen_bit_base_params)
from planner.physics.lora_traffic import adapted_dims
from planner.workload.presets import Architecture
from planner.hardware.units import BYTES_PER_PARAM, GIB, NF4_BYTES_PER_PARAM, NF4_SINGLE_QUANT_BYTES_PER_PARAM

# Runtime reserve per device. CUDA context + framework measured at 1,343 MB on one GPU
# (published case M-16, HF "Model training anatomy"); engines add CUDA graphs and sampler
# buffers, and NCCL allocates its channel buffers once a device talks to peers. domain.md asks
# for 1-3 GiB per GPU; these sum to 1.75 GiB alone and 2.25 GiB with peers.
CUDA_CONTEXT_BYTES = 1343e6
ENGINE_BUFFER_BYTES = 0.5 * GIB
NCCL_BUFFER_BYTES = 0.5 * GIB

# Tokens one forward pass of the engine processes at most (vLLM's chunked-prefill budget,
# max_num_batched_tokens, is 8,192 on large GPUs); it sizes the transient activation workspace.
PREFILL_CHUNK_TOKENS = 8192
ACTIVATION_BYTES = 2  # bf16/fp16 activations
LOGIT_BYTES = 4  # logits are upcast to fp32 for sampling and for the loss
# Training holds the fp32 logits for the loss and, at the start of backward, their fp32 gradient
# beside them: 2 × 4 B per token per vocabulary entry (Wijmans et al. 2024, "Cut Your Losses",
# arXiv 2411.09009 §1). Checked on torchtune's table: chunking the cross-entropy freed 8.1 GiB on
# 2 × 4,096 tokens × 128,256 entries, 8.3 B each (bench/data/reference/torchtune-readme-memory-speed.yaml).
TRAINING_LOGIT_BYTES = 2 * LOGIT_BYTES


def logit_bytes_per_token_entry(loss_chunks: int = 1) -> float:
    """Bytes per token per vocabulary entry the loss holds at its peak. Whole: the fp32 logits and
    their gradient (TRAINING_LOGIT_BYTES). Chunked cross-entropy (torchtune CEWithChunkedOutputLoss,
    torchtune/modules/loss/ce_chunked_output_loss.py: the output projection returns bf16 chunks and
    each is upcast to fp32 on its own) keeps every token's bf16 logits and one chunk's fp32 pair."""
    if loss_chunks <= 1:
        return TRAINING_LOGIT_BYTES
    return ACTIVATION_BYTES + TRAINING_LOGIT_BYTES / loss_chunks


PARTS = ("weights", "kv_cache", "activations", "gradients", "optimizer", "overhead")


@dataclass(frozen=True)
class MemoryBreakdown:
    weights: float = 0.0
    kv_cache: float = 0.0
    activations: float = 0.0
    gradients: float = 0.0
    optimizer: float = 0.0
    overhead: float = 0.0

    # The six parts' sum, read ~65,000 times per large training search of ~8,000 breakdowns: summed once, as
    # each is made. Not compared, and not in as_dict (the plan JSON's breakdown is the six parts).
    total: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.weights + self.kv_cache + self.activations + self.gradients
                           + self.optimizer + self.overhead)

    def as_dict(self) -> dict[str, float]:
        return {part: getattr(self, part) for part in PARTS}


def runtime_overhead_bytes(devices_per_replica: int, neuron: bool = False) -> float:
    """CUDA context + engine buffers + NCCL channels on a GPU. A NeuronCore has no CUDA context and
    no NCCL: the Neuron runtime's reserve is the compiled graph's I/O and scratch buffers, taken as
    the engine buffer (an assumption; AWS publishes no per-core figure)."""
    if neuron:
        return ENGINE_BUFFER_BYTES
    peers = NCCL_BUFFER_BYTES if devices_per_replica > 1 else 0.0
    return CUDA_CONTEXT_BYTES + ENGINE_BUFFER_BYTES + peers


def weight_bytes(arch: Architecture, precision: str) -> float:
    """All weights at `precision`; embeddings and LM head stay 16-bit when the rest is quantised
    (GPTQ/AWQ/bitsandbytes leave them unquantised)."""
    per_param = BYTES_PER_PARAM[precision]
    embedding = arch.embedding_params
    return (arch.params - embedding) * per_param + embedding * max(per_param, 2.0)


def lookup_weight_bytes(arch: Architecture, precision: str) -> float:
    """An untied input embedding table (Architecture.lookup_params), 16-bit as weight_bytes keeps it: held in
    memory, but a forward pass gathers one row of it per token rather than reading it whole."""
    return arch.lookup_params * max(BYTES_PER_PARAM[precision], 2.0)


def streamed_weight_bytes(arch: Architecture, precision: str) -> float:
    """The weights a forward pass reads whole: weight_bytes less the input embedding lookup table."""
    return weight_bytes(arch, precision) - lookup_weight_bytes(arch, precision)


def attention_padding_params(arch: Architecture, tp: int) -> float:
    """Parameters one TP rank holds beyond an even 1/tp share: query and output heads padded up to a
    multiple of tp (Neuron pads heads when tp does not divide them, e.g. 64 heads at TP 24), and
    K/V heads replicated once tp exceeds them (vLLM and Neuron both replicate KV heads)."""
    per_head = arch.layers * arch.hidden_size * arch.head_dim
    q_extra = math.ceil(arch.attention_heads / tp) - arch.attention_heads / tp
    kv_extra = math.ceil(arch.kv_heads / tp) - arch.kv_heads / tp
    return per_head * 2 * (q_extra + kv_extra)


def sharded_weight_bytes(arch: Architecture, precision: str, tp: int) -> float:
    """One TP rank's weights: 1/tp of the model plus the padded and replicated attention heads."""
    return weight_bytes(arch, precision) / tp + attention_padding_params(arch, tp) * BYTES_PER_PARAM[precision]


def kv_values_per_layer_token(arch: Architecture) -> int:
    """Values one layer caches per token. MHA/GQA: K and V, 2 × kv_heads × head_dim (domain.md;
    reference C2). MLA (DeepSeek-V2 paper, arXiv 2405.04434 §2.1.2; V3 report §2.1.1): the joint
    KV latent c_KV of kv_lora_rank plus the decoupled RoPE key of qk_rope_head_dim (512 + 64 = 576
    for DeepSeek-V3), shared by all heads."""
    if arch.is_mla:
        return arch.kv_lora_rank + arch.qk_rope_head_dim
    return 2 * arch.kv_heads * arch.head_dim


def kv_bytes_per_token(arch: Architecture, kv_precision: str) -> float:
    """Cached values per layer per token × layers × bytes."""
    return arch.layers * kv_values_per_layer_token(arch) * BYTES_PER_PARAM[kv_precision]


def kv_bytes_per_sequence(arch: Architecture, context_tokens: int, kv_precision: str) -> float:
    """A sequence's whole KV cache; sliding-window layers hold at most the window."""
    per_layer_token = kv_values_per_layer_token(arch) * BYTES_PER_PARAM[kv_precision]
    windowed = arch.windowed_layers
    window_tokens = min(context_tokens, arch.sliding_window or context_tokens)
    return per_layer_token * ((arch.layers - windowed) * context_tokens + windowed * window_tokens)


def kv_shard_fraction(arch: Architecture, tp: int) -> float:
    """Share of the KV heads one TP rank keeps: heads split over ranks, replicated once TP > kv_heads.
    MLA's latent is shared by every head, so vLLM and SGLang keep the whole latent cache on each TP
    rank (vLLM MLA backend; SGLang's DP-attention exists to avoid that replication)."""
    if arch.is_mla:
        return 1.0
    return math.ceil(arch.kv_heads / tp) / arch.kv_heads


def inference_memory(arch: Architecture, precision: str, kv_precision: str, tp: int, pp: int,
                     sequences: int, context_tokens: int, neuron: bool = False, ep_nodes: int = 1) -> MemoryBreakdown:
    """Per-device memory at peak: every one of `sequences` holds `context_tokens` of KV at once
    (on Neuron, the compiled batch × n_positions the model was compiled for). Expert parallelism over
    `ep_nodes` nodes spreads the routed experts over all their devices and each node's attention
    keeps only its share of the sequences (planner/physics/expert_parallel.py)."""
    weights = sharded_weight_bytes(arch, precision, tp) / pp
    if ep_nodes > 1:
        from planner.physics.expert_parallel import routed_expert_bytes, tokens_per_node
        weights -= routed_expert_bytes(arch, precision) / tp * (1 - 1 / ep_nodes)
        sequences = tokens_per_node(sequences, ep_nodes)
    kv = sequences * kv_bytes_per_sequence(arch, context_tokens, kv_precision) * kv_shard_fraction(arch, tp) / pp
    tokens = min(PREFILL_CHUNK_TOKENS, sequences * context_tokens)
    qkv_width = (arch.attention_heads + 2 * arch.kv_heads) * arch.head_dim / tp
    per_token = 2 * arch.hidden_size + qkv_width + 3 * arch.ffn_hidden_size / tp
    workspace = tokens * per_token * ACTIVATION_BYTES + sequences * arch.vocab_size / tp * LOGIT_BYTES
    return MemoryBreakdown(weights=weights, kv_cache=kv, activations=workspace,
                           overhead=runtime_overhead_bytes(tp * pp, neuron))


def zero_model_states(params: float, dp: int, stage: int, weight_b: float = 2.0, grad_b: float = 2.0,
                      optimizer_b: float = 12.0) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per device under ZeRO (Rajbhandari et al. 2020 §5,
    reference B1): stage 1 shards optimizer states over the DP group, 2 also gradients, 3 also weights."""
    weights = params * weight_b / (dp if stage >= 3 else 1)
    grads = params * grad_b / (dp if stage >= 2 else 1)
    optimizer = params * optimizer_b / (dp if stage >= 1 else 1)
    return weights, grads, optimizer


def activation_bytes_per_layer(seq: int, micro_batch: int, arch: Architecture, tp: int,
                               checkpointing: str, flash_attention: bool) -> float:
    """Korthikanti et al. 2022 (arXiv 2205.05198) Table 2, with sequence parallelism whenever TP > 1.

    none: sbh(34/t + 5as/(ht)); selective: sbh(34/t); full: 2sbh/t (the layer input only).
    FlashAttention never stores the s×s scores, which removes the 5as/h term as selective recompute does.
    op: per-operator checkpointing (op_activation_bytes_per_layer).
    """
    sbh = seq * micro_batch * arch.hidden_size
    if checkpointing == "full":
        return 2 * sbh / tp
    if checkpointing == "op":
        return op_activation_bytes_per_layer(seq, micro_batch, arch, tp)
    score_term = 0.0 if (checkpointing == "selective" or flash_attention) else \
        5 * arch.attention_heads * seq / (arch.hidden_size * tp)
    return sbh * (34 / tp + score_term)


def op_activation_bytes_per_layer(seq: int, micro_batch: int, arch: Architecture, tp: int) -> float:
    """Per-operator selective checkpointing (torchtitan's `selective_ac_option: op`,
    torchtitan/models/llama3/infra/parallelize.py `_save_list`): a layer keeps its input, the
    attention output (with its log-sum-exp, negligible) and the output of every other matmul in
    forward order (wq, wv, w1, w2 of wq wk wv wo w1 w3 w2); the rest is recomputed in backward.
    Bytes: 2 × s·b × (h input + h attention + h wq + kv·d wv + f w1 + h w2) / t."""
    kv_width = arch.kv_heads * arch.head_dim
    width = 4 * arch.hidden_size + kv_width + arch.ffn_hidden_size
    return ACTIVATION_BYTES * seq * micro_batch * width / tp


def optimizer_state_bytes(optimizer: str, mixed_precision: bool) -> float:
    """Bytes per trained parameter: fp32 master copy (mixed precision only) + moment estimates.
    Adam/AdamW keep m and v (ZeRO paper's K = 12 with the master copy); SGD keeps momentum;
    Adafactor's factored second moment is O(rows + cols), negligible per parameter."""
    return MOMENT_BYTES[optimizer] + (4.0 if mixed_precision else 0.0)


# Moment bytes per parameter. 8-bit AdamW (bitsandbytes) keeps m and v block-wise quantised to one byte
# each (Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization", arXiv 2110.02861 §2; the
# fp32 absmax per 2,048-value block adds 0.2%, left out).
MOMENT_BYTES = {"adam": 8.0, "adamw": 8.0, "adamw8bit": 2.0, "sgd": 4.0, "adafactor": 0.0}


def gradient_bytes(precision: str, grad_precision: str) -> float:
    if grad_precision != "auto":
        return BYTES_PER_PARAM[grad_precision]
    # Megatron accumulates bf16 (and fp8) training gradients in fp32 (18 B/param in all);
    # DeepSpeed fp16 mixed precision keeps fp16 gradients (the ZeRO paper's 16 B/param).
    return 2.0 if precision == "fp16" else 4.0


def lora_params(arch: Architecture, rank: int, targets: str = "all") -> float:
    """Adapter parameters: r·(d_in + d_out) per adapted matrix (Hu et al. 2021), summed over the matrices
    planner/physics/lora_traffic.adapted_dims names (targets "all": q, k, v, o and gate, up, down; "qkv": NeMo's
    fused `linear_qkv`), so the adapters' memory and their traffic count the same matrices."""
    return rank * sum(adapted_dims(arch, targets)) * arch.layers


@dataclass(frozen=True)
class TrainingSetup:
    method: str
    precision: str
    optimizer: str
    grad_precision: str
    lora_rank: int
    seq: int
    # How full training keeps its model states (STATE_BYTES); "mixed" is Megatron / DeepSpeed's.
    states: str = "mixed"
    # Optimizer states (and the gradients an optimizer step in backward frees) live in host memory:
    # ZeRO-Offload (Ren et al. 2021, arXiv 2101.06840) / FSDP CPUOffload (torchtune fsdp_cpu_offload).
    offload_optimizer: bool = False
    # The optimizer step runs inside the backward, parameter by parameter, freeing each gradient once
    # applied (torchtune `optimizer_in_bwd`; PyTorch tutorial "How to save memory by fusing the
    # optimizer step into the backward pass", 2023): about one block's gradients live at once.
    optimizer_in_backward: bool = False
    loss_chunks: int = 1  # cross-entropy computed in this many chunks (logit_bytes_per_token_entry)
    # Every activation the backward needs is copied to pinned host memory as the forward saves it and
    # brought back when its backward runs (torchtune `enable_activation_offloading`,
    # torchtune/training/_activation_offloading.py OffloadActivations: every saved tensor of 1 KiB or more
    # that is not a parameter, the output head's excepted): one layer's share stays on the GPU.
    activation_offload: bool = False
    lora_targets: str = "all"  # the matrices LoRA adapts (planner/physics/lora_traffic.py LORA_TARGETS)
    # Adapter dropout (PEFT's default 0), and q, k, v in one adapter module (LitGPT): adapter_dropout_bytes_per_layer.
    lora_dropout: float = 0.0
    lora_fused_qkv: bool = False
    # QLoRA's NF4 stack, one of planner/physics/adapter_memory.NF4_STACKS: bitsandbytes (0.43.2 on, under PEFT).
    nf4_kernels: str = "bitsandbytes"
    nf4_double_quant: bool = True  # QLoRA's recipe (Dettmers et al. 2023 §3); False: a fp32 absmax per 64 weights
    # The training kernel stack, eager, compiled or fused (workload.sections): the step's speed, not its memory.
    kernels: str = "eager"


# Bytes per parameter (weights, gradients, optimizer) for full training, by how states are kept:
# mixed: 16-bit weights, gradients per gradient_bytes, fp32 master + moments (Megatron, DeepSpeed);
# fp32-sharded: FSDP2 mixed precision keeps the sharded parameters in fp32 (the master copy; 16-bit
#   only while gathered), fp32 reduce-scattered gradients and fp32 moments (torchtitan, PyTorch
#   FSDP MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32));
# bf16: pure bf16 weights, gradients and moments, no master copy (torchtune, LitGPT bf16-true).
STATE_BYTES = {"fp32-sharded": (4.0, 4.0, 8.0), "bf16": (2.0, 2.0, 4.0)}


def base_weight_bytes(arch: Architecture, setup: TrainingSetup) -> float:
    """The whole model's weights as training holds (and ZeRO-3 gathers) them: 16-bit for mixed
    precision (fp32 for fp32 training); QLoRA's NF4 base with 16-bit embeddings (the input table alone where its
    stack quantizes the head: adapter_memory.sixteen_bit_base_params)."""
    if setup.method == "full":
        return arch.params * weight_bytes_per_param(setup)
    embedding = sixteen_bit_base_params(arch, NF4_STACKS[setup.nf4_kernels]) if setup.method == "qlora" \
        else arch.embedding_params
    return (arch.params - embedding) * weight_bytes_per_param(setup) + embedding * 2.0


def weight_bytes_per_param(setup: TrainingSetup) -> float:
    if setup.method == "qlora":
        return NF4_BYTES_PER_PARAM if setup.nf4_double_quant else NF4_SINGLE_QUANT_BYTES_PER_PARAM
    if setup.method == "full":
        return 4.0 if setup.precision == "fp32" else 2.0
    return BYTES_PER_PARAM["bf16" if setup.precision in ("int8", "int4", "fp8") else setup.precision]


def zero3_working_set(arch: Architecture, setup: TrainingSetup, tp: int, ep: int = 1) -> tuple[float, float]:
    """(weights, gradients) that ZeRO-3/FSDP hold unsharded at once: the block being computed and
    the prefetched next one, gathered whole (PyTorch FSDP's default backward prefetch; DeepSpeed's
    prefetch bucket), and one block's full gradients before they are reduce-scattered. Under expert
    parallelism a rank gathers only its 1/ep of the routed experts."""
    block_params = (arch.params - arch.embedding_params) / arch.layers / tp
    if ep > 1:
        from planner.physics.expert_parallel import routed_expert_share
        routed = arch.params * routed_expert_share(arch) / arch.layers / tp
        block_params -= routed * (1 - 1 / ep)
    weights = 2 * block_params * weight_bytes_per_param(setup)
    grads = block_params * gradient_bytes(setup.precision, setup.grad_precision) if setup.method == "full" else 0.0
    return weights, grads


def training_model_states(arch: Architecture, setup: TrainingSetup, tp: int, pp: int, dp: int,
                          zero: int, ep: int = 1) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per device; TP and PP divide the model first. With expert
    parallelism (planner/physics/expert_training.py) EP also divides the routed experts, whose states ZeRO
    shards over the dp/ep expert-data-parallel ranks."""
    shard = tp * pp
    mixed = setup.precision != "fp32"
    if setup.method == "full":
        w_b, g_b, o_b = STATE_BYTES.get(setup.states) or (weight_bytes_per_param(setup),
                                                          gradient_bytes(setup.precision, setup.grad_precision),
                                                          optimizer_state_bytes(setup.optimizer, mixed))
        if setup.states in STATE_BYTES and setup.optimizer == "adamw8bit":
            o_b = MOMENT_BYTES["adamw8bit"]  # the tables' optimizer bytes are AdamW's two moments only
        if setup.offload_optimizer:
            g_b, o_b = 0.0, 0.0
        if ep <= 1:
            return zero_model_states(arch.params / shard, dp, zero, w_b, g_b, o_b)
        from planner.physics.expert_parallel import routed_expert_share
        routed = arch.params * routed_expert_share(arch)
        dense = zero_model_states((arch.params - routed) / shard, dp, zero, w_b, g_b, o_b)
        experts = zero_model_states(routed / (shard * ep), dp // ep, zero, w_b, g_b, o_b)
        return dense[0] + experts[0], dense[1] + experts[1], dense[2] + experts[2]
    # LoRA / QLoRA: a frozen base has no gradients or optimizer state; adapters train in fp32 (PEFT), in bf16 where
    # every state is (STATE_BYTES["bf16"]: LitGPT's bf16-true, torchtune).
    adapters = lora_params(arch, setup.lora_rank, setup.lora_targets) / shard
    a_w, a_g, a_o = zero_model_states(adapters, dp, zero, *(STATE_BYTES["bf16"] if setup.states == "bf16" else (
        4.0, 4.0, optimizer_state_bytes(setup.optimizer, False))))
    base = base_weight_bytes(arch, setup) / shard
    return base / (dp if zero >= 3 else 1) + a_w, a_g, a_o


def training_memory(arch: Architecture, setup: TrainingSetup, tp: int, pp: int, dp: int, zero: int,
                    micro_batch: int, microbatches: int, checkpointing: str, flash_attention: bool,
                    virtual_stages: int = 1, neuron: bool = False, ep: int = 1, cp: int = 1) -> MemoryBreakdown:
    """Per-device training memory on the busiest (first) pipeline stage.

    Under 1F1B the first stage keeps min(pp, microbatches) micro-batches of its L/pp layers in flight,
    i.e. about L layers' worth; the interleaved schedule adds (1 + (p-1)/(p·v)) (Korthikanti §4.2.3).
    Context parallelism (planner/physics/context_parallel.py): a rank keeps the activations and logits of
    seq/cp tokens, and the cp ranks, which replicate the weights, shard ZeRO states with the dp ones.
    """
    dp *= cp  # the DP × CP group holds and shards the model states (Megatron data_parallel_group_with_cp)
    seq = setup.seq // cp
    weights, grads, optimizer = training_model_states(arch, setup, tp, pp, dp, zero, ep)
    if setup.optimizer_in_backward and setup.method == "full":  # one block's gradients (TrainingSetup)
        block_params = (arch.params - arch.embedding_params) / arch.layers / tp
        grads = min(grads, block_params * (STATE_BYTES[setup.states][1] if setup.states in STATE_BYTES
                                           else gradient_bytes(setup.precision, setup.grad_precision)))
    if zero >= 3 and dp > 1:
        gathered, unsharded_grads = zero3_working_set(arch, setup, tp, ep)
        weights += gathered
        grads += unsharded_grads
    per_layer = activation_bytes_per_layer(seq, micro_batch, arch, tp, checkpointing, flash_attention)
    stack = NF4_STACKS[setup.nf4_kernels] if setup.method == "qlora" else None
    base_inputs = quantized_base_input_bytes_per_layer(seq, micro_batch, arch, tp) if stack and stack.keeps_inputs \
        else 0.0
    kept_inputs = base_inputs + (adapter_dropout_bytes_per_layer(seq, micro_batch, arch, tp, setup.lora_targets,
                                                                 setup.lora_fused_qkv)
                                 if setup.method != "full" and setup.lora_dropout > 0 else 0.0)
    if checkpointing != "full":  # under full recompute only the layer being recomputed keeps them
        # where the stack's kept inputs outlive their step, the previous micro-batch's too (Nf4Stack)
        per_layer += kept_inputs + (base_inputs if stack and stack.kept_inputs_outlive_step else 0.0)
    in_flight = min(pp, microbatches)
    layers_here = math.ceil(arch.layers / pp)
    if setup.activation_offload:  # the layer whose backward runs holds its activations back on the GPU
        activations = per_layer
    else:
        activations = per_layer * layers_here * in_flight
        if pp > 1 and virtual_stages > 1:
            activations *= 1 + (pp - 1) / (pp * virtual_stages)
    if checkpointing == "full":  # one layer's full working set during its recomputation
        activations += activation_bytes_per_layer(seq, micro_batch, arch, tp, "none", flash_attention) + kept_inputs
    logits = seq * micro_batch * arch.vocab_size / tp * logit_bytes_per_token_entry(setup.loss_chunks)
    if stack:  # the 16-bit copy of the NF4 matrix being multiplied, on top of what the step keeps
        activations += dequantized_weight_bytes(arch, stack, setup.precision, setup.lora_fused_qkv, tp)
    return MemoryBreakdown(weights=weights, activations=activations + logits, gradients=grads,
                           optimizer=optimizer, overhead=runtime_overhead_bytes(tp * pp * dp, neuron))
