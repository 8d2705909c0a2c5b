"""Published training runs, one YAML file per source in bench/data/reference/ (format: the
`source:` block with citation and date, then `rows:`), and how the planner predicts each.

A row is compared only when the planner models what it ran; the rest are counted with the reason
(bench/reference_serving.py's skipped(), which counts the serving rows too), never silently dropped: an
accelerator outside the catalog (the 96 GB / 500 W H100 of torchtitan's tables is not the catalog's SXM
part), expert parallelism, a pipeline run
whose global batch is not stated. A micro-batch a source leaves unstated (its layout, global batch and
sequence stated) is the planner's choice at that layout (bench/planner_choice.py, counted apart).
Measurements, in order of preference: tokens/s per GPU (converted
with the planner's own 6N + 12·L·h·s FLOPs per token, so the comparison is tokens/s); else the
source's MFU times the catalog's dense BF16 peak (the sources state MFU against BF16 peak).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path


from bench.planner_choice import unstated_micro_batch, with_planner_choice
from planner.hardware.catalog import Accelerator, Catalog, InstanceType
from planner.physics.memory import TrainingSetup, training_model_states
from planner.physics.pipeline_schedule import MAX_VIRTUAL_STAGES, schedule_options
from planner.workload.presets import Architecture, presets
from planner.physics.training_time import TrainingLayout, model_flops_per_token, training_step, training_work
from planner.workload.yamlsafe import load_text

DIR = Path(__file__).resolve().parent / "data" / "reference"
# The AWS node with the published part: 8 SXM GPUs on NVLink (p4d/p4de/p5/p5en), A10G's g5, L40S's g6e, L4's g6.
INSTANCE_FOR = {"A100-40GB": "p4d.24xlarge", "A100-80GB": "p4de.24xlarge", "H100-SXM-80GB": "p5.48xlarge",
                "H200": "p5en.48xlarge", "A10G": "g5.48xlarge", "L40S": "g6e.48xlarge", "B200": "p6-b200.48xlarge",
                "L4": "g6.48xlarge"}
# Neuron serving rows state TP in NeuronCores (logical ones on Trainium2, LNC=2): predicted per core
# (catalog.sharded) on the row's instance type (else the node that carries the part), with the Neuron
# constants. TGI rows served by a model compiled for a static batch (`compiled_batch`: TGI on
# transformers-neuronx) are predicted by planner/physics/neuron_serving.py (each prompt encoded alone
# while the batch stalls, issue 25); vLLM on NxD Inference (the engine plans deploy) by the planner's own
# replica_estimate at the compiled batch and `max_context_tokens`' buckets. `itl_definition:
# llmperf-end-to-end` marks LLMPerf's ITL (TTFT included). `identical_prompts: true` marks a static batch of copies
# of one prompt decoded greedily: a MoE batch of them touches one sequence's experts (performance.decode_step
# routed_sequences). `first_token: decoder-step` marks an engine whose context pass leaves each prompt's last token to
# the decoder step that emits the first one (TurboMind at LMDeploy 0.1.0a1; bench/reference_serving.py). `queue: convoy`
# marks a closed loop whose requests arrive together every round (equal output lengths on an engine that prefills every
# waiting prompt before it decodes, `prefill_token_budget` tokens of prompts at a time: planner/physics/closed_loop.convoy).
# `compiled_sequence_tokens: S` marks a TGI row served by optimum-neuron 0.0.20-0.0.26 on transformers-neuronx, compiled
# for MAX_TOTAL_TOKENS S: it runs the shapes neuron_serving.tgi_transformers_neuronx_shapes reads from that export.
# `engine_loop: synchronous` marks a run of vLLM's V0 engine, whose host loop runs between GPU steps: each step pays it
# (bench/engine_loop.py). A serving source's `client` (its `source` block) says how its harness reached the engine:
# `http` (an endpoint, as a plan's clients do) or `in-process`, whose GPU rows pay no request cost
# (bench/reference_serving.in_process).
# `num_requests: N` marks a trtllm-bench offline run of N identical requests (its source's dataset size): predicted as
# that run, in rounds of the resident batch (planner/physics/offline_throughput.py), not a steady state.
NEURON_INSTANCE_FOR = {"Trainium2": "trn2.48xlarge", "Inferentia2": "inf2.48xlarge", "Trainium": "trn1.32xlarge"}
CHECKPOINTING = {"none": "none", "selective": "selective", "full": "full"}
ARCH_FIELDS = set(Architecture.model_fields)


def row_accelerator(catalog: Catalog, itype: InstanceType, row: dict) -> Accelerator:
    """The row's part as its node had it. The catalog's parts are EC2's, whose g-family VMs give no GPU peer access
    (planner/physics/collectives.py); a row run outside EC2 with peer access over PCIe (`gpu_peer_to_peer: true`:
    NVIDIA's own L40S servers) runs on the same part with intra_node_link pcie-p2p."""
    accel = catalog.accelerator(itype.accelerator)
    return accel.model_copy(update={"intra_node_link": "pcie-p2p"}) if row.get("gpu_peer_to_peer") else accel


def row_instance(catalog: Catalog, row: dict) -> InstanceType:
    """The EC2 type that stands for the row's node, with the row's own network between nodes where it states one
    (`inter_node_gbps`: IBM's H100 cluster had 800 Gb/s a node, a p5 has 3,200)."""
    itype = catalog.instance(INSTANCE_FOR[row["accelerator"]])
    return itype.model_copy(update={"inter_node_gbps": row["inter_node_gbps"]}) if row.get("inter_node_gbps") else itype


@cache
def sources() -> dict[str, dict]:
    """source id -> {"source": the citation block, "rows": [...]} for every file in DIR."""
    out = {}
    for path in sorted(DIR.glob("*.yaml")):
        data = load_text(path.read_text(), bundled=True)
        out[data["source"]["id"]] = data
    return out


def row_architecture(row: dict) -> Architecture:
    """The row's model: the bundled preset it names, or the architecture it states."""
    if row.get("model"):
        return presets()[row["model"]]
    return Architecture(**{k: v for k, v in row["architecture"].items() if k in ARCH_FIELDS})


def model_why_not(row: dict) -> str | None:
    """Why a row's model cannot be built (training and serving rows alike), or None: a preset it names, or the
    architecture it states in full."""
    if row.get("model") and row["model"] not in presets():
        return f"model {row['model']!r} is not a bundled preset"
    if not row.get("model"):
        try:
            row_architecture(row)
        except (ValueError, TypeError, KeyError):
            return "architecture incomplete in the source"
    return None


def why_not(row: dict, catalog: Catalog) -> str | None:
    """Why the planner cannot reproduce this training row, or None when it can."""
    if row.get("accelerator") not in INSTANCE_FOR:
        return f"accelerator {row.get('accelerator')!r} not in the catalog"
    if (row.get("ep") or 1) > 1:  # context parallelism (cp) is: planner/physics/context_parallel.py
        return "expert parallelism is not modelled"
    if not (row.get("tokens_per_s_per_gpu") or row.get("mfu_pct") or (row.get("step_time_s") and row.get("global_batch"))):
        return "no throughput published"
    if row.get("warm_up_included"):  # e.g. HF Trainer's train_samples_per_second over a 30-step run
        return "throughput averaged over a short run with its warm-up, not steady state"
    if not all(isinstance(row.get(k), int) for k in ("tp", "pp", "dp", "gpus", "seq")) or not (
            isinstance(row.get("micro_batch"), int) or unstated_micro_batch(row)):
        return "layout (tp, pp, dp, micro-batch, sequence) not fully stated"
    if row.get("global_batch") is None and row["pp"] > 1:
        return "pipeline run without its global batch"
    if (unknown := model_why_not(row)) is not None:
        return unknown
    if row["tp"] * row["pp"] * row["dp"] * (row.get("cp") or 1) != row["gpus"]:
        return "tp × pp × dp × cp differs from the GPU count"
    return None


# What a code base runs when a row leaves its pipeline schedule or recompute unstated, where the code base
# offers one answer: nanotron has only the 1F1B and all-forward-all-backward pipeline engines (both idle
# (p−1)/m of the ideal step; neither interleaves nor splits the backward) and recomputes whole layers only
# when `recompute_layer` is set, False by default (huggingface/nanotron src/nanotron/config/parallelism_config.py
# @19f88fbe454691f9bfcf98d6e3433dd7bcb82389). Elsewhere an unstated schedule is the planner's choice.
FRAMEWORK_DEFAULTS = {"nanotron": {"schedule": "1f1b", "checkpointing": "none"}}
UNSTATED = (None, "not stated")


# Code bases that reduce gradients through PyTorch DistributedDataParallel at its default bucket_cap_mb of
# 25 MiB (nanotron: ModelArgs.ddp_bucket_cap_mb = 25, src/nanotron/config/config.py); the rest bucket as
# Megatron does (planner.physics.training_time.dp_buckets).
DDP_BUCKET_BYTES = {"nanotron": 25 * 2**20}


# Code bases that train on Transformer Engine's fused kernels (planner/physics/efficiency.py FUSED_KERNELS_FACTOR):
# Megatron-Core and NeMo (its Megatron-Core containers). Every other code base runs the eager stack.
FUSED_KERNEL_FRAMEWORKS = ("megatron-core", "nemo-megatron")


# Code bases that always compile the model with torch.compile: IBM fms-fsdp (its README: "torch.compile" in every
# throughput row's setup), OLMo-core (the official training scripts set compile_model=True). torchtitan and
# torchtune compile behind a flag: their rows say `kernels: compiled` where the published run set it.
COMPILED_KERNEL_FRAMEWORKS = ("fms-fsdp", "olmo-core")


def kernels(row: dict) -> str:
    """The row's training kernel stack (training.kernels): as the row states it, else fused for a Transformer Engine
    code base, compiled for one that always compiles, else eager."""
    if row.get("kernels"):
        return row["kernels"]
    if row.get("framework") in FUSED_KERNEL_FRAMEWORKS:
        return "fused"
    return "compiled" if row.get("framework") in COMPILED_KERNEL_FRAMEWORKS else "eager"


def framework_defaults(row: dict) -> dict:
    """The row with what it leaves unstated filled in by its code base's only option (FRAMEWORK_DEFAULTS)."""
    defaults = FRAMEWORK_DEFAULTS.get(row.get("framework"), {})
    filled = {k: v for k, v in defaults.items() if row.get(k) in UNSTATED and (k != "schedule" or (row.get("pp") or 1) > 1)}
    return {**row, **filled} if filled else row


def resolved(row: dict) -> dict:
    """The row as compared: an unstated micro-batch is the planner's choice (bench/planner_choice.py), an
    unstated schedule or recompute its code base's only one (framework_defaults)."""
    row = framework_defaults(row)
    return with_planner_choice(row) if row.get("micro_batch") is None and unstated_micro_batch(row) else row


def training_inputs(catalog: Catalog, row: dict) -> dict:
    """What one published training row states, in the planner's terms: architecture, node and device,
    precision, setup and layout (shared by the throughput and the peak-memory comparisons)."""
    itype = row_instance(catalog, row)
    precision = row["precision"] if row["precision"] in ("bf16", "fp8", "fp16") else "bf16"
    mb, dp = row["micro_batch"], row["dp"]
    return {"arch": row_architecture(row), "itype": itype, "accel": row_accelerator(catalog, itype, row),
            "precision": precision, "mb": mb, "dp": dp, "zero": _zero(row),
            "setup": TrainingSetup(row.get("method", "full"), precision, "adamw", row.get("grad_precision") or "auto",
                                   row.get("lora_rank") or 16,
                                   row["seq"], lora_targets=_lora_targets(row), kernels=kernels(row),
                                   lora_dropout=row.get("lora_dropout") or 0.0,
                                   lora_fused_qkv=row.get("framework") in FUSED_QKV_ADAPTERS),
            "microbatches": max(1, (row.get("global_batch") or dp * mb) // (dp * mb)),
            "checkpointing": CHECKPOINTING.get(str(row.get("checkpointing")), "selective")}


# Code bases whose LoRA runs adapt fewer matrices than every linear layer (planner.physics.lora_traffic.LORA_TARGETS):
# NeMo's Llama 3 fine-tuning recipes in performance mode adapt the fused QKV projection only. A row's own
# `lora_targets` (its config's) comes first.
LORA_TARGETS = {"nemo-megatron": "qkv"}
# Code bases whose q, k and v adapters are one module with one dropout (LitGPT's LoRAQKVLinear, litgpt/lora.py):
# TrainingSetup.lora_fused_qkv.
FUSED_QKV_ADAPTERS = ("litgpt",)


def _lora_targets(row: dict) -> str:
    if row.get("method", "full") == "full":
        return "all"
    return row.get("lora_targets") or LORA_TARGETS.get(row.get("framework"), "all")


def _zero(row: dict) -> int:
    """The row's ZeRO stage; unstated, its code base's default optimizer sharding (DISTRIBUTED_OPTIMIZER_FRAMEWORKS),
    read alike by the throughput and the peak-memory comparisons."""
    if row.get("zero") is None and row.get("framework") in DISTRIBUTED_OPTIMIZER_FRAMEWORKS:
        return 1
    return row.get("zero") or 0


# How each code base keeps model states and what its "selective" / unstated recompute means, for the
# peak-memory comparison (planner.physics.memory.STATE_BYTES, activation_bytes_per_layer):
# - torchtitan: FSDP2 with fp32 sharded parameters; selective = per-operator SAC
#   (`selective_ac_option = "op"`, the llama3 .toml configs).
# - fms-fsdp: FSDP with fp32 flat parameters; its "selective" checkpoints a fraction of whole blocks
#   (fms_fsdp/config/training.py `selective_checkpointing = 1`: every block), which the published
#   HFU / MFU of 0.74 / 0.55 = 1.35 ≈ 8/6 (every block's forward recomputed) confirms.
# - torchtune: bf16 parameters, gradients and AdamW states (no master copy); its configs enable
#   activation checkpointing of every layer unless a row says otherwise; QLoRA's NF4 base runs torchao's kernels
#   (FRAMEWORK_NF4_KERNELS).
# - litgpt: precision bf16-true, every state in bf16; QLoRA on bitsandbytes 0.42.0 (pyproject.toml pins
#   `bitsandbytes==0.42.0` @00af8b0 and every commit its config-hub rows were published at), whose 4-bit matmul
#   keeps its input, under Lightning's BitsandbytesPrecision, which quantizes the LM head too, from fp16
#   (planner.physics.adapter_memory.NF4_STACKS).
# - nemo-megatron: the launcher's GPT configs train with `distributed_fused_adam` (optimizer states
#   sharded over data parallelism, ZeRO-1) where the table leaves ZeRO unstated.
FRAMEWORK_MEMORY = {"torchtitan": ("fp32-sharded", {"selective": "op"}),
                    "fms-fsdp": ("fp32-sharded", {"selective": "full"}),
                    "torchtune": ("bf16", {"not stated": "full"}),
                    "litgpt": ("bf16", {})}
FRAMEWORK_NF4_KERNELS = {"torchtune": "torchao", "litgpt": "lightning-bitsandbytes-0.42"}  # TrainingSetup.nf4_kernels
DISTRIBUTED_OPTIMIZER_FRAMEWORKS = ("nemo-megatron",)


def memory_inputs(catalog: Catalog, row: dict) -> dict:
    """training_inputs with the code base's state precision, recompute policy and optimizer sharding."""
    t = training_inputs(catalog, row)
    states, recompute = FRAMEWORK_MEMORY.get(row.get("framework"), ("mixed", {}))
    t["setup"] = replace(t["setup"], states=states, offload_optimizer=bool(row.get("offload_optimizer")),
                         optimizer=row.get("optimizer") or "adamw",
                         optimizer_in_backward=bool(row.get("optimizer_in_backward")),
                         loss_chunks=row.get("loss_chunks") or 1,
                         activation_offload=bool(row.get("activation_offload")),
                         nf4_kernels=FRAMEWORK_NF4_KERNELS.get(row.get("framework"), "bitsandbytes"),
                         nf4_double_quant=row.get("nf4_double_quant", True))
    t["checkpointing"] = recompute.get(str(row.get("checkpointing")), t["checkpointing"])
    return t


def model_state_bytes(catalog: Catalog, row: dict) -> float:
    """Weights and optimizer states per device of the row's published layout, as its code base keeps them
    (FRAMEWORK_MEMORY), and its gradients unless the optimizer steps inside the backward (which frees each
    as it is applied): what its GPU holds from the first optimizer step on, activations aside."""
    t = memory_inputs(catalog, row)
    weights, grads, optimizer = training_model_states(t["arch"], t["setup"], row["tp"], row["pp"], t["dp"], t["zero"])
    return weights + optimizer + (0.0 if t["setup"].optimizer_in_backward else grads)


def below_model_states(catalog: Catalog) -> list[str]:
    """Rows whose published peak is smaller than the model states their stated layout must hold (LitGPT's
    Llama 3.2 1B and 3B full fine-tunes, published as 1xA10G at 8.7 and 16.5 GB: bf16-true AdamW keeps
    8 bytes per parameter, 12.0 and 28.8 GB with LitGPT's untied tables, more than the 3B's A10G has): not the
    stated layout, so no memory model can reproduce them. Dropped from the peak-memory comparison and listed, like
    implausible()."""
    return [r["id"] for _, r in _peak_memory_rows(catalog)  # offloaded states are not on the GPU
            if not r.get("offload_optimizer") and r["peak_memory_gib"] * 2**30 < model_state_bytes(catalog, r)]


def _peak_memory_rows(catalog: Catalog):
    """(source id, resolved row) of every training row with a published peak and a layout the planner can
    reproduce (its throughput may be unpublished)."""
    for source_id, data in sources().items():
        for r in data["rows"]:
            if "seq" in r and isinstance(r.get("peak_memory_gib"), (int, float)) \
                    and why_not(r, catalog) in (None, "no throughput published"):
                yield source_id, resolved(r)


def peak_memory_bytes(catalog: Catalog, row: dict) -> float:
    """planner.physics.memory.training_memory on the row's published layout, as its code base keeps memory."""
    from planner.physics.memory import training_memory

    t = memory_inputs(catalog, row)
    return training_memory(t["arch"], t["setup"], row["tp"], row["pp"], t["dp"], t["zero"], t["mb"],
                           t["microbatches"], t["checkpointing"], t["accel"].supports.flash_attention,
                           row.get("virtual_stages") or 1, cp=row.get("cp") or 1).total


UNSTATED_RECOMPUTE = ("none", "selective", "full")  # planner/search/training.py CHECKPOINTING
UNSTATED_MICRO_BATCHES = (1, 2, 4, 8, 16)  # planner/search/training.py MICRO_BATCHES


def as_planned(row: dict) -> list[dict]:
    """The row with what it leaves unstated filled in every way the planner's search would try: the
    recompute mode (`activation_checkpointing: auto`) and, for a pipeline run with its global batch,
    the micro-batch (any that splits the per-rank batch). A stated value is kept as published."""
    recompute = [row.get("checkpointing")] if str(row.get("checkpointing")) in CHECKPOINTING else UNSTATED_RECOMPUTE
    if isinstance(row.get("micro_batch"), int):
        micro = [row["micro_batch"]]
    elif isinstance(row.get("global_batch"), int) and isinstance(row.get("dp"), int):
        micro = [mb for mb in UNSTATED_MICRO_BATCHES if row["global_batch"] % (row["dp"] * mb) == 0]
    else:
        micro = []
    return [{**row, "checkpointing": ck, "micro_batch": mb} for ck in recompute for mb in micro]


def stated_schedules(row: dict, layers: int) -> list[tuple[str, int]]:
    """The pipeline schedule a row states (pinned: 1F1B, or interleaved with its v), else the options the
    planner chooses among (interleaved without its v: the interleaved options)."""
    pp, schedule, v = row.get("pp") or 1, row.get("schedule"), row.get("virtual_stages")
    if pp <= 1 or schedule == "1f1b":
        return [("1f1b", 1)]
    if schedule == "interleaved" and isinstance(v, int):
        return [("interleaved", v)]
    options = schedule_options(pp, layers)
    if schedule == "interleaved":
        # no v splits the stages evenly: stages need not be equal (Llama 3, arXiv 2407.21783 §3.3.2, drops a layer
        # from the first and the last stage; Megatron-Core's --decoder-first/last-pipeline-num-layers), so every v
        # up to the layers a stage holds
        return [o for o in options if o[0] == "interleaved"] or [
            ("interleaved", v) for v in range(2, max(2, min(layers // pp, MAX_VIRTUAL_STAGES)) + 1)]
    return options


def predict(catalog: Catalog, row: dict):
    """The planner's estimate on the row's layout; where the schedule is not stated, the planner's
    choice (the fastest of its options)."""
    t = training_inputs(catalog, row)
    arch, accel, setup, dp, zero = t["arch"], t["accel"], t["setup"], t["dp"], t["zero"]
    cp = row.get("cp") or 1  # the DP × CP ranks shard the states (planner/physics/context_parallel.py)
    state = sum(training_model_states(arch, setup, row["tp"], row["pp"], dp * cp, zero))
    work = replace(training_work(arch, setup), dp_bucket_bytes=DDP_BUCKET_BYTES.get(row.get("framework")))
    estimates = [training_step(arch, t["itype"], accel, t["precision"], row["seq"],
                               TrainingLayout(row["tp"], row["pp"], dp, zero, t["mb"], t["microbatches"],
                                              t["checkpointing"], schedule, v, cp=cp), state, work)
                 for schedule, v in stated_schedules(row, arch.layers)]
    return arch, accel, max(estimates, key=lambda e: e.tokens_per_s)


def narayanan_eq3_flops_per_token(arch: Architecture, seq: int) -> float:
    """FLOPs per token as Narayanan et al. 2021 count them (arXiv 2104.04473 eq. 3: 96·B·s·l·h²·(1 + s/6h
    + V/16lh) per iteration of B·s tokens): four passes, the forward recomputed."""
    layers, h = arch.layers, arch.hidden_size
    return 96 * layers * h**2 * (1 + seq / (6 * h) + arch.vocab_size / (16 * layers * h))


def measured_tflops(r: dict, arch: Architecture, accel) -> float:
    """Model TFLOP/s per GPU as published: tokens/s per GPU (or global batch × sequence over the
    published step time, or teraFLOP/s counted with a stated formula) × the planner's FLOPs per token;
    else MFU × dense BF16 peak."""
    tokens_per_s = r.get("tokens_per_s_per_gpu")
    if not tokens_per_s and r.get("tflops_formula") == "narayanan2021-eq3":
        tokens_per_s = r["tflops_per_gpu"] * 1e12 / narayanan_eq3_flops_per_token(arch, r["seq"])
    if not tokens_per_s and r.get("step_time_s") and r.get("global_batch"):
        tokens_per_s = r["global_batch"] * r["seq"] / r["step_time_s"] / r["gpus"]
    if tokens_per_s:
        return tokens_per_s * model_flops_per_token(arch, r["seq"], r.get("method", "full")) / 1e12
    return r["mfu_pct"] / 100 * accel.peak_flops("bf16") / 1e12


def implausible(catalog: Catalog) -> list[str]:
    """Rows whose published per-GPU figure exceeds the GPU's dense peak (an aggregate over GPUs
    reported as per-GPU, most likely): dropped, not reproducible as per-GPU throughput."""
    out = []
    for data in sources().values():
        for r in data["rows"]:
            if "seq" in r and why_not(r, catalog) is None:
                r = resolved(r)
                arch, accel, _ = predict(catalog, r)
                peak = accel.peak_flops(r["precision"] if r["precision"] in ("bf16", "fp8") else "bf16") / 1e12
                if measured_tflops(r, arch, accel) > peak:
                    out.append(r["id"])
    return out


def training_rows(catalog: Catalog, row_type, skip_sources: tuple[str, ...] = (),
                  skip_accelerators: tuple[str, ...] = ()):
    """The sources' GPU training rows (TFLOP/s per device); `skip_sources` and the rows on `skip_accelerators` are
    left out unpredicted."""
    rows = []
    for source_id, data in sources().items():
        if source_id in skip_sources:
            continue
        for r in [resolved(r) for r in data["rows"] if "seq" in r and why_not(r, catalog) is None
                  and r.get("accelerator") not in skip_accelerators]:
            arch, accel, est = predict(catalog, r)
            measured = measured_tflops(r, arch, accel)
            if measured > accel.peak_flops(r["precision"] if r["precision"] in ("bf16", "fp8") else "bf16") / 1e12:
                continue  # above the dense peak: see implausible()
            setup = (f"{r.get('model') or 'custom'} {r['accelerator']}×{r['gpus']} {r['precision']} TP{r['tp']} "
                     f"PP{r['pp']} DP{r['dp']} ZeRO-{_zero(r)} {r.get('method', 'full')}"
                     + (f" mb{r['micro_batch']} (planner's)" if r.get("micro_batch_source") else ""))
            rows.append(row_type(r["id"], "training TFLOP/s", source_id, setup, est.achieved_tflops_per_device, measured,
                                 "gpu", r["accelerator"], arch.is_moe))
    return rows


# Code bases whose published peak is PyTorch's caching allocator's (torch.cuda max allocated, active or
# reserved bytes): it counts tensors only, never the CUDA context the driver creates nor the buffers
# NCCL allocates itself (PyTorch "CUDA semantics: memory management"). torchtitan logs
# max_reserved_gib, torchtune "Peak Memory Active", LitGPT torch.cuda.max_memory_allocated() (the
# sources' notes); the planner's runtime reserve (planner.physics.memory.runtime_overhead_bytes) is
# left out of their comparison, kept where a source reads the device (nvidia-smi).
ALLOCATOR_PEAK_FRAMEWORKS = ("torchtitan", "torchtune", "litgpt")


def memory_rows(catalog: Catalog, row_type):
    """Published per-GPU peak memory against planner.physics.memory.training_memory on the same layout,
    counted as the source counts it. No fitted constant enters memory, so these rows are the same held
    out or not."""
    from planner.physics.memory import runtime_overhead_bytes

    out, dropped = [], set(implausible(catalog)) | set(below_model_states(catalog))
    for source_id, r in _peak_memory_rows(catalog):
        if r["id"] in dropped:
            continue
        t = training_inputs(catalog, r)
        need = peak_memory_bytes(catalog, r)
        if r.get("framework") in ALLOCATOR_PEAK_FRAMEWORKS:
            need -= runtime_overhead_bytes(r["gpus"], t["accel"].is_neuron)
        setup_text = f"{r.get('model') or 'custom'} {r['accelerator']}×{r['gpus']} {r.get('method', 'full')} mb{t['mb']} s{r['seq']}"
        out.append(row_type(r["id"], "training peak memory", source_id, setup_text, need / 2**30, r["peak_memory_gib"],
                            adapters=r.get("method", "full") != "full"))
    return out
