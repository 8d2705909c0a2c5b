"""An engine whose decoder emits the first token (issue 25). LMDeploy 0.1.0a1's TurboMind context-decodes a prompt
without its last token and samples the first token in the decoder step that follows, over the whole static batch
(bench/data/reference/lmdeploy-a100-fp16-benchmark.yaml's notes, from LlamaBatch.cc at the version bump). Its
published first tokens were read as a whole-prompt prefill: its 128-token prompts at batch 1 came out 30-45% fast
while its 1-token and 2,048-token ones matched."""

from __future__ import annotations

import pytest

from bench import reference_serving
from bench.reference_cases import Row
from bench.reference_sources import sources
from planner.hardware.catalog import bundled
from planner.physics.performance import decode_step, prefill_s
from planner.workload.presets import presets

SOURCE = "lmdeploy-a100-fp16-benchmark"


@pytest.fixture(scope="module")
def catalog():
    return bundled()


def _ttft(catalog, row_id: str) -> Row:
    rows = [r for r in reference_serving.serving_rows(catalog, Row) if r.id == row_id and r.metric == "TTFT"]
    assert len(rows) == 1
    return rows[0]


def _node(catalog):
    itype = catalog.instance("p4de.24xlarge")
    return itype, catalog.accelerator(itype.accelerator)


def test_every_turbomind_row_says_its_decoder_emits_the_first_token():
    rows = [r for r in sources()[SOURCE]["rows"] if r.get("engine") == "lmdeploy"]
    assert rows and all(r.get("first_token") == "decoder-step" for r in rows)


@pytest.mark.parametrize("model, batch", [("llama-2-7b", 1), ("llama-2-13b", 16)])
def test_the_first_token_is_a_prefill_of_all_but_the_last_token_and_one_decode_step(catalog, model, batch):
    """128-token prompts: the wave's context pass runs its batch × 127 tokens together, then one decode step of the
    whole batch, attending over the prompt alone, emits every first token. profile_generation drives the engine
    in-process: no HTTP request cost."""
    itype, a100 = _node(catalog)
    arch = presets()[model]
    expected_s = (prefill_s(arch, a100, "bf16", 1, 1, 127, itype, prompts=batch)
                  + decode_step(arch, a100, "bf16", "bf16", 1, 1, batch, 128).seconds)
    row_id = f"lmdeploy-a100-{model}-tp1-bs{batch}-128-128"
    assert _ttft(catalog, row_id).predicted == pytest.approx(expected_s * 1e3)


def test_a_one_token_prompt_has_no_context_pass(catalog):
    itype, a100 = _node(catalog)
    arch = presets()["llama-2-7b"]
    expected_s = decode_step(arch, a100, "bf16", "bf16", 1, 1, 1, 1).seconds  # in-process: no request cost
    assert _ttft(catalog, "lmdeploy-a100-llama-2-7b-tp1-bs1-1-128").predicted == pytest.approx(expected_s * 1e3)


@pytest.mark.parametrize("row_id", ["lmdeploy-a100-llama-2-7b-tp1-bs1-128-128",
                                    "lmdeploy-a100-llama-2-13b-tp1-bs1-128-128",
                                    "lmdeploy-a100-llama-2-70b-tp4-bs1-128-128"])
def test_short_prompts_at_batch_one_are_no_longer_far_too_fast(catalog, row_id):
    """Published 22, 40 and 74 ms; read as a whole-prompt prefill they were predicted 45%, 44% and 30% fast."""
    assert abs(_ttft(catalog, row_id).error) < 0.12
