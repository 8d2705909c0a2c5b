"""vLLM's V0 engine runs its host loop between GPU steps (issue 25; bench/engine_loop.py). Argonne's 2024 vLLM rows
were predicted increasingly fast with the batch (+7% at batch 1-4, +34-57% past 32) while its TensorRT-LLM rows on
the same GPUs were not: the scheduler's and input builder's per-sequence work was missing. Rows that ran V0 say so
(`engine_loop: synchronous`) and pay it; no plan does, since the engines plans deploy overlap it."""

from __future__ import annotations

import re
import statistics

import pytest

from bench import engine_loop, reference_serving
from bench.reference_cases import Row
from bench.reference_sources import sources
from planner.hardware.catalog import bundled
from planner.physics import efficiency
from planner.physics.kv_capacity import resident_sequences, static_batch
from planner.physics.performance import decode_step, prefill_s, step_fixed_s
from planner.physics.replica_serving import replica_estimate
from planner.workload.presets import presets

V0_SOURCES = ("argonne-llm-inference-bench", "philschmid-llmperf-a10g-inf2", "accelmark-verified")


@pytest.fixture(scope="module")
def catalog():
    return bundled()


def _vllm_release(version: str) -> tuple[int, int] | None:
    match = re.search(r"vLLM v?(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def test_every_row_that_ran_vllms_v0_engine_says_so_and_no_other_row_does():
    """V1 became vLLM's default engine in 0.8.0 (2025-03); Argonne's 2024 runs predate it, whatever pip gave them.
    A V0 run with multi-step scheduling (--num-scheduler-steps) pays the loop once per several steps: not read here."""
    for source_id, data in sources().items():
        for row in data["rows"]:
            version = str(row.get("engine_version", ""))
            release = _vllm_release(version)
            multi_step = "num-scheduler-steps" in version  # V0's multi-step loop: one host pass per several steps
            v0 = row.get("engine") == "vllm" and not multi_step and (
                (release is not None and release < (0, 8)) or "vLLM 2024" in version)
            assert (row.get("engine_loop") == "synchronous") == v0, (source_id, row["id"], version)
            if v0:
                assert source_id in V0_SOURCES


def test_the_host_cost_is_one_fixed_part_and_one_per_sequence_and_none_where_the_loop_overlaps():
    v0 = {"engine_loop": "synchronous"}
    assert engine_loop.host_step_s(v0, 0) == engine_loop.SYNCHRONOUS_STEP_HOST_S
    assert engine_loop.host_step_s(v0, 64) - engine_loop.host_step_s(v0, 32) == pytest.approx(
        32 * engine_loop.SYNCHRONOUS_SEQUENCE_HOST_S)
    assert engine_loop.host_step_s({"engine": "vllm"}, 64) == 0.0


def test_the_fitted_loop_sits_in_the_bubble_vllm_measured():
    """vLLM RFC #6854 (2024-07-26): 5-13 ms of GPU bubble per V0 decode step of Llama 3 8B on one H100 under
    benchmark_serving's ShareGPT load, whose running batch V0 caps at 256 sequences (max_num_seqs). The fit, made on
    other rows, puts a full batch's step inside that range and a lone sequence's below it."""
    v0 = {"engine_loop": "synchronous"}
    assert 5e-3 <= engine_loop.host_step_s(v0, 128) <= 13e-3
    assert engine_loop.host_step_s(v0, 1) < 5e-3


def test_a_static_batch_pays_the_loop_on_its_prefill_step_and_every_decode_step(catalog):
    itype = catalog.instance("p4d.24xlarge")
    a100 = catalog.accelerator(itype.accelerator)
    arch, row = presets()["llama-2-7b"], {"engine_loop": "synchronous"}
    batch, prompt, output = 64, 128, 128

    def step_s(k: int) -> float:
        return (decode_step(arch, a100, "bf16", "bf16", 1, 1, k, prompt + output / 2).seconds
                + engine_loop.host_step_s(row, k))

    def first_token_s(k: int) -> float:
        # vLLM's offline script: no HTTP; the prompts' own step pays a step's fixed cost (performance.step_fixed_s)
        return (prefill_s(arch, a100, "bf16", 1, 1, prompt, itype, prompts=k) + step_fixed_s(arch, a100)
                + engine_loop.host_step_s(row, k))

    waves = static_batch(batch, resident_sequences(arch, a100, "bf16", "bf16", 1, prompt + output // 2), output,
                         first_token_s, step_s)
    predicted = [r for r in reference_serving.serving_rows(catalog, Row)
                 if r.id == "llminferbench-a100-vllm-llama-2-7b-tp1-bs64-128"]
    assert len(predicted) == 1 and predicted[0].predicted == pytest.approx(waves.output_tokens_per_s)


def test_a_plan_never_pays_v0s_loop(catalog, monkeypatch):
    """The planner's estimate takes no host loop: V0's constants, however large, move no plan's figure."""
    itype = catalog.instance("p5.48xlarge")
    h100 = catalog.accelerator(itype.accelerator)
    arch = presets()["llama-3-8b"]
    before = replica_estimate(arch, h100, "bf16", "bf16", 1, 1, 32, 1024, 256, itype)
    monkeypatch.setattr(engine_loop, "SYNCHRONOUS_STEP_HOST_S", 1.0)
    monkeypatch.setattr(engine_loop, "SYNCHRONOUS_SEQUENCE_HOST_S", 1.0)
    assert replica_estimate(arch, h100, "bf16", "bf16", 1, 1, 32, 1024, 256, itype) == before
    slowed = replica_estimate(arch, h100, "bf16", "bf16", 1, 1, 32, 1024, 256, itype,
                              host_step_s=lambda k: engine_loop.host_step_s({"engine_loop": "synchronous"}, k))
    assert slowed.inter_token_latency_s > before.inter_token_latency_s + 32


def test_argonnes_vllm_rows_no_longer_drift_fast_with_the_batch(catalog):
    """Signed error of Argonne's vLLM throughput rows at batch 1-4 against past 32: +7% against +34-57% before."""
    rows = [r for r in reference_serving.serving_rows(catalog, Row)
            if r.source == "argonne-llm-inference-bench" and "-vllm-" in r.id]
    small = [r.error for r in rows if int(re.search(r"-bs(\d+)-", r.id).group(1)) <= 4]
    large = [r.error for r in rows if int(re.search(r"-bs(\d+)-", r.id).group(1)) > 32]
    assert len(small) > 20 and len(large) > 20
    assert abs(statistics.median(large) - statistics.median(small)) < 0.15


def test_the_residual_script_shows_v0_steps_missing_time_that_tensorrt_llms_do_not(monkeypatch):
    """bench/engine_loop_residuals.py: with no loop paid, Argonne's vLLM steps at batch 64 run ms past the estimate
    that its TensorRT-LLM steps on the same GPUs do not; with the fitted loop, within 1.5 ms of them (within 1 ms before
    every serving source weighed the same in the fit: its KV share 0.71 -> 0.77 leaves the TensorRT-LLM steps 1.5 ms
    past the estimate and the V0 ones 0.1 ms)."""
    from bench import engine_loop_residuals

    argonne = "argonne-llm-inference-bench"

    def at_64() -> tuple[float, float]:
        missing = engine_loop_residuals.missing_ms_per_step()
        return (missing[(argonne, "vllm-v0", "serving tokens/s")][64],
                missing[(argonne, "tensorrt-llm", "serving tokens/s")][64])

    vllm, trt = at_64()
    assert abs(vllm - trt) < 1.5
    monkeypatch.setattr(engine_loop, "SYNCHRONOUS_STEP_HOST_S", 0.0)
    monkeypatch.setattr(engine_loop, "SYNCHRONOUS_SEQUENCE_HOST_S", 0.0)
    vllm, trt = at_64()
    assert vllm - trt > 3.0


def test_the_fit_writes_the_loop_constants_beside_their_formula(tmp_path, monkeypatch):
    """`bench/calibrate.py --write` puts efficiency.py's constants in efficiency.py and the V0 loop's in
    bench/engine_loop.py, each assignment rewritten in place with its comments kept."""
    import types
    from pathlib import Path

    from bench import calibrate

    loop_copy, efficiency_copy = tmp_path / "engine_loop.py", tmp_path / "efficiency.py"
    loop_copy.write_text(Path(engine_loop.__file__).read_text())
    efficiency_copy.write_text(Path(efficiency.__file__).read_text())
    fake_loop = types.SimpleNamespace(__file__=str(loop_copy))
    monkeypatch.setattr(calibrate, "MODULE_OF", {name: fake_loop for name in calibrate.MODULE_OF})
    monkeypatch.setattr(calibrate, "EFFICIENCY", efficiency_copy)
    calibrate.write_constants({"SYNCHRONOUS_SEQUENCE_HOST_S": 7e-05, "KV_BANDWIDTH_EFFICIENCY": 0.66})
    assert "\nSYNCHRONOUS_SEQUENCE_HOST_S = 7e-05\n" in loop_copy.read_text()
    assert "\nKV_BANDWIDTH_EFFICIENCY = 0.66\n" in efficiency_copy.read_text()
    assert "SYNCHRONOUS" not in efficiency_copy.read_text()
    assert len(loop_copy.read_text().splitlines()) == len(Path(engine_loop.__file__).read_text().splitlines())
