"""Published serving runs (the same per-source YAML files as bench/reference_sources.py: rows with a prompt
and an output length) and how the planner predicts each: closed-loop clients through its continuous-batching
estimate, static batches in waves, trtllm-bench's offline rows through bench/offline_rows.py. A row is
compared only when the planner models what it ran; skipped() counts every row left out, training and
serving, with its reason."""

from __future__ import annotations

from collections import Counter
from functools import cache, partial

from bench.engine_loop import eager_prefill_floor_s, host_step_s
from bench.offline_rows import PRECISIONS, is_trtllm_bench, predict_offline
from bench.reference_sources import (INSTANCE_FOR, NEURON_INSTANCE_FOR, model_why_not, row_accelerator,
                                     row_architecture, sources, why_not)
from planner.hardware.catalog import Catalog


def skipped(catalog: Catalog) -> Counter:
    """Why each row not compared was left out, counted (training rows by why_not, serving rows by serving_why_not)."""
    return Counter(reason for data in sources().values() for r in data["rows"]
                   if (reason := why_not(r, catalog) if "seq" in r else serving_why_not(r)))


# Serving rows: weights as the planner names them; W4A8 / W8A8 (quantised activations) is not modelled.
def _weights(precision: str) -> str | None:
    p = precision.lower()
    if p.startswith(("fp16", "bf16")):
        return "bf16"
    if p.startswith("fp8"):
        return "fp8"
    if "a8" in p and p.startswith(("int4", "int8")):
        return None
    return "int4" if p.startswith("int4") else ("int8" if p.startswith("int8") else None)


def serving_weights(row: dict) -> str | None:
    """The row's weights as the planner names them (trtllm-bench's FP4 columns: NVFP4, bench/offline_rows.py)."""
    if is_trtllm_bench(row):
        return PRECISIONS.get(str(row.get("precision")).lower())
    return _weights(str(row.get("precision")))


def _has_fp8(accelerator: str) -> bool:
    """Whether the catalog's part named by a GPU row has FP8 tensor cores (the planner runs FP8 weights only there)."""
    from planner.hardware.catalog import bundled

    if accelerator not in INSTANCE_FOR:
        return True
    catalog = bundled()
    return catalog.accelerator(catalog.instance(INSTANCE_FOR[accelerator]).accelerator).peak_flops("fp8") is not None


CLIENTS = ("http", "in-process")


def in_process(source_id: str) -> bool:
    """Whether a source's harness called its engine in-process (LMDeploy's profile_generation, trtllm-bench, vLLM's
    offline scripts) rather than through an HTTP endpoint as a plan's clients do (its `client`): a GPU request then
    pays no request overhead (efficiency.REQUEST_OVERHEAD_S). Neuron's request cost is fitted on every Neuron row."""
    client = sources()[source_id]["source"].get("client")
    if client not in CLIENTS:
        raise ValueError(f"{source_id}: client must be one of {', '.join(CLIENTS)} (got {client!r})")
    return client == "in-process"


def serving_why_not(row: dict) -> str | None:
    if row.get("accelerator") not in INSTANCE_FOR and row.get("accelerator") not in NEURON_INSTANCE_FOR:
        return f"accelerator {row.get('accelerator')!r} not in the catalog"
    offline = is_trtllm_bench(row)  # every request queued: bench/offline_rows.py
    if not offline and (row.get("load") not in ("closed-loop", "static-batch") or not isinstance(row.get("concurrency"), int)):
        return "no fixed concurrency (offline or open-loop load)"
    if serving_weights(row) is None:
        return f"precision {row.get('precision')!r} not modelled"
    if _weights(str(row.get("precision"))) == "fp8" and not _has_fp8(row["accelerator"]):
        return (f"precision {row.get('precision')!r} on {row['accelerator']}, which has no FP8 tensor cores "
                "(weight-only FP8, e.g. Marlin on Ampere, is not modelled)")
    if (row.get("pp") or 1) > 1 or (row.get("ep") or 1) > 1 or not isinstance(row.get("tp"), int):
        return "pipeline or expert parallel serving, or TP not stated"
    if not isinstance(row.get("prompt_tokens"), int) or not isinstance(row.get("output_tokens"), int):
        return "prompt or output length not stated"
    if (why := model_why_not(row)) is not None:
        return why
    if row["accelerator"] in NEURON_INSTANCE_FOR and row_architecture(row).is_moe:
        # Recorded, not compared: NeuronX Distributed picks selective loading, every expert or padded blockwise
        # matmuls by tokens x top-k / experts (modules/moe/expert_mlps_v2.py), which the estimate does not follow;
        # optimum-neuron's runs sit 1.4-5x below its tokens/s and 6-39x past its first tokens (README Known limits)
        return "mixture-of-experts serving on Neuron (NeuronX Distributed's expert kernels) is not modelled"
    return None


@cache
def _usable(source_id: str) -> tuple[dict, ...]:
    """A source's rows the planner can compare (a row's own fields decide it: no fitted constant does)."""
    return tuple(r for r in sources()[source_id]["rows"] if "prompt_tokens" in r and serving_why_not(r) is None)


def routed_batch(row: dict, batch: int) -> int:
    """Sequences of a batch that route their tokens independently: one where the harness decodes copies of one prompt
    greedily (`identical_prompts`: every copy picks the same experts), else all of them."""
    return 1 if row.get("identical_prompts") else batch


def serving_kv(row: dict) -> str:
    """The row's KV cache precision as the planner names it: FP8 where published, 16-bit otherwise."""
    return "fp8" if str(row.get("kv_precision")).startswith("fp8") else "bf16"


def in_model_tokens(row: dict) -> dict:
    """The row with its lengths, tokens/s and ITL in the served model's own tokens. A harness that counts tokens
    with one tokenizer for every model (LLMPerf's main branch, 2023-12 to 2024-12: Llama 2's 32,000 entries) states
    how many of its tokens make one of the model's (`counted_tokens_per_model_token`); the planner prefills and
    decodes the model's tokens. TTFT is a time and keeps its value."""
    ratio = row.get("counted_tokens_per_model_token")
    if not ratio:
        return row
    converted = {"prompt_tokens": round(row["prompt_tokens"] / ratio),
                 "output_tokens": round(row["output_tokens"] / ratio)}
    if isinstance(row.get("tokens_per_s"), (int, float)):
        converted["tokens_per_s"] = row["tokens_per_s"] / ratio
    if isinstance(row.get("itl_ms"), (int, float)):
        converted["itl_ms"] = row["itl_ms"] * ratio
    return {**row, **converted}


def serving_rows(catalog: Catalog, row_type, platform: str | None = None,
                 skip_sources: tuple[str, ...] = (), skip_accelerators: tuple[str, ...] = ()):
    """Closed-loop rows: the planner's continuous-batching estimate; on a GPU engine, clients beyond
    the KV slots held at the mean context wait for a slot (closed_loop.slot_wait_s). Static batches: as
    many requests as the engine's KV memory holds at the mean context (prompt + output/2) run at once, in
    waves (paged KV, Kwon et al. SOSP 2023: blocks are taken as sequences grow, so a wave that fills the
    pool at its mean context runs, and the engine preempts at the end rather than admitting fewer: LMDeploy's
    64 × 128/2048 Llama-2-7B batch starts as one wave, 13B's at 64 does not); each wave's prompts
    are prefilled together, then it decodes in lock-step (ITL at the mean context); throughput =
    batch · output ÷ the waves' total time, TTFT and ITL the means over the requests; an engine whose decoder emits the
    first token (`first_token: decoder-step`, TurboMind at LMDeploy 0.1.0a1) prefills all but each prompt's last
    token, and its first token waits for the wave's next decode step. Closed-loop rows whose requests arrive together
    every round (`queue: convoy`: equal output lengths on an engine that prefills before it decodes) are read as
    that convoy (closed_loop.convoy), `prefill_token_budget` tokens of prompts prefilled at a time, unless the
    clients outgrow the KV slots (then as above). trtllm-bench rows
    (every request queued at once): bench/offline_rows.py, output tokens/s only. `platform` ("gpu" or "neuron")
    `skip_sources` and `skip_accelerators` (parts no fit reads) leave rows out before they are predicted (the fit's
    objective: the same rows, faster)."""
    from planner.physics import efficiency
    from planner.physics.closed_loop import convoy, slot_wait_s
    from planner.physics.kv_capacity import resident_sequences, static_batch
    from planner.physics.neuron_serving import compiled_batch_serving, llmperf_itl_s, tgi_transformers_neuronx_shapes
    from planner.physics.performance import decode_step, prefill_s, step_fixed_s
    from planner.physics.replica_serving import replica_estimate

    out = []
    for source_id in sources():
        if source_id in skip_sources:
            continue
        for r in _usable(source_id):
            neuron = r["accelerator"] in NEURON_INSTANCE_FOR
            if r["accelerator"] in skip_accelerators or platform not in (None, "neuron" if neuron else "gpu"):
                continue
            r = in_model_tokens(r)
            arch = row_architecture(r)
            if neuron:
                node = r["instance_type"] if catalog.instance(str(r.get("instance_type"))) else NEURON_INSTANCE_FOR[r["accelerator"]]
                itype, accel = catalog.sharded(catalog.instance(node))
            else:
                itype = catalog.instance(INSTANCE_FOR[r["accelerator"]])
                accel = row_accelerator(catalog, itype, r)
            w, kv = serving_weights(r), serving_kv(r)
            engine_only = in_process(source_id) and not neuron  # no HTTP endpoint: no request overhead
            overhead_s = 0.0 if engine_only else efficiency.request_overhead_s(accel)
            b, prompt, n = r["concurrency"], r["prompt_tokens"], r["output_tokens"]
            unsplit = r.get("decode_attention") == "unsplit"  # one thread block per sequence and KV head (no split)
            floor = eager_prefill_floor_s(r, arch.layers)  # V0 launched prompts kernel by kernel (0 unless READ_EAGER_PREFILL)

            def prompt_step_s(k: int, tokens: int = prompt, alone: bool = True) -> float:
                """A step prefilling k prompts of `tokens` each: the GPU's time, with a step's fixed cost where the
                prompts run as a step of their own (`alone`), at least the host's eager launches."""
                fixed = step_fixed_s(arch, accel) if alone else 0.0
                return max(prefill_s(arch, accel, w, r["tp"], 1, tokens, itype, prompts=k) + fixed, floor)

            if neuron and r.get("compiled_batch") and r.get("compiled_sequence_tokens"):  # TGI on transformers-neuronx:
                # a wave's prompts, then its decode
                shapes = tgi_transformers_neuronx_shapes(r["compiled_batch"], prompt, n, r["compiled_sequence_tokens"])
                waves = compiled_batch_serving(arch, accel, w, kv, r["tp"], r["compiled_batch"], b, prompt, n, shapes,
                                               itype)
                tps, ttft, itl = waves.output_tokens_per_s, waves.time_to_first_token_s, waves.inter_token_latency_s
            elif is_trtllm_bench(r):
                tps, ttft, itl = predict_offline(arch, accel, itype, r).output_tokens_per_s, None, None
            elif r.get("queue") == "convoy" and b <= resident_sequences(arch, accel, w, kv, r["tp"], prompt + n // 2):
                # every round's requests arrive together and are prefilled before any decode (closed_loop.convoy)
                tp, budget = r["tp"], r["prefill_token_budget"]
                round_step_s = decode_step(arch, accel, w, kv, tp, 1, b, prompt + n / 2, routed_sequences=routed_batch(r, b),
                                           unsplit_attention=unsplit).seconds + host_step_s(r, b)
                c = convoy(b, max(1, budget // prompt), n,
                           lambda k: prompt_step_s(k) + host_step_s(r, k),
                           round_step_s,
                           overhead_s)
                tps, ttft, itl = c.output_tokens_per_s, c.time_to_first_token_s, c.inter_token_latency_s
            elif r["load"] == "closed-loop":  # the planner's own estimate (Neuron: compiled shapes and buckets)
                def replica(k: int):
                    """k requests in flight on the row's replica (its host loop: 0 on every engine but vLLM's V0)."""
                    return replica_estimate(arch, accel, w, kv, r["tp"], 1, k, prompt, n, itype,
                                            max_context_tokens=r.get("max_context_tokens"),
                                            compiled_batch=r.get("compiled_batch"), host_step_s=partial(host_step_s, r),
                                            unsplit_attention=unsplit, prefill_floor_s=floor,
                                            optimum_nxd=r.get("neuron_backend") == "optimum-neuron-nxd",
                                            in_process=engine_only)

                e = replica(b)
                tps, ttft, itl = e.output_tokens_per_s_per_replica, e.time_to_first_token_s, e.inter_token_latency_s
                slots = (r.get("compiled_batch") or b) if neuron else resident_sequences(arch, accel, w, kv, r["tp"],
                                                                                         prompt + n // 2)
                if b > slots:
                    # more clients than KV slots (a Neuron server: than its compiled batch): the running batch is the
                    # slots, the rest queue for one
                    e = replica(slots)
                    request_s = e.time_to_first_token_s + (n - 1) * e.inter_token_latency_s
                    tps, itl = e.output_tokens_per_s_per_replica, e.inter_token_latency_s
                    ttft = e.time_to_first_token_s + slot_wait_s(b, slots, request_s)
            else:  # waves of the sequences whose KV fits at the mean context (planner/physics/kv_capacity.py)
                tp = r["tp"]

                def step_s(k: int, context: float = prompt + n / 2) -> float:
                    return (decode_step(arch, accel, w, kv, tp, 1, k, context, routed_sequences=routed_batch(r, k),
                                        unsplit_attention=unsplit).seconds + host_step_s(r, k))

                def first_token_s(k: int) -> float:
                    # `first_token: decoder-step`: the context pass leaves the prompt's last token to the decoder
                    if r.get("first_token") != "decoder-step":
                        return overhead_s + prompt_step_s(k) + host_step_s(r, k)
                    encode = prompt_step_s(k, prompt - 1, alone=False) if prompt > 1 else 0.0
                    return overhead_s + encode + step_s(k, prompt)

                waves = static_batch(b, resident_sequences(arch, accel, w, kv, tp, prompt + n // 2), n,
                                     first_token_s, step_s)
                tps, ttft, itl = waves.output_tokens_per_s, waves.time_to_first_token_s, waves.inter_token_latency_s
            if r.get("itl_definition") == "llmperf-end-to-end":
                itl = llmperf_itl_s(ttft, itl, n)
            setup = f"{r.get('model') or 'custom'} {r['accelerator']} TP{r['tp']} {w} c={'queued' if b is None else b} {prompt}/{n} {r['load']}"
            figures = [("serving tokens/s", tps, r.get("tokens_per_s"))] + ([] if ttft is None else [
                ("TTFT", ttft * 1e3, r.get("ttft_ms")), ("ITL", itl * 1e3, r.get("itl_ms"))])
            for metric, predicted, measured in figures:
                if isinstance(measured, (int, float)) and measured > 0:
                    out.append(row_type(r["id"], metric, source_id, setup, predicted, measured,
                                        "neuron" if neuron else "gpu", r["accelerator"], arch.is_moe))
    return out
