"""The real __main__.py with Pulumi.example.yaml's config under pulumi.runtime mocks."""

from __future__ import annotations

import base64
import json

import botocore.session
import pulumi
import pytest

from planner import plan_file
from tests.pulumi_harness import AMI, ROOT, run_program, stack_config

PLANS = {p.workload: p for p in plan_file(ROOT / "Pulumi.example.yaml").plans}


@pytest.fixture(scope="module")
def stack():
    return run_program(stack_config())


def by_name(stack, suffix, name):
    [found] = [r for r in stack.of_type(suffix) if r.name == name]
    return found


def test_resource_graph_types_and_counts(stack):
    counts = {}
    for r in stack.resources:
        counts[r.type] = counts.get(r.type, 0) + 1
    assert counts["gpuplan:aws:InferenceEndpoint"] == 2
    assert counts["gpuplan:aws:TrainingCluster"] == 1
    for token in ("aws:sagemaker/model:Model", "aws:sagemaker/endpointConfiguration:EndpointConfiguration",
                  "aws:sagemaker/endpoint:Endpoint", "aws:appautoscaling/target:Target", "aws:appautoscaling/policy:Policy"):
        assert counts[token] == 2, token
    for token in ("aws:ec2/launchTemplate:LaunchTemplate", "aws:ec2/placementGroup:PlacementGroup",
                  "aws:ec2/securityGroup:SecurityGroup", "aws:autoscaling/group:Group", "aws:iam/instanceProfile:InstanceProfile",
                  "aws:fsx/lustreFileSystem:LustreFileSystem"):
        assert counts[token] == 1, token
    assert all(r.name.startswith(("chat-70b", "chat-8b", "pretrain-70b")) for r in stack.resources)


def test_endpoint_variant_matches_the_plan(stack):
    for name in ("chat-70b", "chat-8b"):
        plan = PLANS[name]
        [variant] = by_name(stack, "EndpointConfiguration", f"{name}-config").inputs["productionVariants"]
        assert variant["instanceType"] == f"ml.{plan.choice.instance_type}"
        assert variant["initialInstanceCount"] == float(plan.choice.nodes)
        assert variant["variantName"] == "AllTraffic"
        assert 600 <= variant["containerStartupHealthCheckTimeoutInSeconds"] <= 3600


def test_container_environment_is_the_plan(stack):
    plan = PLANS["chat-70b"]
    container = by_name(stack, "sagemaker/model:Model", "chat-70b-model").inputs["primaryContainer"]
    env = container["environment"]
    assert env["OPTION_TENSOR_PARALLEL_DEGREE"] == str(plan.layout.tensor_parallel)
    assert env["OPTION_MAX_ROLLING_BATCH_SIZE"] == str(plan.layout.batch_per_replica)
    assert env["OPTION_MAX_MODEL_LEN"] == "8192"
    assert env["OPTION_ROLLING_BATCH"] == "vllm"
    assert env["OPTION_GPU_MEMORY_UTILIZATION"] == "0.90"
    assert env["HF_MODEL_ID"] == "meta-llama/Llama-3.1-70B-Instruct"
    assert container["image"].startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:")
    small = by_name(stack, "sagemaker/model:Model", "chat-8b-model").inputs["primaryContainer"]
    [source] = small["modelDataSource"]["s3DataSources"]
    assert source == {"s3Uri": "s3://my-models/llama-3.1-8b-instruct/", "s3DataType": "S3Prefix", "compressionType": "None"}


def test_autoscaling_targets_the_variant(stack):
    target = by_name(stack, "appautoscaling/target:Target", "chat-70b-scaling-target").inputs
    # the endpoint's name carries its instance type: a re-plan onto another type is a new endpoint
    # (p5en.48xlarge since the refit on the issue-28 data: its $79.12/h now meets the targets at the likely edge
    # that only p5.48xlarge's $113.07/h met before; tests/golden/chosen_plans.json). p5.48xlarge again since the
    # PCIe-collectives refit (issue 25): the serving band's slow edge moved from 0.687 to 0.718 of the estimate, so
    # p5 meets 1,000 tok/s there, and it ranks first on the one EC2-price rule ($68.80/h vs p5en's $79.12/h).
    # p5en.48xlarge again since the GDDR refit: HBM streams 0.86 of its bandwidth (0.89 before) and the band's slow
    # edge is 0.69, so p5 needs two nodes to meet 1,000 tok/s there and one p5en.48xlarge is cheapest. p5.48xlarge
    # again since the all-reduce curves and elementwise kernels (issue 25): the refit's band lets one p5 meet it
    assert target["resourceId"] == "endpoint/chat-70b-p5-48xlarge/variant/AllTraffic"
    assert target["scalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert target["minCapacity"] == PLANS["chat-70b"].choice.nodes and target["maxCapacity"] == 4
    policy = by_name(stack, "appautoscaling/policy:Policy", "chat-70b-scaling-policy").inputs
    config = policy["targetTrackingScalingPolicyConfiguration"]
    assert config["predefinedMetricSpecification"]["predefinedMetricType"] == \
        "SageMakerVariantConcurrentRequestsPerModelHighResolution"
    assert config["targetValue"] == round(PLANS["chat-70b"].layout.batch_per_replica * 0.7, 1)


def test_execution_role_is_least_privilege(stack):
    policy = json.loads(by_name(stack, "rolePolicy:RolePolicy", "chat-8b-role-policy").inputs["policy"])
    for statement in policy["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert all("*" not in action for action in actions)
        if statement["Resource"] == "*":  # only the actions that have no resource-level permissions
            assert set(actions) <= {"ecr:GetAuthorizationToken", "cloudwatch:PutMetricData"}
    read = next(s for s in policy["Statement"] if s["Sid"] == "ReadModel")
    assert read["Resource"] == "arn:aws:s3:::my-models/llama-3.1-8b-instruct/*"


def test_training_cluster_network_and_security(stack):
    plan = PLANS["pretrain-70b"]
    lt = by_name(stack, "launchTemplate:LaunchTemplate", "pretrain-70b-lt").inputs
    assert lt["instanceType"] == plan.choice.instance_type
    assert lt["imageId"] == AMI
    assert lt["metadataOptions"]["httpTokens"] == "required"
    [volume] = lt["blockDeviceMappings"]
    assert volume["ebs"]["encrypted"] == "true" and volume["ebs"]["volumeType"] == "gp3"
    cards = {"p4d.24xlarge": 4, "p4de.24xlarge": 4, "p5.48xlarge": 32, "p5en.48xlarge": 16}[plan.choice.instance_type]
    interfaces = lt["networkInterfaces"]
    assert len(interfaces) == cards
    assert [i["networkCardIndex"] for i in interfaces] == list(range(cards))
    # ENA + EFA on card 0, EFA-only (no IP address) on the others; no public IPs
    assert interfaces[0]["interfaceType"] == "efa" and interfaces[0]["deviceIndex"] == 0
    assert all(i["interfaceType"] == "efa-only" and i["deviceIndex"] == 1 for i in interfaces[1:])
    assert interfaces[0]["associatePublicIpAddress"] == "false"
    assert lt["metadataOptions"]["httpPutResponseHopLimit"] == 1
    pg = by_name(stack, "placementGroup:PlacementGroup", "pretrain-70b-pg").inputs
    assert pg["strategy"] == "cluster"
    sg = by_name(stack, "securityGroup:SecurityGroup", "pretrain-70b-sg").inputs
    assert all(rule.get("self") and not rule.get("cidrBlocks") and not rule.get("ipv6CidrBlocks") for rule in sg["ingress"])
    asg = by_name(stack, "autoscaling/group:Group", "pretrain-70b-nodes").inputs
    assert asg["desiredCapacity"] == asg["minSize"] == asg["maxSize"] == plan.choice.nodes
    layout = base64.b64decode(lt["userData"]).decode()
    assert f'"tensor_parallel": {plan.layout.tensor_parallel}' in layout
    assert f"GPUPLAN_NNODES={plan.choice.nodes}" in layout and "FI_PROVIDER=efa" in layout
    assert "FI_EFA_USE_DEVICE_RDMA=1" in layout  # p4d/p5 EFA does GPU-direct RDMA
    assert "Name=tag:gpuplan:cluster,Values=pretrain-70b" in layout and "/etc/gpuplan/hostfile" in layout
    assert f"head -n {plan.choice.nodes} | sed 's/$/ slots=8/'" in layout
    assert "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh /fsx lustre" in layout
    ssm = [args for token, args in stack.calls if token == "aws:ssm/getParameter:getParameter"]
    assert ssm == [{"name": "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"}] \
        or ssm[0]["name"].startswith("/aws/service/deeplearning/ami/x86_64/")


def test_every_accelerator_resource_carries_the_policy_tags(stack):
    for suffix in ("EndpointConfiguration", "launchTemplate:LaunchTemplate"):
        for r in stack.of_type(suffix):
            assert r.inputs["tags"]["gpuplan:workload"] in PLANS
            assert int(r.inputs["tags"]["gpuplan:required-bytes"]) > 0


def test_instance_types_exist_in_botocore_service_models(stack):
    session = botocore.session.get_session()
    sagemaker = set(session.get_service_model("sagemaker").shape_for("ProductionVariantInstanceType").enum)
    ec2 = set(session.get_service_model("ec2").shape_for("InstanceType").enum)
    variants = [v["instanceType"] for r in stack.of_type("EndpointConfiguration") for v in r.inputs["productionVariants"]]
    assert variants and set(variants) <= sagemaker
    templates = [r.inputs["instanceType"] for r in stack.of_type("launchTemplate:LaunchTemplate")]
    assert templates and set(templates) <= ec2


def test_preview_mode_keeps_the_literals_the_policies_read():
    stack = run_program(stack_config(), preview=True)
    [variant] = by_name(stack, "EndpointConfiguration", "chat-70b-config").inputs["productionVariants"]
    assert variant["instanceType"] == f"ml.{PLANS['chat-70b'].choice.instance_type}"
    assert by_name(stack, "EndpointConfiguration", "chat-70b-config").inputs["tags"]["gpuplan:layout"].startswith("tp=8")
    # the endpoint's name is set by the program (workload and instance type), so even a preview knows it
    target = by_name(stack, "appautoscaling/target:Target", "chat-70b-scaling-target").inputs
    # the plan since the all-reduce curves' refit
    assert target["resourceId"] == "endpoint/chat-70b-p5-48xlarge/variant/AllTraffic"


@pytest.mark.parametrize("change, message", [
    (lambda c: c.pop("gpuplan:vpcId"), "config gpuplan:vpcId / gpuplan:subnetIds: a training cluster needs a VPC and a subnet: set gpuplan:vpcId"),
    (lambda c: c["gpuplan:workloads"][0]["serving"].update(engine="ollama"),
     "config gpuplan:workloads[0].serving.engine: must be one of"),
    (lambda c: c["gpuplan:workloads"][0]["constraints"].update(families=["g5"], max_nodes=1),
     "config gpuplan:workloads[0] (chat-70b): workload 'chat-70b': no instance type in the catalog can run"),
    (lambda c: c["gpuplan:deployments"].pop("chat-8b"), "config gpuplan:deployments.chat-8b: give modelDataUrl (s3://...) or hfModelId"),
    (lambda c: c.pop("gpuplan:workloads"), "config gpuplan:workloads: missing"),
])
def test_bad_stack_config_fails_with_one_message(change, message):
    config = stack_config()
    change(config)
    with pytest.raises(pulumi.RunError) as err:
        run_program(config)
    assert message in str(err.value)


def test_repository_main_py_registers_the_same_graph(stack):
    from tests.pulumi_harness import run_main_py

    direct = run_main_py(stack_config())
    assert sorted((r.type, r.name) for r in direct.resources) == sorted((r.type, r.name) for r in stack.resources)


def test_children_are_parented_to_their_component(stack):
    lt = by_name(stack, "launchTemplate:LaunchTemplate", "pretrain-70b-lt")
    assert lt.parent and lt.parent.endswith("gpuplan:aws:TrainingCluster::pretrain-70b")
    assert "gpuplan:aws:TrainingCluster$aws:ec2/launchTemplate:LaunchTemplate::pretrain-70b-lt" in lt.urn
