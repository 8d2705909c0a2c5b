"""Issue 24, secure-defaults misses: resource patterns judged by what they cover, wildcard trust
principals, and a security group's ingress judged as the union of its inline and standalone rules."""

from __future__ import annotations

import ipaddress
import json

import pytest

from policies.resources import Resource
from policies.rules import evaluate
from tests.test_policies import validate

ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
SG = "aws:ec2/securityGroup:SecurityGroup"
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"


def _policy(action, resource) -> dict:
    return {"policy": json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": action, "Resource": resource}]})}


@pytest.mark.parametrize("action, resource", [
    ("iam:PassRole", "arn:aws:iam::*:role/*"), ("iam:PutRolePolicy", "arn:aws:iam::*:role/*"),
    ("sts:AssumeRole", "arn:aws:iam::*:role/*"), ("iam:PassRole", "arn:aws:iam::123456789012:role/*"),
    ("sts:AssumeRole", "arn:aws:iam::*:role/gpuplan-runner"), ("s3:Get*", "arn:aws:s3:::*/*"),
    ("s3:Get*", "arn:aws:s3:::*"),
])
def test_wide_resource_patterns_are_as_wide_as_star(action, resource):
    messages = validate("secure-defaults", ROLE_POLICY, _policy(action, resource))
    assert any(f"IAM grant {action} on {resource}" in m for m in messages), messages


@pytest.mark.parametrize("action, resource", [
    ("iam:PassRole", "arn:aws:iam::123456789012:role/gpuplan-training"),
    ("sts:AssumeRole", "arn:aws:iam::123456789012:role/gpuplan-*"),
    ("s3:Get*", "arn:aws:s3:::my-models/llama/*"),
])
def test_named_resources_pass(action, resource):
    assert validate("secure-defaults", ROLE_POLICY, _policy(action, resource)) == []


@pytest.mark.parametrize("principal", ["*", {"AWS": "*"}, {"AWS": ["arn:aws:iam::123456789012:root", "*"]}])
def test_a_trust_policy_open_to_everyone_blocks(principal):
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": principal,
                                                      "Action": "sts:AssumeRole"}]}
    messages = validate("secure-defaults", "aws:iam/role:Role", {"assumeRolePolicy": json.dumps(trust)})
    assert any("trust policy lets any principal assume the role" in m for m in messages), messages
    service = {**trust, "Statement": [{**trust["Statement"][0], "Principal": {"Service": "sagemaker.amazonaws.com"}}]}
    assert validate("secure-defaults", "aws:iam/role:Role", {"assumeRolePolicy": json.dumps(service)}) == []


def test_two_non_adjacent_public_16s_in_one_group_block():
    props = {"ingress": [{"protocol": "tcp", "cidrBlocks": ["8.8.0.0/16"]},
                         {"protocol": "tcp", "cidrBlocks": ["9.9.0.0/16"]}]}
    messages = validate("secure-defaults", SG, props)
    assert any("131,072 public IPv4 addresses" in m for m in messages), messages
    assert validate("secure-defaults", SG, {"ingress": [{"protocol": "tcp", "cidrBlocks": ["8.8.0.0/16"]}]}) == []


def _blocks(count: int) -> list[str]:
    """`count` public /16s, none adjacent to another (every other /16 of 11.0.0.0 upwards, skipping private)."""
    found, net = [], int(ipaddress.ip_address("11.0.0.0"))
    while len(found) < count:
        block = ipaddress.ip_network((net, 16))
        if not block.is_private:
            found.append(str(block))
        net += 2 * 65536
    return found


def _ingress_violations(resources: list[Resource]) -> list[str]:
    return [v.message for v in evaluate(resources) if v.level == "mandatory" and "ingress" in v.message]


def test_standalone_rules_are_judged_with_their_group():
    group = Resource(SG, "nodes", {"ingress": [{"protocol": "tcp", "cidrBlocks": ["8.8.0.0/16"]}]}, urn="urn:sg")
    rule = Resource(SG_RULE, "extra", {"type": "ingress", "securityGroupId": "sg-123", "cidrBlocks": ["9.9.0.0/16"]},
                    urn="urn:rule", dependencies={"securityGroupId": ["urn:sg"]})
    found = _ingress_violations([group, rule])
    assert any("nodes: ingress from its inline and standalone rules together opens 131,072 public IPv4 "
               "addresses" in m for m in found), found
    assert _ingress_violations([group]) == []


def test_28288_standalone_16s_block():
    """The quoted case: 28,288 standalone rules of one non-adjacent public /16 each (1.85 billion addresses)."""
    blocks = _blocks(28_288)
    rules = [Resource(INGRESS_RULE, f"r{i}", {"securityGroupId": "sg-0abc", "cidrIpv4": block}, urn=f"urn:r{i}")
             for i, block in enumerate(blocks)]
    found = _ingress_violations(rules)
    assert any("1,853,882,368 public IPv4 addresses" in m for m in found), found[:3]


def test_a_default_security_group_open_to_the_internet_blocks():
    default = Resource("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup", "default",
                       {"ingress": [{"protocol": "-1", "fromPort": 0, "toPort": 0, "cidrBlocks": ["0.0.0.0/0"]}]})
    assert any("ingress from 0.0.0.0/0" in m for m in _ingress_violations([default]))


P5_KINDS = [
    ("aws-native:ec2:Instance", {"instanceType": "p5.48xlarge"}, "instanceType"),
    ("aws-native:sagemaker:NotebookInstance", {"instanceType": "ml.p5.48xlarge", "roleArn": "r"}, "instanceType"),
    ("aws-native:autoscaling:AutoScalingGroup", {"maxSize": "4", "minSize": "2", "mixedInstancesPolicy": {
        "launchTemplate": {"launchTemplateSpecification": {"launchTemplateId": "lt-1"},
                           "overrides": [{"instanceType": "p5.48xlarge"}]}}},
     "mixedInstancesPolicy.launchTemplate[0].overrides[0].instanceType"),
    ("aws-native:autoscaling:LaunchConfiguration", {"imageId": "ami-1", "instanceType": "p5.48xlarge"}, "instanceType"),
    ("aws:emr/cluster:Cluster", {"releaseLabel": "emr-7.0.0", "masterInstanceGroup": {"instanceType": "m5.xlarge"},
                                 "coreInstanceGroup": {"instanceType": "p5.48xlarge", "instanceCount": 2}},
     "coreInstanceGroup.instanceType"),
    ("aws:emr/cluster:Cluster", {"coreInstanceFleet": {"instanceTypeConfigs": [{"instanceType": "p5.48xlarge"}],
                                                       "targetOnDemandCapacity": 2}},
     "coreInstanceFleet.instanceTypeConfigs[0].instanceType"),
    ("aws:emr/instanceGroup:InstanceGroup", {"clusterId": "j-1", "instanceType": "p5.48xlarge", "instanceCount": 4},
     "instanceType"),
    ("aws:sagemaker/domain:Domain", {"domainName": "d", "defaultSpaceSettings": {
        "executionRole": "r", "jupyterLabAppSettings": {"defaultResourceSpec": {"instanceType": "ml.p5.48xlarge"}}}},
     "defaultSpaceSettings.jupyterLabAppSettings.defaultResourceSpec.instanceType"),
    ("aws:sagemaker/domain:Domain", {"domainName": "d", "defaultUserSettings": {
        "executionRole": "r", "kernelGatewayAppSettings": {"defaultResourceSpec": {"instanceType": "ml.p5.48xlarge"}}}},
     "defaultUserSettings.kernelGatewayAppSettings.defaultResourceSpec.instanceType"),
]


@pytest.mark.parametrize("resource_type, props, where", P5_KINDS)
def test_kinds_that_can_start_a_p5_are_seen(resource_type, props, where):
    found = [(v.policy, v.message) for v in evaluate([Resource(resource_type, "x", props)]) if v.level == "mandatory"]
    assert ("accelerator-resource-planned", f"unplanned accelerator resource: p5.48xlarge ({where}) carries no "
            "gpuplan:workload tag, so no memory or cost check can run; plan it with gpuplan (its components tag what "
            "they create)") in found, found
    narrowed = evaluate([Resource(resource_type, "x", props)], {"instance-family-allowed": {"allowedFamilies": ["g6e"]}})
    assert any(v.policy == "instance-family-allowed" and "family p5 is not allowed" in v.message for v in narrowed)
