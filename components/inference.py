"""`gpuplan:aws:InferenceEndpoint`: a SageMaker real-time endpoint configured from a plan."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components import settings
from planner.workload.plan import Plan

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
    # The serving containers read the token from HF_TOKEN only; an environment value is readable by
    # anyone allowed sagemaker:DescribeModel, so that route is taken only when the stack says so.
    hf_token_in_environment: bool = False
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
        if self.model_data_url:
            s3_artifact("modelDataUrl", self.model_data_url, archive_ok=True)
        if self.compiled_model_url is not None:
            if self.plan.choice.accelerator_vendor != "aws-neuron":
                raise ValueError(f"compiledModelUrl is for Neuron plans; {self.plan.workload} runs on "
                                 f"{self.plan.choice.accelerator}")
            s3_artifact("compiledModelUrl", self.compiled_model_url, archive_ok=False)
            if self.model_data_url and not self.image_uri:
                raise ValueError("give compiledModelUrl or modelDataUrl, not both: the Neuron container serves an "
                                 "optimum-neuron export (weights and compiled graphs) from compiledModelUrl alone")
        if self.hf_token_secret_arn and not self.hf_token_in_environment:
            raise ValueError("hfTokenSecretArn: the serving containers (LMI, TGI) read the Hugging Face token only "
                             "from the HF_TOKEN environment variable, which anyone allowed sagemaker:DescribeModel can "
                             "read. Stage the weights in S3 and give modelDataUrl instead (no token at serving time), "
                             "or accept that exposure with hfTokenInEnvironment: true")
        if self.image_uri and not settings.image_repository_arn(self.image_uri) and not self.vpc_subnet_ids:
            raise ValueError("imageUri is not in Amazon ECR: SageMaker pulls other registries through the model's VPC "
                             "(RepositoryAccessMode Vpc), so set vpcSubnetIds and vpcSecurityGroupIds")
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


def s3_artifact(key_name: str, url: str, archive_ok: bool) -> None:
    """SageMaker's S3Prefix URIs must end in '/' (CreateModel, S3ModelDataSource), and the role's grant
    covers exactly what the URL names: a bare bucket would grant the whole bucket, a prefix without its
    slash every sibling sharing its first letters (`models/llama` also matches `models/llama-private`)."""
    bucket, key = _s3_parts(url)
    archive = archive_ok and key.endswith(".tar.gz")
    if not url.startswith("s3://") or not bucket or not key.strip("/") or not (archive or key.endswith("/")):
        shapes = "s3://bucket/prefix/ (ending in /) or s3://bucket/path/model.tar.gz" if archive_ok \
            else "s3://bucket/prefix/ (ending in /)"
        raise ValueError(f"{key_name} must be {shapes}, never a whole bucket (got {url!r})")


def model_grants(url: str) -> tuple[str, str | None]:
    """(object ARN pattern, ListBucket prefix pattern) for exactly what the URL names: one archive
    object (SageMaker reads it with GetObject alone) or every object under one prefix."""
    bucket, key = _s3_parts(url)
    if key.endswith(".tar.gz"):
        return f"arn:aws:s3:::{bucket}/{key}", None
    return f"arn:aws:s3:::{bucket}/{key}*", f"{key}*"


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


def _registry_statements(image: str) -> list[dict]:
    """Pull rights for the image's own ECR repository and nothing else. A registry outside ECR (pulled
    through the VPC) needs no ECR permission at all."""
    repository = settings.image_repository_arn(image)
    if repository is None:
        return []
    return [{"Sid": "PullImage", "Effect": "Allow",
             "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
             "Resource": repository},
            # GetAuthorizationToken has no resource-level permissions (ECR service authorization reference).
            {"Sid": "EcrToken", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"}]


def _vpc_statements(args: InferenceEndpointArgs, account_id: str) -> list[dict]:
    """The endpoint's network interfaces, scoped by resource ARN (EC2 service authorization reference):
    CreateNetworkInterface authorises the new interface, the subnet and the security groups, so each is
    named; the permission and delete actions act on interfaces only. No condition keys: `ec2:Subnet` is not
    a key of the subnet and security-group resources, where an ArnLike on it is simply false."""
    ec2 = f"arn:aws:ec2:{args.region}:{account_id}"
    interfaces = f"{ec2}:network-interface/*"
    return [
        # Describe* have no resource-level permissions.
        {"Sid": "VpcDescribe", "Effect": "Allow", "Resource": "*",
         "Action": ["ec2:DescribeVpcs", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups",
                    "ec2:DescribeNetworkInterfaces", "ec2:DescribeDhcpOptions"]},
        {"Sid": "VpcCreateInterfaces", "Effect": "Allow", "Action": ["ec2:CreateNetworkInterface"],
         "Resource": [interfaces, *(f"{ec2}:subnet/{s}" for s in args.vpc_subnet_ids or []),
                      *(f"{ec2}:security-group/{g}" for g in args.vpc_security_group_ids or [])]},
        {"Sid": "VpcInterfaces", "Effect": "Allow", "Resource": interfaces,
         "Action": ["ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission"]},
    ]


def volume_key_used(args: InferenceEndpointArgs) -> bool:
    """SageMaker refuses a volume KMS key on instance types with local NVMe (their storage is the
    instance store, encrypted by the hardware), so there the key is not used and not granted."""
    return bool(args.kms_key_arn) and settings.volume_size_gb(args.plan) is not None


def execution_policy(args: InferenceEndpointArgs, image: str, account_id: str = "*") -> dict:
    """Least privilege: read the model artifacts, pull the image, write logs and metrics, and, in a VPC,
    manage the endpoint's network interfaces (SageMaker guide, "Give SageMaker access to resources in
    your Amazon VPC"). The Hugging Face token is read at deployment, not by the role."""
    logs = f"arn:aws:logs:{args.region}:{account_id}:log-group:/aws/sagemaker/Endpoints/*"
    statements: list[dict] = [
        *_registry_statements(image),
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
        objects, listed = model_grants(url)
        statements.append({"Sid": f"Read{sid}", "Effect": "Allow", "Action": ["s3:GetObject"], "Resource": objects})
        if listed is not None:  # a prefix is copied object by object, after listing it
            statements.append({"Sid": f"List{sid}", "Effect": "Allow", "Action": ["s3:ListBucket"],
                               "Resource": f"arn:aws:s3:::{_s3_parts(url)[0]}",
                               "Condition": {"StringLike": {"s3:prefix": [listed]}}})
    if args.vpc_subnet_ids:
        statements += _vpc_statements(args, account_id)
    if volume_key_used(args):
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
        if args.hf_token_secret_arn:  # hfTokenInEnvironment: the stack accepted DescribeModel's exposure
            # Read at deployment by the deployer's credentials, kept a Pulumi secret (encrypted in state);
            # the role gets no secretsmanager permission (the container never calls Secrets Manager).
            pulumi.log.warn(f"{plan.workload}: the Hugging Face token is in the model's environment "
                            "(hfTokenInEnvironment), readable by anyone allowed sagemaker:DescribeModel", resource=self)
            token = aws.secretsmanager.get_secret_version_output(
                secret_id=args.hf_token_secret_arn, opts=pulumi.InvokeOutputOptions(parent=self)).secret_string
            environment["HF_TOKEN"] = pulumi.Output.secret(token)
        if plan.choice.accelerator_vendor == "aws-neuron" and not args.compiled_model_url:
            pulumi.log.warn(f"{plan.workload}: no compiledModelUrl; the endpoint compiles the model for batch "
                            f"{plan.layout.compiled_batch_size} × {plan.layout.n_positions} positions at start, "
                            "which can outlast the health check for large models", resource=self)
        container = aws.sagemaker.ModelPrimaryContainerArgs(image=image, environment=environment)
        if settings.image_repository_arn(image) is None:  # validated: the model has a VPC to pull through
            container.image_config = aws.sagemaker.ModelPrimaryContainerImageConfigArgs(repository_access_mode="Vpc")
        if args.kms_key_arn and not volume_key_used(args):
            pulumi.log.warn(f"{plan.workload}: kmsKeyArn is not used: ml.{plan.choice.instance_type} serves from local "
                            "NVMe instance storage, where SageMaker takes no volume key (the instance store is "
                            "encrypted by the hardware); the role gets no KMS permission", resource=self)
        compiled_export = args.compiled_model_url and not args.image_uri and \
            settings.image_entry(plan)["style"] == "optimum-neuron-vllm"
        if compiled_export:  # an optimum-neuron export holds weights and graphs: it is the model's data
            container.model_data_source = aws.sagemaker.ModelPrimaryContainerModelDataSourceArgs(s3_data_sources=[
                aws.sagemaker.ModelPrimaryContainerModelDataSourceS3DataSourceArgs(
                    s3_uri=args.compiled_model_url, s3_data_type="S3Prefix", compression_type="None")])
        elif args.model_data_url and args.model_data_url.endswith(".tar.gz"):
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
            f"{name}-config", production_variants=[variant], kms_key_arn=args.kms_key_arn if volume_key_used(args) else None,
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
