"""Issue 25: a trtllm-bench run is its stated number of requests, not a steady state. The perf-overview's runs
turn over in rounds of the resident batch (planner/physics/offline_throughput.py); the rounds' closed form is
checked against TensorRT-LLM's scheduler simulated step by step (bench/offline_run_check.py)."""

from __future__ import annotations

import statistics

import pytest

from bench.offline_residuals import compared_rows
from bench.offline_rows import is_trtllm_bench, predict_offline, row_precisions, tuned_settings
from bench.offline_run_check import check, simulated_tokens_per_s
from planner.hardware.catalog import bundled
from planner.physics.offline_throughput import offline_throughput, round_lifetime_s
from tests.test_offline_throughput import _rows

# perf-overview.md, "Preparing a Dataset" (v0.17 @258c7540 and v1.0 @00f37686, which adds 1000/2000): $num_requests
DATASET_REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500, (2048, 128): 3000,
                    (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000, (500, 2000): 3000, (20000, 2000): 1000}


def _bench_rows() -> list[dict]:
    return [r for r in _rows() if is_trtllm_bench(r)]


def _compared(row_id: str):
    """(row, architecture, part, instance type) of one compared row (bench/offline_residuals.compared_rows)."""
    return next(entry for entry in compared_rows(bundled()) if entry[0]["id"] == row_id)


def test_every_trtllm_bench_row_states_the_docs_request_count():
    rows = _bench_rows()
    assert len(rows) == 265
    assert all(r["num_requests"] == DATASET_REQUESTS[(r["prompt_tokens"], r["output_tokens"])] for r in rows)


def test_a_run_is_its_full_rounds_then_the_rest():
    """405B NVFP4 on four B200s, 1000/2000: 1,500 requests in 647 slots are two rounds of 647 and one of 206."""
    row, arch, b200, itype = _compared("trtllm10-b200-llama-3.1-405b-tp4-fp4-1000-2000")
    e = predict_offline(arch, b200, itype, row)
    assert e.batch == 647 and row["num_requests"] == 1500
    rest = round_lifetime_s(arch, b200, "nvfp4", "fp8", 4, 1000, 2000, 206, itype)[0]
    assert e.run_s == pytest.approx(2 * e.lifetime_s + rest)
    assert e.output_tokens_per_s == pytest.approx(1500 * 2000 / e.run_s)
    steady = 647 * 2000 / e.lifetime_s
    # the last round's 206 sequences take 38% of a full round's time for 32% of its tokens
    assert rest / e.lifetime_s == pytest.approx(0.3846, abs=1e-3)
    assert e.output_tokens_per_s / steady == pytest.approx(2.3184 / 2.3846, abs=1e-3)


def test_a_run_that_fills_whole_rounds_is_the_steady_state():
    row, arch, b200, itype = _compared("trtllm10-b200-llama-3.1-405b-tp4-fp4-1000-2000")
    precision, kv = row_precisions(row)
    settings = tuned_settings(arch, b200, precision, kv, 4, 1000, 2000)
    args = (arch, b200, precision, kv, 4, 1000, 2000, *settings, 0.95, itype)
    steady = offline_throughput(*args)
    assert steady.run_s is None
    whole = offline_throughput(*args, requests=3 * steady.batch)
    assert whole.output_tokens_per_s == pytest.approx(steady.output_tokens_per_s, rel=1e-12)
    assert offline_throughput(*args, requests=3 * steady.batch + 1).output_tokens_per_s < steady.output_tokens_per_s
    with pytest.raises(ValueError, match="requests must be at least 1"):
        offline_throughput(*args, requests=0)


def test_no_finite_run_is_faster_than_its_steady_state():
    """A smaller batch amortises a step's weight read over fewer tokens, so the last round never speeds a run up."""
    for row, arch, accel, itype in compared_rows(bundled()):
        finite = predict_offline(arch, accel, itype, row)
        assert finite.output_tokens_per_s <= finite.batch * row["output_tokens"] / finite.lifetime_s * (1 + 1e-12)


def test_the_step_by_step_schedule_of_a_small_run():
    """Two slots, three requests of 4 prompt tokens and 3 output tokens, an 8-token budget, 1 s a decode step and
    0.1 s a prompt token: step 1 encodes both prompts (0.8 s, first tokens out), steps 2-3 decode them (2 s), step 4
    encodes the third (0.4 s), steps 5-6 decode it (2 s): 9 tokens in 5.2 s."""
    def step_s(n: int) -> float:
        return 1.0 if n else 0.0

    assert simulated_tokens_per_s(step_s, 0.1, 4, 3, 2, 8, 3) == pytest.approx(9 / 5.2)
    # a 4-token budget less one per decoding sequence: the second prompt is encoded 3 + 1 tokens beside the first's
    # decodes (1.3 s, 1.1 s) and the third 3 + 1 beside the second's (1.3 s, 1.1 s): 0.4 + 2.4 + 2.4 + 2 s
    assert simulated_tokens_per_s(step_s, 0.1, 4, 3, 2, 4, 3) == pytest.approx(9 / 7.2)


def test_the_rounds_hold_to_the_simulated_scheduler_on_the_b200_runs():
    """bench/offline_run_check.py on the 20 B200 rows: the closed form within 0.5% of the simulation on each, and
    both put the rows' median within +/-5% of the published runs (+4.6% and +4.4%; steady state: +5.7%)."""
    runs = check(bundled(), "B200")
    assert len(runs) == 20 and max(abs(c.gap) for c in runs) < 0.005
    assert statistics.median(c.rounds / c.published - 1 for c in runs) == pytest.approx(0.0457, abs=5e-4)
    assert statistics.median(c.simulated / c.published - 1 for c in runs) == pytest.approx(0.0440, abs=5e-4)
