"""One serving replica's estimate, GPU or Neuron: the one formula the planner and bench share.

A GPU engine batches continuously (planner/physics/performance.serving_estimate). A Neuron replica,
as the plan deploys it (optimum-neuron's vLLM on its NxD backend, components/data/images.yaml), also
admits requests continuously, but runs graphs compiled ahead of time (AWS Neuron docs, NxD Inference
"Model inference: context encoding and token generation"): the token-generation graph decodes the compiled
batch's shape however many sequences are live, the context-encoding graph encodes one new prompt at a time,
and the decode batch stalls while an encoding runs (the others' encodings lengthen every step in
serving_estimate).

The graphs' lengths are the engine's. optimum-neuron's NxD backend compiles one of each at n_positions, not
NxD Inference's power-of-two buckets (huggingface/optimum-neuron v0.2.0 13bac850 to v0.4.0 6d497e40,
models/inference backend config.py: enable_bucketing defaults to False and no exporter sets it; v0.4.5
abf59858, the image's, has no buckets at all: decoder_wrappers.py pads every prompt to max_context_length,
which defaults to sequence_length, and modeling_decoder.py builds the token-generation graph at
sequence_length). So every prompt is encoded at n_positions and every decode step attends over n_positions
(`optimum_nxd`): optimum-neuron's 2025 runs of Llama 3.1 8B and 70B on inf2 first-token at 315.8 and
1,089.9 ms for 1,500-token prompts compiled at 4,096, where a 2,048 bucket would take about half
(bench/data/reference/optimum-neuron-benchmarks.yaml). A plan's n_positions is its workload's
max_context_tokens, so a Neuron plan pays for the longest request it admits on every request. NxD Inference
with its buckets on (AWS's tutorials) runs each prompt at its context-encoding bucket
(neuron_serving.context_bucket_tokens) and each step over its token-generation bucket
(neuron_serving.decode_context_tokens). TGI's transformers-neuronx backend, which prefills a whole wave of
waiting prompts before any first token, is neuron_serving.compiled_batch_serving (bench's 2024 TGI rows).
Speculative, pipeline or expert parallel Neuron replicas keep the GPU form: no published Neuron row
measures them.
"""

from __future__ import annotations

from typing import Callable

from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics.neuron_serving import context_bucket_tokens, decode_context_tokens
from planner.physics.performance import CompiledShapes, ServingEstimate, serving_estimate
from planner.physics.speculative import Speculation
from planner.workload.presets import Architecture


def replica_estimate(arch: Architecture, accel: Accelerator, precision: str, kv_precision: str, tp: int, pp: int,
                     batch: int, prompt_tokens: int, output_tokens: int, itype: InstanceType | None = None,
                     prefix_hit_share: float = 0.0, ep_nodes: int = 1, speculation: Speculation | None = None,
                     max_context_tokens: int | None = None, compiled_batch: int | None = None,
                     attention_dp: bool = False, host_step_s: Callable[[int], float] | None = None,
                     unsplit_attention: bool = False, prefill_floor_s: float = 0.0,
                     optimum_nxd: bool = False, in_process: bool = False) -> ServingEstimate:
    """`batch` requests in flight on one replica. On Neuron the replica runs the graphs compiled for
    `compiled_batch` sequences (default: `batch`, the plan's compiled_batch_size) and `max_context_tokens`
    positions (the plan's n_positions): under optimum-neuron's NxD backend (`optimum_nxd`: plans, and the published
    runs that used it) each prompt encoded and each decode step attending at the compiled length; otherwise (NxD
    Inference with its buckets on) each prompt at its context-encoding bucket and each step over its token-generation
    bucket. `in_process`: a published run that called its engine without an HTTP endpoint (serving_estimate)."""
    compiled = None
    if accel.is_neuron and pp == 1 and ep_nodes == 1 and speculation is None:
        # with no compiled maximum stated (a published run that leaves it out) the buckets are unknown:
        # the live lengths stand
        if max_context_tokens and optimum_nxd:
            compiled = CompiledShapes(compiled_batch or batch, max_context_tokens, float(max_context_tokens), True)
        else:
            compiled = CompiledShapes(
                compiled_batch or batch,
                context_bucket_tokens(prompt_tokens, max_context_tokens) if max_context_tokens else prompt_tokens,
                decode_context_tokens(prompt_tokens, output_tokens, max_context_tokens))
    return serving_estimate(arch, accel, precision, kv_precision, tp, pp, batch, prompt_tokens, output_tokens, itype,
                            prefix_hit_share, ep_nodes, speculation, compiled, attention_dp, host_step_s,
                            unsplit_attention, prefill_floor_s, in_process)
