"""ZeRO-1/2 all-gather the updated weights after the optimizer step: no backward is left to hide
it behind, so it is exposed whatever the compute (issue 25: DP at scale with a fixed global batch)."""

from __future__ import annotations

import pytest

from planner.physics.collectives import group_collective_s
from planner.physics.memory import TrainingSetup
from planner.physics.training_time import TrainingLayout, _data_parallel_s, _dp_collectives_s, training_work
from planner.workload.presets import presets


@pytest.fixture(scope="module")
def case(catalog):
    itype = catalog.instance("p5.48xlarge")
    arch = presets()["llama-3.1-8b"]
    return arch, itype, catalog.accelerator(itype.accelerator), training_work(arch, TrainingSetup("full", "bf16", "adamw", "auto", 16, 4096))


def test_the_updated_weights_gather_is_timed_after_the_step(case):
    """8.03 B parameters, 16-bit, over 16 H100 on two p5 nodes: 64.4 ms, in full even behind 100 s of compute."""
    arch, itype, accel, work = case
    gather = group_collective_s(arch.params * 2.0, 16, 8, accel, itype, 1)
    assert gather == pytest.approx(0.064368, abs=1e-6)
    for zero in (1, 2):
        layout = TrainingLayout(1, 1, 16, zero, 1, 8, "none")
        assert _dp_collectives_s(work, itype, accel, layout, arch.layers)[2] == pytest.approx(gather)
        assert _data_parallel_s(work, itype, accel, layout, 100.0, arch) == pytest.approx(gather)


def test_ddp_and_fsdp_have_nothing_after_the_step(case):
    """DDP's all-reduce and FSDP's per-layer collectives overlap the backward: hidden behind 100 s."""
    arch, itype, accel, work = case
    for zero in (0, 3):
        layout = TrainingLayout(1, 1, 16, zero, 1, 8, "none")
        assert _dp_collectives_s(work, itype, accel, layout, arch.layers)[2] == 0.0
        assert _data_parallel_s(work, itype, accel, layout, 100.0, arch) == 0.0
