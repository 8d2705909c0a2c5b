"""Overlay accelerators may state a sustained clock or a power limit (issue 25): a power-capped or
H100 NVL / 96 GB part is not the SXM datasheet part, and its peak FLOP/s scale down with the clock."""

from __future__ import annotations

import pytest

from gpuplan.cli import app
from planner.hardware.catalog import Catalog, bundled, with_overlay
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


@pytest.mark.parametrize("name,dense_bf16_tflops,ratio", [("L4", 121, 0.5), ("L4-1/8", 15.125, 0.5),
                                                          ("L40S", 362.05, 0.78), ("RTX-PRO-6000", 503.8, 0.87),
                                                          ("A10G", 70, 1.0), ("H100-80GB", 989.4, 1.0)])
def test_bundled_parts_below_their_boost_clock_under_tensor_load_compute_at_the_measured_share(name, dense_bf16_tflops,
                                                                                              ratio):
    """The L4 (72 W), L40S (350 W) and RTX PRO 6000 sustain 0.47, 0.74 and 0.83 of their datasheet bf16 peaks in
    large matmuls where an unthrottled Ada part (L20) sustains 0.955 (catalog sources): their peaks scale by the
    ratio. Parts whose shares were fitted on their own rows (A100, H100) or that hold their clock (A10G) keep theirs."""
    accel = bundled().accelerator(name)
    assert accel.peak_flops("bf16") == pytest.approx(ratio * dense_bf16_tflops * 1e12)
    if ratio < 1 and "/" not in name:  # the measurement is dated where the part's source cites it
        assert accel.source_date == "2026-11-24" and "torch-performance-test-data" in accel.source


def _datasheet_clock(catalog: Catalog) -> Catalog:
    """The same catalog with every part at its datasheet (boost) clock."""
    return Catalog.model_validate({"schema": 1, "sources": catalog.sources, "instance_types": catalog.instance_types,
                                   "accelerators": [a.model_copy(update={"sustained_clock_ratio": None})
                                                    for a in catalog.accelerators]})


@pytest.mark.parametrize("row_id,metric,bound,closer", [
    ("accelmark-nvidia_l4x1-suiteA-bf16-vllm0.7.3-c1", "TTFT", 0.33, 1.5),
    ("trtllm017-l40s-llama-3.1-8b-tp1-128-128", "serving tokens/s", 0.12, None),
    ("trtllm017-l40s-llama-3.1-8b-tp1-2048-128", "serving tokens/s", 0.12, None)])
def test_prefill_heavy_rows_on_the_derated_parts_come_in(row_id, metric, bound, closer):
    """Prefill and large-batch decode are compute-bound, so they follow the clock the part sustains: at today's
    constants these published runs are -42%, +8% and +3% off at the datasheet clock and -26%, -8% and -9% at the
    sustained one. The L4 row comes at least 1.5x closer at the sustained clock. The two L40S rows hold only to within
    12%: they came 1.2x and 2x closer at the sustained clock until the refits that paid the elementwise kernels
    (planner/physics/elementwise.py) and read vLLM V0's host loop on the rows that ran it (bench/engine_loop.py: the
    KV stream's share 0.77 -> 0.71) put them as far off on the slow side as the datasheet clock is on the fast side;
    the derating rests on the measured matmul shares above, not on them. The L4 TTFT row
    keeps a 33% bound: AccelMark's first token (held out) comes ~40 ms later than the planner's, whose HTTP request cost
    is the measured 4 ms (REQUEST_OVERHEAD_S; 0 ms, fitted on every harness alike, before the ninth session)."""
    from bench import reference_serving
    from bench.reference_cases import Row

    def error(catalog: Catalog) -> float:
        rows = [r for r in reference_serving.serving_rows(catalog, Row) if r.id == row_id and r.metric == metric]
        assert len(rows) == 1
        return rows[0].error

    sustained, datasheet = error(bundled()), error(_datasheet_clock(bundled()))
    assert abs(sustained) < (bound if closer is None else min(bound, abs(datasheet) / closer))
