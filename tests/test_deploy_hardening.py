"""What `pulumi up` would trip over (issue 24): S3 prefixes SageMaker refuses or grants wider than named,
ENI permissions under a condition that is false, a token readable through DescribeModel, a KMS grant
for a key that is not used, ECR rights for a registry that is not ECR, and requests AWS would reject
(checked against botocore's service models and the IAM policy linter parliament)."""

from __future__ import annotations

import copy
import json
import logging

import pulumi
import pytest

from components.inference import InferenceEndpointArgs, execution_policy
from planner.pipeline import plan_workload
from tests.conftest import workload
from tests.iam_lint import lint_policy
from tests.pulumi_harness import run_program, stack_config
from tests.request_shapes import assert_request_fits

SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-token-AbCdEf"
KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def _config(**deploy) -> dict:
    config = copy.deepcopy(stack_config())
    config["gpuplan:deployments"]["chat-8b"].update(deploy)
    return config


def _one(stack, suffix, name):
    [found] = [r for r in stack.of_type(suffix) if r.name == name]
    return found


def _policy(stack, name="chat-8b") -> dict:
    return json.loads(_one(stack, "rolePolicy:RolePolicy", f"{name}-role-policy").inputs["policy"])


def _statement(policy: dict, sid: str) -> dict | None:
    return next((s for s in policy["Statement"] if s["Sid"] == sid), None)


@pytest.mark.parametrize("url", ["s3://my-models/llama-3.1-8b-instruct", "s3://my-models", "s3://my-models/",
                                 "s3://my-models/llama-3.1-8b-instruct/model.tar"])
def test_model_data_url_names_a_prefix_with_its_slash_or_an_archive(url):
    with pytest.raises(pulumi.RunError, match=r"config gpuplan:deployments.chat-8b: modelDataUrl must be "
                                              r"s3://bucket/prefix/ \(ending in /\) or s3://bucket/path/model.tar.gz"):
        run_program(_config(modelDataUrl=url))


def test_the_model_grant_is_exactly_the_prefix_or_the_archive():
    policy = _policy(run_program(_config(modelDataUrl="s3://my-models/llama-3.1-8b-instruct/")))
    assert _statement(policy, "ReadModel")["Resource"] == "arn:aws:s3:::my-models/llama-3.1-8b-instruct/*"
    assert _statement(policy, "ListModel")["Condition"] == {"StringLike": {"s3:prefix": ["llama-3.1-8b-instruct/*"]}}
    policy = _policy(run_program(_config(modelDataUrl="s3://my-models/llama/model.tar.gz")))
    assert _statement(policy, "ReadModel")["Resource"] == "arn:aws:s3:::my-models/llama/model.tar.gz"
    assert _statement(policy, "ListModel") is None


def test_network_interfaces_are_scoped_by_resource_arn_not_by_a_false_condition():
    stack = run_program(_config(vpcSubnetIds=["subnet-0abc0abc", "subnet-0def0def"], vpcSecurityGroupIds=["sg-0abc0abc"]))
    policy = _policy(stack)
    ec2 = "arn:aws:ec2:us-east-1:123456789012"
    create = _statement(policy, "VpcCreateInterfaces")
    assert create["Action"] == ["ec2:CreateNetworkInterface"]
    assert create["Resource"] == [f"{ec2}:network-interface/*", f"{ec2}:subnet/subnet-0abc0abc",
                                  f"{ec2}:subnet/subnet-0def0def", f"{ec2}:security-group/sg-0abc0abc"]
    assert _statement(policy, "VpcInterfaces")["Resource"] == f"{ec2}:network-interface/*"
    assert "ec2:Subnet" not in json.dumps(policy)
    # only the Describe calls, which have no resource-level permissions, are on "*"
    assert all(a.startswith("ec2:Describe") for s in policy["Statement"] if s["Resource"] == "*"
               for a in s["Action"] if a.startswith("ec2:"))


def test_the_token_in_the_environment_is_an_explicit_opt_in(caplog):
    with pytest.raises(pulumi.RunError, match="readable through|sagemaker:DescribeModel can read.*hfTokenInEnvironment: true"):
        run_program(_config(hfTokenSecretArn=SECRET))
    with caplog.at_level(logging.WARNING):
        stack = run_program(_config(hfTokenSecretArn=SECRET, hfTokenInEnvironment=True))
    assert _one(stack, "sagemaker/model:Model", "chat-8b-model").inputs["primaryContainer"]["environment"][
        "HF_TOKEN"] == "offline-token"
    assert "chat-8b: the Hugging Face token is in the model's environment" in caplog.text
    assert "secretsmanager" not in json.dumps(_policy(stack))


def test_a_volume_key_on_local_nvme_is_said_and_not_granted(caplog):
    config = _config()
    config["gpuplan:kmsKeyArn"] = KEY
    with caplog.at_level(logging.WARNING):
        stack = run_program(config)
    assert _one(stack, "sagemaker/model:Model", "chat-8b-model")  # chat-8b plans a g6e/g6/g5: local NVMe
    assert "kms" not in json.dumps(_policy(stack)).lower()
    assert _one(stack, "sagemaker/endpointConfiguration:EndpointConfiguration",
                "chat-8b-config").inputs.get("kmsKeyArn") is None
    assert "chat-8b: kmsKeyArn is not used: ml.g" in caplog.text and "local NVMe" in caplog.text


def _neuron_args(**changes) -> InferenceEndpointArgs:
    from planner.hardware.catalog import bundled

    plan = plan_workload(workload(kind="inference", model={"preset": "llama-3.1-8b"},
                                  serving={"engine": "neuron", "concurrent_requests": 4, "max_context_tokens": 4096},
                                  constraints={"families": ["inf2"]}), bundled())
    return InferenceEndpointArgs(plan=plan, region="us-east-1", tags={}, output_tokens=256,
                                 hf_model_id="meta-llama/Llama-3.1-8B-Instruct", **changes)


def test_a_volume_key_on_ebs_is_granted_on_that_key_only():
    args = _neuron_args(kms_key_arn=KEY)  # inf2 serves from EBS, where the key encrypts the volume
    kms = _statement(execution_policy(args, "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:x",
                                      "123456789012"), "Kms")
    assert kms["Resource"] == KEY and kms["Action"] == ["kms:Decrypt", "kms:GenerateDataKey"]


def test_ecr_rights_follow_the_images_registry():
    policy = _policy(run_program(_config()))
    assert _statement(policy, "PullImage")["Resource"] == "arn:aws:ecr:us-east-1:763104351884:repository/djl-inference"
    assert _statement(policy, "EcrToken")["Action"] == ["ecr:GetAuthorizationToken"]
    private = "registry.internal.example.com/llm/vllm:0.6"
    with pytest.raises(pulumi.RunError, match="imageUri is not in Amazon ECR.*set vpcSubnetIds"):
        run_program(_config(imageUri=private))
    stack = run_program(_config(imageUri=private, vpcSubnetIds=["subnet-0abc0abc"], vpcSecurityGroupIds=["sg-0abc0abc"]))
    assert "ecr:" not in json.dumps(_policy(stack))
    container = _one(stack, "sagemaker/model:Model", "chat-8b-model").inputs["primaryContainer"]
    assert container["imageConfig"] == {"repositoryAccessMode": "Vpc"}


VARIANTS = {
    "example": {},
    "vpc": {"vpcSubnetIds": ["subnet-0abc0abc"], "vpcSecurityGroupIds": ["sg-0abc0abc"], "networkIsolation": True},
    "archive": {"modelDataUrl": "s3://my-models/llama/model.tar.gz"},
    "private-registry": {"imageUri": "registry.internal.example.com/llm/vllm:0.6", "vpcSubnetIds": ["subnet-0abc0abc"],
                         "vpcSecurityGroupIds": ["sg-0abc0abc"]},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_iam_policy_the_program_creates_passes_parliament(variant):
    config = _config(**VARIANTS[variant])
    config["gpuplan:kmsKeyArn"] = KEY
    stack = run_program(config)
    documents = [(r.name, json.loads(r.inputs["policy"])) for r in stack.of_type("rolePolicy:RolePolicy")]
    assert {name for name, _ in documents} == {"chat-70b-role-policy", "chat-8b-role-policy", "pretrain-70b-discovery"}
    findings = [f"{name}: {finding}" for name, document in documents for finding in lint_policy(document)]
    assert not findings, "\n".join(findings)


def test_the_neuron_policy_with_compiled_graphs_and_a_volume_key_passes_parliament():
    args = _neuron_args(kms_key_arn=KEY, compiled_model_url="s3://my-models/neff/llama-8b/")
    document = execution_policy(args, "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:x", "123456789012")
    assert not lint_policy(document)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_sagemaker_requests_fit_botocores_service_model(variant):
    config = _config(**VARIANTS[variant])
    config["gpuplan:kmsKeyArn"] = KEY
    stack = run_program(config)
    for model in stack.of_type("sagemaker/model:Model"):
        assert_request_fits("sagemaker", "CreateModel", {"ModelName": model.name, **model.inputs})
    for config_ in stack.of_type("sagemaker/endpointConfiguration:EndpointConfiguration"):
        assert_request_fits("sagemaker", "CreateEndpointConfig", {"EndpointConfigName": config_.name, **config_.inputs})
    for endpoint in stack.of_type("sagemaker/endpoint:Endpoint"):
        assert_request_fits("sagemaker", "CreateEndpoint", {"EndpointName": endpoint.name, **endpoint.inputs})
    for policy in stack.of_type("appautoscaling/policy:Policy"):
        inputs = {k: v for k, v in policy.inputs.items() if k != "name"}
        assert_request_fits("application-autoscaling", "PutScalingPolicy", {"PolicyName": policy.name, **inputs})
    for target in stack.of_type("appautoscaling/target:Target"):
        assert_request_fits("application-autoscaling", "RegisterScalableTarget", target.inputs)


def test_the_shape_check_catches_a_wrong_name_and_a_wrong_enum():
    good = {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g6e.xlarge", "InitialInstanceCount": 1}
    assert_request_fits("sagemaker", "CreateEndpointConfig", {"EndpointConfigName": "c", "productionVariants": [good]})
    with pytest.raises(AssertionError, match="volumeSizeGb"):
        assert_request_fits("sagemaker", "CreateEndpointConfig", {"EndpointConfigName": "c", "productionVariants": [
            {**good, "volumeSizeGb": 30}]})
    with pytest.raises(AssertionError, match="ml.g6e.huge"):
        assert_request_fits("sagemaker", "CreateEndpointConfig", {"EndpointConfigName": "c", "productionVariants": [
            {**good, "InstanceType": "ml.g6e.huge"}]})
