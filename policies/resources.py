"""What the rules read from a resource: its instance types, count, tags, and the planned workload.
Works on plain dicts and on pulumi_policy's proxied props alike (camelCase keys, floats)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

ENDPOINT_CONFIG = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
ASG = "aws:autoscaling/group:Group"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
SG_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
IAM_POLICY = "aws:iam/policy:Policy"
CARRIES_INSTANCE_TYPE = (ENDPOINT_CONFIG, LAUNCH_TEMPLATE, INSTANCE, ASG)
# EC2 accelerated-computing families (instance-type naming): anything of these is an accelerator resource.
ACCELERATED_PREFIXES = ("p2", "p3", "p4", "p5", "p6", "g3", "g4", "g5", "g6", "gr6", "inf1", "inf2", "trn1", "trn2",
                        "dl1", "dl2", "f1", "f2", "vt1")


@dataclass
class Resource:
    type: str
    name: str
    props: Mapping[str, Any]
    urn: str = ""
    parent: str | None = None
    workload_hint: str | None = field(default=None, compare=False)


def family_of(instance_type: str) -> str:
    return instance_type.removeprefix("ml.").split(".")[0]


def is_accelerated(instance_type: str) -> bool:
    family = family_of(instance_type)
    return any(family == p or (family.startswith(p) and not family[len(p):].isdigit()) for p in ACCELERATED_PREFIXES)


def tags_of(resource: Resource) -> dict[str, str]:
    tags = resource.props.get("tags") or {}
    if resource.type == ASG:  # [{key, value, propagateAtLaunch}]
        return {t.get("key"): t.get("value") for t in tags}
    return dict(tags)


def instance_slots(resource: Resource) -> list[tuple[str, int | None]]:
    """(instance type without ml., count) for each place the resource names one; count None where
    the resource itself does not say (a launch template: its nodes come from the group that uses it)."""
    p = resource.props
    if resource.type == ENDPOINT_CONFIG:
        return [(v.get("instanceType").removeprefix("ml."), int(v.get("initialInstanceCount") or 1))
                for v in p.get("productionVariants") or [] if v.get("instanceType")]
    if resource.type in (LAUNCH_TEMPLATE, INSTANCE):
        return [(p.get("instanceType"), None if resource.type == LAUNCH_TEMPLATE else 1)] if p.get("instanceType") else []
    if resource.type == ASG:
        overrides = ((p.get("mixedInstancesPolicy") or {}).get("launchTemplate") or {}).get("overrides") or []
        count = int(p.get("desiredCapacity") or p.get("minSize") or 0)
        return [(o.get("instanceType"), count) for o in overrides if o.get("instanceType")]
    return []
