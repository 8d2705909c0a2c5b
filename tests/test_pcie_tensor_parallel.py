"""Issue 25 (d): tensor parallelism on the PCIe-only parts AWS rents (A10G in g5.12xlarge/48xlarge, L4
in g6, L40S in g6e; no NVLink) all-reduces over PCIe Gen4 x16: 16 GT/s × 16 lanes × 128b/130b ≈ 31.5
GB/s each way (PCI-SIG PCIe 4.0 base specification), which NVIDIA's datasheets state as "PCIe Gen4:
64 GB/s" (both directions, e.g. the A40's and A10's), the catalog's intra_node_gb_s."""

from __future__ import annotations

import pytest

from planner.physics.collectives import COLLECTIVE_EFFICIENCY, intra_node_bytes_per_s, ring_s
from planner.physics.performance import decode_step
from planner.workload.presets import presets


@pytest.mark.parametrize("part", ["A10G", "L4", "L40S"])
def test_pcie_parts_all_reduce_at_pcie_gen4_one_way_bandwidth(catalog, part):
    accel = catalog.accelerator(part)
    assert accel.intra_node_gb_s == 64
    assert intra_node_bytes_per_s(accel) == pytest.approx(32e9 * COLLECTIVE_EFFICIENCY) == pytest.approx(25.6e9)


@pytest.mark.parametrize("instance", ["g5.12xlarge", "g5.48xlarge"])
def test_multi_gpu_g5_types_carry_the_pcie_part(catalog, instance):
    assert catalog.instance(instance).accelerator == "A10G"


def test_tp4_decode_on_a10g_pays_pcie_all_reduces_not_nvlinks(catalog):
    """llama-2-13b at TP 4, batch 32: two all-reduces of 32 × 5,120 × 2 bytes per layer, each a ring over
    4 ranks at 25.6 GB/s; the same on H100's NVLink (900 GB/s both ways) is ~14× less bandwidth time."""
    arch = presets()["llama-2-13b"]
    a10g, h100 = catalog.accelerator("A10G"), catalog.accelerator("H100-80GB")
    step = decode_step(arch, a10g, "bf16", "bf16", 4, 1, 32, 1024)
    activation = 32 * arch.hidden_size * 2
    assert step.communication_s == pytest.approx(2 * arch.layers * ring_s(activation, 4, 25.6e9))
    assert step.communication_s == pytest.approx(2 * 40 * (15e-6 + 3 * 1.5e-6 + 1.5 * 327_680 / 25.6e9), rel=1e-9)
    nvlink = decode_step(arch, h100, "bf16", "bf16", 4, 1, 32, 1024).communication_s
    assert step.communication_s > 1.5 * nvlink
