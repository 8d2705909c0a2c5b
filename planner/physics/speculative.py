"""Speculative decoding: a small draft model proposes k tokens, the target verifies all k+1 positions
in one forward pass, and each step emits the accepted prefix plus one token of its own.

Leviathan, Kalman & Matias 2023 (ICML, arXiv 2211.17192) Eq. 1: with acceptance rate α per drafted
token, a step emits (1 − α^(k+1)) / (1 − α) tokens on average; the step costs one target pass over
k+1 positions plus k draft decode steps. Published effect sizes this reproduces: T5-XXL with a
T5-small draft 2.6–3.4× faster at α 0.62–0.80 (Leviathan Table 2); Chinchilla 70B with a 4B draft
1.9–2.5× (Chen et al. 2023, arXiv 2302.01318); vLLM's speculative decoding measurements (vLLM blog
2024-10-17) up to 1.5–2.8× at low load and slower than plain decoding at high load, where the target
pass is compute-bound and the k+1 positions cost k+1 times the FLOPs (the batch-efficiency effect)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.hardware.catalog import Accelerator
from planner.physics import efficiency
from planner.workload.presets import Architecture


@dataclass(frozen=True)
class Speculation:
    draft: Architecture
    tokens: int  # k: tokens the draft proposes per step
    acceptance_rate: float  # α: chance the target accepts a drafted token


def expected_tokens_per_step(acceptance_rate: float, tokens: int) -> float:
    """Leviathan et al. 2023 Eq. 1: E = (1 − α^(k+1)) / (1 − α), between 1 (α = 0) and k+1 (α → 1)."""
    return (1 - acceptance_rate ** (tokens + 1)) / (1 - acceptance_rate)


def seconds_per_token(verify_memory_s: float, verify_compute_s: float, verify_comm_s: float,
                      draft_step_s: float, spec: Speculation, accel: Accelerator) -> float:
    """One speculative step over the tokens it emits: the target's pass reads its weights and KV once
    but computes k+1 positions (the roofline of the two, efficiency.roofline_s), then the draft runs k decode steps."""
    verify_s = efficiency.roofline_s(accel, verify_memory_s, verify_compute_s * (spec.tokens + 1)) + verify_comm_s
    step_s = verify_s + spec.tokens * draft_step_s
    return step_s / expected_tokens_per_step(spec.acceptance_rate, spec.tokens)


def speculation_of(serving) -> Speculation | None:
    """The spec's draft model and acceptance rate, or None when it decodes plainly."""
    if serving.speculative_draft is None:
        return None
    from planner.workload.presets import presets
    return Speculation(presets()[serving.speculative_draft], serving.speculative_tokens,
                       serving.speculative_acceptance_rate)


def draft_memory_bytes(spec: Speculation | None, precision: str, kv_precision: str, tp: int,
                       sequences: int, context_tokens: int) -> tuple[float, float]:
    """(weights, KV cache) of the draft per device, sharded like the target's (engines run it at the same TP)."""
    if spec is None:
        return 0.0, 0.0
    from planner.physics.memory import kv_bytes_per_sequence, kv_shard_fraction, sharded_weight_bytes
    kv = sequences * kv_bytes_per_sequence(spec.draft, context_tokens, kv_precision) * kv_shard_fraction(spec.draft, tp)
    return sharded_weight_bytes(spec.draft, precision, tp), kv
