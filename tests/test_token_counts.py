"""Published lengths and rates in the served model's tokens (issue 25). LLMPerf before mid-2024 counted every
prompt and output token with Llama 2's tokenizer whatever the model, so philschmid's Llama 3 8B rows on A10G
state 550-token prompts that are 462 Llama 3 tokens, and their tokens/s and ITL are per Llama 2 token."""

from __future__ import annotations

import pytest

from bench.reference_serving import in_model_tokens
from bench.reference_sources import sources

SOURCE = "philschmid-llmperf-a10g-inf2"


def _row(row_id: str) -> dict:
    return next(r for r in sources()[SOURCE]["rows"] if r["id"] == row_id)


def test_llmperf_counts_convert_to_the_models_tokens():
    """vLLM, Llama 3 8B, one client: 550 / 1.19 = 462 prompt tokens, 177 / 1.19 = 149 output tokens,
    31.92 / 1.19 = 26.82 tokens/s, ITL 30.65 × 1.19 = 36.47 ms; TTFT is a time and keeps 137.3 ms."""
    r = in_model_tokens(_row("phllmperf-a10g-vllm-llama-3-8b-c1"))
    assert (r["prompt_tokens"], r["output_tokens"]) == (462, 149)
    assert r["tokens_per_s"] == pytest.approx(26.824, abs=1e-3)
    assert r["itl_ms"] == pytest.approx(36.474, abs=1e-3)
    assert r["ttft_ms"] == 137.3


def test_the_ratio_agrees_with_the_output_each_request_asked_for():
    """Each request asked for 150 of the model's tokens (max_tokens) and generated all of them: converted, vLLM's
    counted outputs come back to 150 within 2% at every concurrency, Llama 3 (1.19) and Yi-1.5 (1.06) alike."""
    vllm = [r for r in sources()[SOURCE]["rows"] if "-vllm-" in r["id"]]
    assert len(vllm) == 14
    for r in vllm:
        assert r["output_tokens"] / r["counted_tokens_per_model_token"] == pytest.approx(150, rel=0.02), r["id"]


def test_rows_counted_in_the_models_own_tokens_are_unchanged():
    row = next(r for data in sources().values() for r in data["rows"]
               if "prompt_tokens" in r and "counted_tokens_per_model_token" not in r)
    assert in_model_tokens(row) is row
