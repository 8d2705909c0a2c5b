"""The policy rules as plain functions over resource properties (design.md): the CrossGuard pack
(policies/pack.py) and `gpuplan check` both run exactly these. Requirements are recomputed from the
resource's own tags with the planner's estimators; nothing relies on values unknown at preview."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from typing import Callable, Iterable

try:  # the pack runs under pulumi-policy; `gpuplan check` reads plain dicts and needs no proxy error
    from pulumi_policy.proxy import UnknownValueError
except ImportError:  # pragma: no cover
    class UnknownValueError(Exception):  # type: ignore[no-redef]
        pass

from planner.catalog import Catalog, bundled
from planner.cost import hourly_price
from planner.tags import TaggedWorkload, read_tags, required_memory
from planner.units import GIB, HOURS_PER_MONTH
from policies.resources import (ASG, CARRIES_INSTANCE_TYPE, ENDPOINT_CONFIG, IAM_POLICY, INSTANCE, LAUNCH_TEMPLATE,
                                PLACEMENT_GROUP, ROLE_POLICY, SECURITY_GROUP, SG_INGRESS_RULE, SG_RULE, Resource,
                                family_of, instance_slots, is_accelerated, tags_of)

# Every family the bundled catalog holds (the planner can choose any of them, trn1n included).
DEFAULT_FAMILIES = sorted({family_of(t.name) for t in bundled().instance_types})
# pulumi-policy's sentinels for values unknown at preview (pulumi_policy/proxy.py), as they arrive in props.
UNKNOWN_SENTINELS = {"1c4a061d-8072-4f0a-a4cb-0ff528b18fe7", "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
                     "04da6b54-80e4-46f7-96ec-b56ff0331ba9", "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
                     "dd056dcd-154b-4c76-9bd3-c8f88648b5ff"}
# What the gating rules read: whole top-level properties, and leaves wherever they sit (a variant's
# instance type, an interface's type). Computed names and IDs (a variant's model name, the launch
# template id an Auto Scaling group points at) are unknown at every first preview and gate nothing.
GATING_PROPS = {"instanceType", "tags", "desiredCapacity", "maxSize", "minSize", "metadataOptions", "policy"}
GATING_LEAVES = {"instanceType", "initialInstanceCount", "interfaceType", "encrypted", "cidrBlocks",
                 "ipv6CidrBlocks", "httpTokens", "volumeSize"}
OPEN_CIDRS = {"0.0.0.0/0", "::/0"}
SUGGESTIONS = 3


@dataclass(frozen=True)
class Finding:
    message: str
    workload: str | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    level: str  # advisory | mandatory
    config_schema: dict
    check: Callable[..., Iterable[Finding]]
    stack: bool = False  # checks the whole stack at once (needs sibling resources)


def _service(resource: Resource) -> str:
    return "sagemaker" if resource.type == ENDPOINT_CONFIG else "ec2"


def _planned(resource: Resource) -> TaggedWorkload | None:
    return read_tags(tags_of(resource))


def _gib(value: float) -> str:
    return f"{value / GIB:.1f} GiB"


def _device_name(accel) -> str:
    return f"{accel.name} NeuronCore" if accel.is_neuron else accel.name


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


def _planned_types(resource: Resource, catalog: Catalog):
    """(plan, catalog instance type, count) for each catalog type a planned resource names."""
    tagged = _planned(resource)
    if tagged is None:
        return
    for instance_type, count in instance_slots(resource):
        itype = catalog.instance(instance_type)
        if itype is not None:
            yield tagged, itype, count


def accelerator_memory_fits(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    tagged = _planned(resource)
    if tagged is None:
        return
    headroom = float(config.get("minHeadroom", tagged.headroom))
    for instance_type, _ in instance_slots(resource):
        itype = catalog.instance(instance_type)
        if itype is None:
            if is_accelerated(instance_type):
                yield Finding(f"{instance_type} is not in the gpuplan catalog, so its accelerator memory cannot be "
                              "checked; add it with a catalog overlay", tagged.workload)
            continue
        need = required_memory(tagged, catalog, itype.name)
        if isinstance(need, str):
            yield Finding(need, tagged.workload)
            continue
        _, accel = catalog.sharded(itype)  # per NeuronCore on Neuron types
        usable = accel.memory_bytes * (1 - headroom)
        if need.total > usable:
            prefix = "ml." if resource.type == ENDPOINT_CONFIG else ""
            fits = fitting_types(tagged, catalog, _service(resource), headroom)
            yield Finding(
                f"{prefix}{itype.name} has {_gib(accel.memory_bytes)} per {_device_name(accel)} ({_gib(usable)} usable after "
                f"{headroom:.0%} headroom) but workload {tagged.workload} needs {_gib(need.total)} per device at TP "
                f"{tagged.int_of('tp')} × PP {tagged.int_of('pp')} (weights {_gib(need.weights)}, KV cache "
                f"{_gib(need.kv_cache)}, activations {_gib(need.activations)}, optimizer {_gib(need.optimizer)}); "
                + (f"types that fit: {', '.join(fits)}" if fits else "no catalog type fits this layout"),
                tagged.workload)


def accelerator_planned(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    if _planned(resource) is not None:
        return
    for instance_type, _ in instance_slots(resource):
        if is_accelerated(instance_type):
            yield Finding(f"unplanned accelerator resource: {instance_type} carries no gpuplan:workload tag, so no "
                          "memory or cost check ran; plan it with gpuplan or tag it")


def instance_family_allowed(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    allowed = [f.lower() for f in config.get("allowedFamilies", DEFAULT_FAMILIES)]
    for instance_type, _ in instance_slots(resource):
        family = family_of(instance_type)
        if is_accelerated(instance_type) and family not in allowed:
            tagged = _planned(resource)
            yield Finding(f"{instance_type}: family {family} is not allowed (allowed: {', '.join(allowed)})",
                          tagged.workload if tagged else None)


def tensor_parallel_within_node(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    for tagged, chip_type, _ in _planned_types(resource, catalog):
        tp = tagged.int_of("tp")
        itype, accel = catalog.sharded(chip_type)
        if tp > itype.accelerators_per_node:
            unit = "NeuronCores" if accel.is_neuron else "accelerators"
            yield Finding(f"tensor parallel {tp} spans nodes: {itype.name} has {itype.accelerators_per_node} "
                          f"{unit}; TP all-reduces twice per layer and must stay inside one NVLink domain "
                          "(use pipeline or data parallelism across nodes)", tagged.workload)


def precision_supported(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    for tagged, itype, _ in _planned_types(resource, catalog):
        accel = catalog.accelerator(itype.accelerator)
        p, s = tagged.precision, accel.supports
        problem = None
        if p == "fp8" and not s.fp8:
            problem = f"{accel.name} has no fp8 tensor cores"
        elif p == "bf16" and not s.bf16:
            problem = f"{accel.name} has no bf16 support"
        elif p == "int4" and not s.int4_kernels:
            cc = accel.compute_capability
            problem = f"{accel.name} has no int4 kernels" + (f" (compute capability {cc}; needs ≥ 7.5)" if cc else
                                                             " (the Neuron SDK has no int4 weight kernels)")
        elif tagged.kind != "inference" and not s.training:
            problem = f"{accel.name} is inference-only and cannot train"
        if tagged.kind == "inference" and tagged.details.get("kv") == "fp8" and not s.fp8:
            problem = f"{accel.name} cannot hold an fp8 KV cache"
        if problem:
            yield Finding(f"{itype.name}: precision {p}: {problem}", tagged.workload)


def monthly_budget(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    for tagged, itype, count in _planned_types(resource, catalog):
        ceiling = (config.get("workloadBudgets") or {}).get(tagged.workload, config.get("maxUsdPerMonth"))
        if ceiling is None:
            return
        nodes = count if count is not None else tagged.int_of("nodes")
        price = hourly_price(catalog, itype, tagged.region, _service(resource), "on-demand")
        if isinstance(price, str):
            yield Finding(f"{itype.name}: cannot price ({price})", tagged.workload)
            continue
        monthly = price.usd_per_hour * nodes * HOURS_PER_MONTH
        if monthly > float(ceiling):
            yield Finding(f"{itype.name} × {nodes} costs ${monthly:,.0f}/month on demand, over the ${float(ceiling):,.0f} "
                          f"budget for {tagged.workload}", tagged.workload)


def endpoint_availability(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    if resource.type != ENDPOINT_CONFIG:
        return
    tagged = _planned(resource)
    if tagged is not None and tagged.environment != "production":
        return
    minimum = int(config.get("minInstances", 2))
    for instance_type, count in instance_slots(resource):
        if count is not None and count < minimum:
            yield Finding(f"production endpoint variant runs {count} × ml.{instance_type}; keep at least {minimum} "
                          "instances so one failure or deployment does not take it down",
                          tagged.workload if tagged else None)


def _policy_actions(document: str) -> list[str]:
    try:
        doc = json.loads(document) if isinstance(document, str) else document
    except ValueError:
        return []
    statements = doc.get("Statement", [])
    statements = statements if isinstance(statements, list) else [statements]
    actions = []
    for s in statements:
        if s.get("Effect") == "Allow":
            a = s.get("Action", [])
            actions += a if isinstance(a, list) else [a]
    return actions


def secure_defaults(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    p, tagged = resource.props, _planned(resource)
    workload = tagged.workload if tagged else None
    if resource.type in (LAUNCH_TEMPLATE, INSTANCE):
        if (p.get("metadataOptions") or {}).get("httpTokens") != "required":
            yield Finding(f"{resource.name}: IMDSv2 is not required (set metadataOptions.httpTokens = required)", workload)
        for mapping in p.get("blockDeviceMappings") or []:
            ebs = mapping.get("ebs") or {}
            if str(ebs.get("encrypted", "false")).lower() != "true":
                yield Finding(f"{resource.name}: volume {mapping.get('deviceName')} is not encrypted", workload)
        if resource.type == INSTANCE and (p.get("rootBlockDevice") or {}).get("encrypted") is not True:
            yield Finding(f"{resource.name}: root volume is not encrypted", workload)
    if resource.type == SECURITY_GROUP:
        for rule in p.get("ingress") or []:
            cidrs = set(rule.get("cidrBlocks") or []) | set(rule.get("ipv6CidrBlocks") or [])
            if cidrs & OPEN_CIDRS:
                yield Finding(f"{resource.name}: ingress from {', '.join(sorted(cidrs & OPEN_CIDRS))} on ports "
                              f"{rule.get('fromPort')}-{rule.get('toPort')}; clusters accept traffic only from "
                              "themselves", workload)
    if resource.type in (SG_RULE, SG_INGRESS_RULE):
        cidrs = set(p.get("cidrBlocks") or []) | set(p.get("ipv6CidrBlocks") or []) | \
            {p.get("cidrIpv4"), p.get("cidrIpv6")} - {None}
        if (resource.type == SG_INGRESS_RULE or p.get("type") == "ingress") and cidrs & OPEN_CIDRS:
            yield Finding(f"{resource.name}: ingress rule open to {', '.join(sorted(cidrs & OPEN_CIDRS))}", workload)
    if resource.type in (ROLE_POLICY, IAM_POLICY):
        wild = [a for a in _policy_actions(p.get("policy") or "{}") if a == "*" or a.endswith(":*")]
        if wild:
            yield Finding(f"{resource.name}: wildcard IAM actions {', '.join(wild)}; grant the actions the role uses")


def multi_node_training_network(resources: list[Resource], config: dict, catalog: Catalog) -> Iterable[Finding]:
    """More than one node needs an EFA-capable type, EFA interfaces and a cluster placement group
    registered beside it (siblings under one component: the placement group's name is unknown at preview)."""
    cluster_groups = {r.parent for r in resources if r.type == PLACEMENT_GROUP and r.props.get("strategy") == "cluster"}
    for r in resources:
        tagged = _planned(r)
        if r.type not in (LAUNCH_TEMPLATE, ASG) or tagged is None or tagged.kind == "inference":
            continue
        nodes = tagged.int_of("nodes")
        if r.type == ASG:
            nodes = int(r.props.get("desiredCapacity") or nodes)
        if nodes <= 1:
            continue
        if r.type == LAUNCH_TEMPLATE:
            itype = catalog.instance(r.props.get("instanceType") or "")
            if itype is not None and not itype.efa:
                yield Finding(f"{itype.name} has no EFA, and {nodes} nodes train over the network", tagged.workload)
            efa = [n for n in r.props.get("networkInterfaces") or [] if n.get("interfaceType") in ("efa", "efa-only")]
            if not efa:
                yield Finding(f"{r.name}: {nodes} nodes but the launch template has no EFA interface", tagged.workload)
            elif itype is not None and len(efa) < itype.network_cards:
                yield Finding(f"{r.name}: {len(efa)} EFA interface(s) for {itype.network_cards} network cards uses "
                              f"{len(efa) / itype.network_cards:.0%} of {itype.name}'s EFA bandwidth", tagged.workload)
            if r.parent not in cluster_groups:
                yield Finding(f"{r.name}: {nodes} nodes without a cluster placement group beside them", tagged.workload)


def _unknown_paths(value, path: str) -> Iterable[str]:
    """Paths under `value` that are unknown: a raw sentinel (offline), or an access that pulumi-policy's
    read-only proxy refuses (during preview)."""
    if isinstance(value, str):
        if value in UNKNOWN_SENTINELS:
            yield path
        return
    if isinstance(value, Mapping):
        keys: Iterable = list(value)
        child = "{path}.{key}"
    elif isinstance(value, Sequence):
        keys, child = range(len(value)), "{path}[{key}]"
    else:
        return
    for key in keys:
        where = child.format(path=path, key=key)
        try:
            item = value[key]
        except UnknownValueError:
            yield where
            continue
        yield from _unknown_paths(item, where)


def gating_values_known(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    """Strict mode: a value the gating rules read that is unknown at preview blocks. CrossGuard itself
    turns an unknown value a rule touches into an advisory "can't run policy", so without this a
    computed instance type or tag set would pass every mandatory rule at preview."""
    if not config.get("strict", True):
        return
    if isinstance(resource.props, dict):  # offline: plain values, so one scan of the text finds any sentinel
        text = repr(resource.props)
        if not any(sentinel in text for sentinel in UNKNOWN_SENTINELS):
            return
    unknown = []
    for path in _unknown_paths(resource.props, ""):
        parts = re.findall(r"[^.\[\]]+", path)
        if parts[0] in GATING_PROPS or GATING_LEAVES.intersection(parts):
            unknown.append(path.lstrip("."))
    if unknown:
        yield Finding(f"{resource.name}: {', '.join(unknown[:3])} unknown at preview, so no rule can check it; set it "
                      "from literals (or run with strict: false to accept the advisory)", tags_of(resource).get(
                          "gpuplan:workload"))


RULES = [
    Rule("accelerator-memory-fits", "Accelerator memory holds the planned workload (weights, KV cache at peak, "
         "training state), recomputed from the resource's tags", "mandatory",
         {"minHeadroom": {"type": "number", "minimum": 0, "maximum": 0.9,
                          "description": "override the planned memory headroom"}}, accelerator_memory_fits),
    Rule("accelerator-resource-planned", "Accelerator resources carry a gpuplan plan (advisory companion of "
         "accelerator-memory-fits)", "advisory", {}, accelerator_planned),
    Rule("instance-family-allowed", "Accelerator instance families are on the allowed list", "mandatory",
         {"allowedFamilies": {"type": "array", "items": {"type": "string"}, "default": DEFAULT_FAMILIES}},
         instance_family_allowed),
    Rule("multi-node-training-network", "Multi-node training has EFA on every network card and a cluster "
         "placement group", "mandatory", {}, multi_node_training_network, stack=True),
    Rule("tensor-parallel-within-node", "Tensor parallelism stays inside one node", "mandatory", {},
         tensor_parallel_within_node),
    Rule("precision-supported", "The accelerator supports the planned precision", "mandatory", {},
         precision_supported),
    Rule("monthly-budget", "Monthly on-demand cost stays under the budget", "advisory",
         {"maxUsdPerMonth": {"type": "number", "minimum": 0},
          "workloadBudgets": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}}},
         monthly_budget),
    Rule("endpoint-availability", "Production endpoints keep at least two instances", "advisory",
         {"minInstances": {"type": "integer", "minimum": 1, "default": 2}}, endpoint_availability),
    Rule("secure-defaults", "IMDSv2, encrypted volumes, no open ingress, no wildcard IAM actions", "mandatory", {},
         secure_defaults),
    Rule("gating-values-known", "Strict mode: the values the gating rules read are known at preview", "mandatory",
         {"strict": {"type": "boolean", "default": True}}, gating_values_known),
]
RULES_BY_NAME = {rule.name: rule for rule in RULES}


@dataclass(frozen=True)
class Violation:
    policy: str
    level: str
    resource: str
    workload: str | None
    message: str


def evaluate(resources: list[Resource], config: dict | None = None, catalog: Catalog | None = None) -> list[Violation]:
    """Every rule over every resource, with per-rule config: {"all": level, rule: level | {enforcementLevel, ...}}."""
    config = config or {}
    catalog = catalog or bundled()
    violations = []
    for rule in RULES:
        setting = config.get(rule.name, config.get("all", {}))
        rule_config = setting if isinstance(setting, dict) else {"enforcementLevel": setting}
        level = rule_config.get("enforcementLevel", config.get("all") if isinstance(config.get("all"), str) else rule.level)
        if level == "disabled":
            continue
        if rule.stack:
            found = [(f, r.name) for f in rule.check(resources, rule_config, catalog)
                     for r in [Resource("", f.workload or "stack", {})]]
        else:
            found = [(f, r.name) for r in resources
                     if r.type in CARRIES_INSTANCE_TYPE or rule.name in ("secure-defaults", "gating-values-known")
                     for f in rule.check(r, rule_config, catalog)]
        violations += [Violation(rule.name, level, name, f.workload, f.message) for f, name in found]
    return violations
