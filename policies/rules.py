"""The policy rules as plain functions over resource properties (design.md): the CrossGuard pack
(policies/pack.py) and `gpuplan check` both run exactly these. Requirements are recomputed from the
facts on the resources (policies/fit.py); tags say what was planned and are checked against them."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Callable, Iterable

from planner.hardware.catalog import Catalog, bundled, with_overlay
from planner.economics.cost import hourly_price
from planner.workload.errors import SpecError
from planner.hardware.hardware_facts import hardware_redefinitions
from planner.report.tags import TaggedWorkload, TagError, read_tags
from planner.hardware.units import HOURS_PER_MONTH
from policies.fit import Finding, accelerator_memory_fits, service_of
from policies.ingress import ingress_union
from policies.network import multi_node_training_network
from policies.resources import (CARRIES_INSTANCE_TYPE, ENDPOINT_CONFIGS, UNKNOWN_SENTINELS, Resource, UnknownValueError,
                                family_of, instance_slots, is_accelerated, requirement_blocks, tags_of)
from policies.secure import secure_defaults

# Every family the bundled catalog holds (the planner can choose any of them, trn1n included). An UltraServer
# (u-p6e-gb200x72, u-trn2x64) is not a launchable type: its nodes launch as its family's instances (p6e-gb200.36xlarge).
DEFAULT_FAMILIES = sorted({family_of(t.name) for t in bundled().instance_types if not t.name.startswith("u-")} |
                          {t.family for t in bundled().instance_types})
# What the gating rules read: whole top-level properties, and leaves wherever they sit (a variant's
# instance type, an interface's type). Computed names and IDs (a variant's model name, the launch
# template id an Auto Scaling group points at) are unknown at every first preview and gate nothing.
GATING_PROPS = {"instanceType", "instanceTypes", "tags", "desiredCapacity", "maxSize", "minSize", "metadataOptions",
                "policy", "instanceRequirements", "scalingConfig", "policyArn", "managedPolicyArns"}
GATING_LEAVES = {"instanceType", "initialInstanceCount", "interfaceType", "encrypted", "cidrBlocks",
                 "ipv6CidrBlocks", "cidrIpv4", "cidrIpv6", "httpTokens", "httpPutResponseHopLimit", "volumeSize",
                 "associatePublicIpAddress", "allowedInstanceTypes", "environment"}


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    level: str  # advisory | mandatory
    config_schema: dict
    check: Callable[..., Iterable[Finding]]
    stack: bool = False  # checks the whole stack at once (needs sibling resources)


def _planned(resource: Resource) -> TaggedWorkload | None:
    """The tagged plan, or None when there is none or it is malformed (accelerator-memory-fits names
    the malformed tag; the other rules have nothing trustworthy to check)."""
    try:
        return read_tags(tags_of(resource))
    except TagError:
        return None


def _planned_types(resource: Resource, catalog: Catalog):
    """(plan, catalog instance type, count) for each catalog type a planned resource names."""
    tagged = _planned(resource)
    if tagged is None:
        return
    for slot in instance_slots(resource):
        itype = catalog.instance(slot.instance_type)
        if itype is not None:
            yield tagged, itype, slot.count


def accelerator_planned(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    if "gpuplan:workload" in tags_of(resource):
        return
    for slot in instance_slots(resource):
        if is_accelerated(slot.instance_type):
            yield Finding(f"unplanned accelerator resource: {slot.instance_type} ({slot.where}) carries no "
                          "gpuplan:workload tag, so no memory or cost check can run; plan it with gpuplan (its "
                          "components tag what they create)")


def _requirement_reach(requirements: Mapping, allowed: list[str], catalog: Catalog) -> str | None:
    """Why attribute-based selection may start a type outside the allow-list or the catalog, if it may."""
    count = requirements.get("acceleratorCount") or {}
    if isinstance(count, Mapping) and count.get("max") == 0:
        return None  # no accelerators at all
    patterns = [str(p) for p in requirements.get("allowedInstanceTypes") or []]
    if not patterns:
        return ("instanceRequirements may pick any accelerator type; list allowedInstanceTypes from the allowed "
                "families or set acceleratorCount.max = 0")
    for pattern in patterns:
        family = family_of(pattern)
        if any(c in family for c in "*?["):  # "p*" reaches p3 and families not yet released
            return f"allowedInstanceTypes {pattern!r} has a wildcard in the family; name the families (p5.*)"
        if is_accelerated(pattern) and family not in allowed:
            return f"allowedInstanceTypes {pattern!r}: family {family} is not allowed"
    return None


def instance_family_allowed(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    allowed = [f.lower() for f in config.get("allowedFamilies", DEFAULT_FAMILIES)]
    workload = tags_of(resource).get("gpuplan:workload")
    for slot in instance_slots(resource):
        family = family_of(slot.instance_type)
        if not is_accelerated(slot.instance_type):
            continue
        if family not in allowed:
            yield Finding(f"{slot.instance_type} ({slot.where}): family {family} is not allowed "
                          f"(allowed: {', '.join(allowed)})", workload)
        elif "." in slot.instance_type and catalog.instance(slot.instance_type) is None:
            yield Finding(f"{slot.instance_type} ({slot.where}) is not in the gpuplan catalog, so no rule can check "
                          "it; add it to the catalog overlay", workload)
    for where, requirements in requirement_blocks(resource):
        problem = _requirement_reach(requirements, allowed, catalog)
        if problem:
            yield Finding(f"{resource.name}: {where}: {problem}", workload)


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
    """Serving runs every hour: its on-demand cost per month against maxUsdPerMonth. A training cluster
    runs for one run: its cost per run (the run-hours tag) against maxUsdPerTrainingRun. A
    workloadBudgets entry is in the workload's own unit."""
    for tagged, itype, count in _planned_types(resource, catalog):
        serving = tagged.kind == "inference"
        default = config.get("maxUsdPerMonth" if serving else "maxUsdPerTrainingRun")
        ceiling = (config.get("workloadBudgets") or {}).get(tagged.workload, default)
        if ceiling is None:
            return
        nodes = count if count is not None else tagged.int_of("nodes")
        price = hourly_price(catalog, itype, tagged.region, service_of(resource), "on-demand")
        if isinstance(price, str):
            yield Finding(f"{itype.name}: cannot price ({price})", tagged.workload)
            continue
        if serving:
            cost, what = price.usd_per_hour * nodes * HOURS_PER_MONTH, "/month"
        elif tagged.run_hours is None:
            yield Finding(f"{itype.name}: no gpuplan:run-hours tag, so a run cannot be priced; re-plan the workload",
                          tagged.workload)
            continue
        else:
            cost, what = price.usd_per_hour * nodes * tagged.run_hours, f" per run ({tagged.run_hours:g} h)"
        if cost > float(ceiling):
            budget = "" if serving else " per-run"
            yield Finding(f"{itype.name} × {nodes} costs ${cost:,.0f}{what} on demand, over the ${float(ceiling):,.0f}"
                          f"{budget} budget for {tagged.workload}", tagged.workload)


def endpoint_availability(resource: Resource, config: dict, catalog: Catalog) -> Iterable[Finding]:
    if resource.type not in ENDPOINT_CONFIGS:
        return
    tagged = _planned(resource)
    if tagged is not None and tagged.environment != "production":
        return
    minimum = int(config.get("minInstances", 2))
    for slot in instance_slots(resource):
        if slot.count is not None and slot.count < minimum:
            yield Finding(f"production endpoint variant runs {slot.count} × ml.{slot.instance_type}; keep at least {minimum} "
                          "instances so one failure or deployment does not take it down",
                          tagged.workload if tagged else None)


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


class HardwareRedefined(SpecError):
    """A policy config's catalogOverlay restates a bundled part's physical facts."""


REDEFINED = ("overlays may add instance types, accelerators and prices, not change a bundled part's physical "
             "facts (datasheet figures); give the part a new name if it really differs")


def bundled_hardware_unchanged(resources: list[Resource], config: dict, catalog: Catalog) -> Iterable[Finding]:
    """The catalog the rules ran with (the stack's gpuplan:catalog in `gpuplan check`, the policy
    config's catalogOverlay in the pack) states every bundled part as the bundled catalog does."""
    changes = hardware_redefinitions(catalog, bundled())
    if changes:
        yield Finding(f"the catalog overlay redefines bundled hardware: {'; '.join(changes[:5])}"
                      + (f" (+{len(changes) - 5} more)" if len(changes) > 5 else "") + f"; {REDEFINED}", None)


OVERLAY = {"catalogOverlay": {"type": "object", "description": "a gpuplan catalog overlay document (the same "
                                                                 "YAML structure as gpuplan:catalog, as JSON)"}}
RULES = [
    Rule("accelerator-memory-fits", "Accelerator memory holds the workload the resources will run (weights, KV "
         "cache at peak, training state), recomputed from the model the container loads, the engine's limits and "
         "the node count; gpuplan tags that disagree or are malformed block", "mandatory",
         {"minHeadroom": {"type": "number", "minimum": 0, "maximum": 0.9,
                          "description": "a headroom floor over the planned one"}, **OVERLAY},
         accelerator_memory_fits, stack=True),
    Rule("accelerator-resource-planned", "Accelerator resources carry a gpuplan plan, so the memory and cost "
         "rules can check them", "mandatory", {}, accelerator_planned),
    Rule("instance-family-allowed", "Accelerator instance types, on every resource kind that can start one, are "
         "in allowed families and in the catalog", "mandatory",
         {"allowedFamilies": {"type": "array", "items": {"type": "string"}, "default": DEFAULT_FAMILIES}, **OVERLAY},
         instance_family_allowed),
    Rule("multi-node-training-network", "Multi-node training has EFA on every network card and its nodes in a "
         "cluster placement group", "mandatory", {}, multi_node_training_network, stack=True),
    Rule("tensor-parallel-within-node", "Tensor parallelism stays inside one node", "mandatory", {},
         tensor_parallel_within_node),
    Rule("precision-supported", "The accelerator supports the planned precision", "mandatory", {},
         precision_supported),
    Rule("monthly-budget", "On-demand cost stays under the budget: serving per month, training per run", "advisory",
         {"maxUsdPerMonth": {"type": "number", "minimum": 0},
          "maxUsdPerTrainingRun": {"type": "number", "minimum": 0},
          "workloadBudgets": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}},
          **OVERLAY}, monthly_budget),
    Rule("endpoint-availability", "Production endpoints keep at least two instances", "advisory",
         {"minInstances": {"type": "integer", "minimum": 1, "default": 2}}, endpoint_availability),
    Rule("secure-defaults", "IMDSv2 with hop limit 1, encrypted volumes, no public IPs on accelerator nodes, no "
         "ingress from the internet, no broad IAM grants", "mandatory", {}, secure_defaults),
    Rule("bundled-hardware-unchanged", "A catalog overlay (the stack's or the policy config's) adds parts and "
         "prices but restates no bundled accelerator's or instance type's physical facts", "mandatory", {**OVERLAY},
         bundled_hardware_unchanged, stack=True),
    Rule("ingress-from-internet", "A security group's inline and standalone ingress rules together open no more "
         "than a /16 of public IPv4 or a /48 of IPv6", "mandatory", {}, ingress_union, stack=True),
    Rule("gating-values-known", "Strict mode: the values the gating rules read are known at preview", "mandatory",
         {"strict": {"type": "boolean", "default": True}}, gating_values_known),
]
EVERY_RESOURCE = {"secure-defaults", "gating-values-known"}  # the others read instance-carrying resources only
RULES_BY_NAME = {rule.name: rule for rule in RULES}


@dataclass(frozen=True)
class Violation:
    policy: str
    level: str
    resource: str
    workload: str | None
    message: str


_OVERLAID: dict[tuple[int, str], tuple[Catalog, Catalog, list[str]]] = {}


def catalog_for(rule_config: Mapping, catalog: Catalog) -> Catalog:
    """The catalog with the policy config's catalogOverlay laid over it (types added by a stack's overlay),
    built once per overlay: the pack asks for it on every resource it validates."""
    overlay = rule_config.get("catalogOverlay")
    if not overlay:
        return catalog
    key = (id(catalog), json.dumps(overlay, sort_keys=True, default=str))
    if key not in _OVERLAID:  # the base is kept in the value, so its id is not reused while cached
        overlaid = with_overlay(catalog, dict(overlay), "policy config catalogOverlay")
        _OVERLAID[key] = (catalog, overlaid, hardware_redefinitions(overlaid, catalog))
    _, overlaid, changes = _OVERLAID[key]
    if changes:  # the rule must not run on forged hardware: its caller reports this at the rule's level
        raise HardwareRedefined(f"{'; '.join(changes[:5])}; {REDEFINED}", file="policy config catalogOverlay")
    return overlaid


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
        try:
            rule_catalog = catalog_for(rule_config, catalog)
        except HardwareRedefined as exc:
            violations.append(Violation(rule.name, level, "stack", None, f"{rule.name}: {exc}"))
            continue
        if rule.stack:
            found = [(f, f.resource or f.workload or "stack") for f in rule.check(resources, rule_config, rule_catalog)]
        else:
            found = [(f, r.name) for r in resources if r.type in CARRIES_INSTANCE_TYPE or rule.name in EVERY_RESOURCE
                     for f in rule.check(r, rule_config, rule_catalog)]
        violations += [Violation(rule.name, level, name, f.workload, f.message) for f, name in found]
    return violations
