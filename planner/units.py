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

BYTES_PER_PARAM = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0,
                   "int4": INT4_BYTES_PER_PARAM}

# QLoRA's NF4 with double quantisation: 4 bits + 0.127 bits of constants per parameter
# (Dettmers et al. 2023, arXiv 2305.14314, §3 "Double Quantization").
NF4_BYTES_PER_PARAM = (4 + 0.127) / 8


def compute_precision(weight_precision: str) -> str:
    """The tensor-core precision that executes matmuls for weights stored at `weight_precision`.

    Weight-only int8/int4 kernels dequantise to 16-bit before the multiply (gpt-fast, AWQ, GPTQ),
    so their FLOPs run at the bf16 rate; fp8 runs natively where the hardware has it.
    """
    return {"fp32": "tf32", "int8": "bf16", "int4": "bf16"}.get(weight_precision, weight_precision)
