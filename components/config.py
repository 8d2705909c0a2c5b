"""`gpuplan:deployments` as users write it: camelCase keys, per workload, checked strictly so a typo
or a wrong type fails the program with the key as written, never a silent default."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from planner.workload.errors import shown

# EC2 resource ids: the prefix and 8 (older) or 17 hex digits. EC2's service model (botocore) gives these
# shapes no pattern; SageMaker's gives SubnetId [-0-9a-zA-Z]+ of at most 32, which these satisfy.
HEX_ID = r"(?:[0-9a-f]{8}|[0-9a-f]{17})"
VPC_ID = re.compile(rf"^vpc-{HEX_ID}$")
SUBNET_ID = re.compile(rf"^subnet-{HEX_ID}$")
SECURITY_GROUP_ID = re.compile(rf"^sg-{HEX_ID}$")
RESERVATION_ID = re.compile(rf"^cr-{HEX_ID}$")  # Capacity Blocks are capacity reservations too (cr-...)
KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:(key|alias)/[A-Za-z0-9/_+=.@-]{1,256}$")
# botocore's sagemaker ContainerImage: [\S]+, at most 255. An image reference is
# [registry[:port]/]repository[:tag][@sha256:digest] (OCI distribution spec: lower-case path components
# separated by . _ - /, tags of [\w][\w.-]{0,127}).
IMAGE_URI = re.compile(r"^(?:[a-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
                       r"(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")
MAX_IMAGE_URI_CHARS = 255
S3_URL = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")
SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$")
# Hugging Face organisations whose models are gated (accept the licence, then a token): a deployment
# of one without hfTokenSecretArn is warned about at `pulumi up`.
GATED_ORGS = ("meta-llama/", "mistralai/", "google/gemma", "CohereForAI/", "tiiuae/falcon-180")


class Deployment(BaseModel):
    """Per-workload deployment settings (README: stack config). Everything optional; what a workload
    needs is checked by its component."""

    model_config = ConfigDict(extra="forbid", strict=True, alias_generator=to_camel, populate_by_name=False,
                              frozen=True)

    model_data_url: str | None = None
    hf_model_id: str | None = Field(default=None, min_length=1)
    hf_token_secret_arn: str | None = None
    hf_token_in_environment: bool = False  # accept the token in the model's environment (DescribeModel)
    image_uri: str | None = Field(default=None, min_length=1)
    max_instance_count: int | None = Field(default=None, ge=1, le=10000)
    compiled_model_url: str | None = None
    vpc_subnet_ids: list[str] | None = Field(default=None, min_length=1)
    vpc_security_group_ids: list[str] | None = Field(default=None, min_length=1)
    network_isolation: bool = False
    protect: bool = False
    renamed_from: str | None = Field(default=None, min_length=1)
    # EC2 serving (components/ec2_inference.py): who may reach the serving port; None: the VPC's CIDR
    allowed_cidr: str | None = None
    # training clusters
    subnet_id: str | None = None
    capacity_reservation_id: str | None = None
    capacity_block_id: str | None = None
    fsx: bool | None = None  # None: provision FSx for Lustre when the plan sizes it
    fsx_import_path: str | None = None
    ami_id: str | None = Field(default=None, pattern=r"^ami-[0-9a-f]{8,17}$")
    ami_parameter: str | None = Field(default=None, pattern=r"^/")

    @field_validator("model_data_url", "compiled_model_url", "fsx_import_path")
    @classmethod
    def _s3(cls, url: str | None) -> str | None:
        if url is not None and not S3_URL.match(url):
            raise ValueError("must be an s3://bucket/prefix URL")
        return url

    @field_validator("subnet_id")
    @classmethod
    def _subnet(cls, value: str | None) -> str | None:
        if value is not None and not SUBNET_ID.match(value):
            raise ValueError("must be a subnet id (subnet- and 8 or 17 hex digits)")
        return value

    @field_validator("vpc_subnet_ids", "vpc_security_group_ids")
    @classmethod
    def _network_ids(cls, values: list[str] | None, info) -> list[str] | None:
        pattern, what, prefix = (SUBNET_ID, "subnet", "subnet") if info.field_name == "vpc_subnet_ids" else \
            (SECURITY_GROUP_ID, "security group", "sg")
        for value in values or []:
            if not pattern.match(value):
                raise ValueError(f"must be {what} ids ({prefix}- and 8 or 17 hex digits)")
        return values

    @field_validator("capacity_reservation_id", "capacity_block_id")
    @classmethod
    def _reservation(cls, value: str | None) -> str | None:
        if value is not None and not RESERVATION_ID.match(value):
            raise ValueError("must be a capacity reservation id (cr- and 8 or 17 hex digits; a Capacity Block "
                             "is a reservation too)")
        return value

    @field_validator("allowed_cidr")
    @classmethod
    def _cidr(cls, value: str | None) -> str | None:
        import ipaddress

        if value is None:
            return value
        try:
            network = ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValueError("must be a CIDR block such as 10.0.0.0/16") from None
        if network.prefixlen == 0:
            raise ValueError("must not be the whole internet (0.0.0.0/0 or ::/0): the serving port stays private")
        return value

    @field_validator("image_uri")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        if value is not None and (len(value) > MAX_IMAGE_URI_CHARS or not IMAGE_URI.match(value)):
            raise ValueError(f"must be a container image URI of at most {MAX_IMAGE_URI_CHARS} characters "
                             "(registry/repository:tag or @sha256:digest)")
        return value

    @field_validator("hf_token_secret_arn")
    @classmethod
    def _secret(cls, arn: str | None) -> str | None:
        if arn is not None and not SECRET_ARN.match(arn):
            raise ValueError("must be a Secrets Manager secret ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME)")
        return arn

    @property
    def gated(self) -> bool:
        return bool(self.hf_model_id and self.hf_model_id.startswith(GATED_ORGS))


def read_deployments(raw: Any, workloads: list[str]) -> dict[str, Deployment]:
    """Raises ValueError("<key as written>: <what is wrong>") for the first problem."""
    key = "gpuplan:deployments"
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError(f"{key}: must be a map of workload name to settings (got {shown(raw)})")
    unknown = sorted(set(raw) - set(workloads))
    if unknown:
        raise ValueError(f"{key}.{unknown[0][:60]}: no workload has this name (workloads: {', '.join(workloads)})")
    out: dict[str, Deployment] = {}
    for name in workloads:
        settings = raw.get(name) or {}
        if not isinstance(settings, dict):
            raise ValueError(f"{key}.{name}: must be a map of settings (got {shown(settings)})")
        try:
            out[name] = Deployment.model_validate(settings)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"])[:60]
            message = "unknown key; allowed: " + ", ".join(sorted(f.alias for f in Deployment.model_fields.values())) \
                if error["type"] == "extra_forbidden" else error["msg"].removeprefix("Value error, ")
            got = f" (got {shown(error['input'])})" if error["type"] != "extra_forbidden" else ""
            raise ValueError(f"{key}.{name}.{field}: {message}{got}") from None
    return out


def read_stack_settings(config: dict) -> None:
    """The stack's own gpuplan:* settings beside workloads and deployments, checked as AWS will read
    them. Raises ValueError("<key as written>: <what is wrong>") for the first problem."""
    from planner.report.tags import tag_value_problem

    vpc = config.get("gpuplan:vpcId")
    if vpc is not None and not (isinstance(vpc, str) and VPC_ID.match(vpc)):
        raise ValueError(f"gpuplan:vpcId: must be a VPC id (vpc- and 8 or 17 hex digits) (got {shown(vpc)})")
    subnets = config.get("gpuplan:subnetIds")
    if subnets is not None:
        if not isinstance(subnets, list):
            raise ValueError(f"gpuplan:subnetIds: must be a list of subnet ids (got {shown(subnets)})")
        for index, subnet in enumerate(subnets):
            if not (isinstance(subnet, str) and SUBNET_ID.match(subnet)):
                raise ValueError(f"gpuplan:subnetIds[{index}]: must be a subnet id (subnet- and 8 or 17 hex digits) "
                                 f"(got {shown(subnet)})")
    kms = config.get("gpuplan:kmsKeyArn")
    if kms is not None and not (isinstance(kms, str) and KMS_KEY_ARN.match(kms)):
        raise ValueError("gpuplan:kmsKeyArn: must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID) "
                         f"(got {shown(kms)})")
    environment = config.get("gpuplan:environment")
    if environment is not None:
        problem = "must be text" if not isinstance(environment, str) else tag_value_problem(environment)
        if problem:
            raise ValueError(f"gpuplan:environment: {problem} (it is written as a tag on every resource)")
    catalog = config.get("gpuplan:catalog")
    if catalog is not None and not isinstance(catalog, str):
        raise ValueError(f"gpuplan:catalog: must be a file path (got {shown(catalog)})")
