"""bench/neuron_residuals.py (issue 25): the Neuron serving residuals per row with the configuration that explains them."""

from __future__ import annotations


def test_residual_dump_names_each_rows_regime():
    """bench/neuron_residuals.py: a published row's configuration and the regime it is grouped in (the
    bucket the context-encoding graph runs the prompt at, one request or several in flight)."""
    from bench import neuron_residuals

    configs = neuron_residuals.configurations()
    c = configs["TRN1-Llama-2-13b-b1-8192/8192"]
    assert (c["engine"], c["batch"], c["prompt"], c["tp"]) == ("transformers-neuronx", 1, 8192, 32)
    assert neuron_residuals.regime(c) == "long prompt, one in flight"
    c = configs["optneuron-tgi-trn1-llama3-70b-bs4-c16"]
    assert (c["engine"], c["batch"], c["concurrency"], c["prompt"]) == ("tgi", 4, 16, 1500)
    assert neuron_residuals.regime(c) == "mid prompt, several in flight"
    lines = neuron_residuals.report(neuron_residuals.neuron_rows("TTFT", loso=False), configs)
    assert any(line.startswith("neuron-inference") and "long prompt, one in flight" in line and "rows  10" in line
               for line in lines)
