"""`gpuplan:aws:TrainingCluster`: an EC2 GPU/Trainium cluster laid out as the plan says."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components import settings
from planner.hardware.catalog import InstanceType
from planner.workload.plan import Plan
from planner.economics.provisioned import FSX_BACKUP_DAYS
from planner.hardware.ultraservers import launch_type
from components.ec2_nodes import IMDSV2_ONLY, node_ami, node_role, reservation_settings

SSM_CORE_POLICY = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
FSX_MOUNT_POINT = "/fsx"
# Families whose EFA does GPU-direct RDMA (EFA docs: P4d, P4de, P5*, Trn1*); on G families EFA moves
# bytes through host memory, so FI_EFA_USE_DEVICE_RDMA must stay unset there.
RDMA_FAMILIES = {"p4d", "p4de", "p5", "p5e", "p5en", "trn1", "trn1n"}
# The Auto Scaling group waits this long for the whole cluster (the default 10 min is sized for one
# web server, not for 16 accelerator nodes placed in one cluster placement group).
CAPACITY_WAIT_BASE_MIN, CAPACITY_WAIT_PER_NODE_MIN, CAPACITY_WAIT_MAX_MIN = 10, 1, 60
CLUSTER_TAG = "gpuplan:cluster"
NODE_TAGS = {"gpuplan:workload", "gpuplan:kind", "gpuplan:environment", "gpuplan:region"}


@dataclass
class TrainingClusterArgs:
    plan: Plan
    instance: InstanceType
    vpc_id: str
    subnet_id: str
    tags: dict[str, str]
    ami_id: str | None = None  # pinned; else resolved once from the SSM parameter and kept
    ami_parameter: str | None = None
    capacity_reservation_id: str | None = None  # an On-Demand Capacity Reservation
    capacity_block_id: str | None = None  # a Capacity Block for ML reservation
    fsx: bool | None = None  # None: what the plan's storage says; True / False: always / never
    fsx_import_path: str | None = None  # s3:// prefix linked to /fsx/data
    protect: bool = False
    root_volume_gb: int | None = None

    def validate(self) -> None:
        if self.plan.kind == "inference":
            raise ValueError(f"workload {self.plan.workload} is inference; TrainingCluster runs training plans")
        if not self.vpc_id or not self.subnet_id:
            raise ValueError("a training cluster needs vpc_id and subnet_id")
        member, per_node = launch_type(self.instance.name)
        if per_node > 1:  # the hostfile, torchrun's node count and the launch template are per launched instance
            raise ValueError(f"{self.instance.name} is an UltraServer: EC2 launches it as {per_node} × {member} in a "
                             "Capacity Block, and a training cluster of UltraServer members (a rank layout across "
                             "members, IMEX for NVLink between them) is not provisioned by TrainingCluster; plan "
                             f"training on {member} or another type (constraints.instance_types)")
        if self.plan.choice.nodes > 1 and not self.instance.efa:
            raise ValueError(f"{self.instance.name} has no EFA; a {self.plan.choice.nodes}-node cluster needs it")
        if self.plan.choice.purchase == "capacity-block" and not self.capacity_block_id:
            raise ValueError(f"the plan buys a Capacity Block for ML ({self.plan.choice.nodes} × "
                             f"{self.plan.choice.instance_type}): purchase one (`gpuplan preflight` lists offerings) "
                             "and set capacityBlockId")
        if self.capacity_reservation_id and self.capacity_block_id:
            raise ValueError("capacityReservationId and capacityBlockId are alternatives; give one")
        if self.fsx_import_path and not self.wants_fsx:
            raise ValueError("fsxImportPath links an S3 prefix to the FSx file system, which this plan does not need "
                             "(S3 streaming is enough): set fsx: true as well, or drop fsxImportPath")

    @property
    def wants_fsx(self) -> bool:
        """The plan sizes storage (planner/economics/storage.py): FSx when S3 streaming cannot carry the run."""
        if self.fsx is not None:
            return self.fsx
        return self.plan.storage is not None and self.plan.storage.recommendation == "fsx"


def network_interfaces(instance: InstanceType, subnet_id: str, security_group_id) -> list[dict]:
    """ENA primary with EFA on card 0 (device 0), EFA-only interfaces on the other cards (device 1): the
    EFA-only ones take no IP address, so a p5 node uses 1 private IP, not 32 (EC2 User Guide, "Maximize
    network bandwidth on accelerated instances", EFA-only interfaces). No public IPs."""
    common = {"subnet_id": subnet_id, "security_groups": [security_group_id], "delete_on_termination": "true"}
    if not instance.efa:
        return [{"device_index": 0, "associate_public_ip_address": "false", **common}]
    primary = {"network_card_index": 0, "device_index": 0, "interface_type": "efa",
               "associate_public_ip_address": "false", **common}
    return [primary] + [{"network_card_index": card, "device_index": 1, "interface_type": "efa-only", **common}
                        for card in range(1, instance.network_cards)]


def capacity_wait_timeout(nodes: int) -> str:
    minutes = min(CAPACITY_WAIT_MAX_MIN, CAPACITY_WAIT_BASE_MIN + CAPACITY_WAIT_PER_NODE_MIN * nodes)
    return f"{minutes}m"


# Runs on every node: waits until all the cluster's nodes run, then writes the hostfile (sorted private
# IPs, one line per node with its slots), the rendezvous endpoint (the first node) and this node's rank
# where torchrun / mpirun read them. Tags, not the group name, find the peers: the launch template is
# created before the Auto Scaling group. Under `set -euo pipefail` every lookup that may find nothing
# ends in `|| true`, so an empty first answer is retried, not fatal. Capacity rebalancing runs one node
# more than the cluster while a replacement starts; a node outside the first N (by address) waits for the
# replaced one to go, and stands by without a rank if it does not (a clear line in the console log either way).
# Bounded: DISCOVERY_ATTEMPTS × DISCOVERY_INTERVAL_S, the Auto Scaling group's longest capacity wait.
DISCOVERY_ATTEMPTS, DISCOVERY_INTERVAL_S = 120, 15
DISCOVERY = r"""TOKEN=$(curl -sX PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
md() { curl -s -H "X-aws-ec2-metadata-token: $TOKEN" "http://169.254.169.254/latest/meta-data/$1"; }
say() { echo "gpuplan: $*" >&2; }
peers() {
  aws ec2 describe-instances --region "$REGION" \
    --filters "Name=tag:{tag},Values={cluster}" "Name=instance-state-name,Values=running" \
    --query 'Reservations[].Instances[].PrivateIpAddress' --output text | tr '\t' '\n' | grep -v '^None$' \
    | grep . | sort -V || true
}
REGION=$(md placement/region); SELF=$(md local-ipv4)
IPS=""; COUNT=0; RANK=""
for attempt in $(seq 1 {attempts}); do
  IPS=$(peers)
  COUNT=$(printf '%s\n' "$IPS" | grep -c . || true)
  RANK=$(printf '%s\n' "$IPS" | head -n {nodes} | grep -nxF "$SELF" | cut -d: -f1 || true)
  if [ "$COUNT" -ge {nodes} ] && [ -n "$RANK" ]; then break; fi
  if [ "$attempt" -lt {attempts} ]; then sleep {interval}; fi
done
if [ "$COUNT" -lt {nodes} ]; then
  say "peer discovery: $COUNT of {nodes} nodes running after {minutes} min; no hostfile written (see the Auto Scaling group's activity)"
  exit 1
fi
printf '%s\n' "$IPS" | head -n {nodes} | sed 's/$/ slots={slots}/' > /etc/gpuplan/hostfile
MASTER=$(printf '%s\n' "$IPS" | head -n 1)
if [ -z "$RANK" ]; then
  say "surplus node: $COUNT nodes run for a {nodes}-node cluster (capacity rebalancing) and $SELF is not among the first {nodes}; standing by without a rank"
  echo "GPUPLAN_NODE_ROLE=standby" >> /etc/gpuplan/env
else
  echo "GPUPLAN_NODE_RANK=$((RANK - 1))" >> /etc/gpuplan/env
fi
cat >> /etc/gpuplan/env <<EOF
GPUPLAN_MASTER_ADDR=$MASTER
GPUPLAN_MASTER_PORT=29500
GPUPLAN_RDZV_ENDPOINT=$MASTER:29500
EOF"""


# Where the nodes publish what `gpuplan observe` reads (gpuplan/observe.py TRAINING_NAMESPACE, kept
# equal by a test); the role may put metrics into this namespace only.
METRICS_NAMESPACE = "gpuplan/training"
PUBLISHER_PATH = "/opt/gpuplan/publish-metric"
# The hook the training job calls, e.g. every 50 steps from rank 0: `publish-metric TOKENS_PER_S STEP_S`,
# the whole job's tokens/s and the step's wall time, as the training loop logs them. IMDSv2 for the region.
PUBLISHER = r"""#!/bin/bash
# gpuplan: publish the job's training tokens/s and step time for `gpuplan observe`.
set -euo pipefail
number='^[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$'
if [ "$#" -ne 2 ] || ! [[ "$1" =~ $number ]] || ! [[ "$2" =~ $number ]]; then
  echo "usage: publish-metric TOKENS_PER_SECOND STEP_TIME_SECONDS (the whole job's, non-negative numbers)" >&2
  exit 2
fi
TOKEN=$(curl -sX PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 60')
REGION=$(curl -s -H "X-aws-ec2-metadata-token: $TOKEN" http://169.254.169.254/latest/meta-data/placement/region)
DIMS='Dimensions=[{Name=Workload,Value={workload}}]'
aws cloudwatch put-metric-data --region "$REGION" --namespace {namespace} --metric-data   "MetricName=TokensPerSecond,Value=$1,Unit=Count/Second,$DIMS"   "MetricName=StepTimeSeconds,Value=$2,Unit=Seconds,$DIMS"
"""


def publisher(workload: str) -> str:
    """The metric hook's script; the workload name is [a-z0-9-] (planner/workload/spec.py), safe in shorthand."""
    return PUBLISHER.replace("{workload}", workload).replace("{namespace}", METRICS_NAMESPACE)


def user_data(plan: Plan, instance: InstanceType, cluster: str, fsx: tuple[str, str] | None = None) -> str:
    """Writes the plan's layout, the EFA/NCCL environment, the hostfile and rendezvous endpoint, and
    mounts FSx for Lustre when the cluster has one (`fsx` = (DNS name, mount name))."""
    lay = plan.layout
    layout = {"workload": plan.workload, "nodes": plan.choice.nodes, "gpus_per_node": plan.choice.accelerators_per_node,
              "tensor_parallel": lay.tensor_parallel, "pipeline_parallel": lay.pipeline_parallel,
              "data_parallel": lay.data_parallel, "zero_stage": lay.zero_stage, "micro_batch": lay.micro_batch,
              "gradient_accumulation_steps": lay.microbatches, "activation_checkpointing": lay.activation_checkpointing}
    slots = plan.choice.devices_per_node or plan.choice.accelerators_per_node
    env = {"GPUPLAN_NNODES": plan.choice.nodes, "GPUPLAN_NPROC_PER_NODE": slots,
           "GPUPLAN_TP": lay.tensor_parallel, "GPUPLAN_PP": lay.pipeline_parallel, "GPUPLAN_DP": lay.data_parallel,
           "GPUPLAN_ZERO_STAGE": lay.zero_stage, "GPUPLAN_MICRO_BATCH": lay.micro_batch,
           "GPUPLAN_HOSTFILE": "/etc/gpuplan/hostfile", "NCCL_SOCKET_IFNAME": "^lo,docker", "NCCL_DEBUG": "WARN"}
    if lay.context_parallel > 1:  # Megatron-Core --context-parallel-size: the sequence split over CP ranks
        layout["context_parallel"] = env["GPUPLAN_CP"] = lay.context_parallel
    if lay.expert_parallel and lay.expert_parallel > lay.tensor_parallel:  # MoE: EP degree in DP ranks (Megatron-Core)
        layout["expert_parallel"] = env["GPUPLAN_EP"] = lay.expert_parallel // lay.tensor_parallel
    if plan.choice.accelerator in settings.LOGICAL_NC_CONFIG:  # NxD Training compiles for the runtime's LNC
        env["NEURON_LOGICAL_NC_CONFIG"] = settings.LOGICAL_NC_CONFIG[plan.choice.accelerator]
    if instance.efa:
        env.update({"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1"})
        if instance.family in RDMA_FAMILIES:
            env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    lines = ["#!/bin/bash", "set -euo pipefail", "mkdir -p /etc/gpuplan",
             f"cat > /etc/gpuplan/layout.json <<'EOF'\n{json.dumps(layout, indent=2)}\nEOF",
             "cat > /etc/gpuplan/env <<'EOF'", *[f"{k}={v}" for k, v in env.items()], "EOF"]
    if fsx:
        dns, mount = fsx
        lines += [f"mkdir -p {FSX_MOUNT_POINT}",
                  f"echo '{dns}@tcp:/{mount} {FSX_MOUNT_POINT} lustre defaults,noatime,flock,_netdev,x-systemd.automount 0 0'"
                  " >> /etc/fstab",
                  f"mount {FSX_MOUNT_POINT}", f"echo GPUPLAN_FSX={FSX_MOUNT_POINT} >> /etc/gpuplan/env"]
    lines += [f"mkdir -p {PUBLISHER_PATH.rsplit('/', 1)[0]}",
              f"cat > {PUBLISHER_PATH} <<'EOF'\n{publisher(plan.workload)}EOF", f"chmod 755 {PUBLISHER_PATH}",
              f"echo GPUPLAN_PUBLISH_METRIC={PUBLISHER_PATH} >> /etc/gpuplan/env"]
    lines += [DISCOVERY.replace("{tag}", CLUSTER_TAG).replace("{cluster}", cluster)
              .replace("{nodes}", str(plan.choice.nodes)).replace("{slots}", str(slots))
              .replace("{attempts}", str(DISCOVERY_ATTEMPTS)).replace("{interval}", str(DISCOVERY_INTERVAL_S))
              .replace("{minutes}", str(DISCOVERY_ATTEMPTS * DISCOVERY_INTERVAL_S // 60)),
              "cp /etc/gpuplan/env /etc/profile.d/gpuplan.sh && sed -i 's/^/export /' /etc/profile.d/gpuplan.sh"]
    return "\n".join(lines) + "\n"


# What the nodes need beyond SSM's managed policy: list the running instances for discovery, and
# put metrics for observe. Neither action has resource-level permissions (Service Authorization
# Reference), so "*" is the only resource; PutMetricData is held to one namespace by its
# cloudwatch:namespace condition key.
NODE_POLICY = {"Version": "2012-10-17", "Statement": [
    {"Sid": "DiscoverPeers", "Effect": "Allow", "Action": ["ec2:DescribeInstances"], "Resource": "*"},
    {"Sid": "PublishTrainingMetrics", "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": "*",
     "Condition": {"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}}}]}


class TrainingCluster(pulumi.ComponentResource):
    """Security group, placement group, launch template, instance profile, the nodes and optional FSx."""

    def __init__(self, name: str, args: TrainingClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args.validate()
        super().__init__("gpuplan:aws:TrainingCluster", name, None, opts)
        plan, tags = args.plan, dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)
        kept = pulumi.ResourceOptions(parent=self, protect=args.protect, retain_on_delete=args.protect)

        # EFA needs all traffic between the nodes themselves; nothing else may reach them.
        self.security_group = aws.ec2.SecurityGroup(
            f"{name}-sg", vpc_id=args.vpc_id, description=f"gpuplan {plan.workload}: intra-cluster traffic only",
            ingress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True, "description": "cluster peers"}],
            egress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "self": True, "description": "cluster peers"},
                    {"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"],
                     "description": "outbound: packages, S3, SSM"}],
            tags=tags, opts=child)
        self.placement_group = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags=tags, opts=child)
        self.role = node_role(name, tags, child)
        self.ssm_attachment = aws.iam.RolePolicyAttachment(f"{name}-ssm", role=self.role.name,
                                                           policy_arn=SSM_CORE_POLICY, opts=child)
        self.role_policy = aws.iam.RolePolicy(f"{name}-discovery", role=self.role.id,
                                              policy=json.dumps(NODE_POLICY), opts=child)
        self.instance_profile = aws.iam.InstanceProfile(f"{name}-profile", role=self.role.name, opts=child)

        self.filesystem = None
        fsx_mount = None
        if args.wants_fsx:
            sizing = plan.storage.fsx  # deployment type, throughput tier and capacity (planner/economics/storage.py)
            self.filesystem = aws.fsx.LustreFileSystem(
                f"{name}-fsx", storage_capacity=sizing.storage_capacity_gib, subnet_ids=args.subnet_id,
                deployment_type=sizing.deployment_type, per_unit_storage_throughput=sizing.per_unit_storage_throughput,
                security_group_ids=[self.security_group.id], automatic_backup_retention_days=FSX_BACKUP_DAYS,
                copy_tags_to_backups=True, skip_final_backup=False, final_backup_tags=tags,
                tags=tags, opts=kept)
            fsx_mount = pulumi.Output.all(self.filesystem.dns_name, self.filesystem.mount_name)
            if args.fsx_import_path:
                self.data_repository = aws.fsx.DataRepositoryAssociation(
                    f"{name}-fsx-s3", file_system_id=self.filesystem.id, data_repository_path=args.fsx_import_path,
                    file_system_path="/data", batch_import_meta_data_on_create=True,
                    s3={"auto_import_policy": {"events": ["NEW", "CHANGED", "DELETED"]}}, tags=tags, opts=child)

        self.ami_id, template_opts = node_ami(self, args.ami_id, args.ami_parameter or settings.ami_parameter(plan))
        script = (fsx_mount.apply(lambda m: user_data(plan, args.instance, name, (m[0], m[1])))
                  if fsx_mount is not None else pulumi.Output.from_input(user_data(plan, args.instance, name)))
        # The nodes carry the stable tags only: a tag specification is part of the template, so a tag
        # that moves with prices (gpuplan:monthly-usd, the seal) would make a new version and roll the
        # running cluster through the instance refresh.
        node_tags = {k: v for k, v in tags.items() if k in NODE_TAGS}
        template: dict = dict(
            image_id=self.ami_id, instance_type=plan.choice.instance_type,
            metadata_options=IMDSV2_ONLY,
            block_device_mappings=[{"device_name": "/dev/sda1", "ebs": {
                "volume_size": args.root_volume_gb or settings.root_volume_gb(plan), "volume_type": "gp3",
                "encrypted": "true", "delete_on_termination": "true"}}],
            network_interfaces=network_interfaces(args.instance, args.subnet_id, self.security_group.id),
            iam_instance_profile={"arn": self.instance_profile.arn},
            placement={"group_name": self.placement_group.name},
            user_data=script.apply(lambda s: base64.b64encode(s.encode()).decode()),
            tag_specifications=[{"resource_type": "instance", "tags": {**node_tags, CLUSTER_TAG: name}},
                                {"resource_type": "volume", "tags": node_tags}],
            tags=tags, **reservation_settings(args.capacity_block_id, args.capacity_reservation_id))
        reservation = args.capacity_block_id or args.capacity_reservation_id
        if not args.capacity_block_id:
            pulumi.log.info(f"{name}: {plan.choice.nodes} × {plan.choice.instance_type} without a reservation; if the "
                            "Auto Scaling group reports InsufficientInstanceCapacity, reserve a Capacity Block for ML "
                            "(`gpuplan preflight` lists offerings) and set capacityBlockId", resource=self)
        self.launch_template = aws.ec2.LaunchTemplate(f"{name}-lt", opts=template_opts, **template)
        version = self.launch_template.latest_version.apply(str)
        launch = {"launch_template": {"id": self.launch_template.id, "version": version}}
        if plan.choice.purchase == "spot" and not reservation:
            # Spot through the group's instances distribution (EC2 Auto Scaling guide, "Auto Scaling groups with
            # multiple instance types and purchase options"): all capacity spot, capacity-optimized placement,
            # and rebalancing that launches a replacement on the rebalance signal, before the interruption.
            launch = {"mixed_instances_policy": {
                "launch_template": {"launch_template_specification": {"launch_template_id": self.launch_template.id,
                                                                      "version": version}},
                "instances_distribution": {"on_demand_base_capacity": 0,
                                           "on_demand_percentage_above_base_capacity": 0,
                                           "spot_allocation_strategy": "capacity-optimized"}},
                "capacity_rebalance": True}
        self.nodes = aws.autoscaling.Group(
            f"{name}-nodes", desired_capacity=plan.choice.nodes, min_size=plan.choice.nodes, max_size=plan.choice.nodes,
            **launch,
            vpc_zone_identifiers=[args.subnet_id], placement_group=self.placement_group.id,
            wait_for_capacity_timeout=capacity_wait_timeout(plan.choice.nodes),
            # a new launch template version (an AMI pinned by amiId, a re-plan) replaces the nodes
            instance_refresh={"strategy": "Rolling", "preferences": {"min_healthy_percentage": 0,
                                                                     "skip_matching": True}},
            tags=[{"key": k, "value": v, "propagate_at_launch": True} for k, v in tags.items()], opts=child)
        self.register_outputs({"security_group_id": self.security_group.id,
                               "placement_group": self.placement_group.name, "ami_id": self.ami_id,
                               "launch_template_id": self.launch_template.id, "nodes": plan.choice.nodes,
                               "instance_type": plan.choice.instance_type})
