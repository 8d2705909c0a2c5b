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

V0 also ran every step that held a prompt without a CUDA graph: it captured graphs for decode batches only ("Capturing
cudagraphs for decoding", its model runner's log line), so a prefill step's kernels were launched from Python one by
one, and a short prompt's step lasts as long as the host takes to launch its layers, not as long as the GPU takes to
run them. A row that ran V0 so reads a prefill step as max(its GPU time, layers * EAGER_LAYER_LAUNCH_S). The constant
is measured, not fitted: vLLM run eagerly decodes Qwen2.5-Omni-7B's thinker (Qwen2.5-7B's 28 layers) at ~22-23 ms a
token on an A800 where its CUDA graphs take ~13 ms (vllm-project/vllm-omni issue #7960, 2026-09-22, vLLM 0.29): a
host-bound step of 22.5 ms / 28 layers = 0.80 ms a layer. SGLang's lighter eager path launches Llama 3 8B's layers in
at most 0.26 ms each (8.23 ms a token at batch 1 with --disable-cuda-graph, sgl-project/sglang PR #1401): the figure
is vLLM's, not every engine's. AccelMark's vLLM 0.7.3 short-prompt first tokens at one client imply 0.25 ms a layer
on its H100 host to 1.3 ms on its A100 ones: hosts differ. The engines plans deploy run prompts in CUDA graphs or
compiled engines (vLLM V1's piecewise graphs, TensorRT-LLM), so no plan pays it.

The rows are read so (READ_EAGER_PREFILL) since the serving fit weighs every source the same (bench/calibrate.py
source_balanced_errors): before, with the median over rows, the floor, which moves a few of Argonne's V0 rows by 1-2%,
tipped which of the LMDeploy-less fit's starts won (KV share 0.71 -> 0.43; docs/calibration-log.md, fourth session); now
the fold stops at one share either way (sixth session). `python bench/eager_prefill_check.py [--fold]` reads the rows
both ways.
"""

from __future__ import annotations

# Host seconds of one V0 engine step (schedule, launch, sampled-token sync) whatever its size (fitted: 0.5 ms before the
# HTTP request cost was measured, 0.9 ms before Hopper's prefill share was fitted on Hopper first tokens, 1 ms while a
# fit read 20 rows a source, 0.6 ms from a prompt's MoE experts as grouped GEMMs until a prompt's step paid a step's fixed
# cost and its LM head multiplied its last position only).
SYNCHRONOUS_STEP_HOST_S = 0.001
# Host seconds each sequence in a V0 step adds (its scheduling, input metadata and output objects; fitted: 70 us before
# the HTTP request cost was measured, 60 us before a prompt's step paid a step's fixed cost).
SYNCHRONOUS_SEQUENCE_HOST_S = 5e-05
# Host seconds to launch one decoder layer's kernels one by one, as V0 ran every step that held a prompt (measured, not
# fitted: vllm-omni #7960's eager vLLM step, 22.5 ms over 28 layers; the module's docstring).
EAGER_LAYER_LAUNCH_S = 0.0008
# Whether a V0 row's prefill is read with that floor (bench/eager_prefill_check.py turns it off to compare).
READ_EAGER_PREFILL = True


def eager_prefill_floor_s(row: dict, layers: int) -> float:
    """The least a prefill step lasts on the row's engine: its layers' kernels launched from the host one at a time
    where the engine ran prompts without a CUDA graph (V0), 0 where a graph or compiled engine launches them."""
    if not READ_EAGER_PREFILL or row.get("engine_loop") != "synchronous":
        return 0.0
    return layers * EAGER_LAYER_LAUNCH_S


def host_step_s(row: dict, sequences: int) -> float:
    """Host seconds a step of `sequences` sequences adds on the row's engine: 0 where its loop overlaps the GPU."""
    if row.get("engine_loop") != "synchronous":
        return 0.0
    return SYNCHRONOUS_STEP_HOST_S + sequences * SYNCHRONOUS_SEQUENCE_HOST_S
