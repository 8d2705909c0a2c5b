"""Overlay accelerators may state a sustained clock or a power limit (issue 25): a power-capped or
H100 NVL / 96 GB part is not the SXM datasheet part, and its peak FLOP/s scale down with the clock."""

from __future__ import annotations

import pytest

from gpuplan.cli import app
from planner.hardware.catalog import bundled, with_overlay
from planner.hardware.clocks import power_limited_clock_fraction
from planner.workload.errors import SpecError
from tests.conftest import write_yaml
from typer.testing import CliRunner

PART = {"name": "H100-capped", "memory_mib": 81920, "memory_bandwidth_gb_s": 3350,
        "tflops": {"bf16": 989, "fp8": 1979}, "intra_node_gb_s": 900, "supports": {"fp8": True}}


def _accel(**extra):
    return with_overlay(bundled(), {"accelerators": [{**PART, **extra}]}, "o.yaml").accelerator("H100-capped")


def test_sustained_clock_ratio_scales_every_precision_peak():
    accel = _accel(sustained_clock_ratio=0.8)
    assert accel.peak_flops("bf16") == pytest.approx(0.8 * 989e12)
    assert accel.peak_flops("fp8") == pytest.approx(0.8 * 1979e12)
    assert _accel().peak_flops("bf16") == pytest.approx(989e12)  # a part that states neither is unchanged


def test_power_limit_holds_the_clock_at_the_cube_root_of_the_power_share():
    """500 W of 700 W: (5/7)^(1/3) = 0.894 of boost, 884 of 989 TFLOP/s; the lower of a stated clock
    ratio and the cap's clock decides."""
    assert power_limited_clock_fraction(500, 700) == pytest.approx(0.8939, abs=1e-4)
    assert _accel(power_limit_w=500, board_power_w=700).peak_flops("bf16") / 1e12 == pytest.approx(884.07, abs=0.01)
    assert _accel(power_limit_w=500, board_power_w=700, sustained_clock_ratio=0.7).peak_flops("bf16") == \
        pytest.approx(0.7 * 989e12)
    assert _accel(power_limit_w=700, board_power_w=700).peak_flops("bf16") == pytest.approx(989e12)


@pytest.mark.parametrize("extra, message", [
    ({"sustained_clock_ratio": 1.5}, "accelerators[0].sustained_clock_ratio: must be from 0.1 to 1 (got 1.5)"),
    ({"sustained_clock_ratio": 0}, "accelerators[0].sustained_clock_ratio: must be from 0.1 to 1 (got 0)"),
    ({"power_limit_w": 5, "board_power_w": 700}, "accelerators[0].power_limit_w: must be from 10 to 3000 W (got 5)"),
    ({"power_limit_w": 500}, "power_limit_w needs board_power_w"),
    ({"power_limit_w": 800, "board_power_w": 700}, "power_limit_w (800 W) must be at most board_power_w (700 W)"),
])
def test_bad_clock_or_power_is_refused_naming_the_field(extra, message):
    with pytest.raises(SpecError) as err:
        _accel(**extra)
    assert message in str(err.value)


def test_cli_exits_2_on_a_bad_power_limit(tmp_path):
    write_yaml(tmp_path / "extra.yaml", {"accelerators": [{**PART, "power_limit_w": 900, "board_power_w": 700}]})
    spec = write_yaml(tmp_path / "w.yaml", {"catalog": "extra.yaml", "workloads": [{
        "name": "chat", "kind": "inference", "model": {"preset": "llama-3-8b"}}]})
    result = CliRunner().invoke(app, ["plan", str(spec)])
    assert result.exit_code == 2
    assert "power_limit_w (900 W) must be at most board_power_w (700 W)" in result.output
    assert "Traceback" not in result.output


def test_a_capped_part_trains_slower_and_never_above_its_own_peak():
    """The same node with its GPUs capped at 350 of 700 W: the compute-bound training step slows by
    about 1/0.794, and the achieved FLOP/s stay under the capped peak."""
    from planner.physics.memory import TrainingSetup
    from planner.workload.presets import presets
    from planner.physics.training_time import TrainingLayout, training_step, training_work

    catalog = bundled()
    itype = catalog.instance("p5.48xlarge")
    full = catalog.accelerator(itype.accelerator)
    capped = full.model_copy(update={"power_limit_w": 350.0, "board_power_w": 700.0})
    arch = presets()["llama-3.1-8b"]
    setup = TrainingSetup("full", "bf16", "adamw", "auto", 16, 4096)
    layout = TrainingLayout(1, 1, 8, 3, 2, 16, "selective")
    work = training_work(arch, setup)
    fast = training_step(arch, itype, full, "bf16", 4096, layout, 0.0, work)
    slow = training_step(arch, itype, capped, "bf16", 4096, layout, 0.0, work)
    assert capped.peak_flops("bf16") / full.peak_flops("bf16") == pytest.approx(0.5 ** (1 / 3))
    assert slow.tokens_per_s < fast.tokens_per_s
    assert slow.achieved_tflops_per_device * 1e12 < capped.peak_flops("bf16")
