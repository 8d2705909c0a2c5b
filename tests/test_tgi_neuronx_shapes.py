"""TGI on transformers-neuronx runs the shapes optimum-neuron compiled, not the prompt's bucket (issue 25).

optimum-neuron 0.0.20-0.0.26 exports a model for TGI with MAX_BATCH_SIZE B and MAX_TOTAL_TOKENS S: over one sequence it
turns continuous batching on with n_positions = [S] and context_length_estimate = [S], so every new prompt is encoded
padded to S and every decode step runs B sequences over S positions; at one sequence it compiles transformers-neuronx's
power-of-two buckets, context buckets half of each. philschmid's inf2.xlarge Llama-3-8B at B 8, S 4,096 published a
1,001 ms first token for a 462-token prompt: read at the prompt's 512-token bucket it was predicted 85% fast."""

from __future__ import annotations

import pytest

from bench import reference_serving
from bench.reference_cases import Row, reference
from bench.reference_sources import sources
from planner.hardware.catalog import bundled
from planner.physics.neuron_serving import decode_context_tokens, mean_bucket_tokens, tgi_transformers_neuronx_shapes


def test_a_continuously_batched_model_encodes_and_decodes_at_the_whole_sequence():
    shapes = tgi_transformers_neuronx_shapes(8, 1500, 245, 4096)
    assert (shapes.context_tokens, shapes.token_steps, shapes.decode_context_tokens) == (4096, 0, 4096)


@pytest.mark.parametrize("prompt, context", [(50, 64), (100, 128), (1500, 2048), (2048, 2048)])
def test_one_sequence_pads_the_prompt_to_half_a_token_bucket(prompt, context):
    shapes = tgi_transformers_neuronx_shapes(1, prompt, 245, 4096)
    assert (shapes.context_tokens, shapes.token_steps) == (context, 0)
    assert shapes.decode_context_tokens == decode_context_tokens(prompt, 245, 4096)


def test_a_prompt_past_half_the_sequence_runs_its_rest_one_token_at_a_time():
    """base.py `context`: the first S ÷ 2 tokens in the context graph, the other 952 through the token graph, each
    attending over its token bucket (4,096 for positions 2,049-3,000)."""
    shapes = tgi_transformers_neuronx_shapes(1, 3000, 100, 4096)
    assert (shapes.context_tokens, shapes.token_steps) == (2048, 952)
    assert shapes.token_step_context_tokens == mean_bucket_tokens(2049, 3000, 4096) == 4096


def test_only_the_2024_tgi_rows_carry_the_compiled_sequence():
    """The 2024 runs (optimum-neuron 0.0.23 and the Neuron SDK 2.19.1 images) ran transformers-neuronx with
    MAX_TOTAL_TOKENS 4096; the 2025 TGI images run NxD Inference's buckets and keep the bucketed reading."""
    rows = [r for d in sources().values() for r in d["rows"] if r.get("engine") == "tgi" and r.get("compiled_batch")]
    marked = [r for r in rows if r.get("compiled_sequence_tokens")]
    assert len(marked) == 39 and all(r["compiled_sequence_tokens"] == 4096 for r in marked)
    assert all("2025" in str(r["engine_version"]) for r in rows if r not in marked)
    assert all("MAX_TOTAL_TOKENS 4096" in r["note"] + str(r["engine_version"]) for r in marked)


def test_the_inf2_first_token_is_a_whole_sequence_encoding():
    """Published 1,001 ms at one client; at the prompt's bucket predicted -85%, at 4,096 positions within 25%."""
    row = next(r for r in reference_serving.serving_rows(bundled(), Row)
               if r.id == "phllmperf-inf2-tgi-llama-3-8b-c1" and r.metric == "TTFT")
    assert abs(row.error) < 0.25


def _source_row(source: str, row_id: str) -> dict:
    return next(r for r in sources()[source]["rows"] if r["id"] == row_id)


def test_the_2024_llmperf_rows_are_counted_in_llama_2_tokens():
    """ray-project/llmperf's main branch (2023-12 to 2024-12) builds prompts and counts output tokens with Llama 2's
    tokenizer whatever the model, and optimum-neuron's 2024 benchmark.sh runs it: each of those rows converts to Llama
    3's tokens at philschmid's measured 1.19, the 245 tokens the model was asked for being counted as 292."""
    every = sources()["optimum-neuron-benchmarks"]["rows"]
    rows = [r for r in every if r.get("itl_definition") == "llmperf-end-to-end"]
    assert len(rows) == 35
    assert all(r["counted_tokens_per_model_token"] == 1.19 and r["output_tokens"] == 292 for r in rows)
    # the 2025 guidellm rows count with the model's own tokenizer
    assert all("counted_tokens_per_model_token" not in r for r in every if r not in rows)
    model = reference_serving.in_model_tokens(rows[0])
    assert (model["prompt_tokens"], model["output_tokens"]) == (1261, 245)


def test_in_llama_3_tokens_tgi_and_aws_agree_on_the_trn1_70b_decode_step():
    """The same TP 32 Llama-3-70B batch-1 decode on trn1: TGI's LLMPerf ITL is end-to-end ÷ counted tokens. Read in
    Llama 2 tokens its decode step was 18.4 ms against AWS's 24.5-26.2 ms (30-42% apart); in Llama 3's, 22.3 ms."""
    tgi = _source_row("optimum-neuron-benchmarks", "optneuron-tgi-trn1-llama3-70b-bs1-c1")
    model = reference_serving.in_model_tokens(tgi)
    n = model["output_tokens"]
    step_ms = (model["itl_ms"] * n - tgi["ttft_ms"]) / (n - 1)
    as_counted_ms = (tgi["itl_ms"] * 245 - tgi["ttft_ms"]) / 244
    assert step_ms == pytest.approx(22.3, abs=0.1) and as_counted_ms == pytest.approx(18.4, abs=0.1)
    aws = [c["itl_ms"] for c in reference()["neuron_serving"]
           if c["model"] == "llama-3-70b" and c["instance_type"] == "trn1.32xlarge" and c["batch"] == 1]
    assert sorted(aws) == [24.48, 26.2, 26.48]
    assert all(abs(step_ms / a - 1) < 0.16 for a in aws) and all(abs(as_counted_ms / a - 1) > 0.24 for a in aws)
