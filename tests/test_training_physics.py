"""Issue 25, training throughput: GEMM efficiency from the shapes (tile and wave quantisation, the
roofline), and ZeRO-3/FSDP collectives issued layer by layer over a flat ring whose steps grow with
data parallelism."""

from __future__ import annotations

import pytest

from planner.physics import collectives
from planner.physics.collectives import group_collective_s
from planner.physics.gemm_shape import gemm_shape_factor, layer_gemm_factor
from planner.physics.memory import TrainingSetup, training_model_states
from planner.workload.presets import Architecture
from planner.physics.training_time import TrainingLayout, training_step, training_work

NAR21_1P7B = Architecture(params=1.7e9, layers=24, hidden_size=2304, attention_heads=24, kv_heads=24, head_dim=96,
                          ffn_hidden_size=9216, vocab_size=51200)


def test_wave_quantisation_by_hand(catalog):
    """A100 (108 SMs), 256×128 tiles: M 2048 × N 1152 is 8 × 9 = 72 tiles, one wave two-thirds full."""
    a100 = catalog.accelerator("A100-80GB")
    factor = gemm_shape_factor(2048, 1152, 4096, a100, 312e12)
    assert factor == pytest.approx(72 / 108)


def test_big_gemms_are_compute_bound_small_ones_are_not(catalog):
    a100 = catalog.accelerator("A100-80GB")
    assert gemm_shape_factor(16384, 16384, 16384, a100, 312e12) > 0.95
    # a 64-token GEMM is HBM-bound: intensity ~64 FLOP/B against the A100's 153 FLOP/B ridge
    assert gemm_shape_factor(64, 4096, 4096, a100, 312e12) < 0.45


def test_small_hidden_at_tp2_loses_to_a_big_model(catalog, arch):
    """The issue's class: hidden 2,304 at TP 2 cannot reach the share a 175B layer at TP 8 does."""
    a100 = catalog.accelerator("A100-80GB")
    small = layer_gemm_factor(NAR21_1P7B, 2048, 2, a100, 312e12)
    big = layer_gemm_factor(arch["gpt-3-175b"], 2048, 8, a100, 312e12)
    assert small < big
    assert small == pytest.approx(0.803, abs=1e-3)  # against 0.914 for the 175B layer


def test_layer_by_layer_collectives_pay_a_ring_step_per_rank(catalog):
    """A flat ring across nodes: ranks − 1 steps, each a NIC hop, for every one of `calls` pieces."""
    itype, accel = catalog.instance("p4de.24xlarge"), catalog.accelerator("A100-80GB")
    whole = group_collective_s(1e9, 1024, 8, accel, itype, 1)
    by_layer = group_collective_s(1e9, 1024, 8, accel, itype, 1, calls=96)
    assert by_layer - whole > 95 * 1023 * collectives.INTER_NODE_RING_STEP_S


def test_zero3_per_gpu_throughput_falls_as_data_parallelism_grows(catalog, arch):
    """At a fixed global batch the compute per GPU shrinks with DP while every micro-batch still
    gathers the whole model layer by layer over a ring that lengthens with DP."""
    a = arch["gpt-3-175b"]
    itype, accel = catalog.instance("p5.48xlarge"), catalog.accelerator("H100-80GB")
    setup = TrainingSetup("full", "bf16", "adamw", "auto", 16, 2048)

    def tflops(dp):
        layout = TrainingLayout(1, 1, dp, 3, 1, 1536 // dp, "full")
        state = sum(training_model_states(a, setup, 1, 1, dp, 3))
        return training_step(a, itype, accel, "bf16", 2048, layout, state, training_work(a, setup)).achieved_tflops_per_device

    assert tflops(128) > tflops(512) > tflops(1536)


@pytest.mark.parametrize("zero,checkpointing,dp", [(0, "full", 8), (1, "selective", 16), (3, "none", 64)])
def test_a_steps_schedule_free_parts_are_the_same_under_every_schedule(catalog, arch, zero, checkpointing, dp):
    """Issue 29: the search computes step_parts once per layout and times each pipeline schedule from
    them; that must give exactly training_step's figures for each schedule (the parts never read it)."""
    from planner.physics.pipeline_schedule import schedule_options
    from planner.physics.training_time import step_from_parts, step_parts

    a = arch["llama-3.1-70b"]
    itype, accel = catalog.instance("p5.48xlarge"), catalog.accelerator("H100-80GB")
    setup = TrainingSetup("full", "bf16", "adamw", "auto", 16, 4096)
    work = training_work(a, setup)
    first = TrainingLayout(4, 8, dp, zero, 1, 32, checkpointing)
    parts = step_parts(a, itype, accel, "bf16", 4096, first, work)
    schedules = schedule_options(8, a.layers, True)
    assert len(schedules) > 1
    for schedule, v in schedules:
        layout = TrainingLayout(4, 8, dp, zero, 1, 32, checkpointing, schedule, v)
        assert step_from_parts(parts, a, 4096, layout, 3.0e10, work) == training_step(a, itype, accel, "bf16", 4096,
                                                                                      layout, 3.0e10, work)
