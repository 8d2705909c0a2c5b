"""How much KV cache a serving plan reserves per sequence (serving.kv_sizing, issue 27).

worst-case: every sequence holds max_context_tokens, the guarantee the engines give themselves (vLLM refuses
to start unless one sequence of max_model_len fits; every admitted request can run to its end).
typical: every sequence holds prompt_tokens + output_tokens rounded up to the engine's KV block, since paged
attention hands out blocks as tokens arrive (Kwon et al., SOSP 2023, "Efficient Memory Management for LLM
Serving with PagedAttention", §4). The pool still holds at least one max_context_tokens sequence, and a
request longer than typical takes blocks others would use: the engine preempts (vLLM recomputes or swaps
the newest sequences), so latency rises for the requests it evicts."""

from __future__ import annotations

import math

from planner.workload.plan import KvSizing  # the plan's section; its model stands with the plan model

POLICIES = ("worst-case", "typical")
# Tokens per KV block, by engine (serving.engine):
# - vllm, lmi (LMI's vLLM rolling batch, engine-options.yaml lmi-vllm): 16, vLLM's CacheConfig.block_size
#   default on CUDA (vllm/platforms/cuda.py check_and_update_config; `--block-size`, engine args docs).
# - tgi: 16, the paged-attention block in text_generation_server/models/globals.py (BLOCK_SIZE; the flashinfer
#   backend pages per token, so 16 is the coarser, safe rounding).
# - tensorrt-llm: 64, tokens_per_block's default (tensorrt_llm plugin config enable_paged_kv_cache, KvCacheConfig).
# - neuron: none; NxD Inference compiles the KV cache as batch × n_positions (static shapes), so it always
#   reserves the worst case.
KV_BLOCK_TOKENS: dict[str, int | None] = {"vllm": 16, "lmi": 16, "tgi": 16, "tensorrt-llm": 64, "neuron": None}
PREEMPTION = ("typical KV sizing: sequences longer than prompt_tokens + output_tokens take blocks others would "
              "use; when the pool runs out the engine preempts the newest sequences (vLLM recomputes or swaps "
              "them), so their latency rises: size worst-case where every request may run to max_context_tokens")


def engine_of(serving, neuron: bool) -> str:
    return serving.engine if serving.engine != "auto" else ("neuron" if neuron else "vllm")


def typical_tokens(prompt_tokens: int, output_tokens: int, engine: str) -> int | None:
    """Prompt + output tokens in whole KV blocks; None where the engine has no paged KV cache."""
    block = KV_BLOCK_TOKENS.get(engine)
    if block is None:
        return None
    return math.ceil((prompt_tokens + output_tokens) / block) * block


def effective_policy(serving, neuron: bool) -> str:
    engine = engine_of(serving, neuron)
    return serving.kv_sizing if KV_BLOCK_TOKENS.get(engine) is not None else "worst-case"


def kv_tokens_per_sequence(policy: str, max_context_tokens: int, typical: int | None, sequences: int) -> int:
    """KV tokens reserved per sequence: typical, but never a pool below one max_context_tokens sequence
    (the engine must admit one request of its full context)."""
    if policy != "typical" or typical is None:
        return max_context_tokens
    return min(max_context_tokens, max(typical, math.ceil(max_context_tokens / max(sequences, 1))))


def serving_kv_tokens(serving, neuron: bool, sequences: int) -> int:
    """kv_tokens_per_sequence for a spec's serving section on a platform."""
    engine = engine_of(serving, neuron)
    return kv_tokens_per_sequence(effective_policy(serving, neuron), serving.max_context_tokens,
                                  typical_tokens(serving.prompt_tokens, serving.output_tokens, engine), sequences)


def kv_sizing_section(w, chosen, target: str) -> tuple[KvSizing, list[str]]:
    """The plan's KV sizing and its warnings: the other policy's count on the chosen type where it differs,
    the preemption risk when typical sized it."""
    from planner.search.inference import best_inference  # it sizes with this module

    s, neuron = w.serving, chosen.accel.is_neuron
    engine, policy = engine_of(s, neuron), effective_policy(s, neuron)
    typical = typical_tokens(s.prompt_tokens, s.output_tokens, engine)
    if typical is None:
        note = (f"{engine} compiles the KV cache for batch × max_context_tokens (static shapes): worst-case is the "
                "only sizing")
        return KvSizing(policy=policy, requested=s.kv_sizing, tokens_per_sequence=s.max_context_tokens,
                        other_policy=policy, note=note), [f"serving.kv_sizing typical: {note}"] if s.kv_sizing == "typical" else []
    other = "typical" if policy == "worst-case" else "worst-case"
    flipped = w.model_copy(update={"serving": s.model_copy(update={"kv_sizing": other})})
    found = best_inference(flipped, chosen.itype, chosen.accel, chosen.price, target)
    section = KvSizing(policy=policy, requested=s.kv_sizing, block_tokens=KV_BLOCK_TOKENS[engine],
                       tokens_per_sequence=typical if policy == "typical" else s.max_context_tokens,
                       other_policy=other, note=PREEMPTION if policy == "typical" else "")
    warnings = [PREEMPTION] if policy == "typical" else []
    if not hasattr(found, "nodes"):
        warnings.append(f"{other} KV sizing does not fit {chosen.itype.name}: {found.reason}")
        return section, warnings
    section = section.model_copy(update={"other_policy_nodes": found.nodes, "other_policy_replicas": found.replicas})
    if (found.nodes, found.replicas) != (chosen.nodes, chosen.replicas):
        warnings.append(f"{other} KV sizing would need {found.nodes} node{'s' if found.nodes != 1 else ''} "
                        f"({found.replicas} replica(s)) of {chosen.itype.name}, against {chosen.nodes} sized "
                        f"{policy} (serving.kv_sizing)")
    return section, warnings

