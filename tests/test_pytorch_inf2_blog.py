"""Issue 25, Neuron rows at TP 2: the PyTorch blog's Llama 2 runs on Inferentia2 ("High performance Llama 2
deployments with AWS Inferentia2 using TorchServe"). "For the Llama-2 7B model, latency decreases from 30.1 ms/token
with 2 cores to 7.9 ms/token with 24 cores; similarly for the Llama-2 13B model, it goes down from 57.3 ms/token to
11.1 ms/token", a latency per output token being the end-to-end latency over the output tokens. At TP 2 one chip
streams the weights with one collective partner; at TP 24 the step is the collectives'. Every other Neuron serving
row runs at TP 8 or more, so these are the only rows that see the weight stream's share apart from the
per-collective latency."""

from __future__ import annotations

import pytest

from bench import calibrate
from bench.reference_cases import all_rows, reference

SOURCE = "pytorch-inf2-llama2-blog"
QUOTED_MS_PER_TOKEN = {("llama-2-7b", 2): 30.1, ("llama-2-7b", 24): 7.9, ("llama-2-13b", 2): 57.3,
                       ("llama-2-13b", 24): 11.1}


def _rows() -> list[dict]:
    return [c for c in reference()["neuron_serving"] if c["source"] == SOURCE]


def test_each_row_is_one_request_over_its_quoted_latency_per_token():
    """tokens/s of one request = output tokens ÷ end-to-end latency = 1,000 ÷ (ms per output token); the blog's own
    "130 tokens/sec and 90 tokens/sec" at TP 24 agree (126.6 and 90.1)."""
    rows = _rows()
    assert {(c["model"], c["tp"]) for c in rows} == set(QUOTED_MS_PER_TOKEN)
    for c in rows:
        assert c["batch"] == 1 and (c["prompt_tokens"], c["output_tokens"]) == (256, 256)
        assert c["tokens_per_s"] == pytest.approx(1000 / QUOTED_MS_PER_TOKEN[c["model"], c["tp"]], abs=0.01)
        assert c["instance_type"] == ("inf2.xlarge" if c["tp"] == 2 else "inf2.48xlarge")
        assert "ttft_ms" not in c and "itl_ms" not in c  # the blog states neither


def test_the_rows_are_compared_on_tokens_per_s_alone_and_fitted(catalog):
    """They enter the Neuron serving fit as a source of their own (bench/calibrate.py source_balanced_errors: every
    source weighs the same, so four rows count as much as AWS's 70)."""
    assert SOURCE not in calibrate.EVALUATED_ONLY_SOURCES
    compared = {(r.id, r.metric) for r in all_rows(catalog) if r.source == SOURCE}
    assert compared == {(c["id"], "serving tokens/s") for c in _rows()}
    fitted = {r.source for r in all_rows(catalog, "neuron", "serving",
                                         calibrate.EVALUATED_ONLY_SOURCES)}
    assert SOURCE in fitted


def test_one_chip_and_twelve_read_the_weight_stream_and_the_collectives_apart(catalog):
    """In sample: TP 24 within 6%, TP 2 6.8% (7B) and 12.4% (13B) fast (within 2%, 5.7% and 11.5% before the Neuron
    refit that followed a prompt's LM head on its last position only: a collective 85 -> 80 us). Before the sixth session's refit (HBM share
    0.76, 80 us a collective) the same rows, never fitted, read +16.7%, +9.6%, +23.9% and +10.5%: the share the TP 24-32
    tables had traded against the collective latency was one chip's weight stream read 17-24% fast."""
    errors = {r.id: r.error for r in all_rows(catalog) if r.source == SOURCE}
    assert errors["PTBLOG-INF2-Llama-2-7b-tp2"] == pytest.approx(0.0681, abs=0.005)
    assert errors["PTBLOG-INF2-Llama-2-13b-tp2"] == pytest.approx(0.1236, abs=0.005)
    assert errors["PTBLOG-INF2-Llama-2-7b-tp24"] == pytest.approx(0.0571, abs=0.005)
    assert errors["PTBLOG-INF2-Llama-2-13b-tp24"] == pytest.approx(0.0581, abs=0.005)
