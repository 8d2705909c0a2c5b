"""EC2 training clusters as AWS documents them: EFA-only interfaces, RDMA only where it exists, capacity
reservations and Capacity Blocks, a pinned AMI, valid FSx sizes mounted on every node, a hostfile."""

from __future__ import annotations

import base64
import copy

import pytest

from components.training import capacity_wait_timeout, network_interfaces, user_data
from planner.economics.storage import FSX_FIRST_GIB, FSX_STEP_GIB, size_fsx
from planner.pipeline import plan_workload
from tests.conftest import workload
from tests.pulumi_harness import run_program, stack_config


def by_name(stack, suffix, name):
    [found] = [r for r in stack.of_type(suffix) if r.name == name]
    return found


def _config(**deploy) -> dict:
    config = copy.deepcopy(stack_config())
    config["gpuplan:deployments"]["pretrain-70b"].update(deploy)
    return config


def test_efa_only_interfaces_take_no_ip_address(catalog):
    p5 = catalog.instance("p5.48xlarge")
    interfaces = network_interfaces(p5, "subnet-1", "sg-1")
    assert len(interfaces) == 32
    assert [i["interface_type"] for i in interfaces] == ["efa"] + ["efa-only"] * 31
    # one private IP per node: 8 nodes fit a /24 many times over
    assert sum(1 for i in interfaces if i["interface_type"] != "efa-only") == 1
    g5 = network_interfaces(catalog.instance("g5.xlarge"), "subnet-1", "sg-1")
    assert g5 == [{"device_index": 0, "associate_public_ip_address": "false", "subnet_id": "subnet-1",
                   "security_groups": ["sg-1"], "delete_on_termination": "true"}]


def test_device_rdma_only_on_families_that_have_it(catalog):
    w = workload(kind="fine-tuning", model={"preset": "llama-3.1-8b"},
                 training={"method": "lora", "tokens": 1e8, "sequence_length": 2048},
                 constraints={"instance_types": ["g6e.48xlarge"]})
    g6e = catalog.instance("g6e.48xlarge")
    script = user_data(plan_workload(w, catalog), g6e, "ft")
    assert ("FI_PROVIDER=efa" in script) == g6e.efa and "FI_EFA_USE_DEVICE_RDMA" not in script


def test_fsx_is_what_the_plan_sized(catalog):
    """fsx: true in the example stack provisions the plan's own sizing; every size is one FSx accepts."""
    valid = {FSX_FIRST_GIB} | {FSX_STEP_GIB * k for k in range(1, 200)}
    stack = run_program(stack_config())
    fs = by_name(stack, "lustreFileSystem:LustreFileSystem", "pretrain-70b-fsx").inputs
    spec = next(w for w in stack_config()["gpuplan:workloads"] if w["name"] == "pretrain-70b")
    sized = plan_workload(workload(**{k: v for k, v in spec.items() if k != "name"}), catalog).storage.fsx
    assert (fs["storageCapacity"], fs["perUnitStorageThroughput"], fs["deploymentType"]) == \
        (sized.storage_capacity_gib, sized.per_unit_storage_throughput, "PERSISTENT_2")
    assert fs["skipFinalBackup"] is False and fs["automaticBackupRetentionDays"] == 7
    for mb_s in (1.0, 400.0, 7e3, 1.5e5):
        for stored in (1e9, 5e12, 3e14):
            fsx = size_fsx("us-east-1", mb_s, stored)
            assert fsx.storage_capacity_gib in valid
            assert fsx.throughput_mb_s >= mb_s and fsx.storage_capacity_gib * 2**30 >= stored


def test_fsx_data_repository_and_mount_name_export():
    stack = run_program(_config(fsxImportPath="s3://my-corpus/tokenised/"))
    dra = by_name(stack, "dataRepositoryAssociation:DataRepositoryAssociation", "pretrain-70b-fsx-s3").inputs
    assert dra["dataRepositoryPath"] == "s3://my-corpus/tokenised/" and dra["fileSystemPath"] == "/data"


def test_capacity_block_and_sized_capacity_wait():
    # checked at the estimate (confidence: expected) so the cluster stays under the wait's 60 min cap and the
    # sizing shows: 8 nodes on the fused kernels the example states (training.kernels; 16 at the fourth issue-25
    # refit's constants, 24 on the merged model, 32 after the issue-25 refit; the likely edge's larger cluster would
    # hit the cap)
    config = _with_training(constraints={"confidence": "expected"})
    config["gpuplan:deployments"]["pretrain-70b"]["capacityBlockId"] = "cr-0123456789abcdef0"
    stack = run_program(config)
    lt = by_name(stack, "launchTemplate:LaunchTemplate", "pretrain-70b-lt").inputs
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == \
        "cr-0123456789abcdef0"
    asg = by_name(stack, "autoscaling/group:Group", "pretrain-70b-nodes").inputs
    assert int(asg["desiredCapacity"]) == 8
    # 10 min + 1 min per node
    assert asg["waitForCapacityTimeout"] == capacity_wait_timeout(int(asg["desiredCapacity"])) == "18m"
    assert asg["instanceRefresh"]["strategy"] == "Rolling"


def test_ami_is_resolved_once_unless_pinned():
    unpinned = run_program(stack_config())
    lt = by_name(unpinned, "launchTemplate:LaunchTemplate", "pretrain-70b-lt")
    assert lt.options["ignore_changes"] == ["imageId"]  # a newer DLAMI does not roll a running cluster
    pinned = run_program(_config(amiId="ami-0123456789abcdef0"))
    lt = by_name(pinned, "launchTemplate:LaunchTemplate", "pretrain-70b-lt")
    assert lt.inputs["imageId"] == "ami-0123456789abcdef0" and lt.options["ignore_changes"] == []
    assert not [c for c in pinned.calls if c[0] == "aws:ssm/getParameter:getParameter"]


def test_nodes_find_each_other_with_least_privilege():
    stack = run_program(stack_config())
    lt = by_name(stack, "launchTemplate:LaunchTemplate", "pretrain-70b-lt").inputs
    script = base64.b64decode(lt["userData"]).decode()
    assert "GPUPLAN_MASTER_ADDR=$MASTER" in script and "GPUPLAN_NODE_RANK=" in script
    instance_tags = next(t["tags"] for t in lt["tagSpecifications"] if t["resourceType"] == "instance")
    assert instance_tags["gpuplan:cluster"] == "pretrain-70b"
    # nothing that moves with prices: a new template version would roll the running cluster
    assert set(instance_tags) == {"gpuplan:workload", "gpuplan:kind", "gpuplan:environment", "gpuplan:region",
                                  "gpuplan:cluster"}
    import json
    policy = json.loads(by_name(stack, "rolePolicy:RolePolicy", "pretrain-70b-discovery").inputs["policy"])
    assert [s["Action"] for s in policy["Statement"]] == [["ec2:DescribeInstances"], ["cloudwatch:PutMetricData"]]
    assert policy["Statement"][1]["Condition"] == {"StringEquals": {"cloudwatch:namespace": "gpuplan/training"}}


@pytest.mark.parametrize("deploy, message", [
    ({"capacityBlockId": "cr-11111111", "capacityReservationId": "cr-22222222"}, "capacityReservationId and capacityBlockId"),
    ({"fsx": False, "fsxImportPath": "s3://bkt/p/"}, "fsxImportPath links an S3 prefix"),
    ({"amiId": "ubuntu"}, "gpuplan:deployments.pretrain-70b.amiId: String should match pattern"),
])
def test_training_deployment_errors(deploy, message):
    import pulumi
    with pytest.raises(pulumi.RunError) as err:
        run_program(_config(**deploy))
    assert message in str(err.value)


def _with_training(**changes) -> dict:
    """The example stack with pretrain-70b's spec changed (training: and constraints: merged)."""
    config = _config()
    spec = next(w for w in config["gpuplan:workloads"] if w["name"] == "pretrain-70b")
    for section, values in changes.items():
        spec[section] = {**spec.get(section, {}), **values}
    return config


def test_a_spot_plan_runs_as_spot_with_rebalancing():
    config = _with_training(constraints={"purchase": "spot"})
    asg = by_name(run_program(config), "autoscaling/group:Group", "pretrain-70b-nodes").inputs
    policy = asg["mixedInstancesPolicy"]
    assert policy["instancesDistribution"] == {"onDemandBaseCapacity": 0, "onDemandPercentageAboveBaseCapacity": 0,
                                               "spotAllocationStrategy": "capacity-optimized"}
    assert "launchTemplate" not in asg and asg["capacityRebalance"] is True
    on_demand = by_name(run_program(_config()), "autoscaling/group:Group", "pretrain-70b-nodes").inputs
    assert "mixedInstancesPolicy" not in on_demand and "launchTemplate" in on_demand


def test_a_capacity_block_plan_needs_the_block():
    import pulumi
    config = _with_training(constraints={"purchase": "capacity-block"})
    with pytest.raises(pulumi.RunError, match="the plan buys a Capacity Block for ML .* set capacityBlockId"):
        run_program(config)
    config["gpuplan:deployments"]["pretrain-70b"]["capacityBlockId"] = "cr-0123456789abcdef0"
    lt = by_name(run_program(config), "launchTemplate:LaunchTemplate", "pretrain-70b-lt").inputs
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}


def test_fsx_follows_the_plan_unless_the_stack_says(catalog):
    """No `fsx:` key: FSx exactly when the plan sizes it; fsx: false keeps S3 even then."""
    # at most 32 nodes: since the issue-25 refit the uncapped plan spreads over 64 nodes, where each node's
    # checkpoint share (1,286 MB/s) fits S3 streaming; 32 nodes write 2,572 MB/s each, so the plan sizes FSx
    config = _with_training(training={"checkpoint_interval_minutes": 10, "max_checkpoint_share": 0.02},
                            constraints={"max_nodes": 32})
    del config["gpuplan:deployments"]["pretrain-70b"]["fsx"]
    assert by_name(run_program(config), "lustreFileSystem:LustreFileSystem", "pretrain-70b-fsx")
    relaxed = _config()
    del relaxed["gpuplan:deployments"]["pretrain-70b"]["fsx"]
    assert not run_program(relaxed).of_type("lustreFileSystem:LustreFileSystem")
    config["gpuplan:deployments"]["pretrain-70b"]["fsx"] = False
    assert not run_program(config).of_type("lustreFileSystem:LustreFileSystem")


def test_an_ultraserver_training_plan_is_refused_not_launched_as_a_type_ec2_lacks(catalog):
    """u-p6e-gb200x72 is not an instance type EC2 launches (its members are 18 × p6e-gb200.36xlarge): a training
    plan on it must stop with the reason before a launch template names it."""
    from components.training import TrainingClusterArgs

    plan = plan_workload(workload(kind="training", model={"preset": "llama-3.1-8b"},
                                  training={"tokens": 1.0e9, "deadline_hours": 48},
                                  constraints={"instance_types": ["p5.48xlarge"]}), catalog)
    ultra = plan.model_copy(update={"choice": plan.choice.model_copy(update={"instance_type": "u-p6e-gb200x72"})})
    args = TrainingClusterArgs(plan=ultra, instance=catalog.instance("u-p6e-gb200x72"), vpc_id="vpc-1",
                               subnet_id="subnet-1", tags={})
    with pytest.raises(ValueError, match=r"u-p6e-gb200x72 is an UltraServer: EC2 launches it as 18 × p6e-gb200\.36xlarge"):
        args.validate()
    TrainingClusterArgs(plan=plan, instance=catalog.instance("p5.48xlarge"), vpc_id="vpc-1", subnet_id="subnet-1",
                        tags={}).validate()
