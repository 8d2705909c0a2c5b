"""Training search for one instance type: nodes × TP × PP × DP × ZeRO × micro-batch ×
activation checkpointing; the cheapest run that fits memory and meets the deadline."""

from __future__ import annotations

import math
from functools import cache

from planner.physics.bands import memory_fit_factor, slow_factor
from planner.search.candidates import Candidate, Miss, memory_miss, pinned_tp_miss, tensor_parallel_options
from planner.hardware.catalog import Accelerator, InstanceType
from planner.economics.cost import HourlyPrice
from planner.physics.expert_training import ep_options, ep_pin_miss, ep_text
from planner.physics.memory import TrainingSetup, training_memory
from planner.search.tables import fit_table, memory_table
from planner.economics.provisioned import fsx_usd_per_hour, root_volumes_usd_per_hour
from planner.economics.purchase import COMMITMENT_YEARS, RunQuote, interruptions_per_month, training_quote
from planner.economics.storage import (FSX_MAX_GIB, S3_MB_S_PER_NODE, StoragePlan, plan_storage, storage_rates,
                                       storage_refusal)
from planner.physics.pipeline_schedule import memory_virtual_stages, schedule_options
from planner.physics.training_time import (TrainingLayout, model_flops_per_token, step_from_parts, step_parts,
                                           training_work)
from planner.hardware.units import compute_precision
from planner.workload.sections import DEFAULT_BATCH_TOKENS  # the spec checks a run holds one batch
from planner.workload.spec import Workload

MICRO_BATCHES = (16, 8, 4, 2, 1)  # largest first: the biggest micro-batch that fits runs the GEMMs best
CHECKPOINTING = ("none", "selective", "full")  # cheapest recompute first
# More nodes mostly add communication, but not always less cost per run: DP changes how the global
# batch splits into micro-batches, and so the bubble (issue 14's frontier found p5 × 16 at $337k/run
# cheaper than the first feasible p5 × 12 at $355k). Per layout, the search goes on past a feasible
# node count until this many larger counts in a row fail to beat the best; `gpuplan frontier` visits all.
NODE_PATIENCE = 2
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

def global_batch_sequences(w: Workload) -> int:
    t = w.training
    tokens = t.global_batch_tokens or DEFAULT_BATCH_TOKENS[w.kind]
    return max(1, round(tokens / t.sequence_length))

def run_storage(w: Workload, tokens_per_s: float, nodes: int) -> StoragePlan:
    t = w.training
    return plan_storage(w.architecture, method=t.method, precision=w.precision, optimizer=t.optimizer,
                        lora_rank=t.lora_rank, tokens=t.tokens, tokens_per_s=tokens_per_s, nodes=nodes,
                        dataset_format=t.dataset_format, checkpoint_interval_s=t.checkpoint_interval_minutes * 60,
                        max_checkpoint_share=t.max_checkpoint_share, region=w.constraints.region)


def unpriced_verdict(w: Workload, arch, book: dict[str, HourlyPrice], nodes: int, train_s: float,
                     tokens_per_s: float, best_usd: float, slow: float) -> str | None:
    """What pricing a layout would conclude, when that is sure without pricing it: "worse" (it meets the
    deadline but cannot beat `best_usd`, the best rank key's cost) or "late" (it misses the deadline);
    None when it must be priced. Every option's run costs at least the cheapest $/h × nodes × train_s (spot
    and capacity blocks only add time or whole days; storage adds cost), and on-demand or a commitment
    always quotes (never refused) at exactly train_s, so the fastest quote takes train_s. Storage is
    refused only on FSx, so a run that streams from S3 needs no sizing."""
    if not any(p == "on-demand" or p in COMMITMENT_YEARS for p in book):
        return None
    floor_usd = min(price.usd_per_hour for price in book.values()) * nodes * train_s / 3600 * (1 - 1e-9)
    if float(f"{floor_usd:.3g}") <= best_usd:
        return None
    t = w.training
    *_, per_node_mb_s = storage_rates(arch, method=t.method, precision=w.precision, optimizer=t.optimizer,
                                      lora_rank=t.lora_rank, tokens=t.tokens, tokens_per_s=tokens_per_s, nodes=nodes,
                                      dataset_format=t.dataset_format,
                                      checkpoint_interval_s=t.checkpoint_interval_minutes * 60,
                                      max_checkpoint_share=t.max_checkpoint_share)
    if per_node_mb_s > S3_MB_S_PER_NODE:
        return None
    return "worse" if not t.deadline_hours or train_s * slow <= t.deadline_hours * 3600 else "late"


def run_storage_usd_per_hour(w: Workload, storage: StoragePlan, mem, devices_per_node: int, nodes: int) -> float:
    """What the run provisions beside its instances, per hour (planner/economics/provisioned.py): a gp3 root volume
    per node, and FSx for Lustre with its backups when S3 streaming cannot carry the run."""
    region = w.constraints.region
    hourly = root_volumes_usd_per_hour(mem.weights + mem.gradients + mem.optimizer, devices_per_node, nodes, region)
    if storage.recommendation == "fsx":
        hourly += fsx_usd_per_hour(storage.fsx.usd_per_month, storage.dataset_bytes, storage.checkpoint_bytes, region)
    return hourly


def run_quotes(w: Workload, book: dict[str, HourlyPrice], nodes: int, train_s: float,
               tokens_per_s: float, storage: StoragePlan | None = None) -> dict[str, RunQuote | str]:
    """Each option's way to buy this run, or why it cannot; `storage` when the caller already planned it
    (the search plans each surviving candidate's storage once, for the refusal and the quotes alike)."""
    storage = storage or run_storage(w, tokens_per_s, nodes)
    refused = storage_refusal(storage)
    if refused:
        return {purchase: refused for purchase in book}
    restart_s = w.training.restart_minutes * 60 + storage.checkpoint_write_s  # relaunch, then read it back
    return {purchase: training_quote(purchase, price.usd_per_hour, nodes, train_s,
                                     interruptions=interruptions_per_month(price.spot_interruption,
                                                                           w.constraints.spot_interruptions_per_month),
                                     checkpoint_write_s=storage.checkpoint_write_s, restart_s=restart_s)
            for purchase, price in book.items()}


def best_training(w: Workload, itype: InstanceType, accel: Accelerator, book: dict[str, HourlyPrice],
                  collect: list[Candidate] | None = None) -> Candidate | Miss:
    """The cheapest run on this type; with `collect`, every feasible (TP, PP, nodes) run is appended to
    it too (larger node counts cost more per run but finish sooner: the frontier)."""
    arch, t, c, pins = w.architecture, w.training, w.constraints, w.layout
    apn = itype.accelerators_per_node
    usable = accel.memory_bytes * (1 - c.memory_headroom)
    # constraints.confidence likely: the memory must fit at the high edge of memory.band
    grow = memory_fit_factor("neuron" if accel.is_neuron else "gpu", c.confidence)
    fit_usable = usable / grow
    fit_edge = f" (estimate × {grow:.2f}, the 80% band's high edge: confidence likely)" if grow > 1 else ""
    setup = TrainingSetup(t.method, w.precision, t.optimizer, t.grad_precision, t.lora_rank, t.sequence_length)
    seqs = global_batch_sequences(w)
    work = training_work(arch, setup)
    flash = accel.supports.flash_attention
    ckpts = CHECKPOINTING if t.activation_checkpointing == "auto" else (t.activation_checkpointing,)
    neuron = accel.is_neuron
    # constraints.confidence likely: the deadline must hold at the slow edge of the 80% band
    slow = slow_factor("neuron" if neuron else "gpu", "training", c.confidence)
    edge = " (likely: the 80% band's slow edge)" if c.confidence == "likely" else ""
    stages = NEURON_ZERO_STAGES if neuron else (0, 1, 2, 3)
    if pins.zero_stage is not None and pins.zero_stage not in stages:
        return Miss(f"layout.zero_stage {pins.zero_stage}: NeuronX Distributed shards optimizer states only "
                    f"(ZeRO-1); stages {', '.join(map(str, stages))} run on {accel.name}")
    zeros = (pins.zero_stage,) if pins.zero_stage is not None else stages
    mbs = (pins.micro_batch,) if pins.micro_batch else MICRO_BATCHES
    nodes_options = (pins.nodes,) if pins.nodes else node_counts(c.max_nodes)
    single_node_only = None
    if not itype.multi_node and any(n > 1 for n in nodes_options):
        single_node_only = f"multi-node training needs EFA or another inter-node network: {itype.multi_node_gap()}"
        nodes_options = tuple(n for n in nodes_options if n == 1)
    if t.deadline_hours and not pins.nodes:
        # The compute roof: even at 100% of peak, fewer devices than this cannot meet the deadline.
        peak = accel.peak_flops(compute_precision(w.precision)) or 0.0
        floor_devices = t.tokens * model_flops_per_token(arch, t.sequence_length, t.method) / (t.deadline_hours * 3600 * peak) \
            if peak else 0.0
        reachable = tuple(n for n in nodes_options if n * apn >= floor_devices)
        if not reachable:
            most = max(nodes_options)
            why = (f"even at peak FLOP/s, {most} node(s) cannot train {t.tokens:.3g} tokens in "
                   f"{t.deadline_hours:g} h (needs ≥ {floor_devices:,.0f} {accel.name})")
            return Miss(f"{why}; {single_node_only}" if single_node_only else why, floor_devices / (most * apn), stage=2)
        nodes_options = reachable
    pps = (pins.pipeline_parallel,) if pins.pipeline_parallel else pipeline_options(arch.layers)
    tps = tensor_parallel_options(apn, arch.attention_heads, pins.tensor_parallel, neuron)
    if not tps:
        return Miss(pinned_tp_miss(pins.tensor_parallel, apn, arch.attention_heads) if pins.tensor_parallel else
                    f"no TP degree divides both {apn} devices and {arch.attention_heads} heads")
    if pins.nodes and pins.nodes > c.max_nodes:
        return Miss(f"layout.nodes {pins.nodes} is over constraints.max_nodes {c.max_nodes} (the node cap; raise it, up to 4096)")
    best: Candidate | None = None
    best_usd: float | None = None  # best.rank_key[0]
    miss: Miss | None = None

    sized = memory_table(arch, setup, flash, neuron)
    fits = fit_table(arch, setup, w.precision, seqs, itype, accel, fit_usable)

    def memory(tp, pp, dp, zero, mb, ck, ep=1, virtual_stages=1):
        m = math.ceil(seqs / (dp * mb))
        key = (tp, pp, dp, zero, mb, m, ck, ep, virtual_stages)
        if (mem := sized.get(key)) is None:
            mem = sized[key] = training_memory(arch, setup, tp, pp, dp, zero, mb, m, ck, flash,
                                               virtual_stages, neuron, ep)
        return m, mem

    for tp in tps:
        for pp in pps:
            if pp > arch.layers:
                continue
            worse_in_a_row = 0  # see NODE_PATIENCE
            for nodes in nodes_options:
                if collect is None and worse_in_a_row >= NODE_PATIENCE:
                    break
                devices = nodes * apn
                if devices % (tp * pp):
                    continue
                dp = devices // (tp * pp)
                if pins.data_parallel and dp != pins.data_parallel:
                    continue
                if dp * min(mbs) > seqs:
                    miss = Miss(f"a global batch of {seqs} sequences cannot feed {dp} data-parallel ranks "
                                f"at {nodes} nodes (raise training.global_batch_tokens)", dp * min(mbs) / seqs).nearer(miss)
                    break
                eps = ep_options(arch, t.method, dp, pins.expert_parallel, tp)  # MoE: TP-only experts, or EP
                if not eps:
                    miss = Miss(ep_pin_miss(arch, pins.expert_parallel, tp, dp)).nearer(miss)
                    continue
                _, lean = memory(tp, pp, dp, max(zeros), min(mbs), ckpts[-1], max(eps))
                if lean.total > fit_usable:
                    if best is None:  # a miss is only reported when nothing fits (then best stays None)
                        miss = memory_miss(itype, accel, usable, lean.total * grow,
                                           f"at {nodes} node(s), TP {tp} × PP {pp} × DP {dp}{ep_text(max(eps))}, "
                                           f"ZeRO-{max(zeros)}, micro-batch {min(mbs)}, {ckpts[-1]} recompute"
                                           f"{fit_edge}").nearer(miss)
                    continue
                fit_key = (tp, pp, dp, ckpts, zeros, mbs, eps)
                if fit_key in fits:
                    found = fits[fit_key]
                else:
                    found = fits[fit_key] = _fastest_fit(arch, itype, accel, w, setup, work, fit_usable, tp, pp,
                                                         dp, seqs, ckpts, zeros, mbs, memory, eps)
                if found is None:
                    continue
                layout, mem, est = found
                time_to_train_s = t.tokens / est.tokens_per_s
                verdict = None if best_usd is None or collect is not None else unpriced_verdict(
                    w, arch, book, nodes, time_to_train_s, est.tokens_per_s, best_usd, slow)
                if verdict is not None:  # what its pricing would conclude (it cannot be the best)
                    worse_in_a_row += verdict == "worse"
                    continue
                storage = run_storage(w, est.tokens_per_s, nodes)
                if refused := storage_refusal(storage):
                    miss = Miss(refused, storage.fsx.storage_capacity_gib / FSX_MAX_GIB, stage=2).nearer(miss)
                    continue
                priced = run_quotes(w, book, nodes, time_to_train_s, est.tokens_per_s, storage).values()
                quotes = sorted((q for q in priced if not isinstance(q, str)), key=lambda q: (q.usd_per_run, q.wall_s))
                if not quotes:
                    miss = Miss("; ".join(priced), stage=2).nearer(miss)
                    continue
                in_time = [q for q in quotes if not t.deadline_hours or q.wall_s * slow <= t.deadline_hours * 3600]
                if not in_time:
                    fastest = min(quotes, key=lambda q: q.wall_s)
                    miss = Miss(f"{fastest.wall_s * slow / 3600:,.0f} h to train{edge} > deadline {t.deadline_hours:g} h at "
                                f"{nodes} node(s), TP {tp} × PP {pp} × DP {dp}"
                                + (f" ({fastest.purchase})" if len(book) > 1 or fastest.purchase != "on-demand" else ""),
                                fastest.wall_s * slow / (t.deadline_hours * 3600), stage=2).nearer(miss)
                    continue
                quote = in_time[0]
                storage_h = run_storage_usd_per_hour(w, storage, mem, itype.accelerators_per_node, nodes)
                cand = Candidate(itype, accel, book[quote.purchase], nodes, tp, pp, dp, 1, mem, usable, est,
                                 nodes * quote.usd_per_instance_hour, quote.usd_per_run + storage_h * quote.wall_s / 3600,
                                 storage_usd_per_hour=storage_h, zero=layout[0],
                                 micro_batch=layout[1], microbatches=layout[2], checkpointing=layout[3],
                                 pipeline_schedule=layout[5] if pp > 1 else None,
                                 virtual_stages=layout[6] if pp > 1 and layout[5] == "interleaved" else None,
                                 purchase=quote.purchase, wall_s=quote.wall_s, train_ep=layout[4])
                improved = best is None or cand.rank_key < best.rank_key
                worse_in_a_row = 0 if improved else worse_in_a_row + 1
                if improved:
                    best, best_usd = cand, cand.rank_key[0]
                if collect is not None:
                    collect.append(cand)
    if best is not None:
        return best
    if single_node_only:
        return Miss(f"{miss.reason}; {single_node_only}", miss.shortfall, stage=miss.stage) if miss else Miss(single_node_only)
    return miss or Miss("no layout of this type fits the pins in layout:")

def _fastest_fit(arch, itype, accel, w, setup, work, usable, tp, pp, dp, seqs, ckpts, zeros, mbs, memory, eps=(1,)):
    """For each EP degree, recompute mode and ZeRO stage, the largest micro-batch that fits; the fastest of those."""
    best = None
    smallest = min(mbs)
    for ep, ck in ((ep, ck) for ep in eps for ck in ckpts):
        for zero in sorted(zeros, reverse=True):  # each lower stage holds more: stop at the first misfit
            _, lean = memory(tp, pp, dp, zero, smallest, ck, ep)
            if lean.total > usable:
                break  # the smallest micro-batch does not fit: no larger one, no lower stage will
            # Activations grow with the micro-batch (and at most so do the micro-batches in flight,
            # which only shrink as it grows): start from the largest that can fit by that bound.
            room = (usable - lean.total + lean.activations) / max(lean.activations, 1.0)
            for mb in mbs:
                if dp * mb > seqs or (mb > smallest and mb / smallest > room * pp):
                    continue
                m, mem = (0, lean) if mb == smallest else memory(tp, pp, dp, zero, mb, ck, ep)
                if mb == smallest:
                    m = math.ceil(seqs / (dp * mb))
                if mem.total > usable:
                    continue
                parts = None  # the schedule-free part of the step, shared by every schedule below
                for schedule, v in schedule_options(pp, arch.layers, not accel.is_neuron):
                    vm = memory_virtual_stages(schedule, v)
                    sched_mem = mem if vm == 1 else memory(tp, pp, dp, zero, mb, ck, ep, vm)[1]
                    if sched_mem.total > usable:
                        continue
                    layout = TrainingLayout(tp, pp, dp, zero, mb, m, ck, schedule, v, ep)
                    state = sched_mem.weights + sched_mem.gradients + sched_mem.optimizer
                    parts = parts or step_parts(arch, itype, accel, w.precision, setup.seq, layout, work)
                    est = step_from_parts(parts, arch, setup.seq, layout, state, work)
                    # equal speed (no data parallelism to shard over): the lower ZeRO stage, which is simpler
                    if best is None or (est.tokens_per_s, -zero) > (best[2].tokens_per_s, -best[0][0]):
                        best = ((zero, mb, m, ck, ep, schedule, v), sched_mem, est)
                break
    return best
