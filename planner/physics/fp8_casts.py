"""HBM traffic of FP8 training that no GEMM roof covers: the casts of every GEMM's 16-bit operands to FP8.

FP8 training (Transformer Engine, which Megatron-Core/NeMo and torchao's float8 both follow) keeps activations and
gradients in 16 bits between layers and casts each linear layer's operands to FP8 just before its GEMM:
- forward: the layer's input (K elements per token) is cast to FP8; when its weight trains, in the same kernel a
  transposed FP8 copy is written for the weight-gradient GEMM, as Hopper's FP8 tensor cores take only the TN layout
  (TE `transformer_engine/pytorch/module/linear.py`: `fp8_cast_transpose_fused` when the weight requires a
  gradient, `cast_to_fp8` otherwise; NVIDIA TE user guide, "Using FP8 with Transformer Engine");
- backward: the gradient of the layer's output (N elements per token) is cast the same way, with its transpose for
  the weight gradient (TE `grad_output_preprocess`, `fp8_cast_transpose_bgrad_fused`).
Each element is read in 16 bits (2 B) and written as FP8 (1 B), plus 1 B for the transposed copy when the weight
trains: 4 B, or 3 B on a frozen base (LoRA). Full recompute casts the forward's inputs again. The weights' own casts
happen once per step (TE keeps the FP8 weights across micro-batches, `is_first_microbatch`) and the amax/scale
updates are per tensor, not per token: both are left out. What BF16 training does not pay, so it is what keeps
FP8's speed-up below its doubled GEMM rate besides the 16-bit attention core and the non-matmul traffic.
"""

from __future__ import annotations

from planner.hardware.units import compute_precision
from planner.workload.presets import Architecture

READ_BYTES, FP8_BYTES = 2, 1  # a 16-bit element read, an FP8 element written (and its transpose, when trained)


def gemm_operand_elements(arch: Architecture) -> tuple[int, int]:
    """(Σ K, Σ N) of one layer's forward GEMMs per token, whole (TP shards them, planner.physics.gemm_shape's
    layer_gemms): QKV and MLP-up read h, the attention output reads q, MLP-down reads f; they write q + 2·kv, h,
    2·f (gate and up: the gated MLP the presets assume, as memory.lora_params and lora_traffic count it) and h.
    A mixture of experts runs the MLP once per active and shared expert a token goes through."""
    h, f = arch.hidden_size, arch.ffn_hidden_size
    q, kv = arch.attention_heads * arch.head_dim, arch.kv_heads * arch.head_dim
    mlps = arch.active_experts + arch.shared_experts if arch.is_moe else 1
    return h + q + mlps * (h + f), (q + 2 * kv) + h + mlps * (2 * f + h)


def fp8_cast_bytes_per_token(arch: Architecture, precision: str, checkpointing: str, method: str = "full") -> float:
    """Bytes one token moves through every layer's FP8 casts in a training step (0 unless the linear layers run
    in FP8). Per device it is this × the tokens it processes ÷ (TP × PP): TP splits each GEMM's operands (sequence
    parallelism shards the inputs of column-parallel layers), PP the layers."""
    if compute_precision(precision) != "fp8":
        return 0.0
    inputs, outputs = gemm_operand_elements(arch)
    per_element = READ_BYTES + FP8_BYTES + (FP8_BYTES if method == "full" else 0)
    forwards = 2 if checkpointing == "full" else 1
    return per_element * (forwards * inputs + outputs) * arch.layers
