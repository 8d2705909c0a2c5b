"""How long a new prompt waits behind the other clients' prefills when `clients` clients each keep one
request in flight (a closed loop: a client sends its next request when its last one ends).

A benchmark at fixed concurrency, and a replica serving `batch` interactive users, is a closed
queueing network, not an open one: at most clients − 1 prompts can be ahead of a new one, and a client
whose prompt is waiting sends no other. Its prefills form one FCFS station (the replica prefills one
prompt at a time; chunked prefill interleaves the chunks with decode steps, but the prompts still
finish in arrival order: Agrawal et al., Sarathi-Serve, OSDI 2024, §4) and the rest of each request
(its decode steps, the request overhead) is a delay station every client passes through at its own
pace. That is the machine-repairman model, solved exactly by mean-value analysis (Reiser and
Lavenberg, "Mean-value analysis of closed multichain queuing networks", JACM 27(2), 1980):

    R(k) = S · (1 + Q(k − 1)),   X(k) = k ÷ (R(k) + Z),   Q(k) = X(k) · R(k),   Q(0) = 0

for k = 1 … clients, with S the prefill's service time and Z the rest of the request (the think
time). The wait is R(clients) − S. MVA is exact for exponential service; with identical prompts the
service is deterministic, and MVA's wait is then an upper estimate while the clients' arrivals are spread, within
the queue's physical bound (clients − 1 prefills); clients that arrive together every round wait longer (convoy,
below: the benchmark rows that show it, not a replica the planner deploys, whose engine chunks its prefills).
It replaces Kingman's open-queue formula (ρ/(1 − ρ) · c_a²/2 · S), which assumed Poisson arrivals from
infinitely many clients and grew without bound as ρ → 1: NIM's 5,000-token Llama-3.1-70B rows at 5-50 users sat
15-21% fast under it.
No constant is fitted.
"""

from __future__ import annotations

from typing import Callable

from planner.physics.kv_capacity import StaticBatch


def prefill_wait_s(clients: int, prefill_s: float, think_s: float) -> float:
    """Mean seconds a new prompt queues before its prefill starts (mean-value analysis above)."""
    if clients <= 1 or prefill_s <= 0:
        return 0.0
    queue = response = 0.0
    for k in range(1, clients + 1):
        response = prefill_s * (1 + queue)
        queue = k * response / (response + max(think_s, 0.0))
    return response - prefill_s


def slot_wait_s(clients: int, slots: int, request_s: float) -> float:
    """Mean seconds a request waits for a KV slot when `clients` closed-loop clients share `slots`
    resident sequences (the engine's KV pool; planner/physics/kv_capacity.resident_sequences). With every
    slot busy the replica completes slots ÷ request_s requests a second, and Little's law over a client's
    cycle (wait + request_s) gives clients = slots ÷ request_s · (wait + request_s)."""
    if clients <= slots or slots <= 0:
        return 0.0
    return request_s * (clients / slots - 1)


def convoy(clients: int, prompts_per_prefill: int, output_tokens: int, prefill_s: Callable[[int], float],
           step_s: float, overhead_s: float = 0.0) -> StaticBatch:
    """A closed loop whose clients' requests arrive together every round, on an engine that runs every waiting
    prefill before any decode step (vLLM's V0 scheduler without chunked prefill, `_schedule_default`: "Don't
    schedule decodes if prefills are scheduled", vllm-project/vllm vllm/core/scheduler.py @0054e1fa). The round's
    prompts are prefilled `prompts_per_prefill` at a time (as many as the prefill token budget holds), one group
    after another, while every decode waits; the clients then decode output_tokens − 1 steps together (`step_s`
    each, all of them resident) and, with equal output lengths, finish in the same step and send their next
    requests together: the convoy re-forms every round. The j-th group's first token comes after j group
    prefills (`prefill_s(k)`: a group of k prompts) after the request's fixed cost (`overhead_s`, every client's
    at once), so a new prompt waits (groups − 1) ÷ 2 prefills on average: the deterministic bound that mean-value
    analysis (prefill_wait_s) stays under, since it takes the clients' arrivals to be spread. The round is one wave of
    kv_capacity.static_batch's kind whose first tokens come group by group. No constant."""
    group = max(1, min(prompts_per_prefill, clients))
    sizes = [group] * (clients // group) + ([clients % group] if clients % group else [])
    elapsed, first_sum = overhead_s, 0.0
    for k in sizes:
        elapsed += prefill_s(k)
        first_sum += k * elapsed
    round_s = elapsed + (output_tokens - 1) * step_s
    mean_first = first_sum / clients
    return StaticBatch(clients * output_tokens / round_s, mean_first,
                       (round_s - mean_first) / (output_tokens - 1) if output_tokens > 1 else 0.0, waves=1)
