"""The host work a synchronous engine loop adds to every step: how published runs of vLLM's V0 engine are read.

vLLM's V0 engine runs one step at a time on the host: it schedules, builds the step's inputs from per-sequence
Python objects, launches the forward pass, waits for the sampled tokens and turns them back into Python objects
before it schedules the next step. The GPU idles meanwhile: "GPU is often idle, waiting for CPU operations (5-13ms
of GPU bubble)" per decode step of Llama 3 8B on one H100 under benchmark_serving's ShareGPT load (vLLM RFC #6854,
"Multi-Step Scheduling", 2024-07-26), and work that grows with the sequences in the step (the scheduler's and the
input builder's per-sequence loops). vLLM's V1 engine (the default from 0.8) overlaps that work with the GPU,
and so do TensorRT-LLM's C++ executor and SGLang's scheduler: the engines the plans deploy
(components/data/images.yaml: LMI 20 with vLLM 0.15, TensorRT-LLM 0.21, TGI 3) carry no such term, and the planner's
estimates none.

So a published row that ran V0 (`engine_loop: synchronous` on its row: Argonne's 2024 vLLM runs, philschmid's
vLLM 0.4.3, AccelMark's vLLM 0.7.3) pays, on every engine step of k sequences (a decode step of the batch, a prefill
step of its prompts), host seconds = SYNCHRONOUS_STEP_HOST_S + k * SYNCHRONOUS_SEQUENCE_HOST_S. Both are fitted with
the serving constants (bench/calibrate.py) and checked leave-one-source-out; before them, the shared per-step cost
every engine pays (efficiency.DECODE_STEP_OVERHEAD_S) and the decode shares absorbed V0's host time, so the engines
the plans deploy were predicted with it. The evidence in the rows: on the same A100s and H100s, Argonne's vLLM
steps ran 0.7, 1.9, 3.0 and 5.4 ms longer than the estimate at batch 1, 16, 32 and 64 while its TensorRT-LLM steps
ran 0-1.3 ms longer; AccelMark's vLLM 0.20.1 (V1) rows are within 2% where its 0.7.3 rows on the same GPU are 25-30%
fast. A linear cost in the step's sequences is the loops' shape, not a claim about any one host.
"""

from __future__ import annotations

# Host seconds of one V0 engine step (schedule, launch, sampled-token sync) whatever its size (fitted).
SYNCHRONOUS_STEP_HOST_S = 0.0009
# Host seconds each sequence in a V0 step adds (its scheduling, input metadata and output objects; fitted).
SYNCHRONOUS_SEQUENCE_HOST_S = 5e-05


def host_step_s(row: dict, sequences: int) -> float:
    """Host seconds a step of `sequences` sequences adds on the row's engine: 0 where its loop overlaps the GPU."""
    if row.get("engine_loop") != "synchronous":
        return 0.0
    return SYNCHRONOUS_STEP_HOST_S + sequences * SYNCHRONOUS_SEQUENCE_HOST_S
