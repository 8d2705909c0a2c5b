"""Context parallelism (CP) in training: the sequence of every micro-batch is split over CP ranks, each
holding seq/CP of its tokens through every layer, as Megatron-Core and Transformer Engine run it.

Sources:
- Megatron-Core, "context_parallel package" (docs.nvidia.com/megatron-core): every layer but attention
  works on the rank's own seq/CP tokens; the CP ranks replicate the weights, so gradients reduce over the
  DP × CP ranks (`data_parallel_group_with_cp`), which also shard the distributed optimizer.
- Transformer Engine `AttnFuncWithCPAndKVP2P` (transformer_engine/pytorch/attention.py, `attn_fwd`/`attn_bwd`
  over a ring of P2P sends): the sequence is cut into 2·CP chunks and rank r keeps chunks r and 2·CP−1−r,
  which balances causal attention (each rank does 1/CP of it). In CP steps a rank computes attention of its
  queries with one K/V block while it sends that block on and receives the next: CP−1 transfers of a block
  of seq/CP tokens' K and V, each overlapped with one step's attention. The backward passes K, V and the
  accumulated dK, dV round the same ring: twice the bytes beside twice the attention work.
- Llama 3 paper (arXiv 2407.21783) §3.3.2: all-gather of K and V over the CP group, the same bytes.

Worked example (tests/test_context_parallel.py): Llama 3.1 8B (32 layers, h 4,096, 8 KV heads of 128),
sequence 32,768, micro-batch 1, 4 micro-batches, selective recompute, bf16 on p5 (H100: attention at
989.4 TFLOP/s × the GEMM share 0.43 = 425.4 TFLOP/s; EFA 3,200 Gbit/s for 8 GPUs at 80%: 40 GB/s each).
  TP 8 × CP 2 (the CP pair spans two nodes): a block is 2 · 16,384 · ⌈8/8⌉ · 128 · 2 B = 8,388,608 B
  → 8,388,608 / 40e9 + 16.5 µs P2P latency = 226.2 µs; the rank's forward attention per layer is
  4 · 32,768² · 4,096 / 8 / 2 / 2 = 5.50e11 FLOP = 1.292 ms, 0.646 ms per ring step: hidden, exposed 0.
  TP 8 × CP 8 (8 nodes): a block is 2,097,152 B → 68.9 µs, beside 1.37e11 FLOP = 0.323 ms / 8 = 40.4 µs
  per step: 7 × 28.5 µs = 199.8 µs exposed per layer forward, × 3 (forward and backward) × 32 layers
  × 4 micro-batches = 76.7 ms per step.
Attention grows with seq² and the transfer with seq: CP is exposed at short sequences over slow links.
"""

from __future__ import annotations

import math

from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics.collectives import inter_node_bytes_per_s, intra_node_bytes_per_s, latency_s
from planner.workload.presets import Architecture

# CP degrees the training search tries, and the shortest sequence at which it tries them: below 16,384
# tokens the CP ring only shrinks the GEMMs (seq/CP rows) unless activations do not fit otherwise.
# (Megatron-Core's docs recommend CP for long sequences, where activation memory is the limit.)
CP_DEGREES = (2, 4, 8, 16)
CP_MIN_SEQUENCE_TOKENS = 16_384
KV_BYTES_PER_VALUE = 2  # K and V travel in bf16 (FP8 training keeps attention in 16-bit, as TE runs it)


def splits(seq: int, cp: int) -> bool:
    """Whether the sequence cuts into 2·CP equal chunks (TE's causal load balance needs it)."""
    return cp == 1 or seq % (2 * cp) == 0


def cp_text(cp: int) -> str:
    """How a layout names its CP degree in plans and messages (nothing at CP 1)."""
    return f" × CP {cp}" if cp > 1 else ""


def kv_block_bytes(arch: Architecture, seq: int, micro_batch: int, tp: int, cp: int) -> float:
    """One ring step's transfer: K and V of seq/CP tokens of a micro-batch on one TP rank (KV heads split
    over TP, replicated once TP exceeds them), 2 · (seq/CP) · b · ⌈kv_heads/TP⌉ · head_dim · 2 B."""
    kv_heads_here = math.ceil(arch.kv_heads / tp)
    return 2 * seq / cp * micro_batch * kv_heads_here * arch.head_dim * KV_BYTES_PER_VALUE


def cp_link_bytes_per_s(itype: InstanceType, accel: Accelerator, tp: int, cp: int) -> float:
    """The link a CP ring crosses. Megatron orders ranks TP innermost, then CP (`order="tp-cp-ep-dp-pp"`):
    the group stays on NVLink while TP·CP fits a node, else every hop goes over the NICs, each device
    with its share of the node's (all of the node's devices send at once)."""
    if tp * cp <= itype.accelerators_per_node:
        return intra_node_bytes_per_s(accel)
    return inter_node_bytes_per_s(itype)


def attention_forward_flops(arch: Architecture, seq: int, micro_batch: int, tp: int, cp: int) -> float:
    """One layer's causal attention core (QKᵀ and softmax·V) on one rank in the forward: 4·s·s·h per
    sequence halved by the causal mask (FlashAttention skips it; Dao 2023 §3.1), split over TP and, by
    the load-balanced chunking, evenly over CP."""
    return 4 * seq * seq * arch.hidden_size * micro_batch / tp / cp / 2


def exposed_forward_s(block_bytes: float, link_bytes_per_s: float, attention_forward_s: float, cp: int) -> float:
    """Exposed ring time of one layer's forward: CP−1 transfers, each beside one step's attention
    (1/CP of the rank's attention): (CP−1) · max(0, block/link + P2P latency − attention/CP)."""
    if cp <= 1:
        return 0.0
    transfer_s = block_bytes / link_bytes_per_s + latency_s(2)
    return (cp - 1) * max(0.0, transfer_s - attention_forward_s / cp)


def cp_step_s(arch: Architecture, itype: InstanceType, accel: Accelerator, seq: int, tp: int, pp: int, cp: int,
              micro_batch: int, microbatches: int, checkpointing: str, attention_flops_per_s: float) -> float:
    """Exposed CP communication of a training step on the busiest stage: per micro-batch and layer the
    forward's exposed ring time, the backward's twice that (dK/dV with K/V, beside twice the attention),
    and under full recompute the forward once more."""
    if cp <= 1:
        return 0.0
    block = kv_block_bytes(arch, seq, micro_batch, tp, cp)
    attention_s = attention_forward_flops(arch, seq, micro_batch, tp, cp) / attention_flops_per_s
    forward_s = exposed_forward_s(block, cp_link_bytes_per_s(itype, accel, tp, cp), attention_s, cp)
    passes = 3 + (1 if checkpointing == "full" else 0)
    return microbatches * math.ceil(arch.layers / pp) * passes * forward_s
