"""Unit constants and precision sizes shared by every estimator."""

from __future__ import annotations

MIB = 1024**2
GIB = 1024**3
GB = 1e9
TERA = 1e12
HOURS_PER_MONTH = 730.0  # AWS billing convention: 8,760 h / 12

# Group-wise int4 (GPTQ/AWQ, group 128) stores one fp16 scale and one fp16 zero point per 128
# weights: 0.5 + 4/128 = 0.53125 B/param, inside the 0.53-0.56 B/param domain.md quotes.
INT4_GROUP_SIZE = 128
INT4_BYTES_PER_PARAM = 0.5 + 4 / INT4_GROUP_SIZE

# 4-bit floating-point weights with block scales. MXFP4 (OCP Microscaling Formats spec v1.0, 2023):
# E2M1 values in blocks of 32 sharing one 8-bit E8M0 scale, 4 + 8/32 = 4.25 bits. NVFP4 (NVIDIA
# Blackwell, "Introducing NVFP4", 2025-06): E2M1 in blocks of 16 with one FP8 E4M3 scale, 4 + 8/16
# = 4.5 bits (the per-tensor FP32 scale is negligible).
MXFP4_BYTES_PER_PARAM = (4 + 8 / 32) / 8
NVFP4_BYTES_PER_PARAM = (4 + 8 / 16) / 8
FP4_FORMATS = ("mxfp4", "nvfp4")

BYTES_PER_PARAM = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0,
                   "int4": INT4_BYTES_PER_PARAM, "mxfp4": MXFP4_BYTES_PER_PARAM, "nvfp4": NVFP4_BYTES_PER_PARAM}

# QLoRA's NF4 with double quantisation: 4 bits + 0.127 bits of constants per parameter
# (Dettmers et al. 2023, arXiv 2305.14314, §3 "Double Quantization").
NF4_BYTES_PER_PARAM = (4 + 0.127) / 8
# NF4 without it: each block of 64 weights keeps its fp32 absmax (bitsandbytes functional.quantize_4bit with
# compress_statistics=False, blocksize 64: transformers' BitsAndBytesConfig default, Lightning's `nf4` mode).
NF4_SINGLE_QUANT_BYTES_PER_PARAM = (4 + 32 / 64) / 8


def compute_precision(weight_precision: str, fp4_tensor_cores: bool = False) -> str:
    """The tensor-core precision that executes matmuls for weights stored at `weight_precision`.

    Weight-only int8/int4 kernels dequantise to 16-bit before the multiply (gpt-fast, AWQ, GPTQ),
    so their FLOPs run at the bf16 rate; fp8 runs natively where the hardware has it. MXFP4/NVFP4
    run on FP4 tensor cores where they exist (Blackwell: activations quantised to FP4 too, as
    TensorRT-LLM's and vLLM's NVFP4/MXFP4 paths do) and dequantise to bf16 elsewhere (vLLM's
    gpt-oss MXFP4 path on Hopper: weight-only, Marlin/Triton kernels).
    """
    if weight_precision in FP4_FORMATS:
        return "fp4" if fp4_tensor_cores else "bf16"
    return {"fp32": "tf32", "int8": "bf16", "int4": "bf16"}.get(weight_precision, weight_precision)


def attention_precision(linear_precision: str) -> str:
    """The precision attention's QKᵀ and P·V run at when the linear layers run at `linear_precision`:
    16-bit under FP8 or FP4 weights (FlashAttention's and TensorRT-LLM's kernels read an FP8 KV cache but
    multiply in 16-bit), otherwise the same."""
    return "bf16" if linear_precision in ("fp8", "fp4") else linear_precision
