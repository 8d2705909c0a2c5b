"""The tags every accelerator resource carries: enough of the workload and the plan for a policy to
recompute the per-device memory requirement from the resource's own properties, with the same
estimators, whatever instance type the resource names (design.md: policies never trust unknowns)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog import Catalog
from planner.memory import MemoryBreakdown, TrainingSetup, inference_memory, training_memory
from planner.training_time import VIRTUAL_PIPELINE_STAGES
from planner.plan import Plan
from planner.presets import presets
from planner.spec import Workload

PREFIX = "gpuplan:"
WORKLOAD = PREFIX + "workload"


def _pairs(values: dict[str, object]) -> str:
    return ",".join(f"{k}={v}" for k, v in values.items() if v is not None)


def _unpairs(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def plan_tags(plan: Plan, w: Workload, environment: str = "production") -> dict[str, str]:
    lay = plan.layout
    tags = {
        WORKLOAD: plan.workload,
        PREFIX + "kind": plan.kind,
        PREFIX + "model": w.model.preset or "custom",
        PREFIX + "precision": w.precision,
        PREFIX + "layout": _pairs({"tp": lay.tensor_parallel, "pp": lay.pipeline_parallel, "dp": lay.data_parallel,
                                   "zero": lay.zero_stage, "mb": lay.micro_batch, "m": lay.microbatches,
                                   "ckpt": lay.activation_checkpointing, "replicas": lay.replicas,
                                   "batch": lay.batch_per_replica, "nodes": plan.choice.nodes}),
        PREFIX + "required-bytes": str(int(plan.memory.required_per_device_bytes)),
        PREFIX + "headroom": f"{w.constraints.memory_headroom:g}",
        PREFIX + "monthly-usd": f"{plan.cost.usd_per_month:.2f}",
        PREFIX + "environment": environment,
        PREFIX + "region": plan.choice.region,
    }
    if w.kind == "inference":
        tags[PREFIX + "serving"] = _pairs({"ctx": w.serving.max_context_tokens, "kv": w.serving.kv_cache_precision,
                                           "engine": plan.engine})
    else:
        t = w.training
        tags[PREFIX + "training"] = _pairs({"method": t.method, "seq": t.sequence_length, "opt": t.optimizer,
                                            "grad": t.grad_precision, "rank": t.lora_rank})
    return tags


@dataclass(frozen=True)
class TaggedWorkload:
    """What the tags say, parsed; `problem` says why a requirement cannot be recomputed."""
    workload: str
    kind: str
    model: str
    precision: str
    layout: dict[str, str]
    details: dict[str, str]
    headroom: float
    monthly_usd: float | None
    environment: str
    region: str

    def int_of(self, key: str, default: int = 1) -> int:
        return int(float(self.layout.get(key, default)))


def read_tags(tags: dict) -> TaggedWorkload | None:
    """The planned workload behind a resource's tags, or None when it carries none."""
    if not tags or WORKLOAD not in tags:
        return None
    kind = tags.get(PREFIX + "kind", "inference")
    monthly = tags.get(PREFIX + "monthly-usd")
    return TaggedWorkload(
        workload=tags[WORKLOAD], kind=kind, model=tags.get(PREFIX + "model", "custom"),
        precision=tags.get(PREFIX + "precision", "bf16"), layout=_unpairs(tags.get(PREFIX + "layout", "")),
        details=_unpairs(tags.get(PREFIX + ("serving" if kind == "inference" else "training"), "")),
        headroom=float(tags.get(PREFIX + "headroom", 0.10)),
        monthly_usd=float(monthly) if monthly else None, environment=tags.get(PREFIX + "environment", "production"),
        region=tags.get(PREFIX + "region", "us-east-1"))


def required_memory(tagged: TaggedWorkload, catalog: Catalog, instance_type: str) -> MemoryBreakdown | str:
    """Per-device memory the tagged workload needs on `instance_type`; a string says why it cannot be known."""
    arch = presets().get(tagged.model)
    if arch is None:
        return f"model {tagged.model!r} is not a bundled preset, so its requirement cannot be recomputed"
    itype = catalog.instance(instance_type)
    if itype is None:
        return f"instance type {instance_type} is not in the catalog"
    tp, pp = tagged.int_of("tp"), tagged.int_of("pp")  # in the type's sharding unit: GPUs or NeuronCores
    accel = catalog.accelerator(itype.accelerator)
    if tagged.kind == "inference":
        return inference_memory(arch, tagged.precision, tagged.details.get("kv", "fp16"), tp, pp,
                                tagged.int_of("batch"), int(tagged.details.get("ctx", 4096)), accel.is_neuron)
    d = tagged.details
    setup = TrainingSetup(d.get("method", "full"), tagged.precision, d.get("opt", "adamw"), d.get("grad", "auto"),
                          int(d.get("rank", 16)), int(d.get("seq", 4096)))
    return training_memory(arch, setup, tp, pp, tagged.int_of("dp"), tagged.int_of("zero", 0), tagged.int_of("mb"),
                           tagged.int_of("m"), tagged.layout.get("ckpt", "full"), accel.supports.flash_attention,
                           VIRTUAL_PIPELINE_STAGES, accel.is_neuron)
