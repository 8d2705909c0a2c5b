"""Pipeline schedules: a layout choice, each with its own bubble, activation memory and p2p traffic.

- 1F1B (PipeDream-Flush; Narayanan et al. 2021, §2.2.1): bubble (p−1)/m of the ideal step; the first
  stage keeps p micro-batches of its layers in flight.
- Interleaved 1F1B with v model chunks per device (Narayanan et al. 2021, §2.2.2): bubble (p−1)/(v·m);
  every micro-batch crosses v times as many stage boundaries (p2p ×v), and the first stage holds
  (1 + (p−1)/(p·v)) times 1F1B's activations (Korthikanti et al. 2022, §4.2.3). Megatron needs the
  layers of a stage to split evenly into the v chunks.
- ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", §3): the backward split into input- and
  weight-gradient passes fills the bubble to about a third of 1F1B's, (p−1)/(3m), at 1F1B's peak
  activation memory.
"""

from __future__ import annotations

SCHEDULES = ("1f1b", "interleaved", "zb-h1")
# ZB-H1 leaves about a third of 1F1B's bubble (Qi et al. 2023, §3.1: "reduces the bubble to 1/3").
ZB_H1_BUBBLE_SHARE = 1 / 3
# Largest number of model chunks per device the search tries (Megatron's published configurations go
# to 12 for GPT-3 175B at PP 8: one layer per chunk).
MAX_VIRTUAL_STAGES = 12


def bubble_fraction(schedule: str, pp: int, microbatches: int, virtual_stages: int = 1) -> float:
    """Idle time of the pipeline as a fraction of the step's compute."""
    if pp <= 1:
        return 0.0
    base = (pp - 1) / max(1, microbatches)
    if schedule == "interleaved":
        return base / max(1, virtual_stages)
    if schedule == "zb-h1":
        return base * ZB_H1_BUBBLE_SHARE
    return base


def p2p_factor(schedule: str, virtual_stages: int = 1) -> int:
    """How many times a micro-batch's activations cross stage boundaries relative to 1F1B."""
    return max(1, virtual_stages) if schedule == "interleaved" else 1


def memory_virtual_stages(schedule: str, virtual_stages: int) -> int:
    """The v that planner.physics.memory.training_memory's interleaving factor takes: 1 (no extra) unless interleaved."""
    return max(1, virtual_stages) if schedule == "interleaved" else 1


def schedule_options(pp: int, layers: int, zero_bubble: bool = True) -> list[tuple[str, int]]:
    """(schedule, virtual stages) the search tries at this pipeline depth: 1F1B, ZB-H1 where the framework
    has it (NeuronX Distributed does not), and interleaving by every v that splits a stage's layers evenly."""
    if pp <= 1:
        return [("1f1b", 1)]
    options = [("1f1b", 1)] + ([("zb-h1", 1)] if zero_bubble else [])
    if layers % pp == 0:
        per_stage = layers // pp
        options += [("interleaved", v) for v in range(2, min(per_stage, MAX_VIRTUAL_STAGES) + 1) if per_stage % v == 0]
    return options


def describe(schedule: str, virtual_stages: int) -> str:
    return f"interleaved 1F1B ×{virtual_stages}" if schedule == "interleaved" else {"zb-h1": "ZB-H1"}.get(schedule, "1F1B")
