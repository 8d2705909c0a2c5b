"""Decode attention reads the KV cache no faster than the kernel was measured to on the part (issue 25).

The KV stream's share (efficiency.KV_BANDWIDTH_EFFICIENCY, 0.78) is fitted on A100, H100 and GDDR rows. On a B200 it
put decode attention above the kernel that runs it there: TensorRT-LLM's trtllm-gen paged decode attention reaches
5,830.86 GB/s at its best shape, 0.73 of the B200's 8,000 (flashinfer-ai/flashinfer PR #1415, 2025-08-08). The
B200 rows (TensorRT-LLM 0.17's perf overview, never fitted) read 8.4% fast (median), their decode-heavy long-output
runs 10-22%."""

from __future__ import annotations

import statistics

import pytest

from bench import kv_kernel_check
from bench import reference_sources as rs
from bench.offline_rows import predict_offline
from planner.hardware.catalog import bundled
from planner.physics import efficiency
from planner.physics.memory import kv_bytes_per_sequence
from planner.physics.performance import decode_step
from planner.workload.errors import SpecError
from tests.test_gemm_share import _part  # an overlay part: HBM (the default), 600 GB/s
from tests.test_offline_throughput import _b200, _row, _rows

B200_KERNEL_SHARE = 0.73


def test_b200_reads_the_kv_cache_at_its_kernels_measured_share():
    b200 = bundled().accelerator("B200")
    assert b200.kv_share_measured == B200_KERNEL_SHARE
    assert efficiency.kv_bandwidth(b200) == pytest.approx(B200_KERNEL_SHARE * 8000e9)
    # the fitted share, for a part that states no measurement
    h100 = bundled().accelerator("H100-80GB")
    assert h100.kv_share_measured is None
    assert efficiency.kv_bandwidth(h100) == pytest.approx(efficiency.KV_BANDWIDTH_EFFICIENCY * 3350e9)


def test_the_catalog_figure_is_the_best_published_shape():
    """bench/kv_kernel_check.py reads it from FlashInfer PR #1415's two listings (bench/data/kv_kernels/): 128
    sequences of 4,096 tokens at 5,830.86 GB/s; 4 sequences of 1,024 reach only 0.12 of peak."""
    assert kv_kernel_check.measured_share() == bundled().accelerator("B200").kv_share_measured == B200_KERNEL_SHARE
    shares = {(batch, tokens): share for run, batch, tokens, share in kv_kernel_check.shares() if run == "first listing"}
    assert shares[(128, 4096)] == pytest.approx(5830.86 / 8000)
    assert shares[(4, 1024)] == pytest.approx(973.91 / 8000)


def test_the_measurement_caps_the_fitted_share_and_never_raises_it():
    assert efficiency.kv_bandwidth(_part(kv_share_measured=0.5)) == pytest.approx(0.5 * 600e9)
    assert efficiency.kv_bandwidth(_part(kv_share_measured=0.95)) == pytest.approx(
        efficiency.KV_BANDWIDTH_EFFICIENCY * 600e9)


@pytest.mark.parametrize("value", [1.5, 0])
def test_a_bad_kernel_share_is_refused_naming_the_field(value):
    with pytest.raises(SpecError) as err:
        _part(kv_share_measured=value)
    assert f"accelerators[0].kv_share_measured: must be from 0.05 to 1 (got {value:g})" in str(err.value)


def test_a_b200_decode_step_reads_its_kv_at_the_kernel_share():
    """Llama-3.1-70B NVFP4 on one B200 at 394 sequences of 1,152 tokens (the 128/2048 row's batch): the step's KV
    time is its bytes over 0.73 of 8 TB/s."""
    catalog = bundled()
    row = _row("trtllm10-b200-llama-3.1-70b-tp1-fp4-128-2048")
    _, b200 = _b200(catalog)
    arch = rs.row_architecture(row)
    b, ctx = 394, 128 + 2048 / 2
    step = decode_step(arch, b200, "nvfp4", "fp8", 1, 1, b, ctx)
    kv_s = b * kv_bytes_per_sequence(arch, int(ctx), "fp8") / (B200_KERNEL_SHARE * 8000e9)
    uncapped = b * kv_bytes_per_sequence(arch, int(ctx), "fp8") / (efficiency.KV_BANDWIDTH_EFFICIENCY * 8000e9)
    assert step.memory_s > kv_s > uncapped


def test_the_b200_rows_median_and_their_long_output_runs():
    """The 20 published B200 runs: median +8.4% at the fitted share, +5.7% at the kernel's; +4.6% since each run is its
    stated number of requests (planner/physics/offline_throughput.py's rounds). The 70B and 405B 1,000/2,000 runs
    (published 6,271 and 4,933 tokens/s): +14.9% and +22.0% -> +12.0% and +20.9% -> +9.2% and +17.6%."""
    catalog = bundled()
    itype, b200 = _b200(catalog)

    def error(r):
        return predict_offline(rs.row_architecture(r), b200, itype, r).output_tokens_per_s / r["tokens_per_s"] - 1

    errors = {r["id"]: error(r) for r in _rows("trtllm10-b200-")}
    assert statistics.median(errors.values()) == pytest.approx(0.0457, abs=5e-4)
    assert errors["trtllm10-b200-llama-3.1-70b-tp1-fp4-1000-2000"] == pytest.approx(0.0916, abs=1e-3)
    assert errors["trtllm10-b200-llama-3.1-405b-tp4-fp4-1000-2000"] == pytest.approx(0.1759, abs=1e-3)
