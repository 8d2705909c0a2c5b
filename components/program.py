"""The Pulumi program: stack config → planner → components → exported plan and monthly cost.

Config (namespace gpuplan; Pulumi.yaml declares the scalar keys):
  workloads         the workload list (README: the workload spec), one component per workload
  catalog           optional catalog overlay file
  vpcId, subnetIds  network for training clusters
  kmsKeyArn         optional key for SageMaker volumes
  environment       production (default) or another name; tagged for the policies
  deployments       per workload, camelCase keys (components/config.py): modelDataUrl | hfModelId,
                    hfTokenSecretArn, hfTokenInEnvironment, imageUri, maxInstanceCount, compiledModelUrl (Neuron), vpcSubnetIds,
                    vpcSecurityGroupIds, networkIsolation, protect, renamedFrom; for training subnetId,
                    capacityReservationId, capacityBlockId, fsx, fsxImportPath, amiId, amiParameter
The region is aws:region, else AWS_REGION / AWS_DEFAULT_REGION, else the provider's (profile) region.
"""

from __future__ import annotations

import os

import pulumi
import pulumi_aws as aws

from components import Ec2InferenceArgs, Ec2InferenceServer, InferenceEndpoint, InferenceEndpointArgs, TrainingCluster, TrainingClusterArgs
from components.config import Deployment, read_deployments, read_stack_settings
from planner import InfeasibleError, SpecError, plan_workloads
from planner.hardware import catalog as catalog_mod
from planner.workload.paths import overlay_path
from planner.economics import provisioned
from planner.workload.spec import (STACK_CATALOG_KEY, STACK_DOCUMENT_KEYS, STACK_KEY, STACK_REGION_KEY, parse_workloads,
                                   stack_document)
from planner.report.tags import plan_tags, tag_value_problem


def fail(key: str, message: str) -> None:
    raise pulumi.RunError(f"config {key}: {message}")


def stack_region() -> str:
    region = pulumi.Config("aws").get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return region or aws.get_region().region


def read_config(config: pulumi.Config, region: str):
    try:
        workloads = config.require_object("workloads")
    except pulumi.ConfigMissingError:
        fail(STACK_KEY, "missing; set it with `pulumi config set --path 'workloads[0].name' chat`")
    raw = {STACK_KEY: workloads, STACK_REGION_KEY: region}
    try:
        named = config.get("catalog")
        if named:  # relative to the project directory, where `pulumi up` runs, and kept inside it
            raw[STACK_CATALOG_KEY] = named if os.path.isabs(named) else \
                overlay_path(named, os.path.join(os.getcwd(), "Pulumi.yaml"), STACK_CATALOG_KEY)
        spec = parse_workloads(stack_document(raw), "", STACK_DOCUMENT_KEYS)
        plans = plan_workloads(spec)
    except SpecError as exc:
        path = exc.path.removeprefix("config.")
        path = path if path.startswith(("gpuplan:", "aws:")) else f"gpuplan:{path}" if path else STACK_KEY
        fail(path, exc.message)
    except InfeasibleError as exc:
        fail(f"{exc.path or STACK_KEY} ({exc.workload})", exc.explanation())
    return spec, plans


def _component_opts(deploy: Deployment) -> pulumi.ResourceOptions | None:
    """A renamed workload keeps its resources: the component is aliased to its earlier name, and
    Pulumi carries the alias to every child named after it."""
    return pulumi.ResourceOptions(aliases=[pulumi.Alias(name=deploy.renamed_from)]) if deploy.renamed_from else None


def _ec2_serving(workload, plan, deploy: Deployment, catalog, config: pulumi.Config, region: str, tags: dict):
    """A serving plan on EC2 (a type SageMaker does not host, or deploy_target ec2)."""
    subnets = config.get_object("subnetIds") or []
    if not config.get("vpcId") or not (deploy.subnet_id or subnets):
        fail("gpuplan:vpcId / gpuplan:subnetIds", "serving on EC2 needs a VPC and a subnet: set gpuplan:vpcId and "
             f"gpuplan:subnetIds (or gpuplan:deployments.{workload.name}.subnetId)")
    return Ec2InferenceServer(workload.name, Ec2InferenceArgs(
        plan=plan, instance=catalog.instance(plan.choice.instance_type), region=region, vpc_id=config.get("vpcId"),
        subnet_id=deploy.subnet_id or subnets[0], tags=tags, output_tokens=workload.serving.output_tokens,
        headroom=workload.constraints.memory_headroom, model_data_url=deploy.model_data_url,
        hf_model_id=deploy.hf_model_id, image_uri=deploy.image_uri, allowed_cidr=deploy.allowed_cidr,
        capacity_block_id=deploy.capacity_block_id, capacity_reservation_id=deploy.capacity_reservation_id,
        ami_id=deploy.ami_id, ami_parameter=deploy.ami_parameter, protect=deploy.protect), opts=_component_opts(deploy))


def main() -> None:
    config = pulumi.Config("gpuplan")
    region = stack_region()
    spec, plans = read_config(config, region)
    catalog = catalog_mod.load(spec.catalog)
    try:
        deployments = read_deployments(config.get_object("deployments"), [w.name for w in spec.workloads])
    except ValueError as exc:
        key, _, message = str(exc).partition(": ")
        fail(key, message)
    try:
        read_stack_settings({f"gpuplan:{key}": config.get_object(key) if key == "subnetIds" else config.get(key)
                             for key in ("vpcId", "subnetIds", "environment", "kmsKeyArn")})
    except ValueError as exc:
        key, _, message = str(exc).partition(": ")
        fail(key, message)
    environment = config.get("environment") or "production"
    summaries = {}
    for workload, plan in zip(spec.workloads, plans.plans):
        deploy = deployments[workload.name]
        if deploy.fsx is not None and plan.kind != "inference":  # the deployment's override is priced too
            plan = provisioned.priced(plan, fsx=deploy.fsx)
            plans.plans[[p.workload for p in plans.plans].index(plan.workload)] = plan
        key = f"gpuplan:deployments.{workload.name}"
        tags = plan_tags(plan, workload, environment)
        for tag, value in tags.items():
            if tag_value_problem(value):
                fail(f"{workload.path} (tag {tag})", tag_value_problem(value))
        try:
            if plan.choice.deploy_target == "sagemaker":
                component = InferenceEndpoint(workload.name, InferenceEndpointArgs(
                    plan=plan, region=region, tags=tags, output_tokens=workload.serving.output_tokens,
                    headroom=workload.constraints.memory_headroom, model_data_url=deploy.model_data_url,
                    hf_model_id=deploy.hf_model_id, image_uri=deploy.image_uri,
                    max_instance_count=deploy.max_instance_count, kms_key_arn=config.get("kmsKeyArn") or None,
                    compiled_model_url=deploy.compiled_model_url, hf_token_secret_arn=deploy.hf_token_secret_arn,
                    hf_token_in_environment=deploy.hf_token_in_environment,
                    vpc_subnet_ids=deploy.vpc_subnet_ids, vpc_security_group_ids=deploy.vpc_security_group_ids,
                    network_isolation=deploy.network_isolation, protect=deploy.protect,
                    name_stem=deploy.renamed_from), opts=_component_opts(deploy))
                if deploy.gated and not deploy.hf_token_secret_arn:
                    pulumi.log.warn(f"{workload.name}: {deploy.hf_model_id} is a gated model; without "
                                    "hfTokenSecretArn the container cannot download it", resource=component)
                pulumi.export(f"{workload.name}-endpoint", component.endpoint_name)
            elif plan.kind == "inference":
                component = _ec2_serving(workload, plan, deploy, catalog, config, region, tags)
                pulumi.export(f"{workload.name}-launch-template", component.launch_template.id)
            else:
                subnets = config.get_object("subnetIds") or []
                if not config.get("vpcId") or not (deploy.subnet_id or subnets):
                    fail("gpuplan:vpcId / gpuplan:subnetIds", "a training cluster needs a VPC and a subnet: set "
                         f"gpuplan:vpcId and gpuplan:subnetIds (or gpuplan:deployments.{workload.name}.subnetId)")
                component = TrainingCluster(workload.name, TrainingClusterArgs(
                    plan=plan, instance=catalog.instance(plan.choice.instance_type), vpc_id=config.get("vpcId") or "",
                    subnet_id=deploy.subnet_id or (subnets[0] if subnets else ""), tags=tags,
                    ami_id=deploy.ami_id, ami_parameter=deploy.ami_parameter,
                    capacity_reservation_id=deploy.capacity_reservation_id,
                    capacity_block_id=deploy.capacity_block_id, fsx=deploy.fsx, fsx_import_path=deploy.fsx_import_path,
                    protect=deploy.protect), opts=_component_opts(deploy))
                pulumi.export(f"{workload.name}-launch-template", component.launch_template.id)
                pulumi.export(f"{workload.name}-ami", component.ami_id)
                if component.filesystem is not None:
                    pulumi.export(f"{workload.name}-fsx-mount-name", component.filesystem.mount_name)
        except ValueError as exc:
            fail(key, str(exc))
        summaries[workload.name] = {
            "instance_type": plan.choice.instance_type, "nodes": plan.choice.nodes, "deploy_target": plan.choice.deploy_target,
            "layout": plan.layout.model_dump(exclude_none=True), "usd_per_month": round(plan.cost.usd_per_month, 2),
            "required_per_device_gib": round(plan.memory.required_per_device_bytes / 2**30, 2)}
        pulumi.export(f"{workload.name}-monthly-usd", round(plan.cost.usd_per_month, 2))

    pulumi.export("plans", summaries)
    pulumi.export("monthly-usd-total", round(sum(p.cost.usd_per_month for p in plans.plans), 2))
