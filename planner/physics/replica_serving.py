"""One serving replica's estimate, GPU or Neuron: the one formula the planner and bench share.

A GPU engine batches continuously (planner/physics/performance.serving_estimate). A Neuron replica,
as the plan deploys it (optimum-neuron's vLLM on NxD Inference, components/data/images.yaml), also
admits requests continuously, but runs graphs compiled ahead of time (AWS Neuron docs, NxD Inference
"Model inference: context encoding and token generation", and "Bucketing"): the token-generation graph
decodes the compiled batch's shape however many sequences are live, the context-encoding graph encodes
one new prompt at a time padded up to its bucket (planner/physics/neuron_serving.context_bucket_tokens),
the token-generation graph attends over its bucket of positions (neuron_serving.decode_context_tokens),
and the decode batch stalls while an encoding runs (the others' encodings lengthen every step in
serving_estimate). TGI's transformers-neuronx backend, which prefills a whole wave of waiting prompts
before any first token, is neuron_serving.compiled_batch_serving (bench's TGI rows).
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
                     unsplit_attention: bool = False, prefill_floor_s: float = 0.0) -> ServingEstimate:
    """`batch` requests in flight on one replica. On Neuron the replica runs the graphs compiled for
    `compiled_batch` sequences (default: `batch`, the plan's compiled_batch_size) and `max_context_tokens`
    positions (the plan's n_positions): each prompt encoded at its context-encoding bucket, each decode
    step attending over its token-generation bucket."""
    compiled = None
    if accel.is_neuron and pp == 1 and ep_nodes == 1 and speculation is None:
        # with no compiled maximum stated (a published run that leaves it out) the buckets are unknown:
        # the live lengths stand
        compiled = CompiledShapes(
            compiled_batch or batch,
            context_bucket_tokens(prompt_tokens, max_context_tokens) if max_context_tokens else prompt_tokens,
            decode_context_tokens(prompt_tokens, output_tokens, max_context_tokens))
    return serving_estimate(arch, accel, precision, kv_precision, tp, pp, batch, prompt_tokens, output_tokens, itype,
                            prefix_hit_share, ep_nodes, speculation, compiled, attention_dp, host_step_s,
                            unsplit_attention, prefill_floor_s)
