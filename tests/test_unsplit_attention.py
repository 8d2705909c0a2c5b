"""Decode attention run one thread block per (sequence, KV head) (planner/physics/unsplit_attention.py): the formula,
its measurement on TensorRT-LLM 0.9's sweep, and its held-out check on NIM's one-client runs, which no constant saw."""

from __future__ import annotations

import csv
import io
import statistics

import pytest

from bench import attention_check, calibrate, reference_sources
from bench.accuracy import stored_band_share
from bench.reference_cases import all_rows
from planner.hardware.catalog import bundled
from planner.physics import unsplit_attention
from planner.physics.performance import decode_step
from planner.physics.replica_serving import replica_estimate
from planner.workload.presets import presets
from scripts.convert_nim_dli_sweep import convert

NIM = "nim-dli-sweep"


def _h100():
    catalog = bundled()
    itype = catalog.instance("p5.48xlarge")
    return itype, catalog.accelerator(itype.accelerator)


def test_a_block_runs_its_kv_heads_query_heads_over_every_position():
    """Llama 2 70B (64 query heads, 8 KV heads) at TP 8: one block per rank holds 8 query heads, so 80 layers × 3,072
    positions × 8 × 1.205 ns = 2.369 ms, at TP 8 as at TP 4 (8 ÷ 8 query heads per KV head either way)."""
    assert unsplit_attention.UNSPLIT_ATTENTION_NS_PER_HEAD_POSITION == 1.205
    seconds = unsplit_attention.unsplit_attention_s(80, 3072, 64, 8, 8)
    assert seconds == pytest.approx(80 * 3072 * 8 * 1.205e-9, rel=1e-12)
    assert seconds == pytest.approx(2.369e-3, abs=1e-6)
    assert unsplit_attention.unsplit_attention_s(80, 3072, 64, 8, 4) == seconds


def test_it_slows_a_gqa_step_and_leaves_an_mha_step_at_its_bandwidth_roof():
    itype, h100 = _h100()
    seventy, seven = presets()["llama-2-70b"], presets()["llama-2-7b"]
    split = decode_step(seventy, h100, "bf16", "bf16", 8, 1, 1, 3072, itype=itype)
    unsplit = decode_step(seventy, h100, "bf16", "bf16", 8, 1, 1, 3072, itype=itype, unsplit_attention=True)
    assert unsplit.seconds - split.seconds == pytest.approx(2.3e-3, abs=0.1e-3)
    mha = [decode_step(seven, h100, "bf16", "bf16", 1, 1, 1, 3072, itype=itype, unsplit_attention=flag).seconds
           for flag in (False, True)]
    assert mha[0] == mha[1]  # 32 blocks of one query head each: the KV stream's roof binds first


def test_no_plan_pays_it():
    """The engines plans deploy split a long sequence's attention (TensorRT-LLM's multi-block mode on by default, the
    split-KV decode of FlashAttention and FlashInfer): the planner's own estimate never passes the flag."""
    itype, h100 = _h100()
    arch = presets()["llama-3-70b"]
    plan = replica_estimate(arch, h100, "bf16", "bf16", 8, 1, 1, 7000, 1000, itype)
    unsplit = replica_estimate(arch, h100, "bf16", "bf16", 8, 1, 1, 7000, 1000, itype, unsplit_attention=True)
    assert unsplit.inter_token_latency_s > plan.inter_token_latency_s * 1.3


def test_the_constant_is_the_sweeps_measured_difference():
    """bench/attention_check.py: the one-sequence Llama 2 70B steps with a 16-bit KV cache grow 2.22 ms (A100, TP 2) and
    2.23 ms (H100, TP 4) from 192 to 3,072 positions; the block time that reproduces each is 1.20 and 1.21 ns."""
    measured = attention_check.measurements()
    assert [(config, round(grown, 2), ns) for config, grown, ns in measured] == [
        ("A100-80GB fp16 TP2", 2.22, 1.2), ("H100-SXM-80GB fp16 TP4", 2.23, 1.21)]
    assert attention_check.measured_constant() == pytest.approx(unsplit_attention.UNSPLIT_ATTENTION_NS_PER_HEAD_POSITION)


# Three lines of NIM's CSV as published (the columns the converter reads, in the file's order): one client, five
# clients, and one client on an 8-GPU BF16 engine.
NIM_HEADER = ("task_inputs-model,task_inputs-execution_type,task_inputs-GPU,task_inputs-n_gpus,task_inputs-precision,"
              "time_to_first_token-avg,inter_token_latency-avg,output_token_throughput-avg,input_config-concurrency,"
              "input_config-synthetic_input_tokens_mean,input_config-output_tokens_mean")
NIM_LINES = ["meta-llama3-8b-instruct,NIM_TRT-LLM,A100-SXM4-80GB,2,fp16,21427707.88,8332502.995435435,119.81369220726037,1,200,1000",
             "meta-llama3-8b-instruct,NIM_TRT-LLM,A100-SXM4-80GB,2,fp16,40169521.65,8720022.191875208,571.2048768030431,5,200,1000",
             "meta-llama3-70b-instruct,NIM_TRT-LLM,H100_80GB_HBM3,8,bf16,333600000.0,19110000.0,51.2,1,7000,1000"]


def test_the_nim_converter_keeps_one_client_runs_in_milliseconds():
    rows = convert(list(csv.DictReader(io.StringIO("\n".join([NIM_HEADER] + NIM_LINES)))))
    assert [r["id"] for r in rows] == ["nimdli-a100-80gb-llama-3-8b-fp16-tp2-200-1000",
                                       "nimdli-h100-sxm-80gb-llama-3-70b-bf16-tp8-7000-1000"]
    first = rows[0]
    assert (first["ttft_ms"], first["itl_ms"], first["tokens_per_s"]) == (21.43, 8.333, 119.81)
    assert (first["concurrency"], first["load"], first["decode_attention"], first["kv_precision"]) == (
        1, "closed-loop", "unsplit", "fp16")


def test_nims_published_steps_grow_with_the_context_alike_at_tp4_and_tp8():
    """The signature of one block per KV head: Llama 3 70B on H100 in FP16 grows 4.9 ms from 200/200 to 7,000/1,000 at
    TP 4 and at TP 8, though TP 8 streams half the KV bytes per GPU."""
    rows = {r["id"]: r for r in reference_sources.sources()[NIM]["rows"]}

    def growth(tp: int) -> float:
        return (rows[f"nimdli-h100-sxm-80gb-llama-3-70b-fp16-tp{tp}-7000-1000"]["itl_ms"]
                - rows[f"nimdli-h100-sxm-80gb-llama-3-70b-fp16-tp{tp}-200-200"]["itl_ms"])
    assert growth(4) == pytest.approx(4.90, abs=0.01) and growth(8) == pytest.approx(4.89, abs=0.01)


def _figures(rows) -> dict[str, tuple[float, float]]:
    out = {}
    for metric in ("serving tokens/s", "TTFT", "ITL"):
        errors = [r.error for r in rows if r.metric == metric]
        out[metric] = (statistics.median(abs(e) for e in errors), statistics.median(errors))
    return out


def test_nims_one_client_runs_are_never_fitted_and_predicted_within_the_readmes_figures(monkeypatch):
    """72 runs, every one predicted by constants that never saw the source (the serving fit never reads it; Hopper's
    prefill share, whose group reads its Hopper first tokens, refitted without it: 0.65 as with it; the block time is
    measured on the other sweep): tokens/s 6.6%, first token 6.5% (-2.8%), inter-token latency 6.6% (first token 9.0%,
    -6.5%, before a prompt's step paid a step's fixed cost and its LM head ran on its last position only; 8.7%,
    -5.8%, before a prompt's experts ran as grouped GEMMs: the fold's prefill share 0.65 -> 0.66; first token 12.1%,
    -12.1%, before a request served over HTTP paid the measured 4 ms; 7.5%, 13.2% (-5.2%) and 7.3% before Hopper's prefill share was fitted on Hopper first
    tokens and the serving refit that followed, KV share 0.84 -> 0.78; 8.1%, 12.4% and 8.1% while a fit read 20 rows a
    source). Without the blocks' time the inter-token latency is 12.0% and tokens/s 13.0%, both fast."""
    assert NIM in calibrate.EVALUATED_ONLY_SOURCES
    with calibrate.prefill_held_out(NIM):
        rows = [r for r in all_rows(bundled()) if r.source == NIM]
        monkeypatch.setattr(unsplit_attention, "UNSPLIT_ATTENTION_NS_PER_HEAD_POSITION", 0.0)
        without = _figures([r for r in all_rows(bundled()) if r.source == NIM])
    assert len(rows) == 216
    figures = _figures(rows)
    assert figures["serving tokens/s"][0] == pytest.approx(0.065, abs=0.003)
    assert figures["TTFT"] == pytest.approx((0.065, -0.028), abs=0.003)
    assert figures["ITL"] == pytest.approx((0.066, -0.049), abs=0.003)
    assert without["ITL"] == pytest.approx((0.120, -0.117), abs=0.003)
    assert without["serving tokens/s"][0] == pytest.approx(0.132, abs=0.003)


def test_nims_one_client_runs_are_reported_apart_and_draw_no_band():
    """Pooled, NIM's 72 well-predicted inter-token latencies (a third of the class) would narrow the band every plan
    reads to 0.89-1.24, which held 71.6% of the TensorRT-LLM sweep's it never saw (bench/accuracy.py SOURCES_APART):
    they are their own class in the table, and no band names them."""
    from bench.accuracy import SOURCES_APART
    from planner.physics.bands import bands

    stored = bands()
    assert SOURCES_APART[NIM] == "nim-one-client"
    assert all(NIM not in entry["sources"] for entry in stored["classes"].values())
    assert stored["loso"]["nim-one-client/ITL"]["rows"] == 72 and stored["loso"]["gpu/ITL"]["rows"] == 122


def test_the_plans_bands_hold_nims_runs_they_were_never_drawn_from():
    """A second blind check of the 80% bands (read with the prefill share its own fold fitted): they hold 88.9% of NIM's
    one-client tokens/s and all of its inter-token latencies, but 63.9% of its first tokens: the first-token band's
    30 ms offset (the host time AccelMark's and GPUStack's endpoints add) puts its fast edge above NIM's short prompts
    (10.5 ms published for Llama 3 8B in FP8 on two H100s). A plan's target is checked at the slow edge (README). (90.3%
    and 75.0% with the 25 ms offset before a prompt's step paid a step's fixed cost and its LM head ran on its last
    position only, which narrowed the band 0.56-1.57 -> 0.52-1.43 at the wider offset; 76.4%
    of its first tokens before the HTTP request cost was measured and the band's offset went 20 -> 25 ms; 88.9%
    and 66.7% before Hopper's prefill share was fitted on Hopper first tokens, 95.8% and 63.9% while a fit read 20 rows
    a source, 88.9% and 62.5% before every serving source weighed the same in it.)"""
    from planner.physics.bands import bands

    classes = bands()["classes"]
    with calibrate.prefill_held_out(NIM):
        rows = [r for r in all_rows(bundled()) if r.source == NIM]

    def inside(key: str, metric: str) -> float:
        return stored_band_share(classes[key], [r for r in rows if r.metric == metric])

    assert inside("gpu/serving tokens/s", "serving tokens/s") == pytest.approx(0.889, abs=0.002)
    assert inside("gpu/ITL", "ITL") == 1.0
    assert inside("gpu/TTFT", "TTFT") == pytest.approx(0.639, abs=0.002)


def test_the_rows_that_ran_without_multi_block_mode_say_so():
    """TensorRT-LLM 0.9's sweep, NIM's 2024 engines and Argonne's 2024 TensorRT-LLM runs (their run.py hands the runner
    a `--multi_block_mode` flag that is off unless given, and no command gives it): every one of their TensorRT-LLM rows,
    and no other row, reads its decode attention one thread block per (sequence, KV head)."""
    marked = {source_id for source_id, data in reference_sources.sources().items()
              for row in data["rows"] if row.get("decode_attention") == "unsplit"}
    assert marked == {"trtllm-v09-dli-sweep", NIM, "argonne-llm-inference-bench"}
    for row in reference_sources.sources()["argonne-llm-inference-bench"]["rows"]:
        assert (row.get("decode_attention") == "unsplit") == (row["engine"] == "tensorrt-llm"), row["id"]
