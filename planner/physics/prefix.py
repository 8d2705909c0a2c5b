"""Prefix caching: the share of a prompt whose KV cache is already resident is not prefilled again.

vLLM's automatic prefix caching and SGLang's RadixAttention (Zheng et al. 2024, arXiv 2312.07104,
§3 and Fig. 8) keep the KV blocks of earlier prompts and reuse them for any prompt with the same
prefix; SGLang reports cache hit rates of 50-99 % on few-shot, chat and agent workloads and up to
5× throughput from it. The work removed is physics (planner.physics.performance.prefill_s); the hit share is
the spec's own expectation (serving.prefix_hit_share), never assumed.
"""

from __future__ import annotations

from planner.hardware.catalog import Accelerator


def prefix_cached_tokens(prompt_tokens: int, prefix_hit_share: float, accel: Accelerator) -> int:
    """Prompt tokens served from the cache. Neuron's compiled context-encoding graph runs whole
    prompts (transformers-neuronx has no prefix cache), so nothing is saved there. At least one
    token is always computed: the first output token needs one forward pass."""
    if accel.is_neuron or prefix_hit_share <= 0:
        return 0
    return min(prompt_tokens - 1, int(prompt_tokens * prefix_hit_share))
