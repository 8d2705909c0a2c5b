"""A prompt's own prefill step pays what every engine step pays: the framework's step cost and each weight GEMM's
measured tail (performance.step_fixed_s, the decode step's own fixed cost). Issue 25's quoted miss: short prompts'
first tokens came early. Before, on the two sources no fit reads: TensorRT-LLM 0.9's one-prompt 128-token first tokens
16% early on H100 and A100 and 38% on H200 (median), NIM's one-client first tokens 6.5% early (signed median; its
H100 200-token prompts at TP 8 in FP8 28-32%). The figures below are with the refit that followed both this and a
prompt's LM head on its last position only (test_prefill_logits.py)."""

from __future__ import annotations

import re
import statistics

import pytest

from bench.reference_cases import all_rows
from planner.physics import efficiency
from planner.physics.closed_loop import prefill_wait_s
from planner.physics.performance import decode_step, prefill_s, serving_estimate, step_fixed_s, weight_gemms_per_step
from planner.workload.presets import presets


def _sweep_one_prompt(rows, part: str) -> list[float]:
    """The TensorRT-LLM 0.9 sweep's dense one-prompt 128-token first tokens on `part` (static batches of 1)."""
    return [r.error for r in rows if r.source == "trtllm-v09-dli-sweep" and r.metric == "TTFT" and not r.moe
            and f"-{part}-" in r.id and re.search(r"-bs1-128-\d+$", r.id)]


def test_the_quoted_short_prompts_come_nearer_what_was_measured(catalog):
    rows = all_rows(catalog)
    # median signed error of the one-prompt 128-token first tokens: -16% / -38% / -16% before, now:
    h100, h200, a100 = (_sweep_one_prompt(rows, part) for part in ("h100", "h200", "a100"))
    assert (len(h100), len(h200), len(a100)) == (31, 16, 15)
    assert statistics.median(h100) == pytest.approx(0.090, abs=0.01)
    assert statistics.median(h200) == pytest.approx(-0.023, abs=0.01)
    assert statistics.median(a100) == pytest.approx(-0.011, abs=0.01)
    nim = [r.error for r in rows if r.source == "nim-dli-sweep" and r.metric == "TTFT"]
    assert len(nim) == 72
    assert abs(statistics.median(nim)) < 0.05  # -6.5% before; -2.8% now
    # Llama 2 7B in FP8 on one H100, a 128-token prompt: 3.96 ms before, 6.62 ms now, 6.36 ms published
    one = next(r for r in rows if r.id == "trtllm09dli-h100-sxm-80gb-llama-2-7b-fp8-tp1-bs1-128-128" and r.metric == "TTFT")
    assert (one.predicted, one.measured) == (pytest.approx(6.62, abs=0.01), 6.36)


def test_a_first_token_left_to_the_decoder_step_pays_the_step_once(catalog):
    """LMDeploy's TurboMind runs the prompt's last token in the decode step (`first_token: decoder-step`): that step
    carries the fixed cost and the context pass before it adds none: 21.60 ms (22.0 published; 21.78 before a prompt's
    LM head ran on its last position only, test_prefill_logits.py), where a second fixed cost would make it 24.3."""
    row = next(r for r in all_rows(catalog) if r.id == "lmdeploy-a100-llama-2-7b-tp1-bs1-128-128" and r.metric == "TTFT")
    assert row.predicted == pytest.approx(21.60, abs=0.01)


def test_a_lone_prompt_pays_one_step_fixed_cost(catalog):
    arch, h100 = presets()["llama-3-8b"], catalog.accelerator("H100-80GB")
    fixed = step_fixed_s(arch, h100)
    # 1.8 ms a step and 6.8 us for each of 4 x 32 + 1 weight GEMMs
    assert fixed == pytest.approx(efficiency.DECODE_STEP_OVERHEAD_S + efficiency.GEMM_KERNEL_TAIL_S * 129)
    assert weight_gemms_per_step(arch) == 129
    assert fixed == pytest.approx(decode_step(arch, h100, "bf16", "bf16", 1, 1, 1, 300).overhead_s)
    alone = serving_estimate(arch, h100, "bf16", "bf16", 1, 1, 1, 200, 100)
    assert alone.time_to_first_token_s == pytest.approx(
        efficiency.request_overhead_s(h100) + prefill_s(arch, h100, "bf16", 1, 1, 200) + fixed)
    # two pipeline stages each pay the step's cost once and their own layers' GEMM tails
    assert step_fixed_s(arch, h100, 2) == pytest.approx(2 * efficiency.DECODE_STEP_OVERHEAD_S
                                                        + efficiency.GEMM_KERNEL_TAIL_S * 129)


def test_a_shared_step_adds_its_share_and_neuron_none(catalog):
    """Among 8 clients the prompt's step is shared with seven decodes whose fixed cost is already in theirs: the prompt
    adds an eighth of it. A Neuron graph's fixed costs are its collective latency's (step_fixed_s is 0)."""
    arch, h100 = presets()["llama-3-8b"], catalog.accelerator("H100-80GB")
    shared = serving_estimate(arch, h100, "bf16", "bf16", 1, 1, 8, 200, 100)
    step = decode_step(arch, h100, "bf16", "bf16", 1, 1, 8, 250)
    prefill = prefill_s(arch, h100, "bf16", 1, 1, 200)
    inter_token = step.seconds + 7 / 100 * prefill
    assert shared.inter_token_latency_s == pytest.approx(inter_token)
    overhead = efficiency.request_overhead_s(h100)
    wait = prefill_wait_s(8, prefill, overhead + step.seconds * 7 / 8 + 99 * inter_token)
    assert shared.time_to_first_token_s == pytest.approx(
        overhead + wait + prefill + step_fixed_s(arch, h100) / 8 + step.seconds * 7 / 8)
    assert step_fixed_s(presets()["llama-3-8b"], catalog.accelerator("Inferentia2")) == 0.0
