"""A mixture-of-experts model on a GPU carries the MoE rows' own 80% band where two or more sources measured
the figure (bench/accuracy.py _model_classes, planner/physics/bands.py ratio_quantiles), and `confidence: likely`
checks its targets at that band's slow edge. Issue 25: a band holds at least 75% of its rows; the GPU class's
throughput band held 59% of the MoE rows while Argonne's TensorRT-LLM batches of copies of one prompt were read as
independent sequences (sources disagreeing in sign), 80% once they were read as copies with the estimate putting every
MoE source fast, and 84% since decode pays the routed experts' grouped GEMMs (test_moe_expert_gemms.py): the MoE
rows straddle the estimate now, and their band's fast edge is wider than a dense plan's, its slow edge the same."""

from __future__ import annotations

import pytest

from bench.accuracy import MODEL_CLASS_MIN_SOURCES, SOURCES_APART, TARGET_COVERAGE, band_classes
from bench.reference_cases import Row, all_rows
from planner.physics.bands import bands, ratio_quantiles, slow_factor
from planner.pipeline import plan_workload
from tests.conftest import workload

MIXTRAL = {"kind": "inference", "model": {"preset": "mixtral-8x7b"},
           "serving": {"prompt_tokens": 512, "output_tokens": 256, "concurrent_requests": 32},
           "constraints": {"instance_types": ["p4de.24xlarge"], "confidence": "expected"}}


def _row(source: str, ratio: float, n: int, moe: bool = True) -> Row:
    return Row(f"{source}-{n}", "serving tokens/s", source, "", 1.0, ratio, moe=moe)


def _inside(rows: list[Row], q10: float, q90: float) -> float:
    return sum(q10 <= r.measured / r.predicted <= q90 for r in rows) / len(rows)


def test_the_moe_band_holds_the_moe_runs_and_is_never_narrower_than_the_gpu_one(catalog):
    # the sources kept apart (NVIDIA's TensorRT-LLM 0.9.0 sweep: 156 Mixtral batches) are reported as their own class
    rows = [r for r in all_rows(catalog) if r.moe and r.metric == "serving tokens/s" and r.source not in SOURCES_APART]
    classes = bands()["classes"]
    gpu, moe = classes["gpu/serving tokens/s"], classes["moe/serving tokens/s"]
    assert len(rows) == 44 and len({r.source for r in rows}) == 3
    # 26 before identical_prompts, 35 before the routed experts' grouped GEMMs, 37 before the HBM weight stream and its
    # per-kernel cost were measured (the GPU band moved from 0.77-1.19 to 0.74-1.19), 35 before each MoE layer's router
    # paid its GEMM tail (performance.weight_gemms_per_step), 36 before its token-sorting kernel; 35 before every serving
    # source weighed the same in the fit (the GPU band 0.83-1.19 -> 0.78-1.18), 36 before a fit read every row of a
    # source (the GPU band 0.78-1.18 -> 0.81-1.14), 35 before a prompt's experts ran as grouped GEMMs (trtllm-bench's
    # long-prompt Mixtral-8x22B runs, fast before, now inside; its decode-heavy ones slower still); 33 too since a
    # prompt's step pays a step's fixed cost and its LM head runs on its last position only (the GPU band 0.81-1.16 ->
    # 0.81-1.15); 31 since each trtllm-bench run is its stated number of requests (its Mixtral-8x22B runs slower still)
    assert _inside(rows, gpu["q10"], gpu["q90"]) == pytest.approx(31 / 44)
    # drawn from the held-out residuals, it holds 39 of the 44 rows at the committed constants (issue 25: >= 75%; 39
    # before the stream was measured, 37 before the routers' tails, 38 before their token-sorting kernels, 39 before
    # every serving source weighed the same, 38 before the HTTP request cost was measured, 39 before a prompt's experts
    # ran as grouped GEMMs)
    assert _inside(rows, moe["q10"], moe["q90"]) == pytest.approx(38 / 44)
    # the MoE rows straddle the estimate: some run faster than it (TensorRT-LLM's offline Mixtral-8x22B up to x1.41)
    assert moe["percentiles"][0] < 1 < moe["percentiles"][1]
    # its own percentiles, joined with the GPU band: never narrower than a dense plan's
    assert moe["joined_with"] == "gpu/serving tokens/s" and "widening" not in moe
    assert (moe["q10"], moe["q90"]) == (min(moe["percentiles"][0], gpu["q10"]), max(moe["percentiles"][1], gpu["q90"]))
    assert moe["q10"] == gpu["q10"] and moe["q90"] > gpu["q90"]
    # a source left out keeps 73% of its rows inside the others' percentiles (README's accuracy table says so; 77%
    # before every serving source weighed the same, 73% before Argonne's TensorRT-LLM rows were read with their
    # one-block-per-KV-head attention, 77% before the stream was measured, 57% before the routers' tails, 61% before
    # their token-sorting kernels; 75% since a fit reads every row of a source; 73% since Hopper's prefill share is
    # fitted on Hopper first tokens; 68% since a prompt's step pays a step's fixed cost and its LM head runs once; 64%
    # since each trtllm-bench run is its stated number of requests)
    assert moe["held_out_share"]["percentiles"] == pytest.approx(28 / 44, abs=1e-4)
    assert moe["held_out_share"]["percentiles"] < TARGET_COVERAGE


def test_a_model_class_is_stored_only_where_two_sources_measured_it():
    one = [_row("a", 0.7 + 0.02 * i, i) for i in range(10)] + [_row("dense", 1.0, i, moe=False) for i in range(10)]
    assert MODEL_CLASS_MIN_SOURCES == 2
    assert "moe/serving tokens/s" not in band_classes(one)
    two = one + [_row("b", 1.3 + 0.02 * i, i) for i in range(10)]
    classes = band_classes(two)
    entry, gpu = classes["moe/serving tokens/s"], classes["gpu/serving tokens/s"]
    assert entry["sources"] == ["a", "b"] and entry["rows"] == 20  # the dense rows stay in the GPU class only
    assert gpu["rows"] == 30
    assert entry["percentiles"] == pytest.approx([0.738, 1.442], abs=1e-4)  # deciles of 0.70-0.88 and 1.30-1.48
    assert entry["held_out_share"]["percentiles"] == 0.0  # each source lies wholly outside the other's band
    assert (entry["q10"], entry["q90"]) == (min(0.738, gpu["q10"]), max(1.442, gpu["q90"]))


def test_a_moe_plan_carries_the_moe_band_and_the_gpu_one_where_moe_has_none(catalog):
    perf = plan_workload(workload(**MIXTRAL), catalog).performance
    classes = bands()["classes"]
    moe = classes["moe/serving tokens/s"]
    assert ratio_quantiles("gpu", "serving tokens/s", moe=True) == (moe["q10"], moe["q90"])
    assert ratio_quantiles("gpu", "serving tokens/s", moe=True) != ratio_quantiles("gpu", "serving tokens/s")
    per_replica = perf.output_tokens_per_s_per_replica
    assert perf.band["output_tokens_per_s_per_replica"] == pytest.approx([per_replica * moe["q10"],
                                                                        per_replica * moe["q90"]])
    assert "moe/ITL" not in classes  # one source (AccelMark's two Mixtral rows): the GPU band applies
    q10, q90 = ratio_quantiles("gpu", "ITL")
    assert perf.band["inter_token_latency_s"] == pytest.approx([perf.inter_token_latency_s * q10,
                                                               perf.inter_token_latency_s * q90])
    assert ratio_quantiles("neuron", "serving tokens/s", moe=True) == ratio_quantiles("neuron", "serving tokens/s")


def test_likely_checks_a_moe_throughput_target_at_the_moe_slow_edge(catalog):
    """A target the estimate meets but the MoE band's slow edge misses: `likely` buys another replica. The MoE rows'
    own slow percentile (x0.88) sits inside the GPU band's, so that edge is the GPU's (x1.24)."""
    expected = plan_workload(workload(**MIXTRAL), catalog)
    aggregate = expected.performance.output_tokens_per_s
    slow_moe = slow_factor("gpu", "serving tokens/s", "likely", moe=True)
    q10, _ = ratio_quantiles("gpu", "serving tokens/s", moe=True)
    assert slow_moe == pytest.approx(1 / q10) and slow_moe == slow_factor("gpu", "serving tokens/s", "likely")
    # 1.211 before every serving source weighed the same, 1.222 before Argonne's TensorRT-LLM rows ran unsplit, 1.351
    # before V0's host loop, 1.297 before the stream was measured, 1.281 before a fit read every row of a source, 1.238
    # before Hopper's prefill share was fitted on Hopper first tokens, 1.237 before the HTTP request cost was measured,
    # 1.236 before a prompt's step paid a step's fixed cost and its LM head ran on its last position only, 1.232 before
    # each trtllm-bench run was its stated number of requests (the GPU band's slow edge 0.812 -> 0.815)
    assert slow_moe == pytest.approx(1.2265, abs=0.001)
    target = aggregate / ((1 + slow_moe) / 2)
    spec = {**MIXTRAL, "serving": {**MIXTRAL["serving"], "target_output_tokens_per_s": target},
            "constraints": {**MIXTRAL["constraints"], "confidence": "likely"}}
    likely = plan_workload(workload(**spec), catalog)
    assert aggregate >= target > aggregate / slow_moe
    assert likely.performance.output_tokens_per_s / slow_moe >= target
    assert likely.layout.replicas > expected.layout.replicas
    assert likely.performance.decided_at.startswith("slow edge")
