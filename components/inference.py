"""`gpuplan:aws:InferenceEndpoint`: a SageMaker real-time endpoint configured from a plan."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components import settings
from planner.plan import Plan

VARIANT = "AllTraffic"


@dataclass
class InferenceEndpointArgs:
    plan: Plan
    region: str
    tags: dict[str, str]
    output_tokens: int
    headroom: float = 0.10
    model_data_url: str | None = None  # s3://bucket/prefix/ (uncompressed) or .../model.tar.gz
    hf_model_id: str | None = None
    image_uri: str | None = None
    max_instance_count: int | None = None
    kms_key_arn: str | None = None
    compiled_model_url: str | None = None  # Neuron: s3:// prefix of pre-compiled graphs (NEFF cache)
    hf_token_secret_arn: str | None = None  # Secrets Manager secret holding the Hugging Face token
    vpc_subnet_ids: list[str] | None = None
    vpc_security_group_ids: list[str] | None = None
    network_isolation: bool = False
    protect: bool = False  # protect + retainOnDelete: `pulumi destroy` and replacements leave it running
    name_stem: str | None = None  # the endpoint's name stem (the workload's earlier name after a rename)
    extra_environment: dict[str, str] = field(default_factory=dict)

    def validate(self) -> None:
        if self.plan.kind != "inference":
            raise ValueError(f"workload {self.plan.workload} is {self.plan.kind}; InferenceEndpoint serves inference plans")
        if not (self.model_data_url or self.hf_model_id):
            raise ValueError("give modelDataUrl (s3://...) or hfModelId")
        if self.model_data_url and not self.model_data_url.startswith("s3://"):
            raise ValueError(f"modelDataUrl must be an s3:// URI (got {self.model_data_url!r})")
        if self.compiled_model_url is not None:
            if self.plan.choice.accelerator_vendor != "aws-neuron":
                raise ValueError(f"compiledModelUrl is for Neuron plans; {self.plan.workload} runs on "
                                 f"{self.plan.choice.accelerator}")
            if not self.compiled_model_url.startswith("s3://"):
                raise ValueError(f"compiledModelUrl must be an s3:// URI (got {self.compiled_model_url!r})")
        if bool(self.vpc_subnet_ids) != bool(self.vpc_security_group_ids):
            raise ValueError("vpcSubnetIds and vpcSecurityGroupIds go together (SageMaker's VpcConfig needs both)")
        if self.network_isolation and self.hf_model_id and not self.model_data_url:
            raise ValueError("networkIsolation blocks the container's downloads: give modelDataUrl (s3://) instead "
                             "of hfModelId alone")
        if self.max_instance_count is not None and self.max_instance_count < self.plan.choice.nodes:
            raise ValueError(f"maxInstanceCount {self.max_instance_count} is below the planned {self.plan.choice.nodes}")


def _s3_parts(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key


def endpoint_name(stem: str, instance_type: str) -> str:
    """The endpoint's name carries the instance type: a re-plan onto another type is a new endpoint
    (created, then the old one deleted), because SageMaker refuses to change the instance type of a
    variant that is an autoscaling target (SageMaker guide, "Update endpoints that use auto scaling").
    Other changes (model, image, counts) update the endpoint in place under the same name."""
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", f"{stem}-{instance_type}").strip("-")
    return slug[:63].rstrip("-")


def trust_policy(account_id: str) -> dict:
    """SageMaker may assume the role only on behalf of this account (confused-deputy guard)."""
    return {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"},
                           "Action": "sts:AssumeRole", "Condition": {"StringEquals": {"aws:SourceAccount": account_id}}}]}


def execution_policy(args: InferenceEndpointArgs, image: str, account_id: str = "*") -> dict:
    """Least privilege: read the model artifacts, pull the image, write logs and metrics, and, in a VPC,
    manage the endpoint's network interfaces (SageMaker guide, "Give SageMaker access to resources in
    your Amazon VPC"). The Hugging Face token is read at deployment, not by the role."""
    logs = f"arn:aws:logs:{args.region}:{account_id}:log-group:/aws/sagemaker/Endpoints/*"
    statements: list[dict] = [
        {"Sid": "PullImage", "Effect": "Allow",
         "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
         "Resource": settings.image_repository_arn(image) or f"arn:aws:ecr:{args.region}:*:repository/*"},
        # GetAuthorizationToken has no resource-level permissions (ECR service authorization reference).
        {"Sid": "EcrToken", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"},
        {"Sid": "Logs", "Effect": "Allow",
         "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
         "Resource": [logs, f"{logs}:log-stream:*"]},
        # PutMetricData has no resource-level permissions; the namespace condition narrows it.
        {"Sid": "Metrics", "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": "*",
         "Condition": {"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/Endpoints", "/aws/sagemaker/*"]}}},
    ]
    for sid, url in (("Model", args.model_data_url), ("CompiledGraphs", args.compiled_model_url)):
        if not url:
            continue
        bucket, key = _s3_parts(url)
        prefix = key.rsplit("/", 1)[0] + "/" if key.endswith(".tar.gz") else key
        statements += [
            {"Sid": f"Read{sid}", "Effect": "Allow", "Action": ["s3:GetObject"],
             "Resource": f"arn:aws:s3:::{bucket}/{prefix}*"},
            {"Sid": f"List{sid}", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": f"arn:aws:s3:::{bucket}",
             "Condition": {"StringLike": {"s3:prefix": [f"{prefix}*"]}}},
        ]
    if args.vpc_subnet_ids:
        statements += [
            # Describe* have no resource-level permissions.
            {"Sid": "VpcDescribe", "Effect": "Allow", "Resource": "*",
             "Action": ["ec2:DescribeVpcs", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups",
                        "ec2:DescribeNetworkInterfaces", "ec2:DescribeDhcpOptions"]},
            {"Sid": "VpcInterfaces", "Effect": "Allow",
             "Action": ["ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
                        "ec2:DeleteNetworkInterface", "ec2:DeleteNetworkInterfacePermission"],
             "Resource": "*", "Condition": {"ArnLike": {"ec2:Subnet": [
                 f"arn:aws:ec2:{args.region}:{account_id}:subnet/{s}" for s in args.vpc_subnet_ids]}}},
        ]
    if args.kms_key_arn:
        statements.append({"Sid": "Kms", "Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                           "Resource": args.kms_key_arn})
    return {"Version": "2012-10-17", "Statement": statements}


def scaling_target_value(plan: Plan, utilisation: float = 0.7) -> float:
    """ConcurrentRequestsPerModel target: 70% (AWS's target-tracking example) of the sequences one model
    copy runs at once. Streaming LLM requests last seconds to minutes, so concurrency, not invocations
    per minute, tracks their load; the high-resolution metric reports every 10 s."""
    return max(1.0, round(plan.layout.batch_per_replica * utilisation, 1))


CONCURRENCY_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"


class InferenceEndpoint(pulumi.ComponentResource):
    """Role, Model, EndpointConfiguration, Endpoint and target-tracking autoscaling for one plan."""

    def __init__(self, name: str, args: InferenceEndpointArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        args.validate()  # before any child exists
        super().__init__("gpuplan:aws:InferenceEndpoint", name, None, opts)
        plan = args.plan
        child = pulumi.ResourceOptions(parent=self)
        image = args.image_uri or settings.image_uri(plan, args.region)
        tags = {**args.tags}
        account = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id

        self.role = aws.iam.Role(f"{name}-role", assume_role_policy=account.apply(lambda a: json.dumps(trust_policy(a))),
                                 tags=tags, opts=child)
        self.role_policy = aws.iam.RolePolicy(
            f"{name}-role-policy", role=self.role.id,
            policy=account.apply(lambda a: json.dumps(execution_policy(args, image, a))), opts=child)
        environment: dict = {**settings.container_environment(plan, args.hf_model_id, args.headroom,
                                                              args.compiled_model_url, args.output_tokens),
                             **args.extra_environment}
        if args.hf_token_secret_arn:
            # Read at deployment by the deployer's credentials, kept a Pulumi secret (encrypted in state).
            token = aws.secretsmanager.get_secret_version_output(
                secret_id=args.hf_token_secret_arn, opts=pulumi.InvokeOutputOptions(parent=self)).secret_string
            environment["HF_TOKEN"] = pulumi.Output.secret(token)
        if plan.choice.accelerator_vendor == "aws-neuron" and not args.compiled_model_url:
            pulumi.log.warn(f"{plan.workload}: no compiledModelUrl; the endpoint compiles the model for batch "
                            f"{plan.layout.compiled_batch_size} × {plan.layout.n_positions} positions at start, "
                            "which can outlast the health check for large models", resource=self)
        container = aws.sagemaker.ModelPrimaryContainerArgs(image=image, environment=environment)
        if args.model_data_url and args.model_data_url.endswith(".tar.gz"):
            container.model_data_url = args.model_data_url
        elif args.model_data_url:  # an uncompressed prefix: SageMaker copies it as is, no tarball to unpack
            container.model_data_source = aws.sagemaker.ModelPrimaryContainerModelDataSourceArgs(s3_data_sources=[
                aws.sagemaker.ModelPrimaryContainerModelDataSourceS3DataSourceArgs(
                    s3_uri=args.model_data_url, s3_data_type="S3Prefix", compression_type="None")])
        vpc = {"subnets": args.vpc_subnet_ids, "security_group_ids": args.vpc_security_group_ids} \
            if args.vpc_subnet_ids else None
        self.model = aws.sagemaker.Model(f"{name}-model", execution_role_arn=self.role.arn, primary_container=container,
                                         vpc_config=vpc, enable_network_isolation=args.network_isolation or None,
                                         tags=tags, opts=pulumi.ResourceOptions(parent=self, depends_on=[self.role_policy]))
        timeout = settings.startup_timeout_s(plan)
        variant: dict = {"variant_name": VARIANT, "model_name": self.model.name,
                         "instance_type": f"ml.{plan.choice.instance_type}",
                         "initial_instance_count": plan.choice.nodes,
                         "model_data_download_timeout_in_seconds": timeout,
                         "container_startup_health_check_timeout_in_seconds": timeout}
        volume = settings.volume_size_gb(plan)
        if volume is not None:
            variant["volume_size_in_gb"] = volume
        self.endpoint_config = aws.sagemaker.EndpointConfiguration(
            f"{name}-config", production_variants=[variant], kms_key_arn=args.kms_key_arn if volume else None,
            tags=tags, opts=child)
        kept = pulumi.ResourceOptions(parent=self, protect=args.protect, retain_on_delete=args.protect)
        self.endpoint = aws.sagemaker.Endpoint(
            f"{name}-endpoint", name=endpoint_name(args.name_stem or name, plan.choice.instance_type),
            endpoint_config_name=self.endpoint_config.name, tags=tags, opts=kept)
        max_count = args.max_instance_count or plan.choice.nodes * 2
        self.scaling_target = aws.appautoscaling.Target(
            f"{name}-scaling-target", service_namespace="sagemaker",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            resource_id=pulumi.Output.concat("endpoint/", self.endpoint.name, "/variant/", VARIANT),
            min_capacity=plan.choice.nodes, max_capacity=max_count, opts=child)
        self.scaling_policy = aws.appautoscaling.Policy(
            f"{name}-scaling-policy", policy_type="TargetTrackingScaling", service_namespace="sagemaker",
            scalable_dimension=self.scaling_target.scalable_dimension, resource_id=self.scaling_target.resource_id,
            target_tracking_scaling_policy_configuration={
                "target_value": scaling_target_value(plan),
                "predefined_metric_specification": {"predefined_metric_type": CONCURRENCY_METRIC},
                "scale_in_cooldown": 300, "scale_out_cooldown": 60},
            opts=child)
        self.endpoint_name = self.endpoint.name
        self.register_outputs({"endpoint_name": self.endpoint.name, "endpoint_config_name": self.endpoint_config.name,
                               "role_arn": self.role.arn, "instance_type": f"ml.{plan.choice.instance_type}",
                               "initial_instance_count": plan.choice.nodes})
