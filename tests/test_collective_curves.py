"""Issue 25, tensor-parallel all-reduces at their message size: NCCL's bus bandwidth ramps with the message
(planner/data/collectives.yaml: published nccl-tests all_reduce_perf curves, 8 GPUs of one node), so a decode
step's 4-30 MB all-reduces run well below the large-message plateau the ring model assumed (80% of the link),
and on A100s below it at every size up to ~256 MB. Each case is a row of a published curve."""

from __future__ import annotations

import statistics

import pytest

from planner.physics.collectives import (COLLECTIVE_EFFICIENCY, intra_node_bytes_per_s, intra_node_ring_s, latency_s,
                                         nvlink_share, ring_s)
from planner.workload.bundled import load

MIB = 2**20
HOPPER_4_MIB_BUS_GB_S = (135.44, 132.41, 128.73, 138.44)  # H100 exemplar, p5, Azure H100, Azure H200


def test_the_share_at_a_measured_size_is_the_median_of_its_link_s_curves():
    assert nvlink_share(900, 4 * MIB) == pytest.approx(statistics.median(HOPPER_4_MIB_BUS_GB_S) / 450)
    assert nvlink_share(600, 16 * MIB) == pytest.approx((109.22 + 99.99) / 2 / 300)


def test_between_measured_sizes_the_share_is_log_linear_and_flat_outside():
    lo, hi = nvlink_share(900, 4 * MIB), nvlink_share(900, 8 * MIB)
    assert nvlink_share(900, 4 * MIB * 2**0.5) == pytest.approx((lo + hi) / 2)
    assert nvlink_share(900, 64) == nvlink_share(900, MIB)
    assert nvlink_share(900, 16 * 2**30) == nvlink_share(900, 2**30)


@pytest.mark.parametrize("size, published_us", [(4 * MIB, 54.19), (16 * MIB, 123.8), (64 * MIB, 324.7),
                                                (256 * MIB, 1112.5)])
def test_an_all_reduce_on_8_h100s_takes_what_nccl_tests_measured(catalog, size, published_us):
    """NVIDIA/exemplar-performance's 8x H100 all_reduce_perf, out-of-place time: within 5%."""
    h100 = catalog.accelerator("H100-80GB")
    assert intra_node_ring_s(size, 8, h100) * 1e6 == pytest.approx(published_us, rel=0.05)


def test_on_a100_a_16_mib_all_reduce_runs_at_about_half_the_old_plateau(catalog):
    """Azure ND A100 v4 and a DGX A100 capture: 109 and 100 GB/s bus bandwidth at 16 MiB, against the 240 GB/s
    (80% of NVLink 3's 300 GB/s one way) every size was charged before."""
    a100 = catalog.accelerator("A100-80GB")
    plateau = ring_s(16 * MIB, 8, intra_node_bytes_per_s(a100), accel=a100)
    measured = intra_node_ring_s(16 * MIB, 8, a100)
    assert measured == pytest.approx(1.75 * 16 * MIB / ((109.22 + 99.99) / 2 * 1e9))
    assert measured > 1.3 * plateau


def test_a_small_all_reduce_pays_the_engine_s_latency_not_the_sum(catalog):
    """A decode step's all-reduce at batch 1 (16 KB) is latency-bound: latency_s, fitted to gpt-fast's TP decode,
    and never less."""
    h100 = catalog.accelerator("H100-80GB")
    assert intra_node_ring_s(16_384, 8, h100) == latency_s(8, h100)
    assert intra_node_ring_s(16_384, 2, h100) == latency_s(2, h100)


def test_nvlink_sharp_lifts_only_all_reduces_across_more_than_4_gpus(catalog):
    """At 1 GiB the 8-GPU curves reach ~466 GB/s (NVLink SHARP); 2-4 H100s stay near the ring's 360
    (4x H100, NCCL 2.26.2: 4,525.6 us for 1 GiB), and all-gathers run as rings."""
    h100 = catalog.accelerator("H100-80GB")
    assert nvlink_share(900, 2**30) > 1.0
    four = intra_node_ring_s(2**30, 4, h100)
    assert four == pytest.approx(1.5 * 2**30 / (450e9 * COLLECTIVE_EFFICIENCY))
    assert four * 1e6 == pytest.approx(4525.6, rel=0.02)
    gather = intra_node_ring_s(2**30, 8, h100, phases=1)
    assert gather == pytest.approx(7 / 8 * 2**30 / (450e9 * COLLECTIVE_EFFICIENCY))


def test_links_without_a_curve(catalog):
    """PCIe parts keep their one-way share (planner/physics/collectives.py); NVLink 5 (B200) takes Hopper's
    shares of its twice-as-fast link, so its transfers take half as long."""
    l40s, b200, h100 = (catalog.accelerator(n) for n in ("L40S", "B200", "H100-80GB"))
    assert intra_node_ring_s(64 * MIB, 4, l40s) == ring_s(64 * MIB, 4, intra_node_bytes_per_s(l40s), accel=l40s)
    assert intra_node_ring_s(256 * MIB, 8, b200) == pytest.approx(intra_node_ring_s(256 * MIB, 8, h100) / 2)


def test_every_curve_names_its_source_at_a_commit_and_when_it_was_read():
    for link in load("collectives")["links"]:
        assert link["curves"]
        for curve in link["curves"]:
            assert "@" in curve["source"] and ":" in curve["source"]
            assert curve["retrieved"] == "2026-11-24"
            sizes = [size for size, _ in curve["points"]]
            assert sizes == sorted(sizes) and sizes[0] == MIB and sizes[-1] == 2**30
