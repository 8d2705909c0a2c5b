"""Issue 25, collectives across nodes measured on published multi-node nccl-tests runs
(bench/data/collectives/across-nodes.yaml, bench/collective_check.py), not fitted to training runs.

A ring's time across nodes grows with every rank (an all-gather of 32 MiB takes 240 µs on 2 p5 nodes, 2.7 ms on 32);
NCCL pipelines the buffer through NVLink and the NICs at once, so a large collective takes its slower leg's time,
not their sum; an all-reduce takes NCCL's tree once that is cheaper than the ring's 2·(ranks − 1) hops."""

from __future__ import annotations

import math

import pytest

from bench import collective_check as cc
from planner.physics import collectives
from planner.physics.collectives import group_collective_s, inter_node_bytes_per_s, intra_node_ring_s, ring_s

MIB = 2**20


def _curve(collective: str, nodes: int, source: str = "crazyguitar") -> dict:
    return next(c for c in cc.curves() if c["collective"] == collective and c["nodes"] == nodes
                and source in c["source"])


def test_the_planner_s_latency_constants_are_what_the_fit_curves_measure(catalog):
    step, level = cc.measure(catalog)
    assert step == pytest.approx(collectives.INTER_NODE_RING_STEP_S)
    assert level == pytest.approx(collectives.INTER_NODE_TREE_LEVEL_S)


def test_the_fit_curves_and_other_sources_p5_runs_are_within_10_percent(catalog):
    """80 rows on 2-32 p5 nodes; the check: two 2-node p5 all-reduce curves from other sources (awsome-distributed-
    training, aws-do-eks), 1 MiB-2 GiB."""
    fit, _ = cc.relative(cc.pooled(catalog, "fit"))
    assert fit < 0.10
    p5_checks = [e for c in cc.curves() if c["use"] == "check" and c["network"] == "efa"
                 and c["instance"] == "p5.48xlarge" for e in cc.log_errors(c, catalog)]
    assert len(p5_checks) == 24
    assert cc.relative(p5_checks)[0] < 0.10


@pytest.mark.parametrize("nodes, published_us", [(2, 239.6), (32, 2698.8)])
def test_a_32_mib_all_gather_grows_with_the_ranks(catalog, nodes, published_us):
    """crazyguitar's p5 all_gather_perf, 32 MiB over 16 and 256 H100s: 33,554,432 B at an algbw of 140.06 and
    12.43 GB/s. Within 12%: the ring's 255 hops (2.3 ms at 9 µs), not its bytes, set the time at 32 nodes."""
    measured = dict(cc.measured_s(_curve("all_gather", nodes)))[32 * MIB]
    assert measured * 1e6 == pytest.approx(published_us, rel=1e-3)
    h100, p5 = catalog.accelerator("H100-80GB"), catalog.instance("p5.48xlarge")
    assert group_collective_s(32 * MIB, 8 * nodes, 8, h100, p5, 1) == pytest.approx(measured, rel=0.12)


def test_a_large_all_reduce_takes_its_slower_leg_s_time_not_the_sum(catalog):
    """8 GiB all-reduced across 2 p5 nodes in 33.7 ms (crazyguitar); NVLink's leg alone is 32.2 ms, the NICs' 26.8:
    the sum the planner charged before was 59 ms."""
    h100, p5 = catalog.accelerator("H100-80GB"), catalog.instance("p5.48xlarge")
    size = 8192 * MIB
    intra = intra_node_ring_s(size, 8, h100, 2)
    inter = ring_s(size / 8, 2, inter_node_bytes_per_s(p5), 2, h100)
    hops = min(2 * 15 * collectives.INTER_NODE_RING_STEP_S, 2 * collectives.INTER_NODE_TREE_LEVEL_S)
    assert group_collective_s(size, 16, 8, h100, p5) == pytest.approx(max(intra, inter) + hops)
    measured = dict(cc.measured_s(_curve("all_reduce", 2)))[size]
    assert group_collective_s(size, 16, 8, h100, p5) == pytest.approx(measured, rel=0.05)
    assert intra + inter > 1.7 * measured


def test_an_all_reduce_over_many_nodes_takes_the_tree(catalog):
    """128 ranks on 32 nodes: a ring's 2·127 hops are 2.3 ms, the tree's 2·log2(32) levels 1.4 ms; an all-gather has
    only the ring."""
    assert collectives.across_nodes_latency_s(128, 32, 2) == pytest.approx(
        2 * math.log2(32) * collectives.INTER_NODE_TREE_LEVEL_S)
    assert collectives.across_nodes_latency_s(128, 32, 1) == pytest.approx(127 * collectives.INTER_NODE_RING_STEP_S)
    assert collectives.across_nodes_latency_s(16, 2, 2) == pytest.approx(
        min(30 * collectives.INTER_NODE_RING_STEP_S, 2 * collectives.INTER_NODE_TREE_LEVEL_S))
    assert collectives.across_nodes_latency_s(8, 1, 2) == 0.0


def test_infiniband_clusters_run_faster_than_the_efa_measured_constants(catalog):
    """The constants are EFA's (what the planner provisions). InfiniBand's NIC hops are shorter: on 2-8 nodes of H100
    with 400G InfiniBand the model's all-reduce times are 46-62% above what was measured (nccl-tests #309), which the
    model must not hide by being refitted to them."""
    _, signed = cc.relative(cc.pooled(catalog, "check", network="infiniband"))
    assert signed > 0.25
