"""HBM traffic of LoRA adapters that no GEMM roof covers.

A LoRA layer runs beside its frozen base linear as separate kernels (Hu et al. 2021; HF PEFT
`peft/tuners/lora/layer.py` Linear.forward, torchtune `torchtune/modules/peft/lora.py` LoRALinear.forward):

    result = base(x);  result = result + lora_B(lora_A(dropout(x))) * scaling

The rank-r GEMMs do almost no arithmetic (2·r FLOPs per element), so each is bound by the bytes it
moves: per token and per adapted matrix of d_in inputs and d_out outputs, in 16-bit elements,
- forward: lora_A reads x (d_in); lora_B writes its output (d_out); `* scaling` reads and writes it
  (2·d_out); the add reads both terms and writes the sum (3·d_out): d_in + 6·d_out;
- backward (autograd of the same ops): the scaling's grad reads and writes d_out (2·d_out); lora_B's
  input and weight gradients each read the output gradient (2·d_out); lora_A's input gradient writes
  d_in and its weight gradient reads x (2·d_in); the input gradient is summed with the base's
  (read 2·d_in, write d_in): 4·d_out + 5·d_in.
Full recompute reruns the forward. The rank-r intermediates (r ≪ d) are left out. Dropout on x,
when a config sets it, adds more; PEFT's default lora_dropout is 0 (an identity), so none is counted.
"""

from __future__ import annotations

from planner.workload.presets import Architecture

# Which matrices carry adapters: "all" (q, k, v, o, gate, up, down: PEFT's and torchtune's all-linear setting, what
# the planner assumes) or "qkv", one adapter on the fused QKV projection: NeMo's Llama 3 fine-tuning recipes in
# performance mode (`finetune_performance_optimizations`, nemo/collections/llm/recipes/llama3_8b.py and llama3_70b.py,
# NeMo 24.12: `recipe.peft.target_modules = ['linear_qkv']`), which DGX Cloud's fine-tuning benchmarks run.
LORA_TARGETS = ("all", "qkv", "qv")
BYTES_PER_ELEMENT = 2  # bf16/fp16 activations and adapter outputs
FORWARD_IN, FORWARD_OUT = 1, 6  # elements per token per input / output dimension, forward
BACKWARD_IN, BACKWARD_OUT = 5, 4  # the same, backward


def adapted_dims(arch: Architecture, targets: str = "all") -> tuple[int, int]:
    """(Σ d_in, Σ d_out) over one layer's adapted matrices: q, k, v, o and gate, up, down
    (planner.physics.memory.lora_params counts adapter parameters from it); "qkv": the fused projection reads h
    once, writes q + 2·kv; "qv": the query and value projections (LitGPT's and the LoRA paper's default)."""
    h, hd = arch.hidden_size, arch.head_dim
    q, kv, f = arch.attention_heads * hd, arch.kv_heads * hd, arch.ffn_hidden_size
    if targets == "qkv":
        return h, q + 2 * kv
    if targets == "qv":
        return 2 * h, q + kv
    d_in = 3 * h + q + 2 * h + f  # q, k, v read h; o reads q; gate, up read h; down reads f
    d_out = q + kv + kv + h + f + f + h
    return d_in, d_out


def adapter_bytes_per_token(arch: Architecture, checkpointing: str, targets: str = "all") -> float:
    """Bytes one token moves through every layer's adapters in a training step (forward, backward,
    and the forward again under full recompute)."""
    d_in, d_out = adapted_dims(arch, targets)
    forwards = 2 if checkpointing == "full" else 1
    elements = forwards * (FORWARD_IN * d_in + FORWARD_OUT * d_out) + BACKWARD_IN * d_in + BACKWARD_OUT * d_out
    return elements * BYTES_PER_ELEMENT * arch.layers


def adapter_traffic_s(arch: Architecture, method: str, checkpointing: str, tokens_per_device: float,
                      bytes_per_s: float, targets: str = "all") -> float:
    """Time one device spends on its share of the adapters' traffic (0 for full training). The
    adapters are split with the layers they sit on (TP, PP), so a device moves its tokens' share."""
    if method == "full" or bytes_per_s <= 0:
        return 0.0
    return tokens_per_device * adapter_bytes_per_token(arch, checkpointing, targets) / bytes_per_s
