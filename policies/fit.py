"""accelerator-memory-fits: the per-device requirement recomputed from what the resources will do.

The tags say which workload and layout were planned; the facts decide what is sized: the instance
type and count on the resource, the model the container loads (HF_MODEL_ID mapped to its bundled
architecture), the engine's context, batch, parallelism, precision and memory fraction from the
container environment, and a training node's exported layout. A tag that disagrees with a fact, or
that is missing or malformed, is a violation naming the tag; the requirement uses the fact."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from planner.hardware.catalog import Catalog
from planner.economics.cost import hourly_price
from planner.workload.presets import presets
from planner.report.tags import PREFIX, TaggedWorkload, TagError, read_tags, required_memory
from planner.hardware.units import BYTES_PER_PARAM, GIB
from planner.hardware.ultraservers import planned_type
from policies.facts import ServingFacts, container_environment, model_of, serving_exports, serving_facts, templates_of, \
    training_exports
from policies.resources import ASG, ENDPOINT_CONFIGS, LAUNCH_TEMPLATE, SAGEMAKER_SERVICE, Resource, group_size, \
    instance_slots, tags_of

SUGGESTIONS = 3
LAYOUT = PREFIX + "layout"


@dataclasses.dataclass(frozen=True)
class Finding:
    message: str
    workload: str | None = None
    resource: str | None = None  # set by stack rules: the resource the finding is about

QUANTISED_KV = ("fp8", "int8")  # KV dtypes only an engine variable turns on


def service_of(resource: Resource) -> str:
    return "sagemaker" if resource.type in SAGEMAKER_SERVICE else "ec2"


def _gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


def fitting_types(tagged: TaggedWorkload, catalog: Catalog, service: str, headroom: float) -> list[str]:
    """The cheapest catalog types (in the workload's region) whose devices hold the requirement at the same layout."""
    fits = []
    neuron = tagged.details.get("engine") == "neuron"
    for chip_type in catalog.instance_types:
        itype, accel = catalog.sharded(chip_type)  # TP counts NeuronCores on Neuron types
        if itype.accelerators_per_node < tagged.int_of("tp") or (tagged.kind == "inference" and
                                                                 accel.is_neuron != neuron):
            continue
        if tagged.kind != "inference" and not accel.supports.training:
            continue
        need = required_memory(tagged, catalog, itype.name)
        if isinstance(need, str) or need.total > accel.memory_bytes * (1 - headroom):
            continue
        price = hourly_price(catalog, itype, tagged.region, service, "on-demand")
        if not isinstance(price, str):
            fits.append((price.usd_per_hour, itype.name))
    return [f"{name} (${usd:,.2f}/h)" for usd, name in sorted(fits)[:SUGGESTIONS]]


def _serving_facts(resource: Resource, resources: list[Resource], strict: bool) -> tuple[ServingFacts | None, list[str]]:
    exported = serving_exports(resource)  # an EC2 serving node (components/ec2_inference.py): same engine facts
    if exported is not None:
        facts = serving_facts(exported)
        return facts, [f"{resource.name} user data: {problem}" for problem in facts.problems]
    if resource.type not in ENDPOINT_CONFIGS:
        return None, []
    model = model_of(resource, resources)
    env = container_environment(model) if model is not None else None
    if env is None:
        return None, ["the SageMaker Model this endpoint configuration serves is not in the stack, so the model and "
                      "engine limits cannot be checked (strict: false sizes from the tags alone)"] if strict else []
    facts = serving_facts(env)
    problems = [f"{model.name}: {problem}" for problem in facts.problems]
    if facts.model_id is not None and facts.preset is None and not _custom(resource):
        problems.append(f"{model.name}: unknown model id: add it to the models file or set the architecture "
                        f"(HF_MODEL_ID {facts.model_id[:80]!r}); the tags alone cannot say what the container loads")
    return facts, problems


def _custom(resource: Resource) -> bool:
    """Whether the tags carry a whole architecture (gpuplan:architecture), which sizes any model id."""
    return bool(tags_of(resource).get(PREFIX + "architecture"))


def _untagged_serving(resource: Resource, facts: ServingFacts | None) -> TaggedWorkload | None:
    """The least an engine container needs (its model's weights, one sequence of its context), for an
    endpoint that carries no gpuplan tags: enough to block a model that cannot fit at all."""
    if facts is None or facts.preset is None:
        return None
    arch = presets()[facts.preset]
    return TaggedWorkload(workload=resource.name, kind="inference", model=facts.preset, architecture=arch,
                          precision=facts.precision or "bf16",
                          layout={"tp": facts.tp or 1, "pp": facts.pp, "batch": facts.batch or 1, "nodes": 1},
                          details={"ctx": facts.context_tokens or min(arch.max_context_tokens or 4096, 4096), "kv": facts.kv_cache_precision or "fp16"},
                          headroom=0.0, environment="", region="")


def _same(a, b) -> bool:
    return a.model_dump(exclude={"source"}) == b.model_dump(exclude={"source"})


def reconcile(tagged: TaggedWorkload, facts: ServingFacts | None, exported: dict[str, int],
              count: int | None) -> tuple[TaggedWorkload, list[str]]:
    """The workload as the facts say it runs, every tag that disagrees, and the architecture to size."""
    disagreements: list[str] = []
    layout, details, precision = dict(tagged.layout), dict(tagged.details), tagged.precision
    arch, model = tagged.architecture, tagged.model

    def differs(tag: str, key: str, written, actual, where: str) -> None:
        disagreements.append(f"tag {tag} says {key}={written} but {where} {actual}")

    if facts is not None:
        if facts.preset is not None and not _same(presets()[facts.preset], tagged.architecture):
            disagreements.append(f"tag {PREFIX}model says {tagged.model} but the container loads {facts.model_id} "
                                 f"({facts.preset})")
            arch = presets()[facts.preset]
            model = facts.preset
        ranks = tagged.int_of("adp")
        for key, actual, name in (("tp", facts.tp, "tensor parallel degree"), ("pp", facts.pp, "pipeline degree"),
                                  ("adp", facts.attention_dp, "attention data-parallel size"),
                                  ("batch", facts.batch, "batch size")):
            written = -(-tagged.int_of(key) // ranks) * ranks if key == "batch" else tagged.int_of(key)  # per rank
            if actual is not None and actual != written:
                differs(LAYOUT, key, tagged.int_of(key), actual, f"the engine's {name} is")
                layout[key] = actual
        if facts.context_tokens is not None and facts.context_tokens != details["ctx"]:
            differs(PREFIX + "serving", "ctx", details["ctx"], facts.context_tokens, "the engine's context is")
            details["ctx"] = facts.context_tokens
        # The KV cache is as wide as the engine's env makes it, whatever the tag says: no KV dtype variable
        # (or auto) keeps the model's 16-bit dtype, so a kv=fp8 tag without the variable is sized at 16 bits.
        kv = facts.kv_cache_precision or ("fp16" if details.get("kv") in QUANTISED_KV else None)
        if kv is not None and BYTES_PER_PARAM.get(kv) != BYTES_PER_PARAM.get(details.get("kv")):
            differs(PREFIX + "serving", "kv", details.get("kv"), kv, "the engine's KV cache is")
            details["kv"] = kv
        if facts.precision is not None and facts.precision != tagged.precision and not (
                facts.precision in ("bf16", "fp16") and tagged.precision == "int8"):
            # int8 on vLLM comes from the checkpoint's own quantisation config, beside a 16-bit dtype
            differs(PREFIX + "precision", "precision", tagged.precision, facts.precision, "the container loads")
            precision = facts.precision
    for key, actual in exported.items():
        if actual != tagged.int_of(key, 0 if key == "zero" else 1):
            differs(LAYOUT, key, tagged.int_of(key, 0 if key == "zero" else 1), actual, "the nodes' user data exports")
            layout[key] = actual
    if count is not None and count != tagged.int_of("nodes"):
        differs(LAYOUT, "nodes", tagged.int_of("nodes"), count, "the resource runs")
        layout["nodes"] = count
    effective = dataclasses.replace(tagged, layout=layout, details=details, precision=precision, architecture=arch,
                                    model=model)
    return effective, disagreements


def _group_sizes(resources: list[Resource]) -> dict[str, int]:
    """Launch template name → the node count of the Auto Scaling group that starts it."""
    return {template.name: size for group in resources if group.type == ASG
            if (size := group_size(group)) is not None for template in templates_of(group, resources)}


def accelerator_memory_fits(resources: list[Resource], config: dict, catalog: Catalog) -> Iterable[Finding]:
    strict = config.get("strict", True)
    sizes = _group_sizes(resources)
    for resource in resources:
        slots = instance_slots(resource)
        if not slots:
            continue
        try:
            tagged = read_tags(tags_of(resource))
        except TagError as exc:
            yield Finding(f"{resource.name}: {exc}", tags_of(resource).get(PREFIX + "workload"), resource.name)
            continue
        facts, problems = _serving_facts(resource, resources, strict)
        if tagged is None:
            # Untagged: accelerator-resource-planned reports it when the type is accelerated. A container
            # that loads a known model is sized from its own facts all the same, whatever the type.
            untagged = _untagged_serving(resource, facts)
            if facts is not None:  # the container is in the stack: what it says is wrong blocks, tagged or not
                for message in problems:
                    yield Finding(f"{resource.name}: {message}", None, resource.name)
            if untagged is not None:
                yield from _fits(resource, untagged, slots, catalog, float(config.get("minHeadroom", 0.0)),
                                 facts.memory_fraction or 1.0)
            continue
        exported = training_exports(resource) if resource.type == LAUNCH_TEMPLATE and facts is None else {}
        count = sizes.get(resource.name) if resource.type == LAUNCH_TEMPLATE else None
        if any(planned_type(s.instance_type) != s.instance_type for s in slots):
            count = None  # UltraServer members: the plan counts UltraServers (planner/hardware/ultraservers.py)
        if resource.type in ENDPOINT_CONFIGS or resource.type == ASG:
            counts = {s.count for s in slots if s.count is not None}
            count = max(counts) if counts else None
        effective, disagreements = reconcile(tagged, facts, exported, count)
        for message in problems + disagreements:
            yield Finding(f"{resource.name}: {message}", tagged.workload, resource.name)
        headroom = max(float(config.get("minHeadroom", 0.0)), tagged.headroom)
        fraction = facts.memory_fraction if facts is not None and facts.memory_fraction is not None else 1.0
        yield from _fits(resource, effective, slots, catalog, headroom, fraction)


def _fits(resource: Resource, tagged: TaggedWorkload, slots, catalog: Catalog, headroom: float,
          fraction: float) -> Iterable[Finding]:
    prefix = "ml." if resource.type in SAGEMAKER_SERVICE else ""
    for slot in {s.instance_type: s for s in slots}.values():
        itype = catalog.instance(planned_type(slot.instance_type))  # a member sized as its UltraServer
        if itype is None:
            yield Finding(f"{resource.name}: {prefix}{slot.instance_type} ({slot.where}) is not in the gpuplan catalog, so "
                          "its accelerator memory cannot be checked; add it to the catalog overlay (gpuplan:catalog in "
                          "the stack, catalogOverlay in the policy config)", tagged.workload, resource.name)
            continue
        need = required_memory(tagged, catalog, itype.name)
        if isinstance(need, str):
            yield Finding(f"{resource.name}: {need}", tagged.workload, resource.name)
            continue
        _, accel = catalog.sharded(itype)  # per NeuronCore on Neuron types
        usable = accel.memory_bytes * min(1 - headroom, fraction)
        if need.total > usable:
            fits = fitting_types(tagged, catalog, service_of(resource), headroom)
            limit = (f"{headroom:.0%} headroom" if fraction >= 1 - headroom
                     else f"the engine's {fraction:.0%} memory fraction")
            device = f"{accel.name} NeuronCore" if accel.is_neuron else accel.name
            model = "custom architecture" if tagged.model == "custom" else tagged.model
            yield Finding(
                f"{prefix}{itype.name} has {_gib(accel.memory_bytes)} per {device} ({_gib(usable)} usable after {limit}) "
                f"but workload {tagged.workload} ({model}) needs {_gib(need.total)} per device at TP "
                f"{tagged.int_of('tp')} × PP {tagged.int_of('pp')} (weights {_gib(need.weights)}, KV cache "
                f"{_gib(need.kv_cache)}, activations {_gib(need.activations)}, optimizer {_gib(need.optimizer)}); "
                + (f"types that fit: {', '.join(fits)}" if fits else "no catalog type fits this layout"),
                tagged.workload, resource.name)
