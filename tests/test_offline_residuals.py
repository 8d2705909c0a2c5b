"""bench/offline_residuals.py (issue 25): where a trtllm-bench row's predicted time goes, and which regime it is in."""

from __future__ import annotations

import pytest

from planner.hardware.catalog import bundled
from planner.physics import efficiency


def test_a_rows_step_split_and_prefill_share_rebuild_its_predicted_throughput():
    """The decode step's parts (kernels, TP all-reduces, fixed overhead) and the prefill share of the lifetime are
    the offline estimate's own: batch · OSL ÷ (OSL · step ÷ (1 − prefill share)) is its steady tokens/s, and the
    run of 3,000 requests (one round of 1,583, one of 1,417) a little less."""
    from bench import offline_residuals

    rows = {r.id: r for r in offline_residuals.residuals(bundled())}
    r = rows["trtllm017-h100-llama-3.1-70b-tp8-128-2048"]
    assert (r.setup, r.batch, r.binding, r.regime) == ("llama-3.1-70b H100-SXM-80GB TP8 fp8 128/2048", 1583,
                                                        "kv-memory", "decode-bound")
    # 80 layers of four weight GEMMs' tails each (and the LM head's), plus the step's fixed cost
    overhead_s = efficiency.DECODE_STEP_OVERHEAD_S + (4 * 80 + 1) * efficiency.GEMM_KERNEL_TAIL_S
    assert r.overhead_ms == pytest.approx(overhead_s * 1e3)
    step_s = (r.kernels_ms + r.allreduce_ms + r.overhead_ms) / 1e3
    assert r.batch * 2048 / (2048 * step_s / (1 - r.prefill_share)) == pytest.approx(r.steady)
    assert r.predicted / r.steady == pytest.approx(0.9913, abs=1e-3)
    assert rows["trtllm017-h100-llama-3.1-70b-tp8-5000-500"].regime == "prefill-bound"


def test_the_report_groups_rows_by_regime_and_tp():
    from bench.offline_residuals import Residual, report

    def row(share: float, tp: int, predicted: float) -> Residual:
        return Residual("x", "m A TP1 bf16 1/1", tp, 8, "kv-memory", 1.0, 0.0, 0.0, share, 100.0, predicted, predicted)

    assert [row(s, 1, 100).regime for s in (0.29, 0.30, 0.60, 0.61)] == ["decode-bound", "mixed", "mixed",
                                                                          "prefill-bound"]
    lines = report([row(0.1, 8, 130), row(0.1, 8, 110), row(0.1, 8, 120), row(0.9, 8, 90)])
    assert "decode-bound   TP8:   3 rows, signed median +20.0%, abs. 20.0%" in lines
    assert "prefill-bound  TP8:   1 rows, signed median -10.0%, abs. 10.0%" in lines
