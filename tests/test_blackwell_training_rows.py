"""Issue 25: B200 training rows. NeMo's published performance summary (Megatron-Bridge, 25.11 container) times Llama 3
8B and Llama 3.1 405B pre-training on DGX-B200 beside the DGX-H100 rows already in the fit. Blackwell has no GEMM share
of its own: it takes the lowest fitted one (Hopper's), and these rows show what that gives on a fused FP8 stack."""

from __future__ import annotations

import pytest

from bench import calibrate, reference_sources as rs
from bench.reference_cases import all_rows, reference
from planner.physics import efficiency

SOURCE = "nemo-b200"
ROWS = {"N-B200-8B-FP8", "N-B200-405B-FP8"}


@pytest.fixture(scope="module")
def b200_rows(catalog):
    return {r.id: r for r in all_rows(catalog) if r.source == SOURCE}


def test_the_b200_rows_carry_their_page_at_a_commit_and_are_compared(b200_rows, catalog):
    data = rs.sources()[SOURCE]
    assert "@00b7660be0254ac6f95f44164ddd0c3e9cc798ed" in data["source"]["citation"]
    assert {r["id"] for r in data["rows"]} == ROWS
    assert not [r["id"] for r in data["rows"] if rs.why_not(r, catalog)]
    assert set(b200_rows) == ROWS and {r.accelerator for r in b200_rows.values()} == {"B200"}
    # the same page's H100 rows stay in the fit as source nemo
    assert {r["id"] for r in reference()["training"] if r["source"] == "nemo"} == {"N-8B-FP8", "N-70B-FP8"}


def test_b200_rows_are_compared_but_not_fitted(catalog):
    """Fitted in, they would move Hopper's share and the shared constants through Blackwell's fallback to it."""
    assert "B200" in calibrate.EVALUATED_ONLY
    fitted = calibrate.objective(catalog, "gpu", group="training")
    assert calibrate.objective(catalog, "gpu", without=SOURCE, group="training") == fitted


def test_blackwell_takes_the_lowest_fitted_gemm_share_at_its_measured_share_of_its_peak(catalog):
    """No Blackwell share is fitted: the B200 takes Hopper's (the lowest), scaled by its own large-GEMM share over the
    H100's in one script (zzc0721/torch-performance-test-data: 1,696 of 2,250 TFLOP/s, 0.75, against 0.80): 6% less."""
    b200 = catalog.accelerator("B200")
    assert "10" not in efficiency.GEMM_EFFICIENCY_BY_GENERATION and b200.gemm_share_measured == 0.75
    assert efficiency.gemm_efficiency(b200) == pytest.approx(
        min(efficiency.GEMM_EFFICIENCY_BY_GENERATION.values()) * 0.75 / efficiency.FITTED_PART_GEMM_SHARE["9"])


@pytest.mark.parametrize(("row_id", "measured_tflops", "tolerance"), [
    # 30,624 tokens/s/GPU at 8 GPUs (DDP, MBS 2): +5.3% with the inherited share
    ("N-B200-8B-FP8", 1870.1, 0.10),
    # 661 tokens/s/GPU at 128 GPUs, TP 4 x PP 8 (interleaved, v 8) x CP 2: -3.0%
    ("N-B200-405B-FP8", 1743.8, 0.10),
])
def test_b200_training_rows_are_within_the_training_target(b200_rows, row_id, measured_tflops, tolerance):
    row = b200_rows[row_id]
    assert row.measured == pytest.approx(measured_tflops, abs=0.1)  # tokens/s x the planner's FLOPs per token
    assert row.predicted == pytest.approx(row.measured, rel=tolerance)
