"""Every rule through pulumi_policy's own objects with engine-shaped props (camelCase, floats,
wrapped in the unknown-checking proxy), plus the whole pack over the example program's resources."""

from __future__ import annotations

import copy
import re
import json
import subprocess
import sys

import pytest
from pulumi_policy import (PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions, ResourceValidationArgs,
                           StackValidationArgs)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError, unknown_checking_proxy
from typer.testing import CliRunner

from gpuplan.cli import app
from policies.pack import build_policies
from policies.resources import Resource
from policies.rules import RULES_BY_NAME, evaluate
from tests.conftest import ROOT, write_yaml
from tests.pulumi_harness import run_program, stack_config

POLICIES = {p.name: p for p in build_policies()}
OPTS = PolicyResourceOptions(protect=False, ignore_changes=[], delete_before_replace=None, aliases=[],
                             custom_timeouts=PolicyCustomTimeouts(0, 0, 0), additional_secret_outputs=[])
TAGS_70B = {"gpuplan:workload": "chat-70b", "gpuplan:kind": "inference", "gpuplan:model": "llama-3.1-70b",
            "gpuplan:precision": "bf16", "gpuplan:layout": "tp=8,pp=1,dp=1,replicas=2,batch=16,nodes=2",
            "gpuplan:serving": "ctx=8192,kv=fp16,engine=vllm", "gpuplan:headroom": "0.1",
            "gpuplan:environment": "production", "gpuplan:region": "us-east-1", "gpuplan:monthly-usd": "50090.87"}


def endpoint_config(instance_type="ml.p4de.24xlarge", count=2.0, tags=TAGS_70B):
    return {"productionVariants": [{"variantName": "AllTraffic", "modelName": "chat-70b-model-1a2b3c",
                                    "instanceType": instance_type, "initialInstanceCount": count}], "tags": dict(tags)}


def validate(policy: str, resource_type: str, props: dict, config: dict | None = None) -> list[str]:
    messages: list[str] = []
    args = ResourceValidationArgs(resource_type, unknown_checking_proxy(props), "urn:pulumi:test::gpuplan::x::r", "r",
                                  OPTS, None, config)
    POLICIES[policy].validate(args, lambda message, urn=None: messages.append(message))
    return messages


EC = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
LT = "aws:ec2/launchTemplate:LaunchTemplate"


def test_memory_fits_passes_and_blocks_undersized():
    assert validate("accelerator-memory-fits", EC, endpoint_config()) == []
    [message] = validate("accelerator-memory-fits", EC, endpoint_config("ml.g5.48xlarge"))
    assert message.startswith("ml.g5.48xlarge has 22.4 GiB per A10G (20.1 GiB usable after 10% headroom) but "
                              "workload chat-70b needs 24.1 GiB per device at TP 8 × PP 1")
    # NVIDIA types only (the vLLM engine), cheapest SageMaker price first
    assert "types that fit: p4de.24xlarge ($34.31/h), g6e.48xlarge ($37.66/h), p4d.24xlarge ($37.69/h)" in message
    assert "KV cache 5.0 GiB" in message


def test_memory_headroom_config_override():
    assert validate("accelerator-memory-fits", EC, endpoint_config("ml.p4d.24xlarge")) == []
    assert validate("accelerator-memory-fits", EC, endpoint_config("ml.p4d.24xlarge"), {"minHeadroom": 0.5})


def test_unplanned_accelerator_is_advisory():
    untagged = endpoint_config(tags={})
    assert validate("accelerator-memory-fits", EC, untagged) == []
    [message] = validate("accelerator-resource-planned", EC, untagged)
    assert message.startswith("unplanned accelerator resource: p4de.24xlarge")
    assert RULES_BY_NAME["accelerator-resource-planned"].level == "advisory"
    assert validate("accelerator-resource-planned", LT, {"instanceType": "m7i.large"}) == []


def test_unknown_instance_type_is_not_silently_passed():
    props = endpoint_config(UNKNOWN_STRING_VALUE)
    # strict (the default): the rule reports, so the mandatory level blocks the preview
    [message] = validate("accelerator-memory-fits", EC, props)
    assert message.startswith("accelerator-memory-fits: string value at .productionVariants.0.instanceType can't be "
                              "known during preview; strict mode blocks")
    [message] = validate("gating-values-known", EC, props)
    assert "productionVariants[0].instanceType unknown at preview" in message
    # strict: false gives CrossGuard's own behaviour (an advisory "can't run policy")
    with pytest.raises(UnknownValueError) as err:
        validate("accelerator-memory-fits", EC, props, {"strict": False})
    assert err.value.message == "string value at .productionVariants.0.instanceType can't be known during preview"
    assert validate("gating-values-known", EC, props, {"strict": False}) == []


def test_instance_family_allowed_default_and_config():
    assert validate("instance-family-allowed", LT, {"instanceType": "p5.48xlarge"}) == []
    assert validate("instance-family-allowed", LT, {"instanceType": "p3.16xlarge"}) == \
        ["p3.16xlarge: family p3 is not allowed (allowed: g5, g6, g6e, inf2, p4d, p4de, p5, p5e, p5en, trn1, trn1n)"]
    # the planner's own trn1n plans pass the default list
    assert validate("instance-family-allowed", LT, {"instanceType": "trn1n.32xlarge"}) == []
    assert validate("instance-family-allowed", LT, {"instanceType": "p5.48xlarge"}, {"allowedFamilies": ["g6e"]})
    assert validate("instance-family-allowed", LT, {"instanceType": "m7i.large"}, {"allowedFamilies": ["g6e"]}) == []


def test_tensor_parallel_within_node():
    tags = {**TAGS_70B, "gpuplan:layout": "tp=16,pp=1,dp=1,replicas=1,batch=32,nodes=2"}
    [message] = validate("tensor-parallel-within-node", EC, endpoint_config(tags=tags))
    assert message.startswith("tensor parallel 16 spans nodes: p4de.24xlarge has 8 accelerators")
    assert validate("tensor-parallel-within-node", EC, endpoint_config()) == []


@pytest.mark.parametrize("precision, instance_type, expected", [
    ("fp8", "ml.p4d.24xlarge", "precision fp8: A100-40GB has no fp8 tensor cores"),
    ("int4", "ml.inf2.48xlarge", "precision int4: Inferentia2 has no int4 kernels (the Neuron SDK has no int4 weight kernels)"),
    ("fp8", "ml.p5.48xlarge", None),
])
def test_precision_supported(precision, instance_type, expected):
    tags = {**TAGS_70B, "gpuplan:precision": precision}
    messages = validate("precision-supported", EC, endpoint_config(instance_type, tags=tags))
    assert messages == ([] if expected is None else [f"{instance_type.removeprefix('ml.')}: {expected}"])


def test_training_on_inferentia_is_blocked():
    tags = {**TAGS_70B, "gpuplan:kind": "training", "gpuplan:training": "method=full,seq=4096,opt=adamw,grad=auto,rank=16"}
    assert validate("precision-supported", LT, {"instanceType": "inf2.48xlarge", "tags": tags}) == \
        ["inf2.48xlarge: precision bf16: Inferentia2 is inference-only and cannot train"]


def test_monthly_budget_is_configurable():
    assert validate("monthly-budget", EC, endpoint_config()) == []  # no ceiling configured
    [message] = validate("monthly-budget", EC, endpoint_config(), {"maxUsdPerMonth": 10000})
    assert message == "p4de.24xlarge × 2 costs $50,091/month on demand, over the $10,000 budget for chat-70b"
    assert validate("monthly-budget", EC, endpoint_config(), {"maxUsdPerMonth": 10000,
                                                               "workloadBudgets": {"chat-70b": 1e6}}) == []


def test_endpoint_availability():
    [message] = validate("endpoint-availability", EC, endpoint_config(count=1.0))
    assert "runs 1 × ml.p4de.24xlarge; keep at least 2 instances" in message
    assert validate("endpoint-availability", EC, endpoint_config(count=2.0)) == []
    staging = endpoint_config(count=1.0, tags={**TAGS_70B, "gpuplan:environment": "staging"})
    assert validate("endpoint-availability", EC, staging) == []


def test_secure_defaults():
    good = {"instanceType": "p5.48xlarge", "metadataOptions": {"httpTokens": "required"},
            "blockDeviceMappings": [{"deviceName": "/dev/sda1", "ebs": {"encrypted": "true", "volumeSize": 500.0}}]}
    assert validate("secure-defaults", LT, good) == []
    bad = {**good, "metadataOptions": {"httpTokens": "optional"},
           "blockDeviceMappings": [{"deviceName": "/dev/sda1", "ebs": {"encrypted": "false"}}]}
    assert validate("secure-defaults", LT, bad) == ["r: IMDSv2 is not required (set metadataOptions.httpTokens = required)",
                                                    "r: volume /dev/sda1 is not encrypted"]
    sg = {"ingress": [{"protocol": "tcp", "fromPort": 22.0, "toPort": 22.0, "cidrBlocks": ["0.0.0.0/0"]}]}
    assert validate("secure-defaults", "aws:ec2/securityGroup:SecurityGroup", sg) == \
        ["r: ingress from 0.0.0.0/0 on ports 22.0-22.0; clusters accept traffic only from themselves"]
    policy = {"policy": json.dumps({"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]})}
    assert validate("secure-defaults", "aws:iam/rolePolicy:RolePolicy", policy) == \
        ["r: wildcard IAM actions s3:*; grant the actions the role uses"]


def _policy_resource(r) -> PolicyResource:
    return PolicyResource(r.type, r.inputs, r.urn, r.name, OPTS, None, None, [], {})


def test_multi_node_network_stack_policy():
    stack = run_program(stack_config())
    by_urn = {r.urn: _policy_resource(r) for r in stack.resources}
    resources = []
    for r in stack.resources:
        pr = by_urn[r.urn]
        pr.parent = by_urn.get(r.parent)
        resources.append(pr)
    messages: list[str] = []
    POLICIES["multi-node-training-network"].validate(StackValidationArgs(resources, {}), lambda m, urn=None: messages.append(m))
    assert messages == []
    no_pg = [r for r in resources if r.resource_type != "aws:ec2/placementGroup:PlacementGroup"]
    POLICIES["multi-node-training-network"].validate(StackValidationArgs(no_pg, {}), lambda m, urn=None: messages.append(m))
    assert messages == ["pretrain-70b-lt: 16 nodes without a cluster placement group beside them"]


def _resources(stack) -> list[Resource]:
    return [Resource(r.type, r.name, r.inputs, r.urn, r.parent) for r in stack.resources]


def test_whole_pack_passes_the_planned_stack():
    violations = evaluate(_resources(run_program(stack_config())))
    assert [v for v in violations if v.level == "mandatory"] == []


def test_whole_pack_blocks_an_undersized_endpoint_swap():
    resources = _resources(run_program(stack_config()))
    for r in resources:
        if r.name == "chat-70b-config":
            r.props = copy.deepcopy(r.props)
            r.props["productionVariants"][0]["instanceType"] = "ml.g5.12xlarge"
    blocked = [v for v in evaluate(resources) if v.level == "mandatory"]
    assert [(v.policy, v.resource) for v in blocked] == [("accelerator-memory-fits", "chat-70b-config"),
                                                        ("tensor-parallel-within-node", "chat-70b-config")]
    assert "ml.g5.12xlarge has 22.4 GiB per A10G" in blocked[0].message and "types that fit:" in blocked[0].message


def test_whole_pack_blocks_tp16_on_8_gpu_nodes():
    resources = _resources(run_program(stack_config()))
    for r in resources:
        if r.name == "pretrain-70b-lt":
            r.props = copy.deepcopy(r.props)
            r.props["tags"]["gpuplan:layout"] = re.sub(r"tp=\d+,", "tp=16,", r.props["tags"]["gpuplan:layout"])
    blocked = [v for v in evaluate(resources) if v.level == "mandatory"]
    assert [v.policy for v in blocked] == ["tensor-parallel-within-node"]
    assert blocked[0].message.startswith("tensor parallel 16 spans nodes: p5.48xlarge has 8 accelerators")


def test_levels_from_config():
    resources = _resources(run_program(stack_config()))
    assert evaluate(resources, {"all": "disabled"}) == []
    [v] = evaluate(resources, {"endpoint-availability": "mandatory"})
    assert (v.policy, v.level, v.workload) == ("endpoint-availability", "mandatory", "chat-8b")


def test_check_cli_exit_codes_and_formats(tmp_path):
    runner = CliRunner()
    ok = runner.invoke(app, ["check", str(ROOT / "Pulumi.example.yaml"), "--format", "json"])
    assert ok.exit_code == 0, (ok.output, ok.exception)
    report = json.loads(ok.output)
    assert report["passed"] is True and report["mandatory"] == 0 and report["advisory"] == 1, report
    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"endpoint-availability": "mandatory"}))
    blocked = runner.invoke(app, ["check", str(ROOT / "Pulumi.example.yaml"), "--policy-config", str(config),
                                  "--format", "markdown"])
    assert blocked.exit_code == 1
    assert "❌ **Policies: 1 mandatory, 0 advisory violation(s)**" in blocked.output
    assert "**mandatory** `endpoint-availability` on `chat-8b-config`" in blocked.output
    bad = runner.invoke(app, ["check", str(tmp_path / "missing.yaml")])
    assert bad.exit_code == 2
    not_json = write_yaml(tmp_path / "policy.yaml", {"all": "mandatory"})
    bad = runner.invoke(app, ["check", str(ROOT / "Pulumi.example.yaml"), "--policy-config", str(not_json)])
    assert bad.exit_code == 2 and "not valid JSON" in bad.output


def test_pack_main_only_constructs_the_pack():
    source = (ROOT / "policies" / "__main__.py").read_text()
    assert source.count("PolicyPack(") == 1
    assert "PolicyPack(" not in (ROOT / "policies" / "pack.py").read_text()
    out = subprocess.run([sys.executable, "-c", "import policies.pack, policies.rules; print('ok')"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok"  # importing the rules never starts the analyzer server


def test_strict_mode_blocks_unknown_gating_values_offline():
    from policies.resources import Resource
    from policies.rules import evaluate

    lt = Resource(LT, "lt", {"instanceType": UNKNOWN_STRING_VALUE, "tags": {"gpuplan:workload": "w"},
                             "networkInterfaces": [{"interfaceType": "efa", "subnetId": UNKNOWN_STRING_VALUE}]})
    [found] = [v for v in evaluate([lt]) if v.policy == "gating-values-known"]
    assert found.level == "mandatory" and found.message.startswith("lt: instanceType unknown at preview")
    assert "subnetId" not in found.message  # computed IDs gate nothing
    assert not [v for v in evaluate([lt], {"gating-values-known": {"strict": False}}) if v.policy == "gating-values-known"]
