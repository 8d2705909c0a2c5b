"""SageMaker serving as AWS and the engines document it: images that exist, engine options by their
documented names, the token from Secrets Manager, re-plans that deploy, config errors as written."""

from __future__ import annotations

import copy
import json

import pulumi
import pytest
import yaml

from components import settings
from components.inference import endpoint_name
from planner.pipeline import plan_workload
from tests.conftest import ROOT, workload
from tests.pulumi_harness import run_program, stack_config

DLC = yaml.safe_load((ROOT / "components" / "data" / "dlc-images.yaml").read_text())
IMAGES = yaml.safe_load((ROOT / "components" / "data" / "images.yaml").read_text())
OPTIONS = settings.engine_options()


def by_name(stack, suffix, name):
    [found] = [r for r in stack.of_type(suffix) if r.name == name]
    return found


def test_every_image_the_program_can_emit_is_in_awss_dlc_list():
    for vendor, engines in IMAGES["images"].items():
        for engine, entry in engines.items():
            listed = {row["tag"] for row in DLC["images"][entry["repository"]]}
            assert entry["tag"] in listed, (vendor, engine)
            assert entry["style"] in OPTIONS, (vendor, engine)
    # every vendored row says where it came from
    assert all(row["source"] in DLC["sources"] for rows in DLC["images"].values() for row in rows)


def _plan(catalog, engine: str, precision: str):
    families = ["inf2"] if engine == "neuron" else ["g6e", "p4de"]
    return plan_workload(workload(kind="inference", model={"preset": "llama-3.1-8b"}, precision=precision,
                                  serving={"engine": engine, "concurrent_requests": 8, "max_context_tokens": 4096,
                                           "output_tokens": 256},
                                  constraints={"families": families}), catalog)


# Neuron serves 16-bit weights only: its NxD Inference container has no int8 setting (test_neuron_int8_is_refused).
ENGINE_PRECISIONS = [(e, p) for e in ("vllm", "lmi", "tensorrt-llm", "tgi") for p in ("bf16", "fp8", "int8", "int4")] \
    + [("neuron", "bf16"), ("neuron", "fp16")]


@pytest.mark.parametrize("engine, precision", ENGINE_PRECISIONS)
def test_environment_uses_only_the_engines_documented_names(catalog, engine, precision):
    plan = _plan(catalog, engine, precision)
    style = settings.image_entry(plan)["style"]
    env = settings.container_environment(plan, "meta-llama/Llama-3.1-8B-Instruct", 0.1, None, 256)
    assert set(env) <= set(OPTIONS[style]["options"]), set(env) - set(OPTIONS[style]["options"])
    quantize = env.get("OPTION_QUANTIZE") or env.get("HF_MODEL_QUANTIZE")
    assert quantize is None or quantize in OPTIONS[style]["quantize"].values()
    assert quantize != "bitsandbytes8"
    if style == "lmi-trtllm":  # TRT-LLM compiles for input/output lengths; vLLM's names mean nothing to it
        assert "OPTION_MAX_MODEL_LEN" not in env and "OPTION_GPU_MEMORY_UTILIZATION" not in env
        assert int(env["OPTION_MAX_INPUT_LEN"]) + int(env["OPTION_MAX_OUTPUT_LEN"]) == plan.max_context_tokens
    if style == "tgi":  # a queue limit, not the batch: TGI refuses requests above it
        assert int(env["MAX_CONCURRENT_REQUESTS"]) >= max(128, plan.layout.batch_per_replica)
        assert int(env["MAX_BATCH_TOTAL_TOKENS"]) == plan.layout.batch_per_replica * plan.max_context_tokens
    if style == "lmi-vllm" and precision == "int8":  # vLLM reads int8 from the checkpoint's own config
        assert "OPTION_QUANTIZE" not in env


def test_lmi_engine_runs_vllm_since_lmi_dist_was_removed(catalog):
    env = settings.container_environment(_plan(catalog, "lmi", "bf16"), None, 0.1)
    assert env["OPTION_ROLLING_BATCH"] == "vllm"


def _config(**deploy) -> dict:
    config = copy.deepcopy(stack_config())
    config["gpuplan:deployments"]["chat-8b"].update(deploy)
    return config


def test_hf_token_comes_from_secrets_manager_and_the_role_gets_no_secret_access():
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-token-AbCdEf"
    stack = run_program(_config(hfTokenSecretArn=arn, hfTokenInEnvironment=True))
    model = by_name(stack, "sagemaker/model:Model", "chat-8b-model")
    assert "primaryContainer" in model.secrets  # the token makes the container a Pulumi secret (encrypted in state)
    assert model.inputs["primaryContainer"]["environment"]["HF_TOKEN"] == "offline-token"
    assert ("aws:secretsmanager/getSecretVersion:getSecretVersion", {"secretId": arn}) in stack.calls
    policy = json.loads(by_name(stack, "rolePolicy:RolePolicy", "chat-8b-role-policy").inputs["policy"])
    assert not any("secretsmanager" in json.dumps(s) for s in policy["Statement"])


def test_trust_policy_is_bound_to_the_account_and_logs_are_complete():
    stack = run_program(stack_config())
    trust = json.loads(by_name(stack, "iam/role:Role", "chat-8b-role").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}
    policy = json.loads(by_name(stack, "rolePolicy:RolePolicy", "chat-8b-role-policy").inputs["policy"])
    logs = next(s for s in policy["Statement"] if s["Sid"] == "Logs")
    assert set(logs["Action"]) == {"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
                                   "logs:DescribeLogStreams"}
    assert all(r.startswith("arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/")
               for r in logs["Resource"])


def test_vpc_config_and_network_isolation_with_their_interface_permissions():
    stack = run_program(_config(vpcSubnetIds=["subnet-0abc0abc"], vpcSecurityGroupIds=["sg-0abc0abc"], networkIsolation=True))
    model = by_name(stack, "sagemaker/model:Model", "chat-8b-model").inputs
    assert model["vpcConfig"] == {"subnets": ["subnet-0abc0abc"], "securityGroupIds": ["sg-0abc0abc"]}
    assert model["enableNetworkIsolation"] is True
    policy = json.loads(by_name(stack, "rolePolicy:RolePolicy", "chat-8b-role-policy").inputs["policy"])
    interfaces = next(s for s in policy["Statement"] if s["Sid"] == "VpcCreateInterfaces")
    assert "arn:aws:ec2:us-east-1:123456789012:subnet/subnet-0abc0abc" in interfaces["Resource"]


def test_replan_onto_another_type_is_a_new_endpoint_name_and_scales_on_concurrency():
    assert endpoint_name("chat-70b", "p4de.24xlarge") == "chat-70b-p4de-24xlarge"
    assert endpoint_name("chat-70b", "p5.48xlarge") != endpoint_name("chat-70b", "p4de.24xlarge")
    assert len(endpoint_name("x" * 80, "p5.48xlarge")) == 63


def test_protect_and_rename_keep_the_running_endpoint():
    config = _config(protect=True)
    config["gpuplan:workloads"][1]["name"] = "chat-small"
    # the plan's type names the endpoint; checked at the estimate (not the band's slow edge) so the example's
    # g6e.xlarge plan stays the one this test is about: the running endpoint's name surviving a rename
    config["gpuplan:workloads"][1]["constraints"]["confidence"] = "expected"
    config["gpuplan:deployments"]["chat-small"] = dict(config["gpuplan:deployments"].pop("chat-8b"),
                                                       renamedFrom="chat-8b")
    stack = run_program(config)
    endpoint = by_name(stack, "sagemaker/endpoint:Endpoint", "chat-small-endpoint")
    assert endpoint.options["protect"] and endpoint.options["retain_on_delete"]
    assert endpoint.inputs["name"] == "chat-8b-g6e-xlarge"  # the running endpoint's name is kept
    component = by_name(stack, "gpuplan:aws:InferenceEndpoint", "chat-small")
    assert "chat-8b" in component.options["aliases"]


@pytest.mark.parametrize("deploy, message", [
    ({"modelDataURL": "s3://x/y"}, "config gpuplan:deployments.chat-8b.modelDataURL: unknown key; allowed: allowedCidr, amiId"),
    ({"maxInstanceCount": 2.5}, "config gpuplan:deployments.chat-8b.maxInstanceCount: Input should be a valid integer"),
    ({"fsx": "false"}, "config gpuplan:deployments.chat-8b.fsx: Input should be a valid boolean"),
    ({"hfTokenSecretArn": "hf_abc"}, "config gpuplan:deployments.chat-8b.hfTokenSecretArn: must be a Secrets Manager"),
    ({"networkIsolation": True, "modelDataUrl": None, "hfModelId": "meta-llama/Llama-3.1-8B-Instruct"},
     "networkIsolation blocks the container's downloads"),
    ({"vpcSubnetIds": ["subnet-11111111"]}, "vpcSubnetIds and vpcSecurityGroupIds go together"),
])
def test_deployment_errors_name_the_key_as_written(deploy, message):
    config = _config(**deploy)
    config["gpuplan:deployments"]["chat-8b"] = {k: v for k, v in config["gpuplan:deployments"]["chat-8b"].items()
                                                if v is not None}
    with pytest.raises(pulumi.RunError) as err:
        run_program(config)
    assert message in str(err.value)


def test_deployments_for_an_unknown_workload_are_an_error():
    config = stack_config()
    config["gpuplan:deployments"]["chat-9b"] = {"hfModelId": "x/y"}
    with pytest.raises(pulumi.RunError) as err:
        run_program(config)
    assert "gpuplan:deployments.chat-9b: no workload has this name" in str(err.value)


def test_the_stack_region_is_the_planning_region():
    config = copy.deepcopy(stack_config())
    config["aws:region"] = "eu-west-1"
    config["gpuplan:workloads"] = [w for w in config["gpuplan:workloads"] if w["name"] == "chat-8b"]
    config["gpuplan:workloads"][0].setdefault("constraints", {}).pop("instance_types", None)
    config["gpuplan:deployments"] = {"chat-8b": config["gpuplan:deployments"]["chat-8b"]}
    stack = run_program(config)
    image = by_name(stack, "sagemaker/model:Model", "chat-8b-model").inputs["primaryContainer"]["image"]
    assert ".dkr.ecr.eu-west-1.amazonaws.com/" in image
    config["gpuplan:workloads"][0]["constraints"]["region"] = "us-east-1"
    with pytest.raises(pulumi.RunError) as err:
        run_program(config)
    assert "gpuplan:workloads[0].constraints.region: 'us-east-1' disagrees with the stack's aws:region 'eu-west-1'" \
        in str(err.value)


def test_neuron_int8_is_refused_because_its_container_cannot_load_it(catalog):
    from planner.workload.errors import InfeasibleError

    with pytest.raises(InfeasibleError, match="no int8 weight setting"):
        _plan(catalog, "neuron", "int8")
