"""Issue 28: Trainium2 serving rows are compared (per logical NeuronCore, with the Neuron constants)
and accuracy reports B200 and Trainium2 as their own rows beside their platform's."""

from __future__ import annotations

import pytest

from bench.accuracy import PLATFORMS, summary
from bench.reference_cases import Row, all_rows
from bench.reference_serving import skipped


def test_trainium2_serving_rows_are_compared_on_the_neuron_constants(catalog):
    rows = [r for r in all_rows(catalog) if r.accelerator == "Trainium2"]
    assert {r.source for r in rows} == {"nxdi-trn2-tutorials", "optimum-neuron-benchmarks"}
    assert {r.platform for r in rows} == {"neuron"} and {r.metric for r in rows} == {"serving tokens/s", "TTFT", "ITL"}
    assert not any("Trainium2" in reason for reason in skipped(catalog))


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
