"""Issue 28: Trainium2 serving rows are compared (per logical NeuronCore, with the Neuron constants)
and accuracy reports B200 and Trainium2 as their own rows beside their platform's."""

from __future__ import annotations

import pytest

from bench.accuracy import PLATFORMS, summary
from bench.reference_cases import Row, all_rows
from bench.reference_serving import skipped


def test_trainium2_serving_rows_are_compared_on_the_neuron_constants(catalog):
    rows = [r for r in all_rows(catalog) if r.accelerator == "Trainium2"]
    assert {r.source for r in rows} == {"nxdi-trn2-tutorials", "optimum-neuron-benchmarks", "vllm-neuron-trn2-tutorials"}
    assert {r.platform for r in rows} == {"neuron"} and {r.metric for r in rows} == {"serving tokens/s", "TTFT", "ITL"}
    assert not any("Trainium2" in reason for reason in skipped(catalog))
    assert not any(r.moe for r in rows)


def test_neuron_moe_runs_are_recorded_not_compared(catalog):
    """optimum-neuron's Trainium2 runs of four MoE models (Qwen3 30B-A3B and 235B-A22B, Llama 4 Scout and Maverick; one
    client and the saturated run each) are kept with their source, and left out of the comparison with the reason:
    NeuronX Distributed's expert kernels are not modelled (README Known limits), so the search plans MoE on Neuron only
    where the constraints name the type (tests/test_neuron.py)."""
    reason = "mixture-of-experts serving on Neuron (NeuronX Distributed's expert kernels) is not modelled"
    assert skipped(catalog)[reason] == 8
    from bench.reference_sources import sources

    recorded = [r for r in sources()["optimum-neuron-benchmarks"]["rows"] if r["accelerator"] == "Trainium2"]
    assert {r["model"] for r in recorded} == {"llama-3.1-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
                                              "llama-4-scout", "llama-4-maverick"}


def test_b200_and_trainium2_are_reported_as_their_own_rows():
    rows = [Row("a", "ITL", "s1", "", 11.0, 10.0, "gpu", "B200"), Row("b", "ITL", "s2", "", 9.0, 10.0, "gpu", "H200"),
            Row("c", "TTFT", "s3", "", 12.0, 10.0, "neuron", "Trainium2")]
    out = summary(rows)
    assert out[("b200", "ITL")]["rows"] == 1 and out[("b200", "ITL")]["signed_median"] == pytest.approx(0.1)
    assert out[("gpu", "ITL")]["rows"] == 2  # B200 stays in its platform too
    assert out[("trainium2", "TTFT")]["median_abs"] == pytest.approx(0.2)
    assert {"b200", "trainium2"} <= set(PLATFORMS)


def test_moe_rows_are_reported_as_their_own_class():
    """Issue 28: MoE serving is its own accuracy class, beside (not instead of) its platform's rows."""
    from bench.accuracy import model_class_summary

    rows = [Row("a", "ITL", "s1", "", 12.0, 10.0, "gpu", "H100-SXM-80GB", moe=True),
            Row("b", "ITL", "s2", "", 9.0, 10.0, "gpu", "H100-SXM-80GB"),
            Row("c", "TTFT", "s3", "", 15.0, 10.0, "neuron", "Trainium2", moe=True)]
    out = model_class_summary(rows)
    assert out[("moe", "ITL")]["rows"] == 1 and out[("moe", "ITL")]["signed_median"] == pytest.approx(0.2)
    assert out[("moe", "TTFT")]["median_abs"] == pytest.approx(0.5)
    assert ("dense", "ITL") not in out and summary(rows)[("gpu", "ITL")]["rows"] == 2


def test_reference_rows_of_moe_models_carry_the_moe_flag(catalog):
    """Mixtral rows (Argonne LLM-Inference-Bench, static batches) are compared and flagged MoE; dense rows are not."""
    rows = all_rows(catalog)
    moe = {r.setup.split()[0] for r in rows if r.moe}
    assert moe and all(name.startswith(("mixtral", "deepseek", "qwen3-30b", "qwen3-235b", "gpt-oss", "llama-4"))
                       for name in moe)
    assert not any(r.moe for r in rows if r.setup.startswith("llama-3.1-70b"))


def test_the_2025_26_trainium2_runs_as_far_as_they_are_off(catalog):
    """Two more Trainium2 runs, compared and never fitted. optimum-neuron's Qwen3 32B on one chip (trn2.3xlarge, TP 4
    logical cores, BATCH_SIZE 2, SEQUENCE_LENGTH 4,096, one client; 1,500 tokens in, 251 generated) is read at its one
    compiled shape like the 8B beside it, and is off the same way: first token and step both ~1.5x faster than the
    shares fitted on Inferentia2 and Trainium say (TTFT 770.9 ms published, 1,222 predicted; ITL 32.1 ms, 48.3; 1,155
    and 49.0 before the Neuron refit that followed a prompt's LM head on its last position only: prefill share 0.38 ->
    0.35, collective 85 -> 80 us). vLLM's Neuron plugin (SDK 2.32) decodes Llama 3.1 8B at TP 8 for two clients within
    12% on the same shares (8% before that refit). One set of
    Trainium2 constants fitted on these six dense runs still leaves 15% between sources (docs/calibration-log.md)."""
    rows = {(r.id, r.metric): r.error for r in all_rows(catalog) if r.accelerator == "Trainium2"}
    qwen, plugin = "optneuron-vllm-trainium2-qwen3-32b-sync", "vllm-neuron-trn2-llama31-8b-tp8-c2-512-128"
    assert rows[(qwen, "TTFT")] == pytest.approx(0.585, abs=0.01)
    assert rows[(qwen, "ITL")] == pytest.approx(0.506, abs=0.01)
    assert rows[(plugin, "serving tokens/s")] == pytest.approx(0.119, abs=0.01)
    assert rows[(plugin, "TTFT")] == pytest.approx(-0.047, abs=0.01)
    assert rows[(plugin, "ITL")] == pytest.approx(-0.108, abs=0.01)
