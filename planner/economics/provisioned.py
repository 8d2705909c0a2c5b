"""Everything the components provision beside the instances, priced: EBS root volumes per training node,
FSx for Lustre (capacity × throughput tier) and its backups, SageMaker ML storage volumes, and the root and
model volumes of every instance EC2 serving launches (components/ec2_inference.py). The sizes are
the ones the components create (components/settings.py and training.py read them from here), so the plan's
cost is what AWS bills for what the program makes (tests/test_provisioned_cost.py walks the resources)."""

from __future__ import annotations

import math

from planner.workload.plan import Plan, PlanCost, ProvisionedCost
from planner.economics.storage import CHECKPOINTS_KEPT, _prices
from planner.hardware.ultraservers import launch_type
from planner.hardware.units import GIB, HOURS_PER_MONTH

# Automatic daily backups kept by the training cluster's FSx for Lustre file system (components/training.py).
FSX_BACKUP_DAYS = 7
# Families (as the instance type's name spells them) whose instances carry local NVMe: SageMaker rejects
# VolumeSizeInGB for them (SageMaker ProductionVariant VolumeSizeInGB: "not supported for instances with
# local instance storage"), so no ML storage volume is created or billed.
NVME_FAMILIES = {"g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en", "trn1", "trn1n"}
ROOT_VOLUME_MIN_GB, ROOT_VOLUME_MAX_GB, ROOT_VOLUME_DLAMI_GB = 200, 16384, 150  # gp3 allows 1-16,384 GiB
ML_VOLUME_MIN_GB, ML_VOLUME_MAX_GB = 30, 512  # SageMaker VolumeSizeInGB bounds for hosting
# EC2 serving (components/ec2_inference.py): a root volume for the DLAMI (about 150 GB with its CUDA and
# Neuron stacks) plus the image's layers, and a model volume of at least EC2_MODEL_VOLUME_MIN_GB.
EC2_SERVING_ROOT_VOLUME_GB = 200
EC2_MODEL_VOLUME_MIN_GB = 30


def root_volume_gb(states_per_device_bytes: float, devices_per_node: int) -> int:
    """Root volume for the DLAMI plus one full checkpoint's model states (weights, gradients, optimizer)
    of every device on the node."""
    return int(min(ROOT_VOLUME_MAX_GB, max(ROOT_VOLUME_MIN_GB, math.ceil(states_per_device_bytes * devices_per_node / 1e9)
                                           + ROOT_VOLUME_DLAMI_GB)))


def ml_volume_gb(instance_type: str, weights_bytes: float) -> int | None:
    """Room for the model twice over (download and unpacked copy); None where SageMaker forbids it."""
    if instance_type.removeprefix("ml.").split(".")[0] in NVME_FAMILIES:
        return None
    return int(min(ML_VOLUME_MAX_GB, max(ML_VOLUME_MIN_GB, math.ceil(2 * weights_bytes / 1e9) + 10)))


def ec2_model_volume_gb(weights_bytes: float) -> int:
    """Room for the model twice over (the S3 copy and the engine's converted or unpacked copy), as the
    SageMaker ML storage volume is sized (ml_volume_gb), with no SageMaker ceiling."""
    return max(EC2_MODEL_VOLUME_MIN_GB, math.ceil(2 * weights_bytes / 1e9) + 10)


def serving_weights_bytes(plan: Plan) -> float:
    """One model copy's weights: a device's share times the devices the copy spans (under attention DP the
    replicated attention counts once per rank: room to spare, never short)."""
    return plan.memory.per_device_bytes.get("weights", 0.0) * plan.layout.devices_per_copy


def _rate(key: str, region: str) -> tuple[float, str, str, bool]:
    entry = _prices()[key]
    rates = entry["usd_per_gib_month"]
    return rates.get(region, rates["us-east-1"]), entry["source"], str(entry["date"]), region not in rates


def _item(key: str, what: str, region: str, gib: float, count: int, note: str = "") -> ProvisionedCost:
    rate, source, day, estimated = _rate(key, region)
    return ProvisionedCost(item=what, quantity=count, size_gib=gib, usd_per_gib_month=rate,
                           usd_per_hour=rate * gib * count / HOURS_PER_MONTH, price_source=source, price_date=day,
                           price_estimated=estimated, note=note)


def fsx_backup_gib(dataset_bytes: float, checkpoint_bytes: float) -> float:
    """Backups are incremental (FSx for Lustre User Guide, "Protecting your data with backups"): the first
    holds the data on the file system (dataset + kept checkpoints), each later daily one the checkpoints
    rewritten that day (at most CHECKPOINTS_KEPT new ones a day), kept for FSX_BACKUP_DAYS."""
    stored = dataset_bytes + CHECKPOINTS_KEPT * checkpoint_bytes
    return (stored + (FSX_BACKUP_DAYS - 1) * CHECKPOINTS_KEPT * checkpoint_bytes) / GIB


def fsx_usd_per_hour(fsx_usd_per_month: float, dataset_bytes: float, checkpoint_bytes: float, region: str) -> float:
    """The file system and its backups, per hour it exists (the search ranks runs with it)."""
    backup = _rate("fsx_lustre_backup", region)[0] * fsx_backup_gib(dataset_bytes, checkpoint_bytes)
    return (fsx_usd_per_month + backup) / HOURS_PER_MONTH


def root_volumes_usd_per_hour(states_per_device_bytes: float, devices_per_node: int, nodes: int, region: str) -> float:
    return _rate("ebs_gp3", region)[0] * root_volume_gb(states_per_device_bytes, devices_per_node) * nodes / HOURS_PER_MONTH


def states_per_device(plan: Plan) -> float:
    return sum(plan.memory.per_device_bytes.get(k, 0.0) for k in ("weights", "gradients", "optimizer"))


def provisioned_items(plan: Plan, fsx: bool | None = None) -> list[ProvisionedCost]:
    """What the program creates beside the instances for this plan and what each costs; `fsx` is the
    deployment's override (None: what the plan's storage says)."""
    region, nodes = plan.choice.region, plan.choice.nodes
    if plan.kind == "inference":
        if plan.choice.deploy_target == "ec2":
            return ec2_serving_volumes(plan)
        gib = ml_volume_gb(plan.choice.instance_type, serving_weights_bytes(plan))
        if gib is None:
            return []
        return [_item("sagemaker_ml_storage", "SageMaker ML storage volume per instance", region, gib, nodes,
                      "the autoscaling floor; each instance added carries one")]
    devices = plan.choice.devices_per_node or plan.choice.accelerators_per_node
    items = [_item("ebs_gp3", "EBS gp3 root volume per node", region, root_volume_gb(states_per_device(plan), devices), nodes)]
    s = plan.storage
    wants = fsx if fsx is not None else (s is not None and s.recommendation == "fsx")
    if s is not None and wants:
        f = s.fsx
        items.append(ProvisionedCost(
            item=f"FSx for Lustre {f.deployment_type} at {f.per_unit_storage_throughput} MB/s/TiB", quantity=1,
            size_gib=f.storage_capacity_gib, usd_per_gib_month=f.usd_per_month / f.storage_capacity_gib,
            usd_per_hour=f.usd_per_month / HOURS_PER_MONTH, price_source=f.price_source, price_date=f.price_date,
            price_estimated=f.price_estimated, note="" if s.recommendation == "fsx" else "the deployment's fsx: true"))
        items.append(_item("fsx_lustre_backup", f"FSx for Lustre backups ({FSX_BACKUP_DAYS} daily, incremental)", region,
                           fsx_backup_gib(s.dataset_bytes, s.checkpoint_bytes), 1,
                           "the final backup outlives the file system until deleted"))
    return items


def ec2_serving_volumes(plan: Plan) -> list[ProvisionedCost]:
    """The gp3 root and model volumes of every instance EC2 serving launches (an UltraServer node launches
    as its members, each with both volumes), billed per provisioned GB-month whether busy or not."""
    instances = plan.choice.nodes * launch_type(plan.choice.instance_type)[1]
    region = plan.choice.region
    return [_item("ebs_gp3", "EBS gp3 root volume per instance", region, EC2_SERVING_ROOT_VOLUME_GB, instances),
            _item("ebs_gp3", "EBS gp3 model volume per instance", region,
                  ec2_model_volume_gb(serving_weights_bytes(plan)), instances)]


def priced(plan: Plan, fsx: bool | None = None) -> Plan:
    """The plan with its cost (per hour, month and run) covering the instances and everything provisioned."""
    c = plan.cost
    instances_h = c.instances_usd_per_hour if c.instances_usd_per_hour is not None else c.usd_per_hour
    instances_run = c.instances_usd_per_training_run if c.instances_usd_per_hour is not None else c.usd_per_training_run
    items = provisioned_items(plan, fsx)
    extra_h = sum(i.usd_per_hour for i in items)
    total_h = instances_h + extra_h
    update: dict = dict(usd_per_hour=total_h, usd_per_month=total_h * c.hours_per_month, instances_usd_per_hour=instances_h,
                        instances_usd_per_training_run=instances_run, provisioned=items)
    if instances_run is not None:
        wall_h = (plan.performance.wall_clock_s or plan.performance.time_to_train_s or 0.0) / 3600
        update["usd_per_training_run"] = instances_run + extra_h * wall_h
    if c.usd_per_million_output_tokens is not None and plan.performance.output_tokens_per_s:
        update["usd_per_million_output_tokens"] = total_h / (plan.performance.output_tokens_per_s * 3600) * 1e6
    return plan.model_copy(update={"cost": PlanCost(**{**c.model_dump(), **update})})
