"""NVIDIA's TensorRT-LLM 0.9.0 sweep (bench/data/reference/trtllm-v09-dli-sweep.yaml): converted from its CSV
as published, never fitted, and predicted by the serving estimate within the figures the README states."""

from __future__ import annotations

import csv
import io
import statistics

import pytest

from bench import calibrate, reference_sources
from bench.accuracy import stored_band_share, summary
from bench.reference_cases import all_rows
from bench.sweep_residuals import grouped, memory_errors
from planner.hardware.catalog import bundled
from scripts.convert_trtllm_dli_sweep import convert

SOURCE = "trtllm-v09-dli-sweep"
# Four lines of the CSV as published (trailing columns as in the file): a full FP8 run, a first-token-only run,
# one on a part EC2 does not rent (GH200) and one of a model without a bundled preset (GPT-J 6B).
HEADER = ("Batch Size,GPU,Model,Precision,Input/Output Lengths,Tensor Model Parallel Size,Pipeline Model Parallel Size,"
          "Number of GPUs,1st Token Latency (ms),Token-to-token Latency (ms),Throughput (tokens / sec)")
LINES = ["1,H100 80GB HBM3,LLaMA v2 7B,FP8,\"128,128\",1,1,1,6.36,4.09763779527559,243.0",
         "8,L40S,LLaMA v2 70B,FP8,\"2048,128\",4,1,4,1520.5,,",
         "1,GH200 120GB,LLaMA v2 13B,FP8,\"128,128\",1,1,1,9.1,6.121811023622048,162.73",
         "1,H100 80GB HBM3,GPTJ 6B,FP8,\"128,128\",1,1,1,6.0,4.0,250.0"]


def _rows() -> list[dict]:
    return reference_sources.sources()[SOURCE]["rows"]


def test_the_converter_keeps_rentable_parts_and_bundled_models_with_their_published_figures():
    rows = convert(list(csv.DictReader(io.StringIO("\n".join([HEADER] + LINES)))))
    assert [r["id"] for r in rows] == ["trtllm09dli-h100-sxm-80gb-llama-2-7b-fp8-tp1-bs1-128-128",
                                       "trtllm09dli-l40s-llama-2-70b-fp8-tp4-bs8-2048-128"]
    full, first_only = rows
    assert (full["ttft_ms"], full["itl_ms"], full["tokens_per_s"]) == (6.36, 4.0976, 243.0)
    assert (full["precision"], full["kv_precision"], full["load"], full["identical_prompts"]) == ("fp8", "fp8",
                                                                                                   "static-batch", True)
    assert (first_only["tokens_per_s"], first_only["itl_ms"], first_only["gpu_peer_to_peer"]) == (None, None, True)


def test_every_row_is_one_static_batch_whose_figures_agree():
    """tokens/s = batch × output ÷ (first token + (output − 1) × ITL) on every row that has all three: the columns
    were copied, not mixed up (the CSV derives ITL and throughput from one measured latency)."""
    rows = _rows()
    assert len(rows) == 1315 and {r["accelerator"] for r in rows} == {"H100-SXM-80GB", "H200", "A100-80GB", "L40S"}
    for r in rows:
        if r["tokens_per_s"] is None:
            continue
        latency_s = (r["ttft_ms"] + (r["output_tokens"] - 1) * r["itl_ms"]) / 1e3
        assert r["concurrency"] * r["output_tokens"] / latency_s == pytest.approx(r["tokens_per_s"], rel=2e-3), r["id"]


def test_it_holds_nvidias_published_v09_throughput():
    """docs/source/performance.md at TensorRT-LLM v0.9.0, H200 FP8: Mistral 7B at batch 120, 128/2048, 8,950 output
    tokens/s per GPU."""
    row = next(r for r in _rows() if r["id"] == "trtllm09dli-h200-mistral-7b-fp8-tp1-bs120-128-2048")
    assert row["tokens_per_s"] == pytest.approx(8950, abs=1)


def _held_out_rows() -> list:
    """The sweep's rows predicted blind: the serving fit never reads it, and Hopper's prefill share (the one fitted
    constant whose group reads its first tokens) refitted without it (bench/calibrate.py prefill_held_out: 0.66, the full
    fit's, since the HTTP request cost is measured; 0.60 against 0.65 before)."""
    with calibrate.prefill_held_out(SOURCE):
        return [r for r in all_rows(bundled()) if r.source == SOURCE]


def _figures(rows) -> dict[str, tuple[float, float]]:
    """(median |error|, signed median) per metric, as bench/accuracy.py summarises a class (every sweep row is a GPU's)."""
    return {metric: (s["median_abs"], s["signed_median"]) for (_, metric), s in summary(rows).items()}


def test_the_sweep_is_never_fitted_and_its_held_out_errors_are_the_readmes():
    """Kept out of the serving fit, and out of the prefill fit of its own fold: median |error| tokens/s 8.4%, first
    token 5.7% (+3.2%), inter-token latency 9.8% (README, accuracy: the full fold 8.4%, 5.7% and 9.8%; 7.1% (+0.8%)
    before a prompt's step paid a step's fixed cost and its LM head ran on its last position only; 8.3%, 6.8%
    (+0.2%) and 9.8% before a prompt's experts ran as grouped GEMMs, its Mixtral batches' prompts later). 8.3%, 9.4%
    (+5.6%) and 9.8% before the HTTP request cost was measured (its fold's prefill share 0.60 -> 0.66). 7.8%,
    12.1% (+8.4%) and 9.1% before Hopper's prefill share was fitted on Hopper first tokens (0.47 -> 0.65, FP8 at the
    measured 0.90 of it, and the serving refit that followed: KV share 0.84 -> 0.78); 7.7%, 11.9% (+9.5%) and 9.2% while
    a fit read 20 rows a source, 8.8%, 12.1% and 9.9% before every serving source weighed the same in it. In sample, with
    the share its own first tokens helped fit, its first token is 5.7% (7.1% before the prompt's step cost, 6.8% before
    the grouped GEMMs, 7.1% before the HTTP cost). Its one-sequence Llama 2 70B steps set the one
    constant of planner/physics/unsplit_attention.py (bench/attention_check.py), so its inter-token latencies are not a
    held-out check of that one."""
    assert SOURCE in calibrate.EVALUATED_ONLY_SOURCES
    figures = _figures(_held_out_rows())
    assert figures["serving tokens/s"][0] == pytest.approx(0.084, abs=0.003)
    assert figures["TTFT"] == pytest.approx((0.057, 0.032), abs=0.003)
    assert figures["ITL"][0] == pytest.approx(0.098, abs=0.003)
    in_sample = _figures([r for r in all_rows(bundled()) if r.source == SOURCE])
    assert in_sample["TTFT"] == pytest.approx((0.057, 0.032), abs=0.003)


def test_the_sweep_is_reported_apart_and_no_band_a_plan_reads_is_drawn_from_it():
    """Pooled, its 1,315 first tokens would be nine in ten of the GPU class's and set the band a plan's first token
    carries (bench/accuracy.py SOURCES_APART): the stored table states it as its own class, and no band names it."""
    from planner.physics.bands import bands

    stored = bands()
    assert all(SOURCE not in entry["sources"] for entry in stored["classes"].values())
    assert not any(key.startswith("sweep/") for key in stored["classes"])
    assert (stored["loso"]["sweep/TTFT"]["rows"], stored["loso"]["gpu/TTFT"]["rows"]) == (1315, 150)
    assert stored["loso"]["moe/serving tokens/s"]["rows"] == 44  # its Mixtral batches stay out of the MoE class


def test_serving_memory_meets_one_gpu_peaks_and_states_its_gap_at_wide_tp():
    """At TP 1 the serving memory estimate (weights, KV, workspace, runtime) is within 7.2% of the median published
    peak (+4.8%: its runtime allowance is above this engine's). From TP 4 each GPU's peak carries 4-7 GB the estimate
    does not: TensorRT-LLM's workspace for the engine build's largest shapes and its all-reduce buffers, unsharded
    (README, Known limits). Fixing that moves these figures: restate them."""
    errors = memory_errors(bundled())
    one = errors[1]
    assert len(one) == 610 and statistics.median(abs(e) for e in one) == pytest.approx(0.072, abs=0.003)
    assert statistics.median(one) == pytest.approx(0.048, abs=0.003)
    assert statistics.median(errors[2]) == pytest.approx(-0.009, abs=0.003)
    assert statistics.median(errors[4]) == pytest.approx(-0.078, abs=0.005)
    assert statistics.median(errors[8]) == pytest.approx(-0.223, abs=0.005)


def test_the_residuals_script_points_at_mixtral_and_the_h100_context_phase():
    """bench/sweep_residuals.py groups the held-out errors by part, model, TP and batch: the dense models' decode steps
    are within 13% by model while Mixtral 8x7B's are 25.6% long (22.8% before the serving refit that followed Hopper's
    prefill share, KV share 0.84 -> 0.78; 22.2% while a fit read 20 rows a source, 25.2% before every serving source
    weighed the same). H100's first tokens were the slowest part's (+12.2%) until Hopper's prefill share was fitted on
    Hopper first tokens: +4.8% then, -3.6% since the HTTP request cost is measured (its fold's share 0.60 -> 0.66), +1.6%
    since a prompt's step pays a step's fixed cost (its short prompts had come early), and L40S's (Ada's FP8 prefill at
    the training fit's 1.14) are the slowest (+11.2% before that step cost)."""
    groups = grouped(_held_out_rows())
    mixtral = groups[("ITL", "model", "mixtral-8x7b")]
    assert mixtral == (156, pytest.approx(0.256, abs=0.003), pytest.approx(0.256, abs=0.003))
    dense = ("llama-2-7b", "llama-2-13b", "llama-2-70b", "mistral-7b")
    assert all(groups[("ITL", "model", m)][1] < 0.13 for m in dense)
    by_part = {part: groups[("TTFT", "part", part)][2] for part in ("A100-80GB", "H100-SXM-80GB", "H200", "L40S")}
    assert max(by_part, key=by_part.get) == "L40S" and by_part["L40S"] == pytest.approx(0.119, abs=0.003)
    assert by_part["H100-SXM-80GB"] == pytest.approx(0.016, abs=0.003)


def test_the_plans_bands_hold_the_sweep_they_were_never_drawn_from():
    """A blind check of the 80% bands (issue 25: a band must hold at least 75% of a source it never saw): the GPU bands
    hold 89.2% of the sweep's dense tokens/s, 82.7% of its first tokens (on predicted + the band's offset) and 93.1% of
    its inter-token latencies, read with the share its own fold fitted; the MoE band holds 64.7% of its Mixtral
    tokens/s, short of 75% (README). (88.6% and 63.5% before each trtllm-bench run was its stated number of requests,
    which moved the GPU band 0.812-1.153 -> 0.815-1.160 and the MoE one 0.812-1.284 -> 0.815-1.288; 89.7%, 84.2%, 92.2% and 63.5% before a prompt's step paid a step's fixed cost and
    its LM head ran on its last position only; 89.0%, 82.2%, 92.8% and 56.4% before a prompt's experts ran as grouped GEMMs;
    88.6%, 83.4%, 91.3% and 53.8% before the HTTP request cost was measured; 90.4%,
    79.5%, 92.8% and 57.1% before Hopper's prefill share was fitted; 93.6%, 79.0%,
    92.8% and 61.5% while a fit read 20 rows a source; 90.9%, 80.1%, 92.5% and 62.8% before every serving source weighed
    the same in the fit.)"""
    from planner.physics.bands import bands

    classes = bands()["classes"]
    rows = _held_out_rows()

    def inside(key: str, selected: list) -> float:
        return stored_band_share(classes[key], selected)

    tokens = [r for r in rows if r.metric == "serving tokens/s"]
    assert inside("gpu/serving tokens/s", [r for r in tokens if not r.moe]) == pytest.approx(0.892, abs=0.002)
    assert inside("moe/serving tokens/s", [r for r in tokens if r.moe]) == pytest.approx(0.647, abs=0.002)
    assert inside("gpu/TTFT", [r for r in rows if r.metric == "TTFT"]) == pytest.approx(0.827, abs=0.002)
    assert inside("gpu/ITL", [r for r in rows if r.metric == "ITL"]) == pytest.approx(0.931, abs=0.002)
