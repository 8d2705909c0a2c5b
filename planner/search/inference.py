"""Serving search for one instance type: TP × PP × replicas at the smallest node count that holds
the peak KV cache and meets the throughput and latency targets.

Rules kept (design.md): `concurrent_requests` is a ceiling on sequences in flight across the whole
deployment, shared by the replicas (never rounded up per replica); a SageMaker real-time endpoint
instance is one independent model copy, so a replica fits in one instance there (no PP across
instances) and an instance holds one replica (SageMaker starts one serving container per instance,
and TGI, LMI and TensorRT-LLM serve one model copy per container: the GPUs beyond the copy's TP
idle); PP across nodes is for EC2 only, on full nodes joined by an inter-node network."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from planner.physics import attention_dp
from planner.physics.bands import slow_edge, slow_factor
from planner.search.candidates import Candidate, Miss, memory_miss, pinned_tp_miss, tensor_parallel_options
from planner.hardware.catalog import Accelerator, InstanceType
from planner.search.kv_sizing import serving_kv_tokens
from planner.search.pricing import UnitPrice
from planner.physics.memory import inference_memory
from planner.physics.performance import ServingEstimate
from planner.physics.replica_serving import replica_estimate
from planner.workload.spec import Workload
from planner.physics.speculative import draft_memory_bytes, speculation_of

MAX_SERVING_PIPELINE = 8  # beyond 8 nodes per copy a serving replica spends more time in hops than work


def _first_true(lo: int, hi: int, ok) -> int | None:
    """Smallest n in [lo, hi] with ok(n), for a predicate that stays true once true."""
    if lo > hi or not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class Spread:
    """`concurrent` sequences over `replicas`: the first `busy` replicas carry one more."""
    replicas: int
    low: int
    busy: int

    @classmethod
    def of(cls, concurrent: int, replicas: int) -> "Spread":
        replicas = min(replicas, concurrent)  # a replica with no request adds nothing
        return cls(replicas, concurrent // replicas, concurrent % replicas)

    @property
    def peak(self) -> int:
        return self.low + (1 if self.busy else 0)

    @property
    def in_flight(self) -> int:
        return self.low * self.replicas + self.busy


def aggregate_tokens_per_s(spread: Spread, estimate_at, static_shapes: bool = False) -> float:
    """Every replica at its own batch: the busy ones at low+1, the rest at low. A Neuron model is
    compiled for one batch size (the peak), so every decode step runs that shape whatever the
    number of live sequences: a replica with fewer sequences gets the peak's step time."""
    if static_shapes:
        at_peak = estimate_at(spread.peak).output_tokens_per_s_per_replica
        return at_peak * spread.in_flight / spread.peak
    total = spread.busy * estimate_at(spread.peak).output_tokens_per_s_per_replica
    if spread.low:
        total += (spread.replicas - spread.busy) * estimate_at(spread.low).output_tokens_per_s_per_replica
    return total


def best_inference(w: Workload, itype: InstanceType, accel: Accelerator, price: UnitPrice,
                   target: str = "sagemaker", collect: list[Candidate] | None = None) -> Candidate | Miss:
    """The cheapest layout of this type; with `collect`, every feasible (TP, PP, nodes) is appended
    to it too, from the fewest nodes that meet the targets to one replica per request (the frontier)."""
    tps = _serving_rules(w, itype, accel, target)
    if isinstance(tps, Miss):
        return tps
    apn = itype.accelerators_per_node
    best: Candidate | None = None
    miss: Miss | None = None
    for tp in tps:
        spans_nodes = tp == apn and itype.multi_node and target == "ec2"
        for pp, ep in _spans(w, tp, apn, spans_nodes):
            if (pp > 1 or ep > 1) and not spans_nodes:
                continue  # a replica spans nodes only on EC2, with full nodes and a network between them
            shape_best: Candidate | None = None
            for dp_attention in _attention_modes(w, accel, tp, apn, pp):
                replica = _Replica(w, itype, accel, target, tp, pp, ep, dp_attention)
                found = replica.search()
                if isinstance(found, Miss):
                    miss = found.nearer(miss)
                    continue
                if found is None:
                    continue
                good, hi = found
                cand = replica.candidate_at(good * replica.step, price)
                if collect is not None:
                    collect.append(cand)
                    collect.extend(replica.candidate_at(u * replica.step, price) for u in range(good + 1, hi + 1))
                if shape_best is None or _dp_attention_wins(cand, shape_best):
                    shape_best = cand
            if shape_best is not None and (best is None or shape_best.rank_key < best.rank_key):
                best = shape_best
    if best is not None:
        return best
    return miss or Miss("no layout of this type fits the pins in layout:")


def _attention_modes(w: Workload, accel: Accelerator, tp: int, apn: int, pp: int) -> tuple[bool, ...]:
    """TP attention always; DP attention too (planner/physics/attention_dp.py) for an MLA MoE model on a
    replica of whole nodes without PP, where the engine runs it, with no TP pin or draft model."""
    if (attention_dp.applies(w.architecture) and tp == apn and pp == 1 and not accel.is_neuron
            and w.serving.engine in attention_dp.ATTENTION_DP_ENGINES and w.layout.tensor_parallel is None
            and speculation_of(w.serving) is None):
        return (False, True)
    return (False,)


def _dp_attention_wins(dp: Candidate, tp: Candidate) -> bool:
    """DP attention replaces TP attention of the same shape where it ranks first, or ties it (same price,
    nodes and hops) at a lower inter-token latency: at low concurrency TP stays where it is faster."""
    if dp.rank_key[:3] != tp.rank_key[:3]:
        return dp.rank_key < tp.rank_key
    return dp.perf.inter_token_latency_s < tp.perf.inter_token_latency_s


def _serving_rules(w: Workload, itype: InstanceType, accel: Accelerator, target: str) -> list[int] | Miss:
    """The TP degrees to try on this type, or the pin that rules it out whatever the layout."""
    arch, s, pins = w.architecture, w.serving, w.layout
    apn = itype.accelerators_per_node
    tps = tensor_parallel_options(apn, arch.attention_heads, pins.tensor_parallel, accel.is_neuron)
    if not tps:
        return Miss(pinned_tp_miss(pins.tensor_parallel, apn, arch.attention_heads)
                    if pins.tensor_parallel else f"no TP degree divides both {apn} devices and "
                    f"{arch.attention_heads} attention heads")
    if pins.replicas and pins.replicas > s.concurrent_requests:
        return Miss(f"layout.replicas {pins.replicas} exceeds concurrent_requests {s.concurrent_requests}: "
                    "a replica with no request in flight serves nothing", by_request=True)
    if pins.pipeline_parallel and pins.pipeline_parallel > 1 and target == "sagemaker":
        return Miss("a SageMaker endpoint instance is one model copy: pipeline_parallel > 1 would span "
                    "instances (use deploy_target ec2)", by_request=True)
    return tps


class _Replica:
    """One replica shape (TP × PP × EP) on one type: how many replicas a node count holds, their memory
    and speed at the spread of requests, and the smallest node count that fits and meets the targets."""

    def __init__(self, w: Workload, itype: InstanceType, accel: Accelerator, target: str, tp: int, pp: int, ep: int,
                 attention_dp: bool = False):
        self.w, self.itype, self.accel, self.tp, self.pp, self.ep = w, itype, accel, tp, pp, ep
        self.attention_ranks = tp * ep if attention_dp else 1  # planner/physics/attention_dp.py
        self.neuron = accel.is_neuron
        self.usable = accel.memory_bytes * (1 - w.constraints.memory_headroom)
        self.step = pp * ep  # nodes come in whole replicas once a replica spans nodes
        self.per_node = (1 if target == "sagemaker" else itype.accelerators_per_node // tp) if self.step == 1 else 0
        self.speculation = speculation_of(w.serving)
        self.estimates: dict[int, ServingEstimate] = {}

    def capacity(self, n: int) -> int:
        return n * self.per_node if self.step == 1 else n // self.step

    def spread_at(self, n: int) -> Spread:
        return Spread.of(self.w.serving.concurrent_requests, min(self.w.layout.replicas or self.capacity(n),
                                                                 self.capacity(n)))

    def estimate(self, batch: int) -> ServingEstimate:
        if batch not in self.estimates:
            w, s = self.w, self.w.serving
            # Neuron: the graphs optimum-neuron's NxD backend compiles for this batch at n_positions =
            # max_context_tokens, the image plans deploy (planner/physics/replica_serving.py)
            self.estimates[batch] = replica_estimate(w.architecture, self.accel, w.precision, s.kv_cache_precision,
                                                     self.tp, self.pp, batch, s.prompt_tokens, s.output_tokens,
                                                     self.itype, s.prefix_hit_share, self.ep, self.speculation,
                                                     s.max_context_tokens, attention_dp=self.attention_ranks > 1,
                                                     optimum_nxd=True)
        return self.estimates[batch]

    def memory_at(self, n: int):
        w, s = self.w, self.w.serving
        peak = self.spread_at(n).peak
        kv_tokens = serving_kv_tokens(s, self.neuron, peak)  # serving.kv_sizing (planner/search/kv_sizing.py)
        if self.attention_ranks > 1:
            return attention_dp.inference_memory(w.architecture, w.precision, s.kv_cache_precision,
                                                 self.attention_ranks, peak, kv_tokens)
        base = inference_memory(w.architecture, w.precision, s.kv_cache_precision, self.tp, self.pp, peak, kv_tokens,
                                self.neuron, self.ep)
        draft_weights, draft_kv = draft_memory_bytes(self.speculation, w.precision, s.kv_cache_precision, self.tp,
                                                     peak, kv_tokens)
        return replace(base, weights=base.weights + draft_weights, kv_cache=base.kv_cache + draft_kv)

    def fits_one_sequence(self) -> bool:
        """More nodes help memory only if a replica holding one sequence fits."""
        w, s = self.w, self.w.serving
        if self.attention_ranks > 1:
            return attention_dp.inference_memory(w.architecture, w.precision, s.kv_cache_precision,
                                                 self.attention_ranks, 1, s.max_context_tokens).total <= self.usable
        return inference_memory(w.architecture, w.precision, s.kv_cache_precision, self.tp, self.pp, 1,
                                s.max_context_tokens, self.neuron, self.ep).total <= self.usable

    def targets_met(self, n: int) -> bool:
        s = self.w.serving
        spread = self.spread_at(n)
        e = self.estimate(spread.peak)  # the busiest replica sets the latencies
        w, neuron = self.w, self.neuron
        return ((s.target_output_tokens_per_s is None or aggregate_tokens_per_s(spread, self.estimate, neuron)
                 / _slow_throughput_factor(w, neuron) >= s.target_output_tokens_per_s)
                and (s.max_time_to_first_token_ms is None
                     or _slow_latency_s(w, neuron, "TTFT", e.time_to_first_token_s) * 1e3
                     <= s.max_time_to_first_token_ms)
                and (s.max_inter_token_latency_ms is None
                     or _slow_latency_s(w, neuron, "ITL", e.inter_token_latency_s) * 1e3
                     <= s.max_inter_token_latency_ms))

    def units_for(self, replicas: int) -> int:
        """Nodes (in units of `step`) that hold this many replicas."""
        return math.ceil(replicas / self.per_node) if self.step == 1 else replicas

    def search(self) -> tuple[int, int] | Miss | None:
        """(fewest units that fit and meet the targets, most units worth trying), or why none does; None
        when the pinned nodes do not come in whole replicas of this shape. Units are `step` nodes, up to
        the point where every request has its own replica."""
        s, c, pins, step, tp, pp = self.w.serving, self.w.constraints, self.w.layout, self.step, self.tp, self.pp
        if pins.nodes is not None:
            if pins.nodes % step:
                return None
            lo = hi = pins.nodes // step
            if pins.replicas and pins.replicas > self.capacity(pins.nodes):
                return Miss(f"layout.replicas {pins.replicas} do not fit {pins.nodes} node(s) at TP {tp} × PP {pp} "
                            f"({self.capacity(pins.nodes)} replica(s) at most)", stage=0)
        elif pins.replicas is not None:
            lo = hi = self.units_for(pins.replicas)
        else:
            lo, hi = 1, min(self.units_for(s.concurrent_requests), c.max_nodes // step)
        capped = pins.nodes is None and pins.replicas is None and self.units_for(s.concurrent_requests) > hi
        cap = f" at {node_cap_note(c.max_nodes)}" if capped else ""
        if hi < lo or hi * step > c.max_nodes:
            nodes = max(hi, lo) * step
            return Miss(f"needs {nodes} nodes at TP {tp} × PP {pp}, over {node_cap_note(c.max_nodes)}",
                        nodes / c.max_nodes)
        fit = _first_true(lo, hi, lambda u: self.memory_at(u * step).total <= self.usable)
        if fit is None:
            peak = self.spread_at(hi * step).peak
            return memory_miss(self.itype, self.accel, self.usable, self.memory_at(hi * step).total,
                               f"at TP {tp} × PP {pp} with {peak} sequences of "
                               f"{serving_kv_tokens(s, self.neuron, peak)} tokens per replica"
                               f"{cap if self.fits_one_sequence() else ''}")
        good = _first_true(fit, hi, lambda u: self.targets_met(u * step))
        if good is None:
            spread = self.spread_at(hi * step)
            short = _target_miss(self.w, self.estimate(spread.peak),
                                 aggregate_tokens_per_s(spread, self.estimate, self.neuron), hi * step, tp, pp,
                                 self.neuron)
            return replace(short, reason=short.reason + cap)
        return good, hi

    def candidate_at(self, nodes: int, price: UnitPrice) -> Candidate:
        spread = self.spread_at(nodes)
        usd_per_hour = nodes * price.usd_per_hour
        return Candidate(self.itype, self.accel, price, nodes, self.tp, self.pp, 1, spread.replicas,
                         self.memory_at(nodes), self.usable, self.estimate(spread.peak), usd_per_hour, usd_per_hour,
                         batch_per_replica=spread.peak,
                         output_tokens_per_s=aggregate_tokens_per_s(spread, self.estimate, self.neuron),
                         sequences_in_flight=spread.in_flight, purchase=price.purchase, ep=self.ep,
                         attention_dp=self.attention_ranks)


def node_cap_note(max_nodes: int) -> str:
    """The node cap a miss ran into, and how to lift it (spec.py: max_nodes allows up to 4096)."""
    return f"constraints.max_nodes {max_nodes} (the node cap; raise constraints.max_nodes, up to 4096)"


def _spans(w: Workload, tp: int, apn: int, spans_nodes: bool) -> list[tuple[int, int]]:
    """(pipeline stages, expert-parallel nodes) a replica may span: PP across nodes for a dense model,
    EP across nodes for an MoE model (planner/physics/expert_parallel.py), PP there only when pinned. Both
    cost the same nodes, but PP's stages take turns on every decode step while EP's nodes work at once
    (DeepSeek-R1 FP8 on 2 × p5.48xlarge at 64 sequences: ITL 38 ms at EP 16, 47 ms at PP 2), and
    DeepSeek-V3's own deployment and SGLang's spread MoE models across nodes by EP."""
    pins = w.layout
    if pins.expert_parallel:
        ep = pins.expert_parallel // tp if pins.expert_parallel % tp == 0 else 0
        return [(1, ep)] if ep == 1 or (ep > 1 and pins.expert_parallel % apn == 0 and tp == apn) else []
    if pins.pipeline_parallel:
        return [(pins.pipeline_parallel, 1)]
    if not spans_nodes:
        return [(1, 1)]
    if w.architecture.is_moe:
        return [(1, ep) for ep in range(1, MAX_SERVING_PIPELINE + 1)]
    return [(pp, 1) for pp in range(1, MAX_SERVING_PIPELINE + 1)]


def _slow_throughput_factor(w: Workload, neuron: bool) -> float:
    """The throughput band's slow edge over the estimate (1 under confidence: expected)."""
    return slow_factor("neuron" if neuron else "gpu", "serving tokens/s", w.constraints.confidence,
                       moe=w.architecture.is_moe)


def _slow_latency_s(w: Workload, neuron: bool, metric: str, value_s: float) -> float:
    """A latency (TTFT or ITL) at its band's slow edge, a class's request-path offset included (bands.slow_edge)."""
    return slow_edge("neuron" if neuron else "gpu", metric, w.constraints.confidence, value_s,
                     moe=w.architecture.is_moe)


def _target_miss(w: Workload, e: ServingEstimate, aggregate: float, nodes: int, tp: int, pp: int,
                 neuron: bool = False) -> Miss:
    s = w.serving
    edge = " (likely: the 80% band's slow edge)" if w.constraints.confidence == "likely" else ""
    at = f"at {nodes} node(s), TP {tp} × PP {pp}{edge}"
    got = _slow_latency_s(w, neuron, "TTFT", e.time_to_first_token_s) * 1e3
    if s.max_time_to_first_token_ms and got > s.max_time_to_first_token_ms:
        return Miss(f"time to first token {got:.0f} ms > target {s.max_time_to_first_token_ms:g} ms {at}",
                    got / s.max_time_to_first_token_ms, stage=2)
    got = _slow_latency_s(w, neuron, "ITL", e.inter_token_latency_s) * 1e3
    if s.max_inter_token_latency_ms and got > s.max_inter_token_latency_ms:
        return Miss(f"inter-token latency {got:.1f} ms > target {s.max_inter_token_latency_ms:g} ms {at}",
                    got / s.max_inter_token_latency_ms, stage=2)
    aggregate /= _slow_throughput_factor(w, neuron)
    return Miss(f"{aggregate:,.0f} output tokens/s < target {s.target_output_tokens_per_s:,.0f} {at} "
                f"with {s.concurrent_requests} requests in flight", s.target_output_tokens_per_s / aggregate, stage=2)
