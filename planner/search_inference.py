"""Serving search for one instance type: TP × PP × replicas at the smallest node count that holds
the peak KV cache and meets the throughput and latency targets."""

from __future__ import annotations

import math

from planner.candidates import Candidate, Miss, memory_miss, tensor_parallel_options
from planner.catalog import Accelerator, InstanceType
from planner.cost import HourlyPrice
from planner.memory import inference_memory
from planner.performance import serving_estimate
from planner.spec import Workload

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


def best_inference(w: Workload, itype: InstanceType, accel: Accelerator, price: HourlyPrice) -> Candidate | Miss:
    arch, s, c, pins = w.architecture, w.serving, w.constraints, w.layout
    apn = itype.accelerators_per_node
    usable = accel.memory_bytes * (1 - c.memory_headroom)
    best: Candidate | None = None
    miss: Miss | None = None
    tps = tensor_parallel_options(apn, arch.attention_heads, pins.tensor_parallel)
    if not tps:
        return Miss(f"tensor_parallel {pins.tensor_parallel} exceeds the {apn} accelerators per node"
                    if pins.tensor_parallel else f"no TP degree divides both {apn} devices and "
                    f"{arch.attention_heads} attention heads")
    for tp in tps:
        pps = [pins.pipeline_parallel] if pins.pipeline_parallel else \
            ([1] if tp < apn else range(1, MAX_SERVING_PIPELINE + 1))
        for pp in pps:
            if pp > 1 and (tp < apn or not itype.efa):
                continue  # a replica spans nodes only with full nodes and EFA between them
            step = pp  # nodes come in whole replicas once a replica spans nodes
            per_node = apn // tp if pp == 1 else 0

            def replicas_at(n: int) -> int:
                return n * per_node if pp == 1 else n // pp

            def batch_at(n: int) -> int:
                return math.ceil(s.concurrent_requests / pins.replicas) if pins.replicas else \
                    math.ceil(s.concurrent_requests / replicas_at(n))

            def memory_at(n: int):
                return inference_memory(arch, w.precision, s.kv_cache_precision, tp, pp, batch_at(n), s.max_context_tokens)

            def estimate_at(n: int):
                return serving_estimate(arch, accel, w.precision, s.kv_cache_precision, tp, pp, batch_at(n),
                                        s.prompt_tokens, s.output_tokens)

            def targets_met(n: int) -> bool:
                e = estimate_at(n)
                replicas = pins.replicas or replicas_at(n)
                return ((s.target_output_tokens_per_s is None or e.output_tokens_per_s_per_replica * replicas >= s.target_output_tokens_per_s)
                        and (s.max_time_to_first_token_ms is None or e.time_to_first_token_s * 1e3 <= s.max_time_to_first_token_ms)
                        and (s.max_inter_token_latency_ms is None or e.inter_token_latency_s * 1e3 <= s.max_inter_token_latency_ms))

            # Search in units of `step` nodes, up to the point where every request has its own replica.
            def units_for(replicas: int) -> int:
                return math.ceil(replicas / per_node) if pp == 1 else replicas

            if pins.nodes is not None:
                if pins.nodes % step:
                    continue
                lo = hi = pins.nodes // step
            elif pins.replicas is not None:
                lo = hi = units_for(pins.replicas)
            else:
                lo, hi = 1, min(units_for(s.concurrent_requests), c.max_nodes // step)
            if hi < lo or hi * step > c.max_nodes:
                nodes = max(hi, lo) * step
                miss = Miss(f"needs {nodes} nodes at TP {tp} × PP {pp}, over max_nodes {c.max_nodes}",
                            nodes / c.max_nodes).nearer(miss)
                continue
            fit = _first_true(lo, hi, lambda u: memory_at(u * step).total <= usable)
            if fit is None:
                need = memory_at(hi * step).total
                miss = memory_miss(itype, accel, usable, need, f"at TP {tp} × PP {pp} with {batch_at(hi * step)} "
                                   f"sequences of {s.max_context_tokens} tokens per replica").nearer(miss)
                continue
            good = _first_true(fit, hi, lambda u: targets_met(u * step))
            if good is None:
                miss = _target_miss(w, estimate_at(hi * step), pins.replicas or replicas_at(hi * step), hi * step,
                                    tp, pp).nearer(miss)
                continue
            nodes = good * step
            replicas = pins.replicas or replicas_at(nodes)
            estimate, memory = estimate_at(nodes), memory_at(nodes)
            usd_per_hour = nodes * price.usd_per_hour
            cand = Candidate(itype, accel, price, nodes, tp, pp, 1, replicas, memory, usable, estimate,
                             usd_per_hour, usd_per_hour - 1e-9 * estimate.output_tokens_per_s_per_replica * replicas,
                             batch_per_replica=batch_at(nodes))
            if best is None or cand.objective < best.objective:
                best = cand
    if best is not None:
        return best
    return miss or Miss("no layout of this type fits the pins in layout:")


def _target_miss(w: Workload, e, replicas: int, nodes: int, tp: int, pp: int) -> Miss:
    s = w.serving
    at = f"at {nodes} node(s), TP {tp} × PP {pp}"
    if s.max_time_to_first_token_ms and e.time_to_first_token_s * 1e3 > s.max_time_to_first_token_ms:
        got = e.time_to_first_token_s * 1e3
        return Miss(f"time to first token {got:.0f} ms > target {s.max_time_to_first_token_ms:g} ms {at}",
                    got / s.max_time_to_first_token_ms, stage=2)
    if s.max_inter_token_latency_ms and e.inter_token_latency_s * 1e3 > s.max_inter_token_latency_ms:
        got = e.inter_token_latency_s * 1e3
        return Miss(f"inter-token latency {got:.1f} ms > target {s.max_inter_token_latency_ms:g} ms {at}",
                    got / s.max_inter_token_latency_ms, stage=2)
    got = e.output_tokens_per_s_per_replica * replicas
    return Miss(f"{got:,.0f} output tokens/s < target {s.target_output_tokens_per_s:,.0f} {at}",
                s.target_output_tokens_per_s / got, stage=2)
