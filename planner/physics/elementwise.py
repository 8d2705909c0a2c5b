"""HBM traffic of an inference forward pass outside its GEMMs and attention: the elementwise kernels.

A Llama-style decoder layer (vLLM's LlamaDecoderLayer.forward, vllm/model_executor/models/llama.py; TensorRT-LLM's
Llama runs the same ops) launches, per token, besides its GEMMs and its attention kernel:
- two fused residual-add + RMSNorm kernels (before attention and before the MLP, vLLM's fused_add_rms_norm): each
  reads the hidden state and the residual stream and writes both back, 4·h elements;
- the gated MLP's SiLU-and-multiply (SiluAndMul): reads the gate and up projections, writes their product,
  3·f elements per expert a token runs (routed and shared);
- the rotary embedding, in place on the query and key heads: reads and writes (q + k) elements.
Each of these is memory-bound (a few FLOPs per element), so it takes its bytes ÷ HBM bandwidth on the stream
between the GEMMs. Tensor parallelism splits the heads and the MLP but not the hidden state: every TP rank
normalises and adds the whole residual stream (Megatron's sequence parallelism, which splits it, is a training
layout: Korthikanti et al. 2022, §4.2.2), so these kernels take a larger share of a rank's step as TP grows
while its GEMM and weight time shrink. Activations are 16-bit whatever the weights' precision.

Prefill pays them too, for every prompt token. Left out of prefill (the engines that fuse them, TensorRT-LLM
among them, pay less), held-out GPU serving tokens/s went 9.9% -> 10.3%, B200's 7.8% -> 12.5% and MoE's
27.7% -> 32.8%, against TTFT 26.6% -> 25.5% (bench/accuracy.py; README, accuracy): the long-prompt rows of NIM and of
TensorRT-LLM on the L40S are the ones that come out slower for them (tests/test_closed_loop.py, test_clocks.py).

Neuron is left out: its compiler (neuronx-cc) schedules the whole layer graph and keeps these intermediates in
the NeuronCore's on-chip state buffer between its matmuls, so they do not cross HBM as separate kernels do on a GPU.
"""

from __future__ import annotations

from planner.hardware.catalog import Accelerator
from planner.physics import efficiency
from planner.workload.presets import Architecture

ACTIVATION_BYTES = 2  # BF16/FP16 activations between kernels
RESIDUAL_NORM_ELEMENTS = 2 * 4  # two fused add + RMSNorm kernels per layer, each reading and writing h and residual
GATED_MLP_ELEMENTS = 3  # SiLU(gate) · up: reads two f-wide projections, writes one


def elementwise_bytes_per_token(arch: Architecture, tp: int, accel: Accelerator) -> float:
    """HBM bytes one token's elementwise kernels move on one of `tp` tensor-parallel ranks, over every layer
    (none on Neuron, above)."""
    if accel.is_neuron:
        return 0.0
    q = arch.attention_heads * arch.head_dim
    k = arch.kv_heads * arch.head_dim
    experts = arch.active_experts + arch.shared_experts if arch.is_moe else 1
    replicated = RESIDUAL_NORM_ELEMENTS * arch.hidden_size
    split = (GATED_MLP_ELEMENTS * arch.ffn_hidden_size * experts + 2 * (q + k)) / tp
    return arch.layers * (replicated + split) * ACTIVATION_BYTES


def elementwise_s(arch: Architecture, tp: int, accel: Accelerator, tokens: float) -> float:
    """Seconds `tokens` tokens' elementwise kernels take on one TP rank: their bytes at the HBM stream rate of
    16-bit data."""
    return tokens * elementwise_bytes_per_token(arch, tp, accel) / efficiency.effective_bandwidth(accel, "bf16")
