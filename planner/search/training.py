"""Training search for one instance type: nodes × TP × PP × DP × ZeRO × micro-batch ×
activation checkpointing; the cheapest run that fits memory and meets the deadline."""

from __future__ import annotations

import math
from functools import cache

from planner.physics.bands import memory_fit_factor, slow_factor
from planner.search.candidates import Candidate, Miss, NearestMiss, memory_miss, tensor_parallel_options
from planner.hardware.catalog import Accelerator, InstanceType
from planner.physics.context_parallel import cp_text
from planner.physics.expert_training import ep_options, ep_pin_miss, ep_text, expert_parallel_applies
from planner.physics.memory import TrainingSetup, training_memory
from planner.search.pricing import TypePrices
from planner.search.step_floor import degrees_ceiling, layout_tokens_per_s_ceiling, tokens_per_s_ceiling
from planner.search.tables import fit_table, memory_table, step_table
from planner.search.training_options import (NEURON_ZERO_STAGES, context_parallel_options, global_batch_sequences,
                                             pipeline_options, type_rules)
from planner.physics.pipeline_schedule import memory_virtual_stages, schedule_options
from planner.physics.training_time import (TrainingLayout, step_from_parts, step_parts,
                                           training_work)
from planner.workload.spec import Workload

MICRO_BATCHES = (16, 8, 4, 2, 1)  # largest first: the biggest micro-batch that fits runs the GEMMs best
CHECKPOINTING = ("none", "selective", "full")  # cheapest recompute first
# More nodes mostly add communication, but not always less cost per run: DP changes how the global
# batch splits into micro-batches, and so the bubble (issue 14's frontier found p5 × 16 at $337k/run
# cheaper than the first feasible p5 × 12 at $355k). Per layout, the search goes on past a feasible
# node count until this many larger counts in a row fail to beat the best; `gpuplan frontier` visits all.
NODE_PATIENCE = 2

def best_training(w: Workload, itype: InstanceType, accel: Accelerator, prices: TypePrices,
                  collect: list[Candidate] | None = None) -> Candidate | Miss:
    """The cheapest run on this type; with `collect`, every feasible (TP, PP, nodes) run is appended to
    it too (larger node counts cost more per run but finish sooner: the frontier)."""
    ruled = type_rules(w, itype, accel)
    if isinstance(ruled, Miss):
        return ruled
    nodes_options, single_node_only = ruled
    search = _TrainingSearch(w, itype, accel, prices, collect, nodes_options)
    search.sweep(search.cps)
    if search.best is None and search.misses.nearest is not None and search.misses.nearest.stage == 1 \
            and search.cps == (1,) \
            and not w.layout.context_parallel:
        search.sweep(context_parallel_options(w, accel, activations_short=True))  # CP where nothing else fits
    if search.best is not None:
        return search.best
    miss = search.misses.nearest
    if single_node_only:
        return Miss(f"{miss.reason}; {single_node_only}", miss.shortfall, stage=miss.stage) if miss else Miss(single_node_only)
    return miss or Miss("no layout of this type fits the pins in layout:")


_STOP = "stop"  # a node count after which no larger one can fit this (TP, PP)
_UNSEEN = object()  # a (TP, PP, DP) whose fastest layout is not in the fit table yet (None: nothing fits)


@cache
def _dividing(nodes_options: tuple[int, ...], devices_per_node: int, group: int) -> tuple[int, ...]:
    """The node counts whose devices split into whole TP × PP × CP groups: try_nodes counts no other
    (it returns None for them, which moves neither the best nor the patience)."""
    return tuple(n for n in nodes_options if n * devices_per_node % group == 0)


class _TrainingSearch:
    """One type's search state: the options it walks, the memory it has sized, the best run and the
    nearest miss so far."""

    def __init__(self, w: Workload, itype: InstanceType, accel: Accelerator, prices: TypePrices,
                 collect: list[Candidate] | None, nodes_options: tuple[int, ...]):
        arch, t, c, pins = w.architecture, w.training, w.constraints, w.layout
        self.w, self.itype, self.accel, self.prices, self.collect = w, itype, accel, prices, collect
        self.nodes_options, neuron = nodes_options, accel.is_neuron
        # Read once: w.architecture resolves the preset on every access, and the loops below ask it ~20,000 times.
        self.arch, self.neuron, self.flash = arch, neuron, accel.supports.flash_attention
        platform = "neuron" if neuron else "gpu"
        self.usable = accel.memory_bytes * (1 - c.memory_headroom)
        # constraints.confidence likely: the memory must fit at the high edge of memory.band
        self.grow = memory_fit_factor(platform, c.confidence, t.method != "full")
        self.fit_usable = self.usable / self.grow
        self.fit_edge = f" (estimate × {self.grow:.2f}, the 80% band's high edge: confidence likely)" \
            if self.grow > 1 else ""
        self.setup = TrainingSetup(t.method, w.precision, t.optimizer, t.grad_precision, t.lora_rank, t.sequence_length,
                                   kernels=t.kernels, lora_dropout=t.lora_dropout, lora_targets=t.lora_targets)
        self.seqs = global_batch_sequences(w)
        self.step_memo = step_table(arch, self.setup, itype, accel)  # step_parts' pieces (physics/training_time.py)
        self.work = training_work(arch, self.setup)
        self.ckpts = CHECKPOINTING if t.activation_checkpointing == "auto" else (t.activation_checkpointing,)
        # constraints.confidence likely: the deadline must hold at the slow edge of the 80% band
        self.slow = slow_factor(platform, "training", c.confidence)
        self.edge = " (likely: the 80% band's slow edge)" if c.confidence == "likely" else ""
        self.zeros = (pins.zero_stage,) if pins.zero_stage is not None else (NEURON_ZERO_STAGES if neuron else (0, 1, 2, 3))
        self.mbs = (pins.micro_batch,) if pins.micro_batch else MICRO_BATCHES
        self.pps = (pins.pipeline_parallel,) if pins.pipeline_parallel else pipeline_options(arch.layers)
        self.tps = tensor_parallel_options(itype.accelerators_per_node, arch.attention_heads, pins.tensor_parallel, neuron)
        self.cps = context_parallel_options(w, accel)
        self.sized = memory_table(arch, self.setup, accel.supports.flash_attention, neuron)
        self.fits = fit_table(arch, self.setup, w.precision, self.seqs, itype, accel, self.fit_usable)
        self.best: Candidate | None = None
        self.best_usd: float | None = None  # best.rank_key[0]
        self.misses = NearestMiss()
        # try_nodes asks these of every node count: read once
        self.leanest = (max(self.zeros), min(self.mbs), self.ckpts[-1])  # the layout that holds least
        # (1,) whatever DP is: a dense model, or adapters (planner/physics/expert_training.py ep_options)
        self.dense_eps = (1,) if pins.expert_parallel is None and not expert_parallel_applies(arch, t.method) else None

    def memory(self, tp, pp, dp, zero, mb, ck, ep=1, virtual_stages=1, cp=1):
        """(micro-batches per step, memory) of one layout, sized once per search (planner/search/tables.py)."""
        m = math.ceil(self.seqs / (dp * mb))
        key = (tp, pp, dp, zero, mb, m, ck, ep, virtual_stages, cp)
        if (mem := self.sized.get(key)) is None:
            mem = self.sized[key] = training_memory(self.arch, self.setup, tp, pp, dp, zero, mb, m, ck,
                                                    self.flash, virtual_stages, self.neuron, ep, cp)
        return m, mem

    def sweep(self, cps: tuple[int, ...]) -> None:
        """Every (TP, PP, CP) over its node counts."""
        for tp in self.tps:
            for pp in self.pps:
                if pp <= self.arch.layers:
                    for cp in cps:
                        self.walk_nodes(tp, pp, cp)

    def walk_nodes(self, tp: int, pp: int, cp: int = 1) -> None:
        """Node counts smallest first, until NODE_PATIENCE larger ones in a row fail to beat the best."""
        worse_in_a_row = 0
        for nodes in _dividing(self.nodes_options, self.itype.accelerators_per_node, tp * pp * cp):
            if self.collect is None and worse_in_a_row >= NODE_PATIENCE:
                break
            improved = self.try_nodes(tp, pp, nodes, cp)
            if improved == _STOP:
                break
            if improved is not None:
                worse_in_a_row = 0 if improved else worse_in_a_row + 1

    def try_nodes(self, tp: int, pp: int, nodes: int, cp: int = 1) -> bool | str | None:
        """The fastest layout that fits at this node count, priced: True when it became the best, False when
        it cannot beat it, None when nothing there counts either way, _STOP when no larger count fits."""
        w, mbs, zeros, ckpts = self.w, self.mbs, self.zeros, self.ckpts
        devices = nodes * self.itype.accelerators_per_node
        if devices % (tp * pp * cp):
            return None
        dp = devices // (tp * pp * cp)
        pins = w.layout
        if pins.data_parallel and dp != pins.data_parallel:
            return None
        top_zero, min_mb, last_ck = self.leanest
        if dp * min_mb > self.seqs:
            self.misses.note(Miss(f"a global batch of {self.seqs} sequences cannot feed {dp} data-parallel ranks "
                                  f"at {nodes} nodes (raise training.global_batch_tokens)", dp * min_mb / self.seqs))
            return _STOP
        # MoE: TP-only experts, or EP
        eps = self.dense_eps or ep_options(self.arch, w.training.method, dp, pins.expert_parallel, tp)
        if not eps:
            self.misses.note(Miss(ep_pin_miss(self.arch, pins.expert_parallel, tp, dp)))
            return None
        _, lean = self.memory(tp, pp, dp, top_zero, min_mb, last_ck, max(eps), 1, cp)
        if lean.total > self.fit_usable:
            # a miss is only reported when nothing fits (then best stays None), and only the nearest is
            # worded (Miss.nearer's order; memory_miss's shortfall is required ÷ usable, at stage 1)
            if self.best is None and self.misses.nearer_than_worded(1, lean.total * self.grow / self.usable):
                self.misses.note(memory_miss(self.itype, self.accel, self.usable, lean.total * self.grow,
                                        f"at {nodes} node(s), TP {tp} × PP {pp} × DP {dp}{cp_text(cp)}{ep_text(max(eps))}, "
                                        f"ZeRO-{top_zero}, micro-batch {min_mb}, {last_ck} recompute"
                                        f"{self.fit_edge}"))
            return None
        fit_key = (tp, pp, dp, ckpts, zeros, mbs, eps, cp)
        if fit_key not in self.fits and self.late_at_ceiling(tp, pp, dp, cp):
            # Late whatever its fastest layout: pricing that layout could only word a miss (price_run), so it is
            # not even found. Once a best exists nobody reads the miss; before, finding the layout waits until
            # the miss is read, and then only if it could be the nearest (NearestMiss).
            if self.best is None:
                self.misses.defer(lambda: self._late_miss(tp, pp, dp, nodes, cp, fit_key, eps),
                                  self.late_floor(nodes, self.ceiling(tp, pp, dp, cp)))
            return None
        found = self._fit(tp, pp, dp, cp, fit_key, eps)
        return None if found is None else self.price_run(tp, pp, dp, nodes, *found, cp=cp)

    def _fit(self, tp: int, pp: int, dp: int, cp: int, fit_key: tuple, eps: tuple[int, ...]):
        if (found := self.fits.get(fit_key, _UNSEEN)) is _UNSEEN:
            found = self.fits[fit_key] = _fastest_fit(self.arch, self.itype, self.accel, self.w, self.setup, self.work,
                                                      self.fit_usable, tp, pp, dp, self.seqs, self.ckpts, self.zeros,
                                                      self.mbs, self.memory, eps, self.step_memo, cp)
        return found

    def ceiling(self, tp: int, pp: int, dp: int, cp: int) -> float:
        """The largest tokens/s of any layout of these degrees (step_floor.degrees_ceiling), kept with the step memo."""
        key = ("ceiling", tp, pp, dp, cp, self.seqs, self.mbs, self.ckpts)  # physics only
        if (ceiling := self.step_memo.get(key)) is None:
            ceiling = self.step_memo[key] = degrees_ceiling(
                self.arch, self.itype, self.accel, self.w.precision, self.setup.seq, self.work, tp, pp, dp, self.seqs,
                self.mbs, self.ckpts, self.step_memo, cp)
        return ceiling

    def late_at_ceiling(self, tp: int, pp: int, dp: int, cp: int) -> bool:
        """Whether even the fastest any layout of these degrees can train (step_floor.degrees_ceiling) is late."""
        return self.late(self.ceiling(tp, pp, dp, cp))

    def late(self, tokens_per_s: float) -> bool:
        """Whether a run at most this fast misses the deadline at the slow edge (every quote takes at least
        tokens ÷ tokens/s: run_quotes adds the launch, spot its losses); no speed at all (no micro-batch
        feeds the ranks: a ceiling of 0) is late too."""
        t = self.w.training
        return bool(t.deadline_hours) and (not tokens_per_s or t.tokens / tokens_per_s * self.slow > t.deadline_hours * 3600)

    def late_floor(self, nodes: int, tokens_per_s: float) -> tuple[int, float]:
        """A floor under the (−stage, shortfall) of the miss a late run at most this fast words: late by at least
        tokens ÷ tokens/s where its storage streams from S3 at this rate (so at any lower one) and cannot be
        refused (a run with no quote at all words ∞), else 0."""
        t = self.w.training
        if not tokens_per_s or not self.prices.never_refused(nodes, tokens_per_s):
            return -2, 0.0
        return -2, t.tokens / tokens_per_s * self.slow / (t.deadline_hours * 3600)

    def _late_miss(self, tp: int, pp: int, dp: int, nodes: int, cp: int, fit_key: tuple, eps) -> Miss | None:
        """The miss price_run words for these degrees' fastest layout (late at every option), or None when no
        layout of them fits."""
        found = self._fit(tp, pp, dp, cp, fit_key, eps)
        if found is None:
            return None
        _, mem, est = found
        offer = self.prices.offer(nodes, self.w.training.tokens / est.tokens_per_s, est.tokens_per_s,
                                  mem.weights + mem.gradients + mem.optimizer, self.itype.accelerators_per_node)
        return self._offer_miss(offer, nodes, tp, pp, dp, cp)

    def price_run(self, tp: int, pp: int, dp: int, nodes: int, layout: tuple, mem, est, cp: int = 1) -> bool | None:
        """The run at its cheapest option that meets the deadline, kept if it beats the best so far."""
        t, prices, slow = self.w.training, self.prices, self.slow
        time_to_train_s = t.tokens / est.tokens_per_s
        states_bytes = mem.weights + mem.gradients + mem.optimizer

        def priced():
            return prices.offer(nodes, time_to_train_s, est.tokens_per_s, states_bytes, self.itype.accelerators_per_node)

        if self.late(est.tokens_per_s):
            # late under every option, so pricing it could only word its miss: worded only if it is read (issue 29)
            if self.best is None:
                self.misses.defer(lambda: self._offer_miss(priced(), nodes, tp, pp, dp, cp),
                                  self.late_floor(nodes, est.tokens_per_s))
            return None
        verdict = None if self.best_usd is None or self.collect is not None else prices.verdict(
            nodes, time_to_train_s, est.tokens_per_s, self.best_usd, slow)
        if verdict is not None:  # what its pricing would conclude (it cannot be the best)
            return False if verdict == "worse" else None
        offered = priced()
        in_time = [q for q in offered.quotes if not t.deadline_hours or q.wall_s * slow <= t.deadline_hours * 3600]
        if offered.refusal or not in_time:
            self.misses.note(self._offer_miss(offered, nodes, tp, pp, dp, cp))
            return None
        quote, storage_h = in_time[0], offered.storage_usd_per_hour
        cand = Candidate(self.itype, self.accel, prices.book[quote.purchase], nodes, tp, pp, dp, 1, mem, self.usable, est,
                         nodes * quote.usd_per_instance_hour, quote.usd_per_run + storage_h * quote.wall_s / 3600,
                         storage_usd_per_hour=storage_h, zero=layout[0],
                         micro_batch=layout[1], microbatches=layout[2], checkpointing=layout[3],
                         pipeline_schedule=layout[5] if pp > 1 else None,
                         virtual_stages=layout[6] if pp > 1 and layout[5] == "interleaved" else None,
                         purchase=quote.purchase, wall_s=quote.wall_s, train_ep=layout[4], cp=cp)
        improved = self.best is None or cand.rank_key < self.best.rank_key
        if improved:
            self.best, self.best_usd = cand, cand.rank_key[0]
        if self.collect is not None:
            self.collect.append(cand)
        return improved

    def _offer_miss(self, offer, nodes: int, tp: int, pp: int, dp: int, cp: int) -> Miss:
        """Why a priced run cannot be bought in time: storage refused, no option quotes, or late under each."""
        t, slow = self.w.training, self.slow
        if offer.refusal or not offer.quotes:
            return Miss(offer.refusal or "; ".join(offer.reasons),
                        offer.refusal_shortfall if offer.refusal else math.inf, stage=2)
        fastest = min(offer.quotes, key=lambda q: q.wall_s)
        return Miss(f"{fastest.wall_s * slow / 3600:,.0f} h to train{self.edge} > deadline {t.deadline_hours:g} h at "
                    f"{nodes} node(s), TP {tp} × PP {pp} × DP {dp}{cp_text(cp)}"
                    + (f" ({fastest.purchase})" if len(self.prices.book) > 1 or fastest.purchase != "on-demand" else ""),
                    fastest.wall_s * slow / (t.deadline_hours * 3600), stage=2)


def _fastest_fit(arch, itype, accel, w, setup, work, usable, tp, pp, dp, seqs, ckpts, zeros, mbs, memory, eps=(1,),
                 step_memo=None, cp=1):
    """For each EP degree, recompute mode and ZeRO stage, the largest micro-batch that fits (with a pipeline,
    every one that fits); the fastest of those."""
    best, step_memo = None, {} if step_memo is None else step_memo
    smallest = min(mbs)
    schedules = schedule_options(pp, arch.layers, not accel.is_neuron)  # the same for every layout below
    for ep, ck in ((ep, ck) for ep in eps for ck in ckpts):
        for zero in sorted(zeros, reverse=True):  # each lower stage holds more: stop at the first misfit
            _, lean = memory(tp, pp, dp, zero, smallest, ck, ep, 1, cp)
            if lean.total > usable:
                break  # the smallest micro-batch does not fit: no larger one, no lower stage will
            # Activations grow with the micro-batch (and at most so do the micro-batches in flight,
            # which only shrink as it grows): start from the largest that can fit by that bound.
            room = (usable - lean.total + lean.activations) / max(lean.activations, 1.0)
            for mb in mbs:
                if dp * mb > seqs or (mb > smallest and mb / smallest > room * pp):
                    continue
                m, mem = (0, lean) if mb == smallest else memory(tp, pp, dp, zero, mb, ck, ep, 1, cp)
                if mb == smallest:
                    m = math.ceil(seqs / (dp * mb))
                if mem.total > usable:
                    continue
                if best is not None and tokens_per_s_ceiling(arch, itype, accel, w.precision, setup.seq, work, tp, pp, dp,
                                                             mb, m, ck, step_memo, cp) < best[2].tokens_per_s:
                    if pp == 1:
                        break  # no schedule of it can be faster than the best (planner/search/step_floor.py)
                    continue  # a smaller micro-batch means more of them, a narrower bubble: its ceiling may be higher
                if best is not None and layout_tokens_per_s_ceiling(arch, itype, accel, w.precision, setup.seq, work, tp,
                                                                    pp, dp, mb, m, ck, zero, ep, step_memo, cp) \
                        < best[2].tokens_per_s:
                    if pp == 1:
                        break  # the same, with its data-parallel time
                    continue
                layout = parts = None  # the schedule-free part of the step, shared by every schedule below
                for schedule, v in schedules:
                    vm = memory_virtual_stages(schedule, v)
                    sched_mem = mem if vm == 1 else memory(tp, pp, dp, zero, mb, ck, ep, vm, cp)[1]
                    if sched_mem.total > usable:
                        continue
                    state = sched_mem.weights + sched_mem.gradients + sched_mem.optimizer
                    if parts is None:  # step_parts reads no schedule: one layout serves them all
                        layout = TrainingLayout(tp, pp, dp, zero, mb, m, ck, schedule, v, ep, cp)
                        parts = step_parts(arch, itype, accel, w.precision, setup.seq, layout, work, step_memo)
                    est = step_from_parts(parts, arch, setup.seq, layout, state, work, (schedule, v))
                    # equal speed (no data parallelism to shard over): the lower ZeRO stage, which is simpler
                    if best is None or (est.tokens_per_s, -zero) > (best[2].tokens_per_s, -best[0][0]):
                        best = ((zero, mb, m, ck, ep, schedule, v), sched_mem, est)
                if pp == 1:
                    break  # one stage: the largest micro-batch that fits runs the GEMMs best
                # a pipeline: fewer, larger micro-batches widen the bubble ((p − 1)/m, Narayanan et al. 2021
                # §2.2), so every micro-batch that fits is timed (Llama 3 405B at PP 16 × DP 128, issue 25)
    return best
