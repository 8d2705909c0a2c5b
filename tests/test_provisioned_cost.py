"""Issue 27, item 2: everything the program provisions is priced in the plan's cost, or named as free."""

from __future__ import annotations

import pytest

from planner import plan_file
from planner.economics.provisioned import priced
from planner.hardware.units import HOURS_PER_MONTH
from tests.pulumi_harness import ROOT, run_program, stack_config

PLANS = {p.workload: p for p in plan_file(ROOT / "Pulumi.example.yaml").plans}

# Resource types the program creates that AWS does not bill by themselves, with the reason.
FREE = {
    "gpuplan:aws:InferenceEndpoint": "a Pulumi component, not an AWS resource",
    "gpuplan:aws:TrainingCluster": "a Pulumi component, not an AWS resource",
    "aws:ec2/securityGroup:SecurityGroup": "security groups have no charge (VPC pricing)",
    "aws:ec2/placementGroup:PlacementGroup": "placement groups have no charge (EC2 User Guide, Placement groups)",
    "aws:iam/role:Role": "IAM has no charge", "aws:iam/rolePolicy:RolePolicy": "IAM has no charge",
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "IAM has no charge",
    "aws:iam/instanceProfile:InstanceProfile": "IAM has no charge",
    "aws:sagemaker/model:Model": "a SageMaker model is a definition; the endpoint's instances are billed",
    "aws:sagemaker/endpoint:Endpoint": "billed as its configuration's instances and volumes (priced there)",
    "aws:ec2/launchTemplate:LaunchTemplate": "a template; its volumes are billed per node launched (priced at the group)",
    "aws:appautoscaling/target:Target": "Application Auto Scaling has no charge",
    "aws:appautoscaling/policy:Policy": "no charge; the 2 CloudWatch alarms target tracking creates bill about "
                                        "$0.30 each per month (CloudWatch pricing), under the plan's cent rounding per hour",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "no charge; S3 requests are billed by S3",
}


def _stack_plan(name: str):
    """The plan as the program prices it: the deployment's fsx override applied."""
    deploy = stack_config()["gpuplan:deployments"].get(name) or {}
    plan = PLANS[name]
    return priced(plan, fsx=deploy["fsx"]) if "fsx" in deploy and plan.kind != "inference" else plan


def _item(plan, prefix):
    found = [i for i in plan.cost.provisioned if i.item.startswith(prefix)]
    assert found, f"{plan.workload}: no '{prefix}' in the plan's cost"
    return found[0]


def test_example_fsx_true_is_in_the_cost():
    """Quoted: the example's `fsx: true` adds about $4,080/month that was not counted."""
    plan, forced = PLANS["pretrain-70b"], _stack_plan("pretrain-70b")
    assert plan.storage.recommendation == "s3" and not any(i.item.startswith("FSx") for i in plan.cost.provisioned)
    fsx = _item(forced, "FSx for Lustre PERSISTENT_2")
    assert fsx.size_gib == 12000 and fsx.usd_per_hour * HOURS_PER_MONTH == pytest.approx(4080.0)
    assert "fsx: true" in fsx.note
    backups = _item(forced, "FSx for Lustre backups")
    assert backups.usd_per_gib_month == 0.05
    added = forced.cost.usd_per_month - plan.cost.usd_per_month
    assert added == pytest.approx(4080.0 + backups.usd_per_hour * HOURS_PER_MONTH)
    run_h = forced.performance.wall_clock_s / 3600
    assert forced.cost.usd_per_training_run - plan.cost.usd_per_training_run == pytest.approx(added / HOURS_PER_MONTH * run_h)


def test_instances_and_provisioned_add_up():
    for plan in PLANS.values():
        c = plan.cost
        assert c.usd_per_hour == pytest.approx(c.instances_usd_per_hour + sum(i.usd_per_hour for i in c.provisioned))
        assert c.usd_per_month == pytest.approx(c.usd_per_hour * c.hours_per_month)
        for i in c.provisioned:
            assert i.usd_per_hour == pytest.approx(i.size_gib * i.usd_per_gib_month * i.quantity / HOURS_PER_MONTH)
            assert i.price_source and i.price_date


def test_every_billed_resource_is_in_the_cost():
    stack = run_program(stack_config())
    for r in stack.resources:
        workload = next(n for n in PLANS if r.name.startswith(n))
        plan = _stack_plan(workload)
        tags = r.inputs.get("tags")
        if isinstance(tags, dict) and "gpuplan:monthly-usd" in tags:
            assert float(tags["gpuplan:monthly-usd"]) == pytest.approx(plan.cost.usd_per_month, abs=0.01), r.name
        if r.type == "aws:autoscaling/group:Group":
            assert r.inputs["desiredCapacity"] == plan.choice.nodes and plan.cost.instances_usd_per_hour > 0
            [template] = [t for t in stack.resources if t.type == "aws:ec2/launchTemplate:LaunchTemplate"
                          and t.name.startswith(workload)]
            for mapping in template.inputs["blockDeviceMappings"]:
                volume = _item(plan, "EBS gp3 root volume per node")
                assert mapping["ebs"]["volumeType"] == "gp3"
                assert (volume.size_gib, volume.quantity) == (mapping["ebs"]["volumeSize"], plan.choice.nodes)
        elif r.type == "aws:fsx/lustreFileSystem:LustreFileSystem":
            assert _item(plan, "FSx for Lustre PERSISTENT_2").size_gib == r.inputs["storageCapacity"]
            if r.inputs.get("automaticBackupRetentionDays"):
                _item(plan, "FSx for Lustre backups")
        elif r.type == "aws:sagemaker/endpointConfiguration:EndpointConfiguration":
            [variant] = r.inputs["productionVariants"]
            assert variant["initialInstanceCount"] == plan.choice.nodes and plan.cost.instances_usd_per_hour > 0
            volumes = [i for i in plan.cost.provisioned if i.item.startswith("SageMaker ML storage")]
            if "volumeSizeInGb" in variant:
                assert [(v.size_gib, v.quantity) for v in volumes] == [(variant["volumeSizeInGb"], plan.choice.nodes)]
            else:
                assert volumes == []
        else:
            assert r.type in FREE, f"{r.type} ({r.name}) is neither priced in the plan's cost nor named as free"


def test_ml_storage_volume_is_priced_on_types_without_nvme():
    from planner import plan_workloads
    from planner.workload.spec import parse_workloads

    spec = parse_workloads({"workloads": [{"name": "small", "kind": "inference", "model": {"preset": "llama-3.1-8b"},
                                           "precision": "bf16", "serving": {"max_context_tokens": 4096},
                                           "constraints": {"instance_types": ["ml.inf2.48xlarge"]}}]}, "test.yaml")
    [plan] = plan_workloads(spec).plans
    [volume] = plan.cost.provisioned
    assert volume.item.startswith("SageMaker ML storage") and volume.usd_per_gib_month == 0.14
    from components.settings import volume_size_gb

    # the size the endpoint configuration asks for (Neuron weights per NeuronCore × TP, twice, + 10 GB)
    assert volume.size_gib == volume_size_gb(plan) == 47 and volume.quantity == plan.choice.nodes
    assert volume.usd_per_hour == pytest.approx(47 * 0.14 * plan.choice.nodes / HOURS_PER_MONTH)
