"""`gpuplan:aws:TrainingCluster`: an EC2 GPU/Trainium cluster laid out as the plan says."""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components import settings
from planner.catalog import InstanceType
from planner.plan import Plan

SSM_CORE_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
# FSx for Lustre PERSISTENT_2 delivers 250 MB/s per TiB at that tier; capacity comes in 1.2 TiB steps.
FSX_MB_S_PER_TIB = 250
FSX_STEP_GIB = 1200
# Bytes read per training token: tokenised corpora store 2-4 B per token id; 4 keeps a margin
# for shuffling and packing (domain.md: the input pipeline must keep up with tokens/s).
INPUT_BYTES_PER_TOKEN = 4


@dataclass
class TrainingClusterArgs:
    plan: Plan
    instance: InstanceType
    vpc_id: str
    subnet_id: str
    tags: dict[str, str]
    ami_parameter: str | None = None
    capacity_reservation_id: str | None = None
    fsx: bool = False
    root_volume_gb: int | None = None

    def validate(self) -> None:
        if self.plan.kind == "inference":
            raise ValueError(f"workload {self.plan.workload} is inference; TrainingCluster runs training plans")
        if not self.vpc_id or not self.subnet_id:
            raise ValueError("a training cluster needs vpc_id and subnet_id")
        if self.plan.choice.nodes > 1 and not self.instance.efa:
            raise ValueError(f"{self.instance.name} has no EFA; a {self.plan.choice.nodes}-node cluster needs it")


def network_interfaces(instance: InstanceType, subnet_id: str, security_group_id) -> list[dict]:
    """One EFA interface per network card: the primary on card 0 at device 0, the rest at device 1
    (EC2 User Guide, 'Maximize network bandwidth on accelerated instances')."""
    if not instance.efa:
        return [{"device_index": 0, "subnet_id": subnet_id, "security_groups": [security_group_id],
                 "delete_on_termination": "true"}]
    return [{"network_card_index": card, "device_index": 0 if card == 0 else 1, "interface_type": "efa",
             "subnet_id": subnet_id, "security_groups": [security_group_id], "delete_on_termination": "true"}
            for card in range(instance.network_cards)]


def user_data(plan: Plan, efa: bool) -> str:
    """Writes the plan's layout and the EFA/NCCL environment where the launcher reads them."""
    lay = plan.layout
    layout = {"workload": plan.workload, "nodes": plan.choice.nodes, "gpus_per_node": plan.choice.accelerators_per_node,
              "tensor_parallel": lay.tensor_parallel, "pipeline_parallel": lay.pipeline_parallel,
              "data_parallel": lay.data_parallel, "zero_stage": lay.zero_stage, "micro_batch": lay.micro_batch,
              "gradient_accumulation_steps": lay.microbatches, "activation_checkpointing": lay.activation_checkpointing}
    env = {"GPUPLAN_NNODES": plan.choice.nodes, "GPUPLAN_NPROC_PER_NODE": plan.choice.accelerators_per_node,
           "GPUPLAN_TP": lay.tensor_parallel, "GPUPLAN_PP": lay.pipeline_parallel, "GPUPLAN_DP": lay.data_parallel,
           "GPUPLAN_ZERO_STAGE": lay.zero_stage, "GPUPLAN_MICRO_BATCH": lay.micro_batch,
           "NCCL_SOCKET_IFNAME": "^lo,docker", "NCCL_DEBUG": "WARN"}
    if efa:
        env.update({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"})
    lines = ["#!/bin/bash", "set -euo pipefail", "mkdir -p /etc/gpuplan",
             f"cat > /etc/gpuplan/layout.json <<'EOF'\n{json.dumps(layout, indent=2)}\nEOF",
             "cat > /etc/gpuplan/env <<'EOF'", *[f"{k}={v}" for k, v in env.items()], "EOF",
             "cp /etc/gpuplan/env /etc/profile.d/gpuplan.sh && sed -i 's/^/export /' /etc/profile.d/gpuplan.sh"]
    return "\n".join(lines) + "\n"


def fsx_capacity_gib(plan: Plan) -> int:
    needed_mb_s = plan.performance.training_tokens_per_s * INPUT_BYTES_PER_TOKEN / 1e6
    tib = max(1.0, needed_mb_s / FSX_MB_S_PER_TIB)
    return int(math.ceil(tib * 1024 / FSX_STEP_GIB) * FSX_STEP_GIB)


class TrainingCluster(pulumi.ComponentResource):
    """Security group, placement group, launch template, instance profile and the nodes."""

    def __init__(self, name: str, args: TrainingClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args.validate()
        super().__init__("gpuplan:aws:TrainingCluster", name, None, opts)
        plan, tags = args.plan, dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)

        # EFA needs all traffic between the nodes themselves; nothing else may reach them.
        self.security_group = aws.ec2.SecurityGroup(
            f"{name}-sg", vpc_id=args.vpc_id, description=f"gpuplan {plan.workload}: intra-cluster traffic only",
            ingress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True, "description": "cluster peers"}],
            egress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True, "description": "cluster peers"},
                    {"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"],
                     "description": "outbound: packages, S3, SSM"}],
            tags=tags, opts=child)
        self.placement_group = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags=tags, opts=child)
        self.role = aws.iam.Role(f"{name}-role", assume_role_policy=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
            tags=tags, opts=child)
        self.ssm_attachment = aws.iam.RolePolicyAttachment(f"{name}-ssm", role=self.role.name,
                                                           policy_arn=SSM_CORE_POLICY, opts=child)
        self.instance_profile = aws.iam.InstanceProfile(f"{name}-profile", role=self.role.name, opts=child)
        ami = aws.ssm.get_parameter_output(name=args.ami_parameter or settings.ami_parameter(plan),
                                           opts=pulumi.InvokeOutputOptions(parent=self))
        template: dict = dict(
            image_id=ami.value, instance_type=plan.choice.instance_type,
            metadata_options={"http_tokens": "required", "http_endpoint": "enabled",
                              "http_put_response_hop_limit": 2},
            block_device_mappings=[{"device_name": "/dev/sda1", "ebs": {
                "volume_size": args.root_volume_gb or settings.root_volume_gb(plan), "volume_type": "gp3",
                "encrypted": "true", "delete_on_termination": "true"}}],
            network_interfaces=network_interfaces(args.instance, args.subnet_id, self.security_group.id),
            iam_instance_profile={"arn": self.instance_profile.arn},
            placement={"group_name": self.placement_group.name},
            user_data=base64.b64encode(user_data(plan, args.instance.efa).encode()).decode(),
            tag_specifications=[{"resource_type": "instance", "tags": tags}, {"resource_type": "volume", "tags": tags}],
            tags=tags)
        if args.capacity_reservation_id:
            template["capacity_reservation_specification"] = {
                "capacity_reservation_target": {"capacity_reservation_id": args.capacity_reservation_id}}
        self.launch_template = aws.ec2.LaunchTemplate(f"{name}-lt", opts=child, **template)
        self.nodes = aws.autoscaling.Group(
            f"{name}-nodes", desired_capacity=plan.choice.nodes, min_size=plan.choice.nodes, max_size=plan.choice.nodes,
            launch_template={"id": self.launch_template.id, "version": self.launch_template.latest_version.apply(str)},
            vpc_zone_identifiers=[args.subnet_id], placement_group=self.placement_group.id,
            tags=[{"key": k, "value": v, "propagate_at_launch": True} for k, v in tags.items()], opts=child)
        self.filesystem = None
        if args.fsx:
            self.filesystem = aws.fsx.LustreFileSystem(
                f"{name}-fsx", storage_capacity=fsx_capacity_gib(plan), subnet_ids=args.subnet_id,
                deployment_type="PERSISTENT_2", per_unit_storage_throughput=FSX_MB_S_PER_TIB,
                security_group_ids=[self.security_group.id], tags=tags, opts=child)
        self.register_outputs({"security_group_id": self.security_group.id,
                               "placement_group": self.placement_group.name,
                               "launch_template_id": self.launch_template.id, "nodes": plan.choice.nodes,
                               "instance_type": plan.choice.instance_type})
