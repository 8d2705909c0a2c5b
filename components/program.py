"""The Pulumi program: stack config → planner → components → exported plan and monthly cost.

Config (namespace gpuplan):
  workloads         the workload list (design.md), one component per workload
  catalog           optional catalog overlay file
  vpcId, subnetIds  network for training clusters
  kmsKeyArn         optional key for SageMaker volumes
  environment       production (default) or another name; tagged for the policies
  deployments       per workload: modelDataUrl | hfModelId, imageUri, maxInstanceCount, compiledModelUrl (Neuron),
                    subnetId, capacityReservationId, fsx, amiParameter
"""

from __future__ import annotations

import pulumi

from components import InferenceEndpoint, InferenceEndpointArgs, TrainingCluster, TrainingClusterArgs
from planner import InfeasibleError, SpecError, plan_workloads
from planner import catalog as catalog_mod
from planner.spec import parse_workloads
from planner.tags import plan_tags


def fail(key: str, message: str) -> None:
    raise pulumi.RunError(f"config {key}: {message}")


def read_config(config: pulumi.Config, region: str):
    try:
        workloads = config.require_object("workloads")
    except pulumi.ConfigMissingError:
        fail("gpuplan:workloads", "missing; set it with `pulumi config set --path 'workloads[0].name' chat`")
    document = {"workloads": workloads}
    if config.get("catalog"):
        document["catalog"] = config.get("catalog")
    try:
        spec = parse_workloads(document, "stack config")
        plans = plan_workloads(spec, region=region)
    except SpecError as exc:
        fail(f"gpuplan:{exc.path}" if exc.path else "gpuplan:workloads", exc.message)
    except InfeasibleError as exc:
        fail(f"gpuplan:workloads ({exc.workload})", str(exc))
    return spec, plans


def main() -> None:
    config = pulumi.Config("gpuplan")
    region = pulumi.Config("aws").get("region") or "us-east-1"
    spec, plans = read_config(config, region)
    catalog = catalog_mod.load(spec.catalog)
    deployments = config.get_object("deployments") or {}
    environment = config.get("environment") or "production"
    summaries = {}
    for workload, plan in zip(spec.workloads, plans.plans):
        deploy = deployments.get(workload.name, {})
        key = f"gpuplan:deployments.{workload.name}"
        tags = plan_tags(plan, workload, environment)
        try:
            if plan.choice.deploy_target == "sagemaker":
                component = InferenceEndpoint(workload.name, InferenceEndpointArgs(
                    plan=plan, region=region, tags=tags, output_tokens=workload.serving.output_tokens,
                    headroom=workload.constraints.memory_headroom, model_data_url=deploy.get("modelDataUrl"),
                    hf_model_id=deploy.get("hfModelId"), image_uri=deploy.get("imageUri"),
                    max_instance_count=deploy.get("maxInstanceCount"), kms_key_arn=config.get("kmsKeyArn"),
                    compiled_model_url=deploy.get("compiledModelUrl")))
                pulumi.export(f"{workload.name}-endpoint", component.endpoint_name)
            elif plan.kind == "inference":
                fail(f"gpuplan:workloads ({workload.name}).constraints.deploy_target",
                     "ec2 serving is planned and costed, but this program provisions serving on SageMaker only")
            else:
                subnets = config.get_object("subnetIds") or []
                component = TrainingCluster(workload.name, TrainingClusterArgs(
                    plan=plan, instance=catalog.instance(plan.choice.instance_type), vpc_id=config.get("vpcId") or "",
                    subnet_id=deploy.get("subnetId") or (subnets[0] if subnets else ""), tags=tags,
                    ami_parameter=deploy.get("amiParameter"), capacity_reservation_id=deploy.get("capacityReservationId"),
                    fsx=bool(deploy.get("fsx", False))))
                pulumi.export(f"{workload.name}-launch-template", component.launch_template.id)
        except ValueError as exc:
            where = "gpuplan:vpcId / gpuplan:subnetIds" if "vpc_id" in str(exc) else key
            fail(where, str(exc))
        summaries[workload.name] = {
            "instance_type": plan.choice.instance_type, "nodes": plan.choice.nodes, "deploy_target": plan.choice.deploy_target,
            "layout": plan.layout.model_dump(exclude_none=True), "usd_per_month": round(plan.cost.usd_per_month, 2),
            "required_per_device_gib": round(plan.memory.required_per_device_bytes / 2**30, 2)}
        pulumi.export(f"{workload.name}-monthly-usd", round(plan.cost.usd_per_month, 2))

    pulumi.export("plans", summaries)
    pulumi.export("monthly-usd-total", round(sum(p.cost.usd_per_month for p in plans.plans), 2))
