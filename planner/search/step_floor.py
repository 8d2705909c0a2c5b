"""A ceiling on the tokens/s of a training layout from the cheap parts of its step (issue 29): the search's
fastest-fit loop skips timing a layout whose ceiling is below the fastest it has already timed, which
spares the data-parallel collectives (the dearest part of a step) and changes no answer.

Why it is a ceiling, for a layout of TP tp, PP pp, DP dp, micro-batch b, recompute mode and m micro-batches
(tokens per step = m·b·dp·s, devices = tp·pp·dp·cp, CP the context-parallel degree):
  1. Its step is compute·(1 + bubble) + tp_s + (PP, DP, EP, CP and optimizer time, each ≥ 0)
     (planner/physics/training_time.py step_from_parts), and compute and tp_s are at least
     tokens/devices × the per-token figures c and t of device_s_per_token_floor for its (tp, pp, b, recompute, cp).
  2. bubble = bubble_fraction(schedule, pp, m, v) ≥ the least of any schedule the search tries at that m.
So tokens/s = tokens/step ≤ devices / (c·(1 + bubble_min) + t), whatever its ZeRO stage, EP or schedule.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Iterator

from planner.physics.pipeline_schedule import bubble_fraction, schedule_options
from planner.physics import efficiency
from planner.physics.training_time import device_s_per_token_floor, dp_traffic_memo, exposed_dp_s

# The ceiling is compared with figures summed in another order: it is raised by this share, far above
# float rounding, so it is never below a figure it is a ceiling of.
ROUNDING_MARGIN = 1e-9


@lru_cache(maxsize=1 << 16)  # (depth, layers, micro-batches): a few thousand per file of workloads
def bubble_floor(pp: int, layers: int, zero_bubble: bool, microbatches: int) -> float:
    """The least pipeline bubble of any schedule the search tries at this depth and micro-batch count."""
    return min(bubble_fraction(schedule, pp, microbatches, v) for schedule, v in schedule_options(pp, layers, zero_bubble))


def _floor(arch, itype, accel, precision: str, seq: int, work, tp: int, pp: int, micro_batch: int, checkpointing: str,
           memo: dict, cp: int) -> tuple[float, float]:
    """device_s_per_token_floor, kept in step_parts' per-type memo (it reads no DP)."""
    key = ("floor", tp, pp, micro_batch, checkpointing, cp)
    if (floor := memo.get(key)) is None:
        floor = memo[key] = device_s_per_token_floor(arch, itype, accel, precision, seq, work, tp, pp, micro_batch,
                                                     checkpointing, memo, cp)
    return floor


def tokens_per_s_ceiling(arch, itype, accel, precision: str, seq: int, work, tp: int, pp: int, dp: int,
                         micro_batch: int, microbatches: int, checkpointing: str, memo: dict, cp: int = 1) -> float:
    """No layout of these degrees, micro-batch and recompute mode trains faster than this (the module's proof)."""
    compute, tp_part = _floor(arch, itype, accel, precision, seq, work, tp, pp, micro_batch, checkpointing, memo, cp)
    bubble = bubble_floor(pp, arch.layers, not accel.is_neuron, microbatches)
    return tp * pp * dp * cp / (compute * (1 + bubble) + tp_part) * (1 + ROUNDING_MARGIN)



def layout_tokens_per_s_ceiling(arch, itype, accel, precision: str, seq: int, work, tp: int, pp: int, dp: int,
                                micro_batch: int, microbatches: int, checkpointing: str, zero: int, ep: int,
                                memo: dict, cp: int = 1) -> float:
    """tokens_per_s_ceiling with the exposed data-parallel time, once the ZeRO stage and EP degree are known.

    Why it is a ceiling: the step is c·(1 + bubble) + tp_s + exposed(c) + (PP, EP, CP, optimizer ≥ 0) where c is
    the layout's compute_s ≥ c0 = tokens/devices × the compute floor, and exposed(c) is the data-parallel
    time step_parts charges (training_time.exposed_dp_s: m·max(0, a − k·c/m) + max(0, q − k·c·2/(3m)) with the
    same collectives a, q and overlap k). g(c) = c·(1 + bubble_min) + exposed(c) is convex and piecewise linear
    in c (a sum of a line and two hinges), so its least value over c ≥ c0 is at c0 or at a hinge above c0;
    the step is at least that plus tp_s, whatever the schedule."""
    compute, tp_part = _floor(arch, itype, accel, precision, seq, work, tp, pp, micro_batch, checkpointing, memo, cp)
    devices, tokens = tp * pp * dp * cp, microbatches * micro_batch * dp * seq
    per_device = tokens / devices
    bubble = bubble_floor(pp, arch.layers, not accel.is_neuron, microbatches)
    c0 = per_device * compute
    if dp * cp > 1:
        traffic = dp_traffic_memo(work, itype, accel, tp, pp, dp * cp, zero, ep, arch, memo)
        overlap = efficiency.comm_overlap(accel)
        hinges = (microbatches * traffic[0] / overlap, 1.5 * microbatches * traffic[1] / overlap) if overlap > 0 else ()
        least = min(c * (1 + bubble) + exposed_dp_s(traffic, c, microbatches, overlap) for c in (c0, *hinges) if c >= c0)
    else:
        least = c0 * (1 + bubble)
    return tokens / (least + per_device * tp_part) * (1 + ROUNDING_MARGIN)


def degrees_ceilings(arch, itype, accel, precision: str, seq: int, work, tp: int, pp: int, dp: int, seqs: int,
                     micro_batches: tuple[int, ...], checkpointings: tuple[str, ...], memo: dict,
                     cp: int = 1) -> Iterator[float]:
    """tokens_per_s_ceiling of each micro-batch that feeds dp ranks (dp·b ≤ the global batch's sequences,
    m = ⌈sequences / (dp·b)⌉ as the search counts them) and each recompute mode, in the search's order:
    no layout of these (TP, PP, DP) trains faster than the largest of them. Lazily: a caller that only
    asks whether any is above a figure stops at the first."""
    zero_bubble, devices = not accel.is_neuron, tp * pp * dp * cp
    for mb in micro_batches:
        if dp * mb > seqs:
            continue
        bubble = bubble_floor(pp, arch.layers, zero_bubble, math.ceil(seqs / (dp * mb)))
        for ck in checkpointings:
            compute, tp_part = _floor(arch, itype, accel, precision, seq, work, tp, pp, mb, ck, memo, cp)
            yield devices / (compute * (1 + bubble) + tp_part) * (1 + ROUNDING_MARGIN)


# Recompute modes by the work they add: none reruns nothing; selective reruns the attention core; full the
# whole forward with two more TP all-reduces (training_time.recompute_flops_per_token, step_parts).
RECOMPUTE_RANK = {"none": 0, "op": 0, "selective": 1, "full": 2}  # op: per-operator saves, reruns nothing


def degrees_ceiling(arch, itype, accel, precision: str, seq: int, work, tp: int, pp: int, dp: int, seqs: int,
                    micro_batches: tuple[int, ...], checkpointings: tuple[str, ...], memo: dict, cp: int = 1) -> float:
    """The largest of degrees_ceilings; 0 when no micro-batch feeds the data-parallel ranks. At one micro-batch
    a mode that recomputes more has no higher ceiling (its compute and TP floors are sums of the same terms
    and more), so only the modes that recompute least are asked."""
    least = min(RECOMPUTE_RANK[ck] for ck in checkpointings)
    cheapest = tuple(ck for ck in checkpointings if RECOMPUTE_RANK[ck] == least)
    return max(degrees_ceilings(arch, itype, accel, precision, seq, work, tp, pp, dp, seqs, micro_batches, cheapest,
                                memo, cp), default=0.0)
