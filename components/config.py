"""`gpuplan:deployments` as users write it: camelCase keys, per workload, checked strictly so a typo
or a wrong type fails the program with the key as written, never a silent default."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from planner.errors import shown

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
