"""What LoRA and QLoRA layers hold beyond the frozen model's own activations, per device, in bytes.

A QLoRA base is stored in NF4 and dequantized for each matmul; how much that costs depends on the stack
that runs it (Nf4Stack): whether its 4-bit matmul keeps its input for the backward, whether the output head
is quantized too, and which 16-bit type the weight was quantized from. The adapters' dropout keeps a copy of
its input and a mask.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.hardware.units import BYTES_PER_PARAM
from planner.physics.lora_traffic import adapted_dims
from planner.workload.presets import Architecture

SIXTEEN_BIT_BYTES = BYTES_PER_PARAM["bf16"]  # activations, dequantized weights


@dataclass(frozen=True)
class Nf4Stack:
    """How one QLoRA code base runs its NF4 base (TrainingSetup.nf4_kernels names one of NF4_STACKS)."""
    keeps_inputs: bool  # the 4-bit matmul keeps its input for the backward: quantized_base_input_bytes_per_layer
    quantizes_head: bool  # the output head is an NF4 linear too, not a 16-bit one
    # The 16-bit type the weights are quantized from where it need not be the compute type: dequantized to it, a
    # weight is cast to the input's type in a second copy (dequantized_weight_bytes).
    quantized_from: str | None = None
    # The kept inputs outlive their step: held as ctx attributes, which the backward does not free (torch
    # PyNode::release_variables clears save_for_backward's tensors only), they live as long as the graph, and a
    # training loop that holds the step's logits (through their grad_fn, its graph) until the next forward returns
    # runs that forward beside them: two micro-batches' kept inputs at its peak.
    kept_inputs_outlive_step: bool = False


# - bitsandbytes from 0.43.2 under PEFT / transformers (the plans' stack): MatMul4Bit keeps the weight only
#   (PR #1270, commit 9e753741, `ctx.tensors = (None, B)`); transformers keeps the output head in 16 bits
#   (integrations/bitsandbytes.py get_keys_to_not_convert: the output embedding is never converted); the weight is
#   quantized from the dtype it loads in (Params4bit keeps it since 0.43.0) and dequantizes to it.
# - bitsandbytes through 0.43.1: the same, but MatMul4Bit.forward keeps its input (`ctx.tensors = (A, B)`).
# - Lightning's BitsandbytesPrecision on bitsandbytes 0.42.0 (LitGPT, which pins both): `init_context` swaps every
#   torch.nn.Linear for an NF4 one, the LM head included, and `_quantize_weight` quantizes from
#   `weight.to(dtype=torch.half)` (lightning/fabric/plugins/precision/bitsandbytes.py @003e307; the line cites
#   bitsandbytes 0.41.0's own `.half()`), so the quant state is fp16: bitsandbytes 0.42.0 dequantizes to fp16 and
#   MatMul4Bit.forward casts the copy to the bf16 input (`F.dequantize_4bit(B, quant_state).to(A.dtype)`), 2 + 2 B an
#   element at once. LitGPT's loop (finetune/lora.py fit @00af8b0: `logits = model(input_ids, ...)`) rebinds the
#   previous step's logits only when the next forward returns, so that forward runs beside the previous step's
#   MatMul4Bit inputs (`ctx.tensors`).
# - torchao's NF4 (torchtune): `linear_nf4` keeps the NF4 weight and dequantizes to the input's dtype
#   (`weight.to(input.dtype)`); torchtune's output projection is not quantized.
NF4_STACKS = {"bitsandbytes": Nf4Stack(False, False),
              "bitsandbytes-0.43.1": Nf4Stack(True, False),
              "lightning-bitsandbytes-0.42": Nf4Stack(True, True, "fp16", kept_inputs_outlive_step=True),
              "torchao": Nf4Stack(False, False)}


def quantized_base_input_bytes_per_layer(seq: int, micro_batch: int, arch: Architecture, tp: int) -> float:
    """What a QLoRA layer keeps beyond a LoRA one where the 4-bit matmul keeps its input (Nf4Stack.keeps_inputs:
    bitsandbytes/autograd/_functions.py MatMul4Bit.forward through 0.43.1, `ctx.tensors = (A, B)`) though a frozen
    weight's gradient never reads it: the attention's normed input, its output, the MLP's normed input and the down
    projection's input, 2 × s·b × (3h + f) / t bytes."""
    return SIXTEEN_BIT_BYTES * seq * micro_batch * (3 * arch.hidden_size + arch.ffn_hidden_size) / tp


def adapter_dropout_bytes_per_layer(seq: int, micro_batch: int, arch: Architecture, tp: int, targets: str,
                                    fused_qkv: bool) -> float:
    """What LoRA's dropout keeps beyond the layer's own activations: an adapter computes B·A·dropout(x), whose backward
    needs the dropped copy (A's gradient) and the mask (x's), 2 + 1 bytes per input element at each dropout (PEFT
    lora/layer.py Linear.forward, litgpt/lora.py LoRALinear.forward; without dropout it keeps x, which the layer
    keeps already): one per adapted matrix, or one for q, k and v in one module (LitGPT's LoRAQKVLinear)."""
    d_in = adapted_dims(arch, targets)[0]
    if fused_qkv and targets in ("all", "qv"):
        d_in -= (2 if targets == "all" else 1) * arch.hidden_size  # q, k, v (or q, v) read one dropped copy of h
    return (SIXTEEN_BIT_BYTES + 1) * seq * micro_batch * d_in / tp


def dequantized_weight_bytes(arch: Architecture, stack: Nf4Stack, precision: str, fused_qkv: bool, tp: int) -> float:
    """The 16-bit copy of its largest NF4 matrix that a QLoRA step holds while one matmul runs (forward, and again
    for the input gradient in the backward), on top of everything the step keeps: the down/up projections' h × f,
    the fused q, k, v's h × (q + 2·kv) where one module holds them (LitGPT), or the vocabulary × h head where the
    stack quantizes it (Lightning: a Llama 3 8B head is 525 M elements, 2.1 GB at 2 + 2 B each while the fp16 copy
    is cast to bf16)."""
    h = arch.hidden_size
    qkv_width = (arch.attention_heads + (2 * arch.kv_heads if fused_qkv else 0)) * arch.head_dim
    largest = max(h * arch.ffn_hidden_size, h * qkv_width)
    if stack.quantizes_head:
        largest = max(largest, arch.vocab_size * h)
    copies = 2 if stack.quantized_from not in (None, precision) else 1
    return copies * SIXTEEN_BIT_BYTES * largest / tp


def sixteen_bit_base_params(arch: Architecture, stack: Nf4Stack) -> float:
    """The QLoRA base's parameters that stay 16-bit: the embedding tables, or the input table alone where the
    stack quantizes an untied head (a tied table is an embedding, never swapped for an NF4 linear)."""
    if stack.quantizes_head and not arch.tied_embeddings:
        return arch.lookup_params
    return arch.embedding_params
