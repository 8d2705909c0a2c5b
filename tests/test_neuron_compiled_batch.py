"""Issue 25, Neuron rows: a model compiled for a static batch (TGI on transformers-neuronx, optimum-neuron)
encodes each new prompt on its own and stalls the whole compiled batch meanwhile; every decode step
runs the compiled shape whatever the number of live sequences. Quoted case: "on Inferentia2 with a
static batch of 32, TTFT 66% fast and throughput 3× high"."""

from __future__ import annotations

import re

import pytest

from bench import reference_sources as rs
from bench.reference_cases import all_rows
from planner.physics import efficiency
from planner.physics.neuron_serving import RequestShapes, compiled_batch_serving, llmperf_itl_s
from planner.physics.performance import decode_step, prefill_s, serving_estimate
from planner.workload.presets import presets


def _note_figure(row: dict, label: str) -> float:
    """A CSV figure the row's note quotes after `label` ("Requests per Second 0.2005...")."""
    return float(re.search(re.escape(label) + r" ([0-9]+\.[0-9]+)", row["note"]).group(1))


# a 1,500-token prompt encoded in a 2,048-token graph, each step over the live mean context (1,500 + 245 / 2)
SHAPES = RequestShapes(2048, 0, 0.0, 1500 + 245 / 2)


def _core(catalog, name="inf2.48xlarge"):
    return catalog.sharded(catalog.instance(name))


def test_a_wave_of_prompts_is_encoded_one_after_another_before_any_first_token(catalog):
    """trn1 bs8, c = 8 (optimum-neuron LLMPerf CSVs): TTFT 846.6 ms at c = 1, 6,631.5 ms at c = 8,
    i.e. 7.8×: the eight context encodings run back to back before the wave decodes."""
    assert 6631.5 / 846.6 == pytest.approx(7.83, abs=0.01)
    itype, core = _core(catalog, "trn1.32xlarge")
    arch = presets()["llama-3-70b"]
    one = compiled_batch_serving(arch, core, "bf16", "bf16", 32, 8, 1, 1500, 245, SHAPES, itype)
    eight = compiled_batch_serving(arch, core, "bf16", "bf16", 32, 8, 8, 1500, 245, SHAPES, itype)
    prefill = prefill_s(arch, core, "bf16", 32, 1, 2048, itype)  # 1,500 tokens run in the 2,048 bucket
    assert one.time_to_first_token_s == pytest.approx(efficiency.request_overhead_s(core) + prefill)
    assert eight.time_to_first_token_s == pytest.approx(efficiency.request_overhead_s(core) + 8 * prefill)
    # the decode step is the compiled shape's (8 sequences) at c = 1 as at c = 8
    step8 = decode_step(arch, core, "bf16", "bf16", 32, 1, 8, 1500 + 245 / 2, itype=itype).seconds
    assert one.inter_token_latency_s == pytest.approx(step8) == eight.inter_token_latency_s


def test_concurrency_past_the_compiled_batch_queues_in_waves(catalog):
    """bs8 at c = 64 runs 8 waves: the mean request waits 3.5 waves before its own wave's encodings."""
    itype, core = _core(catalog, "trn1.32xlarge")
    arch = presets()["llama-3-70b"]
    wave = compiled_batch_serving(arch, core, "bf16", "bf16", 32, 8, 8, 1500, 245, SHAPES, itype)
    many = compiled_batch_serving(arch, core, "bf16", "bf16", 32, 8, 64, 1500, 245, SHAPES, itype)
    wave_s = wave.time_to_first_token_s + 244 * wave.inter_token_latency_s
    assert many.waves == 8
    assert many.time_to_first_token_s == pytest.approx(3.5 * wave_s + wave.time_to_first_token_s)
    assert many.output_tokens_per_s == pytest.approx(wave.output_tokens_per_s)


def test_llmperf_inter_token_latency_is_end_to_end_over_output_tokens():
    """ray-project/llmperf: INTER_TOKEN_LAT = sum(time_to_next_token) (TTFT included) / output tokens."""
    assert llmperf_itl_s(0.8, 0.03, 245) == pytest.approx((0.8 + 244 * 0.03) / 245)


def test_quoted_inf2_static_batch_32_throughput_is_no_longer_three_times_high(catalog):
    """optimum-neuron llama3.1-8b on inf2 (TP 8, MAX_BATCH_SIZE 32, guidellm throughput, 1,500 tokens in, 180 out):
    per replica 309.7 tokens/s, ITL 54.5 ms, TTFT 7,166 ms. The live continuous-batching estimate reads the throughput
    over twice high (~3× before decode attention had its own share) and the TTFT under half. Read as optimum-neuron's
    NxD backend runs it (each prompt encoded alone at all 4,096 positions while the 32-slot batch waits, every step over
    32 × 4,096), throughput is +19% and ITL +38%. The TTFT stays 90% early: the same servers' open-loop run at the
    same request rate (5.17 req/s) first-tokens at 1,382 ms, so the throughput run's mean (5× that) holds a queue the
    steady state does not. The one-client step, 26.8 ms published, is within 15%, its first token within 5% (-44.5% at
    the 2,048 bucket the estimate read before)."""
    row = next(r for r in rs.sources()["optimum-neuron-benchmarks"]["rows"]
               if r["id"] == "optneuron-tgi-inf2-llama-3.1-8b-bs32-throughput")
    assert (row["compiled_batch"], row["tp"], row["concurrency"], row["output_tokens"]) == (32, 8, 29, 180)
    assert row["neuron_backend"] == "optimum-neuron-nxd" and row["max_context_tokens"] == 4096
    itype, core = _core(catalog)
    arch = presets()["llama-3.1-8b"]
    continuous = serving_estimate(arch, core, "bf16", "bf16", 8, 1, 29, 1500, 180, itype)
    continuous_tps_error = continuous.output_tokens_per_s_per_replica / row["tokens_per_s"] - 1
    assert continuous_tps_error > 1.0
    assert continuous.time_to_first_token_s * 1e3 / row["ttft_ms"] < 0.5
    ours = {r.metric: r.error for r in all_rows(catalog) if r.id == row["id"]}
    assert ours["serving tokens/s"] == pytest.approx(0.188, abs=0.01)
    assert ours["ITL"] == pytest.approx(0.382, abs=0.01)
    assert ours["TTFT"] == pytest.approx(-0.903, abs=0.01)
    sync = {r.metric: r for r in all_rows(catalog) if r.id == "optneuron-tgi-inf2-llama-3.1-8b-bs32-sync"}
    assert sync["ITL"].measured == 26.79 and abs(sync["ITL"].error) < 0.15
    assert sync["TTFT"].measured == 315.8 and abs(sync["TTFT"].error) < 0.05

def test_inf2_and_trn1_tgi_rows_are_compared(catalog):
    rows = [r for r in all_rows(catalog) if r.accelerator in ("Inferentia2", "Trainium") and r.metric != "training sequences/s"]
    assert {"optimum-neuron-benchmarks", "philschmid-llmperf-a10g-inf2", "neuron-inference"} <= {r.source for r in rows}


def test_context_encoding_runs_at_the_next_power_of_two_bucket():
    from planner.physics.neuron_serving import context_bucket_tokens

    assert context_bucket_tokens(1500) == 2048 and context_bucket_tokens(550) == 1024
    assert context_bucket_tokens(2048) == 2048 and context_bucket_tokens(5) == 128
    assert context_bucket_tokens(10000, 12800) == 12800


def test_guidellm_rows_carry_the_tokens_each_request_generated():
    """guidellm asked optimum-neuron's 2025 servers for 250 tokens (emulated data, output variance 20), but the CSVs'
    own Output Token Throughput ÷ Requests per Second is what each request generated: 174-180 for Llama 3.1 8B on
    inf2, 235-237 on Trainium2, 248 for the 70B. The rows carry that, quoted in each row's note (rows that said 250
    read the 8B run's throughput +98% where it is +74%)."""
    rows = [r for r in rs.sources()["optimum-neuron-benchmarks"]["rows"]
            if "guidellm" in r["note"] and r.get("concurrency") is not None]
    assert len(rows) == 6
    for r in rows:
        tps, rps = _note_figure(r, "Output Token Throughput (t/s)"), _note_figure(r, "Requests per Second")
        assert r["output_tokens"] == round(tps / rps), r["id"]
    assert sorted(r["output_tokens"] for r in rows) == [174, 180, 235, 237, 248, 248]


@pytest.mark.parametrize("row_id, replicas, clients", [
    ("optneuron-tgi-inferentia2-llama-3.1-70b-throughput", 1, 27),
    ("optneuron-vllm-trainium2-llama-3.1-8b-throughput", 1, 29),
    ("optneuron-tgi-inf2-llama-3.1-8b-bs32-throughput", 3, 29)])
def test_guidellm_throughput_rows_carry_the_clients_little_s_law_gives(row_id, replicas, clients):
    """guidellm's throughput mode caps clients at 128, but what ran is what Little's law on the CSV gives: Requests per
    Second × Request Latency in flight, shared by the replicas behind nginx. The 70B row said 128 (read so, its first
    token was +113% and its tokens/s +47%; at 27, -59% and +30%)."""
    row = next(r for r in rs.sources()["optimum-neuron-benchmarks"]["rows"] if r["id"] == row_id)
    rps, latency_s = _note_figure(row, "Requests per Second"), _note_figure(row, "Request Latency (s)")
    assert row["concurrency"] == round(rps * latency_s / replicas) == clients
