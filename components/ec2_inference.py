"""`gpuplan:aws:Ec2InferenceServer`: a serving plan on EC2, for the types SageMaker hosting does not offer
(g6f fractional L4, the P6e-GB200 and Trn2 UltraServers; planner/search/sweep.py type_target).

The nodes run the same Deep Learning Container a SageMaker endpoint would (components/data/images.yaml),
started by user data with the engine settings the plan chose (settings.container_environment: TP, max
batch, max model length, FP8 KV cache, Neuron LNC), written to /etc/gpuplan/serving.env where the
policy pack reads them back. No load balancer: the plan prices instances only, and callers inside the
VPC (or the CIDR the stack names) reach each node's serving port directly; an internal NLB would be an
unpriced extra with no second target on a one-node plan. Nothing is reachable from the internet: no
public IP, and the security group admits the serving port from one CIDR only."""

from __future__ import annotations

import base64
import ipaddress
import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components import settings
from components.inference import model_grants, s3_artifact
from components.ec2_nodes import IMDSV2_ONLY, node_ami, node_role, reservation_settings
from components.training import NODE_TAGS, capacity_wait_timeout, network_interfaces
from planner.economics import provisioned
from planner.hardware.catalog import InstanceType
from planner.hardware.ultraservers import launch_type, member_instance
from planner.workload.plan import Plan

SERVING_PORT = 8080  # the DLCs' SageMaker serving port (/ping, /invocations)
SERVING_ENV = "/etc/gpuplan/serving.env"  # policies/facts.py serving_exports reads this block back
MODEL_DIR = settings.SAGEMAKER_MODEL_DIR  # where the containers look for a model without HF_MODEL_ID
MODEL_DEVICE = "/dev/sdf"
ROOT_VOLUME_GB = provisioned.EC2_SERVING_ROOT_VOLUME_GB  # sized and priced in planner/economics/provisioned.py
LOG_GROUP_PREFIX = "/gpuplan/serving/"


def log_group(plan: Plan) -> str:
    return f"{LOG_GROUP_PREFIX}{plan.workload}"


@dataclass
class Ec2InferenceArgs:
    plan: Plan
    instance: InstanceType
    region: str
    vpc_id: str
    subnet_id: str
    tags: dict[str, str]
    output_tokens: int
    headroom: float = 0.10
    model_data_url: str | None = None
    hf_model_id: str | None = None
    image_uri: str | None = None
    allowed_cidr: str | None = None  # None: the VPC's own CIDR
    capacity_block_id: str | None = None
    capacity_reservation_id: str | None = None
    ami_id: str | None = None
    ami_parameter: str | None = None
    protect: bool = False

    def validate(self) -> None:
        plan = self.plan
        if plan.kind != "inference":
            raise ValueError(f"workload {plan.workload} is {plan.kind}; Ec2InferenceServer serves inference plans")
        if not self.vpc_id or not self.subnet_id:
            raise ValueError("EC2 serving needs a VPC and a subnet: set gpuplan:vpcId and gpuplan:subnetIds")
        if not (self.model_data_url or self.hf_model_id):
            raise ValueError("give modelDataUrl (s3://...) or hfModelId")
        if self.model_data_url:
            s3_artifact("modelDataUrl", self.model_data_url, archive_ok=True)
        member, members = launch_type(self.instance.name)
        if members > 1 and not self.capacity_block_id:
            raise ValueError(f"{self.instance.name} is an UltraServer ({members} × {member}), sold only as a Capacity "
                             "Block for ML: purchase one (`gpuplan preflight` lists offerings) and set capacityBlockId")
        if self.capacity_block_id and self.capacity_reservation_id:
            raise ValueError("capacityReservationId and capacityBlockId are alternatives; give one")
        per_copy = plan.layout.devices_per_copy
        if per_copy > self.devices_per_instance:
            raise ValueError(f"one model copy spans {per_copy} devices but one {member} holds "
                             f"{self.devices_per_instance}: multi-instance serving (vLLM over Ray) is not started by "
                             "this component; pin layout.tensor_parallel to fit one instance")
        if self.allowed_cidr is not None:
            network = ipaddress.ip_network(self.allowed_cidr, strict=False)
            if network.prefixlen == 0:
                raise ValueError("allowedCidr must not be the whole internet (0.0.0.0/0 or ::/0)")

    @property
    def devices_per_instance(self) -> int:
        """Devices (GPUs, or NeuronCores on Neuron) on one launched instance."""
        devices = self.plan.choice.devices_per_node or self.plan.choice.accelerators_per_node
        return devices // launch_type(self.instance.name)[1]

    @property
    def instances(self) -> int:
        return self.plan.choice.nodes * launch_type(self.instance.name)[1]


def model_volume_gb(plan: Plan) -> int:
    """The model volume the plan prices (planner/economics/provisioned.py ec2_model_volume_gb)."""
    return provisioned.ec2_model_volume_gb(provisioned.serving_weights_bytes(plan))


def _copies(args: Ec2InferenceArgs) -> list[list[int]]:
    """The devices of each model copy on one instance: one container per copy, each on its own port."""
    per_copy = args.plan.layout.devices_per_copy
    count = max(1, args.devices_per_instance // per_copy)
    return [list(range(i * per_copy, (i + 1) * per_copy)) for i in range(count)]


def user_data(args: Ec2InferenceArgs, image: str, log_group: str) -> str:
    """Mounts the model volume, fetches the model from S3 when given, logs in to ECR and starts one
    container per model copy with the plan's engine settings. Bash, checked by shellcheck in the tests."""
    plan = args.plan
    env = settings.container_environment(plan, None if args.model_data_url else args.hf_model_id, args.headroom,
                                         None, args.output_tokens)
    neuron = plan.choice.accelerator_vendor == "aws-neuron"
    if args.model_data_url and "SM_ON_MODEL" in env:
        env["SM_ON_MODEL"] = MODEL_DIR
    registry = image.split("/", 1)[0]
    lines = ["#!/bin/bash", "set -euo pipefail", "mkdir -p /etc/gpuplan",
             f"cat > {SERVING_ENV} <<'EOF'", *[f"{k}={v}" for k, v in env.items()], "EOF",
             "TOKEN=$(curl -sX PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')",
             "REGION=$(curl -s -H \"X-aws-ec2-metadata-token: $TOKEN\" "
             "http://169.254.169.254/latest/meta-data/placement/region)",
             # the model volume: /dev/sdf, or the NVMe device whose controller names it (EC2 guide, "Amazon EBS
             # and NVMe": the block device mapping name is in the vendor-specific bytes of id-ctrl)
             "model_device() {", f"  if [ -e {MODEL_DEVICE} ]; then echo {MODEL_DEVICE}; return; fi",
             "  for d in /dev/nvme*n1; do",
             "    if nvme id-ctrl -b \"$d\" 2>/dev/null | cut -c3073-3104 | tr -d '\\0 ' | grep -qx '/dev/sdf\\|sdf'; then",
             "      echo \"$d\"; return", "    fi", "  done", "}",
             "DEVICE=\"\"", "for _ in $(seq 1 60); do DEVICE=$(model_device); if [ -n \"$DEVICE\" ]; then break; fi; sleep 5; done",
             "if [ -z \"$DEVICE\" ]; then echo 'gpuplan: model volume not attached' >&2; exit 1; fi",
             "if ! blkid \"$DEVICE\" >/dev/null; then mkfs -t xfs \"$DEVICE\"; fi",
             f"mkdir -p {MODEL_DIR}", f"mount \"$DEVICE\" {MODEL_DIR}"]
    if args.model_data_url and args.model_data_url.endswith(".tar.gz"):
        lines += [f"aws s3 cp --region \"$REGION\" '{args.model_data_url}' - | tar -xz -C {MODEL_DIR}"]
    elif args.model_data_url:
        lines += [f"aws s3 sync --region \"$REGION\" '{args.model_data_url}' {MODEL_DIR}"]
    lines += [f"aws ecr get-login-password --region \"$REGION\" | docker login --username AWS --password-stdin {registry}",
              f"docker pull '{image}'"]
    for index, devices in enumerate(_copies(args)):
        if neuron:  # NeuronCores a copy uses, by the runtime's own variable; every Neuron device is passed in
            access = ("$(for d in /dev/neuron*; do printf -- '--device=%s ' \"$d\"; done) "
                      f"-e NEURON_RT_VISIBLE_CORES={devices[0]}-{devices[-1]}")
        else:
            access = f"--gpus '\"device={','.join(map(str, devices))}\"'"
        lines += ["# shellcheck disable=SC2046  # the Neuron device list splits into one --device flag each",
                  f"docker run -d --name gpuplan-serving-{index} --restart unless-stopped {access} --shm-size 16g "
                  f"--env-file {SERVING_ENV} -p {SERVING_PORT + index}:{SERVING_PORT} -v {MODEL_DIR}:{MODEL_DIR} "
                  f"--log-driver awslogs --log-opt awslogs-region=\"$REGION\" --log-opt awslogs-group={log_group} "
                  f"'{image}' serve"]
    return "\n".join(lines) + "\n"


def node_policy(args: Ec2InferenceArgs, image: str, account_id: str) -> dict:
    """Least privilege for the nodes: pull the one DLC repository, read exactly the model the URL names,
    write the serving logs to one log group. No SSM or other managed policy: nothing else is needed."""
    statements: list[dict] = []
    repository = settings.image_repository_arn(image)
    if repository is not None:
        statements += [{"Sid": "PullImage", "Effect": "Allow", "Resource": repository,
                        "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"]},
                       # GetAuthorizationToken has no resource-level permissions (ECR service authorization reference)
                       {"Sid": "EcrToken", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"}]
    if args.model_data_url:
        objects, listed = model_grants(args.model_data_url)
        statements.append({"Sid": "ReadModel", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": objects})
        if listed is not None:
            bucket = args.model_data_url.removeprefix("s3://").split("/", 1)[0]
            statements.append({"Sid": "ListModel", "Effect": "Allow", "Action": ["s3:ListBucket"],
                               "Resource": f"arn:aws:s3:::{bucket}", "Condition": {"StringLike": {"s3:prefix": [listed]}}})
    statements.append({"Sid": "Logs", "Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                       "Resource": f"arn:aws:logs:{args.region}:{account_id}:log-group:{log_group(args.plan)}:log-stream:*"})
    return {"Version": "2012-10-17", "Statement": statements}


class Ec2InferenceServer(pulumi.ComponentResource):
    """Security group, log group, role and instance profile, launch template and the Auto Scaling group."""

    def __init__(self, name: str, args: Ec2InferenceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args.validate()
        super().__init__("gpuplan:aws:Ec2InferenceServer", name, None, opts)
        plan, tags = args.plan, dict(args.tags)
        child = pulumi.ResourceOptions(parent=self)
        image = args.image_uri or settings.image_uri(plan, args.region)
        member, _ = launch_type(args.instance.name)
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        cidr = pulumi.Output.from_input(args.allowed_cidr) if args.allowed_cidr else \
            aws.ec2.get_vpc_output(id=args.vpc_id, opts=pulumi.InvokeOutputOptions(parent=self)).cidr_block
        ports = len(_copies(args))
        self.security_group = aws.ec2.SecurityGroup(
            f"{name}-sg", vpc_id=args.vpc_id, description=f"gpuplan {plan.workload}: serving port from one CIDR",
            ingress=[{"protocol": "tcp", "from_port": SERVING_PORT, "to_port": SERVING_PORT + ports - 1,
                      "cidr_blocks": [cidr], "description": "serving clients"}],
            egress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"],
                     "description": "outbound: ECR, S3, CloudWatch Logs, model hub"}],
            tags=tags, opts=child)
        self.log_group = aws.cloudwatch.LogGroup(f"{name}-logs", name=log_group(plan),
                                                 retention_in_days=30, tags=tags, opts=child)
        self.role = node_role(name, tags, child)
        self.role_policy = aws.iam.RolePolicy(
            f"{name}-policy", role=self.role.id,
            policy=account.apply(lambda a: json.dumps(node_policy(args, image, a))), opts=child)
        self.instance_profile = aws.iam.InstanceProfile(f"{name}-profile", role=self.role.name, opts=child)
        self.ami_id, template_opts = node_ami(self, args.ami_id, args.ami_parameter or settings.ami_parameter(plan))
        script = self.log_group.name.apply(lambda group: user_data(args, image, group))
        node_tags = {k: v for k, v in tags.items() if k in NODE_TAGS}
        template: dict = dict(
            image_id=self.ami_id, instance_type=member,
            metadata_options=IMDSV2_ONLY,
            block_device_mappings=[
                {"device_name": "/dev/sda1", "ebs": {"volume_size": ROOT_VOLUME_GB, "volume_type": "gp3",
                                                     "encrypted": "true", "delete_on_termination": "true"}},
                {"device_name": MODEL_DEVICE, "ebs": {"volume_size": model_volume_gb(plan), "volume_type": "gp3",
                                                      "encrypted": "true", "delete_on_termination": "true"}}],
            network_interfaces=network_interfaces(member_instance(args.instance), args.subnet_id, self.security_group.id),
            iam_instance_profile={"arn": self.instance_profile.arn},
            user_data=script.apply(lambda s: base64.b64encode(s.encode()).decode()),
            tag_specifications=[{"resource_type": "instance", "tags": node_tags},
                                {"resource_type": "volume", "tags": node_tags}],
            tags=tags, **reservation_settings(args.capacity_block_id, args.capacity_reservation_id))
        self.launch_template = aws.ec2.LaunchTemplate(f"{name}-lt", opts=template_opts, **template)
        count = args.instances
        self.nodes = aws.autoscaling.Group(
            f"{name}-nodes", desired_capacity=count, min_size=count, max_size=count,
            launch_template={"id": self.launch_template.id, "version": self.launch_template.latest_version.apply(str)},
            vpc_zone_identifiers=[args.subnet_id], wait_for_capacity_timeout=capacity_wait_timeout(count),
            instance_refresh={"strategy": "Rolling", "preferences": {"min_healthy_percentage": 0, "skip_matching": True}},
            tags=[{"key": k, "value": v, "propagate_at_launch": True} for k, v in tags.items()],
            opts=pulumi.ResourceOptions(parent=self, protect=args.protect, retain_on_delete=args.protect))
        self.register_outputs({"security_group_id": self.security_group.id, "launch_template_id": self.launch_template.id,
                               "instance_type": member, "instances": count, "serving_port": SERVING_PORT})
