"""Expert parallelism (EP) for MoE serving: a replica spans `ep_nodes` full nodes, attention runs
data-parallel across the nodes (each node TP over its own devices and its share of the batch), and
the routed experts are spread over every device of the replica, so each device holds and reads
1/(tp·ep_nodes) of them. Each MoE layer then moves every token's hidden state to its k experts and
back: two all-to-alls (dispatch and combine), whose cross-node share rides the node's NICs.

Sources: DeepSeek-V3 technical report (arXiv 2412.19437) §3.2.2 and §3.4 (EP across nodes with
DP attention, dispatch and combine per MoE layer); SGLang's DeepSeek deployment (DP attention + EP);
DeepEP (github.com/deepseek-ai/DeepEP README: low-latency dispatch 118-173 µs and combine at EP 16-64
for 128 tokens per rank, hidden 7168, top-8, on 400 Gb/s RDMA), the scale the formula below lands in."""

from __future__ import annotations

import math

from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics.collectives import inter_node_bytes_per_s, latency_s
from planner.physics.memory import weight_bytes
from planner.workload.presets import Architecture

ALL_TO_ALL_BYTES_PER_VALUE = 2  # BF16 hidden states both ways (DeepEP also dispatches FP8; 2 B is the upper bound)


def routed_expert_share(arch: Architecture) -> float:
    """Share of the parameters in routed experts, the part EP spreads: every parameter outside one
    token's path belongs to an idle expert, and the active routed experts are k/E of all routed ones."""
    if not arch.is_moe:
        return 0.0
    routed = arch.experts  # experts counts the routed ones; shared experts sit beside them (models.yaml)
    k = arch.active_experts
    if k >= routed:  # every expert runs for every token
        return 0.0
    return min(1.0, (arch.params - arch.params_per_token) / (arch.params * (1 - k / routed)))


def routed_active_params(arch: Architecture) -> float:
    """Routed-expert parameters one token multiplies: k of the E routed experts (0 for a dense model)."""
    if not arch.is_moe:
        return 0.0
    return arch.params * routed_expert_share(arch) * arch.active_experts / arch.experts


def routed_expert_bytes(arch: Architecture, precision: str) -> float:
    """Bytes of the routed experts (see routed_expert_share)."""
    return weight_bytes(arch, precision) * routed_expert_share(arch)


def tokens_per_node(tokens: int, ep_nodes: int) -> int:
    """DP attention: a node's share of the replica's tokens (the busiest node's)."""
    return math.ceil(tokens / ep_nodes)


def all_to_all_s(arch: Architecture, tokens: int, ep_nodes: int, itype: InstanceType, accel: Accelerator) -> float:
    """Dispatch + combine over every MoE layer for `tokens` tokens of one replica. A token goes to k
    experts spread evenly over ep_nodes nodes, so (ep_nodes-1)/ep_nodes of its k copies leave its node;
    the node's devices share its NICs (inter_node_bytes_per_s is a device's share). Intra-node
    traffic rides NVLink, an order of magnitude faster, and is left out."""
    if ep_nodes <= 1 or not arch.is_moe:
        return 0.0
    apn = itype.accelerators_per_node
    local = tokens_per_node(tokens, ep_nodes)
    leaving_bytes = local * arch.active_experts * arch.hidden_size * ALL_TO_ALL_BYTES_PER_VALUE * (ep_nodes - 1) / ep_nodes
    one_way_s = leaving_bytes / apn / inter_node_bytes_per_s(itype) + latency_s(apn * ep_nodes, accel)
    return 2 * arch.moe_layers * one_way_s
