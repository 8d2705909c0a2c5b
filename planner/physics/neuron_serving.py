"""Serving on a Neuron model compiled for a static batch, where each new prompt stalls the batch.

A Neuron model is compiled ahead of time for one batch size B (TGI on optimum-neuron's
transformers-neuronx backend: MAX_BATCH_SIZE; NxD Inference: max_batch_size). Two graphs run
in turn (AWS Neuron docs, transformers-neuronx developer guide, "Continuous batching", and NxD
Inference "Model inference: context encoding and token generation"): the context-encoding graph
encodes a new request's prompt on its own, and while it runs the token-generation graph, which
decodes all B slots in lock-step, waits. The decode step always runs the compiled shape B, however
many slots are live.

With identical requests from a closed-loop client (LLMPerf, guidellm), requests arrive together
and leave together, so the server runs them in waves of k = min(remaining, B): k encodings back
to back (k × P, every first token of the wave waits for all of them), then output − 1 steps of
the B-shaped graph. That is `kv_capacity.static_batch` with first_token_s(k) = overhead + k·P and
step_s(k) = step(B): published trn1 bs8 TTFTs grow 1 : 2 : 3.9 : 7.8 at 1, 2, 4, 8 clients
(optimum-neuron llama3-70b-trn1.32xlarge CSVs). P and the step run the shapes the model was compiled for: the
whole compiled sequence where optimum-neuron 0.0.20-0.0.26 exported TGI's model for continuous batching
(tgi_transformers_neuronx_shapes), the only engine published runs show batching so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics import efficiency
from planner.physics.kv_capacity import StaticBatch, static_batch
from planner.physics.performance import decode_step, prefill_s
from planner.workload.presets import Architecture


# The smallest context-encoding bucket NxD Inference generates (powers of two from 128 up).
SMALLEST_BUCKET_TOKENS = 128


def power_of_two_at_least(tokens: int) -> int:
    """The smallest power of two that holds `tokens` (every bucket below is one)."""
    return 1 << math.ceil(math.log2(max(1, tokens)))


def context_bucket_tokens(prompt_tokens: int, max_context_tokens: int | None = None) -> int:
    """The length the compiled context-encoding graph runs a prompt at: the next bucket up, buckets
    being powers of two from 128 to the compiled maximum (AWS Neuron docs, NxD Inference "Bucketing":
    without explicit buckets, powers of two up to max_context_length; transformers-neuronx pads to its
    context_length_estimate buckets the same way). A 1,500-token prompt runs as 2,048."""
    bucket = max(SMALLEST_BUCKET_TOKENS, power_of_two_at_least(prompt_tokens))
    return min(bucket, max_context_tokens) if max_context_tokens else bucket


def mean_bucket_tokens(first_tokens: int, last_tokens: int, max_context_tokens: int) -> float:
    """The mean length the token-generation graph attends over while a sequence's KV cache grows from
    `first_tokens` to `last_tokens` (one decode step each): each step runs the smallest bucket that
    holds it, buckets being powers of two from 128 up to the compiled maximum (AWS Neuron docs, NxD
    Inference "Bucketing": without explicit buckets, token-generation buckets are powers of two up to
    seq_len). Steps holding 1,501 to 3,500 tokens run 548 at 2,048 and 1,452 at 4,096: mean 3,534.8."""
    if last_tokens < first_tokens:
        return float(max(first_tokens, context_bucket_tokens(first_tokens, max_context_tokens)))
    total, held = 0, first_tokens
    while held <= last_tokens:
        bucket = context_bucket_tokens(held, max_context_tokens)
        if bucket < held:  # past the compiled maximum (no engine runs it): each step at its own length
            return (total + (held + last_tokens) * (last_tokens - held + 1) / 2) / (last_tokens - first_tokens + 1)
        end = min(last_tokens, bucket)
        total += (end - held + 1) * bucket
        held = end + 1
    return total / (last_tokens - first_tokens + 1)


def decode_context_tokens(prompt_tokens: int, output_tokens: int, max_context_tokens: int | None) -> float:
    """The mean length a compiled token-generation graph attends over while `output_tokens` are decoded
    after a `prompt_tokens` prompt: its buckets' mean where the compiled maximum is known (transformers-
    neuronx bucket.token_sizes: powers of two from 128 up to n_positions; NxD Inference the same), the
    live mean length where it is not."""
    if max_context_tokens:
        return mean_bucket_tokens(prompt_tokens + 1, prompt_tokens + output_tokens - 1, max_context_tokens)
    return prompt_tokens + output_tokens / 2


@dataclass(frozen=True)
class RequestShapes:
    """What one request runs through a model compiled ahead of time: its prompt's first `context_tokens` (padding
    included) in the context-encoding graph, the next `token_steps` prompt tokens one at a time through the
    token-generation graph at one sequence (attending over `token_step_context_tokens` on average), then each decode
    step at the compiled batch attending over `decode_context_tokens`."""
    context_tokens: int
    token_steps: int
    token_step_context_tokens: float
    decode_context_tokens: float


def tgi_transformers_neuronx_shapes(compiled_batch: int, prompt_tokens: int, output_tokens: int,
                                    sequence_tokens: int) -> RequestShapes:
    """The shapes optimum-neuron 0.0.20-0.0.26 compiles for TGI (MAX_BATCH_SIZE = `compiled_batch`, MAX_TOTAL_TOKENS =
    `sequence_tokens` S), read from huggingface/optimum-neuron at tags v0.0.20 (d10aaddf) to v0.0.26 (a8e10e3f),
    optimum/neuron/modeling_decoder.py NeuronDecoderModel.__init__, and the transformers-neuronx it pins
    (src/transformers_neuronx/bucket.py token_sizes / context_sizes, llama/model.py):
    - a batch over 1 on Llama or Mistral exports continuous batching with n_positions = [S] and
      context_length_estimate = [S]: one context graph of S positions at batch 1, which every new prompt is
      right-padded to, and one token graph of the compiled batch over S positions, which every decode step runs;
    - a batch of 1 exports n_positions = S: token buckets are the powers of two from 128 to S and context buckets
      half of each, so a prompt is padded to the smallest context bucket that holds it, and one longer than S ÷ 2 runs
      its first S ÷ 2 tokens in the context graph and the rest one at a time through the token graph (base.py
      `context`); each decode step attends over its token bucket."""
    if compiled_batch > 1:
        return RequestShapes(sequence_tokens, 0, 0.0, float(sequence_tokens))
    half = sequence_tokens // 2
    context = min(half, max(SMALLEST_BUCKET_TOKENS // 2, power_of_two_at_least(prompt_tokens)))
    steps = max(0, prompt_tokens - half)
    return RequestShapes(context, steps, mean_bucket_tokens(half + 1, prompt_tokens, sequence_tokens) if steps else 0.0,
                          decode_context_tokens(prompt_tokens, output_tokens, sequence_tokens))


def compiled_batch_serving(arch: Architecture, core: Accelerator, precision: str, kv_precision: str, tp: int,
                           compiled_batch: int, concurrency: int, prompt_tokens: int, output_tokens: int,
                           shapes: RequestShapes, itype: InstanceType | None = None) -> StaticBatch:
    """`concurrency` identical requests on one replica compiled for `compiled_batch` sequences: waves
    of at most compiled_batch, each prompt encoded alone at its compiled `shapes` (the batch stalls meanwhile), then
    decoded at the compiled batch (ITL: the mean gap between tokens after the first)."""
    encode_one_s = prefill_s(arch, core, precision, tp, 1, shapes.context_tokens, itype, prompts=1)
    if shapes.token_steps:
        encode_one_s += shapes.token_steps * decode_step(arch, core, precision, kv_precision, tp, 1, 1,
                                                         shapes.token_step_context_tokens, itype=itype).seconds
    step_s = decode_step(arch, core, precision, kv_precision, tp, 1, compiled_batch, shapes.decode_context_tokens,
                         itype=itype).seconds
    return static_batch(concurrency, compiled_batch, output_tokens,
                        lambda k: efficiency.request_overhead_s(core) + k * encode_one_s,
                        lambda k: step_s)


def llmperf_itl_s(ttft_s: float, itl_s: float, output_tokens: int) -> float:
    """What LLMPerf reports as inter-token latency: the sum of every gap *including the first token's*
    over the output tokens, i.e. end-to-end latency / output tokens (ray-project/llmperf,
    src/llmperf/ray_clients/openai_chat_completions_client.py: INTER_TOKEN_LAT = sum(time_to_next_token),
    divided by num_output_tokens in token_benchmark_ray.py)."""
    return (ttft_s + (output_tokens - 1) * itl_s) / output_tokens
