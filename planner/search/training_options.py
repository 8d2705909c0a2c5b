"""What the training search walks (planner/search/training.py): node counts, pipeline depths, CP degrees and
the global batch in sequences, and the rules that rule a type out whatever its layout."""

from __future__ import annotations

from functools import cache

from planner.hardware.catalog import Accelerator, InstanceType
from planner.hardware.units import compute_precision
from planner.physics.context_parallel import CP_DEGREES, CP_MIN_SEQUENCE_TOKENS, splits
from planner.physics.training_time import executed_flops_per_token
from planner.search.candidates import Miss, pinned_tp_miss, tensor_parallel_options
from planner.workload.sections import DEFAULT_BATCH_TOKENS  # the spec checks a run holds one batch
from planner.workload.spec import Workload

# NeuronX Distributed: TP inside the node, PP, and ZeRO-1 (its optimizer-state sharding); no ZeRO-2/3.
NEURON_ZERO_STAGES = (0, 1)


@cache
def node_counts(max_nodes: int) -> tuple[int, ...]:
    """1-8 nodes, then 2^k and 3·2^k: the sizes a global batch splits into evenly."""
    sizes = set(range(1, min(8, max_nodes) + 1))
    k = 8
    while k <= max_nodes:
        sizes.update(n for n in (k, 3 * k // 2) if n <= max_nodes)
        k *= 2
    sizes.add(max_nodes)
    return tuple(sorted(sizes))

@cache
def pipeline_options(layers: int) -> tuple[int, ...]:
    """Stage counts that split the layers evenly, plus powers of two (Megatron allows uneven stages)."""
    return tuple(p for p in range(1, layers + 1) if layers % p == 0 or p & (p - 1) == 0)

def context_parallel_options(w: Workload, accel: Accelerator, activations_short: bool = False) -> tuple[int, ...]:
    """CP degrees worth a search (planner/physics/context_parallel.py): the pin; else CP 1, and CP 2-16 where
    it can pay: sequences of CP_MIN_SEQUENCE_TOKENS and more, or (activations_short) when no CP 1 layout fits
    memory. GPUs with FlashAttention only (Transformer Engine's CP runs on its fused attention); each degree
    must cut the sequence into 2·CP equal chunks."""
    pinned, seq = w.layout.context_parallel, w.training.sequence_length
    if pinned:
        return (pinned,)
    if accel.is_neuron or not accel.supports.flash_attention:
        return (1,)
    larger = tuple(cp for cp in CP_DEGREES if splits(seq, cp))
    if activations_short:
        return larger
    return (1, *larger) if seq >= CP_MIN_SEQUENCE_TOKENS else (1,)


def global_batch_sequences(w: Workload) -> int:
    t = w.training
    tokens = t.global_batch_tokens or DEFAULT_BATCH_TOKENS[w.kind]
    return max(1, round(tokens / t.sequence_length))


def type_rules(w: Workload, itype: InstanceType, accel: Accelerator) -> Miss | tuple[tuple[int, ...], str | None]:
    """The node counts worth trying on this type (and why multi-node ones were dropped), or the pin or
    roof that rules the type out whatever the layout."""
    arch, t, c, pins = w.architecture, w.training, w.constraints, w.layout
    apn = itype.accelerators_per_node
    stages = NEURON_ZERO_STAGES if accel.is_neuron else (0, 1, 2, 3)
    if pins.zero_stage is not None and pins.zero_stage not in stages:
        return Miss(f"layout.zero_stage {pins.zero_stage}: NeuronX Distributed shards optimizer states only "
                    f"(ZeRO-1); stages {', '.join(map(str, stages))} run on {accel.name}")
    nodes_options = (pins.nodes,) if pins.nodes else node_counts(c.max_nodes)
    single_node_only = None
    if not itype.multi_node and any(n > 1 for n in nodes_options):
        single_node_only = f"multi-node training needs EFA or another inter-node network: {itype.multi_node_gap()}"
        nodes_options = tuple(n for n in nodes_options if n == 1)
    if t.deadline_hours and not pins.nodes:
        # The compute roof: even at 100% of peak, fewer devices than this cannot meet the deadline.
        peak = accel.peak_flops(compute_precision(w.precision)) or 0.0
        flops = t.tokens * executed_flops_per_token(arch, t.sequence_length, t.method)
        floor_devices = flops / (t.deadline_hours * 3600 * peak) if peak else 0.0
        reachable = tuple(n for n in nodes_options if n * apn >= floor_devices)
        if not reachable:
            most = max(nodes_options)
            why = (f"even at peak FLOP/s, {most} node(s) cannot train {t.tokens:.3g} tokens in "
                   f"{t.deadline_hours:g} h (needs ≥ {floor_devices:,.0f} {accel.name})")
            return Miss(f"{why}; {single_node_only}" if single_node_only else why, floor_devices / (most * apn), stage=2)
        nodes_options = reachable
    if not tensor_parallel_options(apn, arch.attention_heads, pins.tensor_parallel, accel.is_neuron):
        return Miss(pinned_tp_miss(pins.tensor_parallel, apn, arch.attention_heads) if pins.tensor_parallel else
                    f"no TP degree divides both {apn} devices and {arch.attention_heads} heads")
    if pins.nodes and pins.nodes > c.max_nodes:
        return Miss(f"layout.nodes {pins.nodes} is over constraints.max_nodes {c.max_nodes} (the node cap; raise it, up to 4096)")
    return nodes_options, single_node_only
