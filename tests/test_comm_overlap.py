"""Which share of data-parallel traffic hides behind compute, per platform (issue 25): on a GPU NCCL takes SMs
from the GEMMs it overlaps (efficiency.COMM_OVERLAP, fitted on GPU training rows); a NeuronDevice runs collectives
on dedicated collective-communication cores, so Neuron training is not moved by the GPU's fit."""

from __future__ import annotations

import pytest

from bench.reference_cases import _neuron_training_rows
from planner.physics import efficiency
from planner.physics.training_time import exposed_dp_s


def test_exposed_traffic_is_what_the_overlap_leaves():
    """Per micro-batch: m·max(0, a − k·c/m); once a step: max(0, q − k·(c/m)·2/3)."""
    assert exposed_dp_s((0.5, 0.4), 1.0, 2, 0.8) == pytest.approx(2 * 0.1 + (0.4 - 0.8 * 0.5 * 2 / 3))
    assert exposed_dp_s((0.5, 0.4), 1.0, 2, 1.0) == pytest.approx(0.4 - 0.5 * 2 / 3)
    assert exposed_dp_s((0.5, 0.4), 1.0, 2, 0.0) == pytest.approx(2 * 0.5 + 0.4)


def test_neuron_overlaps_fully_and_ignores_the_gpu_constant(catalog, monkeypatch):
    """Before, NeuronX Distributed's rows read the GPU's COMM_OVERLAP: its refit from 1.0 to 0.8 moved them and sent
    the Neuron fit without AWS's serving tables to another valley (Neuron ITL leave-one-source-out 16% -> 26%)."""
    neuron = catalog.accelerator(catalog.instance("trn1.32xlarge").accelerator)
    gpu = catalog.accelerator(catalog.instance("p5.48xlarge").accelerator)
    assert efficiency.comm_overlap(neuron) == efficiency.NEURON_COMM_OVERLAP == 1.0
    assert efficiency.comm_overlap(gpu) == efficiency.COMM_OVERLAP
    before = [r.predicted for r in _neuron_training_rows(catalog)]
    monkeypatch.setattr(efficiency, "COMM_OVERLAP", 0.0)
    assert [r.predicted for r in _neuron_training_rows(catalog)] == before
