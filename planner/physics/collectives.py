"""Collective communication over the links a layout crosses: NVLink/NeuronLink inside a node, the
node's shared NICs (EFA on AWS) between nodes. Hierarchical, as NCCL runs them across nodes:
reduce-scatter inside the node, the inter-node ring on 1/g of the buffer, all-gather back."""

from __future__ import annotations

import math
import statistics
from functools import cache

from planner.physics import efficiency
from planner.hardware.catalog import Accelerator, InstanceType

# NCCL ring collectives reach ~80% of the link's one-way bandwidth (nccl-tests bus bandwidth:
# ~235 of 300 GB/s on NVLink3, ~370 of 450 on NVLink4; EFA all-reduce bus bandwidth on p4d/p5
# sits at 75-85% of line rate in AWS's nccl-tests results).
COLLECTIVE_EFFICIENCY = 0.80
# Without NVLink a ring crosses PCIe, and nccl-tests' all-reduce bus bandwidth is a smaller share of the
# link's one-way rate (PCIe Gen4 x16: 32 GB/s), measured, not fitted:
# - peer-to-peer over PCIe: 12.76 GB/s on 4 RTX 4090 at 64 MB (tinygrad/open-gpu-kernel-modules PR #22,
#   NCCL 2.23.4): 0.40 of the link;
# - staged through host memory where the platform gives no GPU peer access (NCCL's SHM transport; EC2's
#   g5/g6 VMs, catalog intra_node_link pcie-host): 3.10 GB/s on 4 A10G on EC2 at 29 MB (pytorch/pytorch
#   #127077, 2024-05-25, NCCL 2.18.5; vLLM 0.4 shipped NCCL 2.18): 0.097 of the link.
# Small messages stay latency-bound either way (8 A10 over SHM: 32 KB in 36.8 µs, NVIDIA/nccl #922, about
# COLLECTIVE_BASE_S plus its bytes at the SHM rate), so the latency below is shared.
LINK_COLLECTIVE_SHARE = {"nvlink": COLLECTIVE_EFFICIENCY, "pcie-p2p": 0.40, "pcie-host": 0.097}
# Small-message collective latency fitted to gpt-fast's TP scaling (reference P-39, P-40: 17-29 µs
# per all-reduce for TP 2-8): a fixed cost plus one per extra rank.
COLLECTIVE_BASE_S = 15e-6
COLLECTIVE_PER_RANK_S = 1.5e-6
# NVLink SHARP (the NVSwitch reducing in the switch, NCCL >= 2.17 on H100/H200) lifts all-reduce bus bandwidth above
# the ring's ~80% of the link only across more than 4 GPUs: ~365-370 GB/s at 2-4 H100s, ~420/440/460/480 at 5-8
# (NVIDIA/nccl#1455); all-gathers and reduce-scatters run as rings. Below that width a curve is capped at the ring's
# share.
NVLS_MIN_RANKS = 5
# Across nodes a collective pays, on top of its slower link's transfer, one wait on a NIC hop per ring step:
# phases·(ranks − 1) steps for a ring (an all-gather or reduce-scatter ranks − 1, an all-reduce twice that;
# Patarasuk & Yuan 2009). All-gathers run only as rings, so their time at 32 MiB grows ~9 µs a rank from 16 to 256
# H100s on p5 (nccl-tests, bench/data/collectives/across-nodes.yaml). An all-reduce takes NCCL's tree once that is
# cheaper: 2·log2(nodes) levels, up and down. Both measured by bench/collective_check.py on those curves (35 and 45
# points, 2-32 p5 nodes), not fitted to training runs. This is what makes ZeRO-3 and FSDP (one collective per layer)
# and DDP/ZeRO-1/2 (one per gradient bucket) lose throughput per GPU as data parallelism grows at a fixed batch.
INTER_NODE_RING_STEP_S = 9.0e-6
INTER_NODE_TREE_LEVEL_S = 140e-6


def intra_node_bytes_per_s(accel: Accelerator) -> float:
    """One-way per-device bandwidth inside a node (vendor NVLink and PCIe figures add both directions)."""
    neuron = accel.is_neuron or accel.intra_node_link == "neuronlink"
    share = efficiency.NEURON_LINK_EFFICIENCY if neuron else LINK_COLLECTIVE_SHARE[accel.intra_node_link]
    return accel.intra_node_gb_s * 1e9 / 2 * share


@cache
def _nvlink_curves() -> dict[float, tuple[tuple[float, float], ...]]:
    """Per NVLink speed (GB/s both ways), the median over its published curves of all-reduce bus bandwidth as a
    share of the one-way link rate, at each message size (planner/data/collectives.yaml)."""
    from planner.workload.bundled import load  # compiled JSON while current (planner/workload/bundled.py)

    out = {}
    for link in load("collectives")["links"]:
        one_way_gb_s = link["link_gb_s"] / 2
        by_size: dict[float, list[float]] = {}
        for curve in link["curves"]:
            for size, bus_gb_s in curve["points"]:
                by_size.setdefault(float(size), []).append(bus_gb_s / one_way_gb_s)
        out[float(link["link_gb_s"])] = tuple((size, statistics.median(shares))
                                              for size, shares in sorted(by_size.items()))
    return out


def nvlink_share(link_gb_s: float, message_bytes: float) -> float:
    """Share of the one-way NVLink rate an all-reduce of `message_bytes` reaches as bus bandwidth, interpolated
    log-linearly in size between measured points and flat beyond them. A part whose link speed has no curve
    (NVLink 5 on B200/GB200: none published in the sources read) takes the fastest measured link's shares."""
    curves = _nvlink_curves()
    measured = [speed for speed in curves if speed <= link_gb_s]
    points = curves[max(measured) if measured else min(curves)]
    if message_bytes <= points[0][0]:
        return points[0][1]
    for (size_lo, share_lo), (size_hi, share_hi) in zip(points, points[1:]):
        if message_bytes <= size_hi:
            t = math.log(message_bytes / size_lo) / math.log(size_hi / size_lo)
            return share_lo + t * (share_hi - share_lo)
    return points[-1][1]


def intra_node_ring_s(bytes_: float, ranks: int, accel: Accelerator, phases: int = 2) -> float:
    """A collective of `bytes_` over `ranks` devices of one node. On NVLink its transfer runs at the bus bandwidth
    nccl-tests measures at that message size (nvlink_share: a 4 MB all-reduce on 8 H100s reaches ~29% of the
    link, 1 GB ~100% with NVLink SHARP), and since that measured time already holds NCCL's own start-up, the call
    takes the longer of it and the small-message latency (latency_s), not their sum. Other links: ring_s at their
    one-way share."""
    if ranks <= 1:
        return 0.0
    if accel.is_neuron or accel.intra_node_link != "nvlink":
        return ring_s(bytes_, ranks, intra_node_bytes_per_s(accel), phases, accel)
    share = nvlink_share(accel.intra_node_gb_s, bytes_)
    if phases < 2 or ranks < NVLS_MIN_RANKS:
        share = min(share, LINK_COLLECTIVE_SHARE["nvlink"])
    transfer_s = phases * (ranks - 1) / ranks * bytes_ / (accel.intra_node_gb_s * 1e9 / 2 * share)
    return max(latency_s(ranks, accel), transfer_s)


def inter_node_bytes_per_s(itype: InstanceType) -> float:
    """A device's share of its node's NICs when every device of the node talks across nodes at once."""
    return itype.inter_node_gbps * 1e9 / 8 / itype.accelerators_per_node * COLLECTIVE_EFFICIENCY


def latency_s(ranks: int, accel: Accelerator | None = None) -> float:
    if ranks <= 1:
        return 0.0
    if accel is not None and accel.is_neuron:
        return efficiency.NEURON_COLLECTIVE_LATENCY_S
    return COLLECTIVE_BASE_S + COLLECTIVE_PER_RANK_S * (ranks - 1)


def ring_s(bytes_: float, ranks: int, bandwidth: float, phases: int = 2, accel: Accelerator | None = None) -> float:
    """Ring collective on one link class: each rank moves phases·(n-1)/n of the buffer
    (Patarasuk & Yuan 2009). phases 2 is an all-reduce, 1 a reduce-scatter or an all-gather."""
    if ranks <= 1:
        return 0.0
    if bandwidth <= 0:
        return math.inf
    return latency_s(ranks, accel) + phases * (ranks - 1) / ranks * bytes_ / bandwidth


def across_nodes_latency_s(ranks: int, nodes: int, phases: int) -> float:
    """The NIC hops a collective over `ranks` devices on `nodes` nodes waits on: a ring's phases·(ranks − 1) steps,
    or for an all-reduce NCCL's tree when that is cheaper (INTER_NODE_RING_STEP_S, INTER_NODE_TREE_LEVEL_S)."""
    if nodes <= 1:
        return 0.0
    ring = phases * (ranks - 1) * INTER_NODE_RING_STEP_S
    return min(ring, 2 * math.log2(nodes) * INTER_NODE_TREE_LEVEL_S) if phases >= 2 else ring


def group_collective_s(bytes_: float, ranks: int, ranks_per_node: int, accel: Accelerator,
                       itype: InstanceType, phases: int = 2, calls: int = 1) -> float:
    """A collective over `ranks` devices of which `ranks_per_node` share a node (NVLink inside the node on the
    whole buffer, the NICs across nodes on 1/g of it), issued as `calls` equal pieces (FSDP/ZeRO-3 gather and
    reduce-scatter one layer at a time), each paying the latency. Across nodes NCCL pipelines the buffer through
    both links at once, so the transfer takes the slower leg's time, not their sum (nccl-tests on 2 p5 nodes: 8 GiB
    all-reduced in 33.7 ms, the NVLink leg alone 32.2), plus the NIC hops (across_nodes_latency_s). Neuron keeps
    the sum its constants were fitted with."""
    if ranks <= 1:
        return 0.0
    g = max(1, min(ranks, ranks_per_node))
    nodes = -(-ranks // g)
    intra = intra_node_ring_s(bytes_, g, accel, phases)
    if nodes == 1:
        return intra + (calls - 1) * latency_s(g, accel)
    inter = ring_s(bytes_ / g, nodes, inter_node_bytes_per_s(itype), phases, accel)
    latency = latency_s(g, accel) + latency_s(nodes, accel)
    if accel.is_neuron:
        return intra + inter + (calls - 1) * latency
    hops = across_nodes_latency_s(ranks, nodes, phases)
    return max(intra, inter) + hops + (calls - 1) * (latency + hops)
