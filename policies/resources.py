"""What the rules read from a resource: every place it names an instance type (on every resource kind
that can start an accelerator), its count, its tags, and the links to its siblings. Works on plain
dicts and on pulumi_policy's proxied props alike (camelCase keys, floats)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

try:  # the pack runs under pulumi-policy; `gpuplan check` reads plain dicts
    from pulumi_policy.proxy import UnknownValueError
except ImportError:  # pragma: no cover
    class UnknownValueError(Exception):  # type: ignore[no-redef]
        pass

# pulumi-policy's sentinels for values unknown at preview (pulumi_policy/proxy.py), as they arrive in props.
UNKNOWN_SENTINELS = {"1c4a061d-8072-4f0a-a4cb-0ff528b18fe7", "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
                     "04da6b54-80e4-46f7-96ec-b56ff0331ba9", "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
                     "dd056dcd-154b-4c76-9bd3-c8f88648b5ff"}
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the string sentinel, which `plain` puts for any unknown
ENDPOINT_CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
NATIVE_ENDPOINT_CONFIG = "aws-native:sagemaker:EndpointConfig"
SAGEMAKER_MODEL = "aws:sagemaker/model:Model"
NATIVE_SAGEMAKER_MODEL = "aws-native:sagemaker:Model"
NOTEBOOK = "aws:sagemaker/notebookInstance:NotebookInstance"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NATIVE_LAUNCH_TEMPLATE = "aws-native:ec2:LaunchTemplate"
LAUNCH_CONFIGURATION = "aws:ec2/launchConfiguration:LaunchConfiguration"
INSTANCE = "aws:ec2/instance:Instance"
SPOT_REQUEST = "aws:ec2/spotInstanceRequest:SpotInstanceRequest"
SPOT_FLEET = "aws:ec2/spotFleetRequest:SpotFleetRequest"
FLEET = "aws:ec2/fleet:Fleet"
ASG = "aws:autoscaling/group:Group"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
BATCH_COMPUTE = "aws:batch/computeEnvironment:ComputeEnvironment"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
SG_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EBS_VOLUME = "aws:ebs/volume:Volume"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
USER_POLICY = "aws:iam/userPolicy:UserPolicy"
GROUP_POLICY = "aws:iam/groupPolicy:GroupPolicy"
IAM_POLICY = "aws:iam/policy:Policy"
ATTACHMENTS = ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "aws:iam/policyAttachment:PolicyAttachment",
               "aws:iam/userPolicyAttachment:UserPolicyAttachment",
               "aws:iam/groupPolicyAttachment:GroupPolicyAttachment")
# Kinds added for issue 24 (property names from the pulumi-aws and aws-native schemas).
NATIVE_INSTANCE = "aws-native:ec2:Instance"
NATIVE_NOTEBOOK = "aws-native:sagemaker:NotebookInstance"
NATIVE_ASG = "aws-native:autoscaling:AutoScalingGroup"
NATIVE_LAUNCH_CONFIGURATION = "aws-native:autoscaling:LaunchConfiguration"
EMR = ("aws:emr/cluster:Cluster", "aws:emr/instanceGroup:InstanceGroup", "aws:emr/instanceFleet:InstanceFleet",
       "aws-native:emr:Cluster", "aws-native:emr:InstanceGroupConfig", "aws-native:emr:InstanceFleetConfig")
# SageMaker Studio: each app's defaultResourceSpec.instanceType, wherever the settings nest it.
STUDIO = ("aws:sagemaker/domain:Domain", "aws:sagemaker/userProfile:UserProfile", "aws:sagemaker/space:Space",
          "aws-native:sagemaker:Domain", "aws-native:sagemaker:UserProfile", "aws-native:sagemaker:Space")
NESTED = EMR + STUDIO  # read by walking the props for every instanceType
ENDPOINT_CONFIGS = (ENDPOINT_CONFIG, NATIVE_ENDPOINT_CONFIG)
SAGEMAKER_SERVICE = ENDPOINT_CONFIGS + (NOTEBOOK, NATIVE_NOTEBOOK) + STUDIO
# Every resource kind that names an instance type an accelerator could run on.
CARRIES_INSTANCE_TYPE = ENDPOINT_CONFIGS + (NOTEBOOK, LAUNCH_TEMPLATE, NATIVE_LAUNCH_TEMPLATE, LAUNCH_CONFIGURATION,
                                            INSTANCE, SPOT_REQUEST, SPOT_FLEET, FLEET, ASG, EKS_NODE_GROUP, BATCH_COMPUTE,
                                            NATIVE_INSTANCE, NATIVE_NOTEBOOK, NATIVE_ASG,
                                            NATIVE_LAUNCH_CONFIGURATION) + NESTED
# EC2's accelerated-computing families follow one naming scheme: a letter group and a generation digit
# (p5, g6e, gr6, inf2, trn2, dl1, f2, vt1), so families the catalog has not met yet (g7e, trn3) count too.
ACCELERATED_FAMILY = re.compile(r"^(p|g|gr|inf|trn|dl|f|vt)\d")


@dataclass
class Resource:
    type: str
    name: str
    props: Mapping[str, Any]
    urn: str = ""
    parent: str | None = None
    dependencies: dict[str, list[str]] = field(default_factory=dict)  # property → URNs it was computed from


@dataclass(frozen=True)
class Slot:
    """One place a resource names an instance type (without `ml.`), the count it starts there (None
    where the resource itself does not say), and the property path, for messages."""
    instance_type: str
    count: int | None
    where: str


def family_of(instance_type: str) -> str:
    return instance_type.removeprefix("ml.").split(".")[0].lower()


def is_accelerated(instance_type: str) -> bool:
    return bool(ACCELERATED_FAMILY.match(family_of(instance_type)))


def _list(value: Any) -> list:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def _map(value: Any) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number == number and abs(number) < 1e9 else None


def group_size(group: Resource) -> int | None:
    """The most nodes an Auto Scaling group runs (desired, min or max), or None when none is known."""
    counts = [c for k in ("desiredCapacity", "minSize", "maxSize") if (c := _count(group.props.get(k))) is not None]
    return max(counts) if counts else None


def tags_of(resource: Resource) -> dict[str, str]:
    """Tags as a dict, whether written as a map or as [{key, value}] (Auto Scaling, aws-native)."""
    tags = resource.props.get("tags")
    if isinstance(tags, Mapping):
        return {str(k): v for k, v in tags.items()}
    return {str(t.get("key")): t.get("value") for t in _list(tags) if isinstance(t, Mapping)}


def _variants(p: Mapping) -> list[Slot]:
    slots = []
    for prop in ("productionVariants", "shadowProductionVariants"):
        for i, v in enumerate(_list(p.get(prop))):
            v = _map(v)
            if isinstance(v.get("instanceType"), str):
                count = _count(v.get("initialInstanceCount"))
                slots.append(Slot(v["instanceType"].removeprefix("ml."), 1 if count is None else count,
                                  f"{prop}[{i}].instanceType"))
    return slots


def _overrides(configs: list, count: int | None, prop: str) -> list[Slot]:
    return [Slot(o["instanceType"], count, f"{prop}[{i}].overrides[{j}].instanceType")
            for i, c in enumerate(configs) for j, o in enumerate(_list(_map(c).get("overrides")))
            if isinstance(_map(o).get("instanceType"), str)]


def _nested_slots(value: Any, path: str) -> list[Slot]:
    """Every instanceType under `value` (EMR groups and fleets, Studio apps' resource specs), counted by
    its sibling instanceCount or the fleet's target capacity where given."""
    slots: list[Slot] = []
    if isinstance(value, Mapping):
        kind = value.get("instanceType")
        if isinstance(kind, str) and kind:
            count = _count(value.get("instanceCount"))
            slots.append(Slot(kind.removeprefix("ml."), count, f"{path}.instanceType".lstrip(".")))
        for key, item in value.items():
            if key != "instanceType":
                slots += _nested_slots(item, f"{path}.{key}")
    elif isinstance(value, Sequence) and not isinstance(value, str):
        for i, item in enumerate(value):
            slots += _nested_slots(item, f"{path}[{i}]")
    return slots


def instance_slots(resource: Resource) -> list[Slot]:
    """Every instance type the resource can start, with its count."""
    p, t = resource.props, resource.type
    if t in ENDPOINT_CONFIGS:
        return _variants(p)
    if t == NATIVE_LAUNCH_TEMPLATE:
        p = _map(p.get("launchTemplateData"))
    single = {NOTEBOOK: 1, INSTANCE: 1, SPOT_REQUEST: 1, LAUNCH_TEMPLATE: None, NATIVE_LAUNCH_TEMPLATE: None,
              LAUNCH_CONFIGURATION: None, NATIVE_INSTANCE: 1, NATIVE_NOTEBOOK: 1, NATIVE_LAUNCH_CONFIGURATION: None}
    if t in NESTED:
        return _nested_slots(p, "")
    if t in single:
        kind = p.get("instanceType")
        return [Slot(kind.removeprefix("ml."), single[t], "instanceType")] if isinstance(kind, str) and kind else []
    if t in (ASG, NATIVE_ASG):
        count = _count(p.get("desiredCapacity")) or _count(p.get("minSize"))
        policy = _map(_map(p.get("mixedInstancesPolicy")).get("launchTemplate"))
        return _overrides([policy], count, "mixedInstancesPolicy.launchTemplate")
    if t == FLEET:
        count = _count(_map(p.get("targetCapacitySpecification")).get("totalTargetCapacity"))
        return _overrides(_list(p.get("launchTemplateConfigs")), count, "launchTemplateConfigs")
    if t == SPOT_FLEET:
        count = _count(p.get("targetCapacity"))
        specs = [Slot(s["instanceType"], count, f"launchSpecifications[{i}].instanceType")
                 for i, s in enumerate(_list(p.get("launchSpecifications")))
                 if isinstance(_map(s).get("instanceType"), str)]
        return specs + _overrides(_list(p.get("launchTemplateConfigs")), count, "launchTemplateConfigs")
    if t == EKS_NODE_GROUP:
        count = _count(_map(p.get("scalingConfig")).get("desiredSize"))
        return [Slot(k, count, f"instanceTypes[{i}]") for i, k in enumerate(_list(p.get("instanceTypes")))
                if isinstance(k, str)]
    if t == BATCH_COMPUTE:  # entries are types or whole families ("p4d"); Batch sizes by vCPUs, not nodes
        resources = _map(p.get("computeResources"))
        return [Slot(k, None, f"computeResources.instanceTypes[{i}]")
                for i, k in enumerate(_list(resources.get("instanceTypes"))) if isinstance(k, str)]
    return []


def requirement_blocks(resource: Resource) -> list[tuple[str, Mapping]]:
    """Attribute-based instance selection (instanceRequirements): EC2 picks the types, so the pack
    must reason about which families the attributes can reach."""
    p, found = resource.props, []
    if resource.type == NATIVE_LAUNCH_TEMPLATE:
        p = _map(p.get("launchTemplateData"))
    if isinstance(p.get("instanceRequirements"), Mapping):
        found.append(("instanceRequirements", p["instanceRequirements"]))
    configs = {ASG: [_map(_map(p.get("mixedInstancesPolicy")).get("launchTemplate"))],
               FLEET: _list(p.get("launchTemplateConfigs")), SPOT_FLEET: _list(p.get("launchTemplateConfigs"))}
    for i, c in enumerate(configs.get(resource.type, [])):
        for j, o in enumerate(_list(_map(c).get("overrides"))):
            if isinstance(_map(o).get("instanceRequirements"), Mapping):
                found.append((f"overrides[{j}].instanceRequirements", o["instanceRequirements"]))
    return found


def plain(value: Any, unknown: str = UNKNOWN) -> Any:
    """A proxied props tree as plain values, each value unknown at preview replaced by `unknown`, so a
    rule over the whole stack can skip one resource's unknowns instead of failing for all."""
    try:
        if isinstance(value, Mapping):
            out = {}
            for key in list(value):
                try:
                    out[key] = plain(value[key], unknown)
                except UnknownValueError:
                    out[key] = unknown
            return out
        if isinstance(value, Sequence) and not isinstance(value, str):
            items = []
            for i in range(len(value)):
                try:
                    items.append(plain(value[i], unknown))
                except UnknownValueError:
                    items.append(unknown)
            return items
    except UnknownValueError:
        return unknown
    return value
