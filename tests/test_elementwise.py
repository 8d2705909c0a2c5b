"""Issue 25, serving at TP > 1: a decode step's norms, residual adds and gated activation are memory-bound
kernels of their own, and TP splits the MLP and heads but not the residual stream, so every rank normalises and
adds all of it (planner/physics/elementwise.py). TensorRT-LLM's decode-bound offline rows were +11/+18/+31% fast at
TP 2/4/8 (bench/offline_residuals.py) while TP 1 was within 1%."""

from __future__ import annotations

import pytest

from planner.physics import efficiency, performance
from planner.physics.elementwise import elementwise_bytes_per_token
from planner.workload.presets import presets


def test_bytes_per_token_count_the_kernels_of_a_llama_layer(catalog):
    """Llama 3.1 70B: 80 layers, h 8,192, f 28,672, 64 query and 8 KV heads of 128."""
    h100 = catalog.accelerator("H100-80GB")
    arch = presets()["llama-3.1-70b"]
    per_layer_tp8 = 8 * 8192 + (3 * 28672 + 2 * (8192 + 1024)) / 8
    assert elementwise_bytes_per_token(arch, 8, h100) == pytest.approx(80 * per_layer_tp8 * 2)
    # the residual stream's share is not divided: TP 8 moves far more than an eighth of TP 1's bytes
    assert elementwise_bytes_per_token(arch, 8, h100) > 0.3 * elementwise_bytes_per_token(arch, 1, h100)


def test_an_moe_token_runs_the_activation_of_each_expert_it_visits(catalog):
    h100 = catalog.accelerator("H100-80GB")
    arch = presets()["mixtral-8x7b"]  # 2 of 8 experts, f 14,336
    assert elementwise_bytes_per_token(arch, 1, h100) == pytest.approx(
        32 * (8 * 4096 + 3 * 14336 * 2 + 2 * (4096 + 1024)) * 2)


def test_neuron_fuses_them_into_its_compiled_graph(catalog):
    assert elementwise_bytes_per_token(presets()["llama-3.1-70b"], 8, catalog.accelerator("Inferentia2")) == 0


def test_a_decode_step_pays_them_at_the_hbm_stream_rate(catalog, monkeypatch):
    h100 = catalog.accelerator("H100-80GB")
    arch = presets()["llama-3.1-70b"]
    step = performance.decode_step(arch, h100, "fp8", "fp8", 8, 1, 1583, 1100)
    monkeypatch.setattr(performance, "elementwise_s", lambda *_: 0.0)
    without = performance.decode_step(arch, h100, "fp8", "fp8", 8, 1, 1583, 1100)
    expected_s = 1583 * elementwise_bytes_per_token(arch, 8, h100) / efficiency.effective_bandwidth(h100, "bf16")
    assert step.seconds - without.seconds == pytest.approx(expected_s)
    assert step.memory_s - without.memory_s == pytest.approx(expected_s)
    assert expected_s / step.seconds > 0.08  # a tenth of a large-batch TP 8 step
