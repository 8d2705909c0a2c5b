"""`gpuplan preflight`: what each plan needs from the account and region (Service Quotas, zone
offerings, the subnet's zone, capacity reservations) against what it has, each check on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from botocore.exceptions import ClientError

from gpuplan.aws import calls as aws_calls
from gpuplan.aws.calls import Calls, ClientFactory, Unavailable
from planner.hardware.catalog import Catalog, InstanceType
from planner.workload.plan import Plan

# Service Quotas codes, in vCPUs (EC2 "Running On-Demand ... instances" / "All ... Spot Instance Requests").
EC2_QUOTAS = {
    ("p", "on-demand"): ("L-417A185B", "Running On-Demand P instances"),
    ("g", "on-demand"): ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("inf", "on-demand"): ("L-1945791B", "Running On-Demand Inf instances"),
    ("trn", "on-demand"): ("L-2C3B7624", "Running On-Demand Trn instances"),
    ("p", "spot"): ("L-7212CCBC", "All P Spot Instance Requests"),
    ("g", "spot"): ("L-3819A6DF", "All G and VT Spot Instance Requests"),
    ("inf", "spot"): ("L-B5D1601B", "All Inf Spot Instance Requests"),
    ("trn", "spot"): ("L-6B0D517C", "All Trn Spot Instance Requests"),
}


@dataclass
class Check:
    workload: str
    check: str
    required: str
    available: str
    ok: bool | None  # None: could not be checked ("unknown: <reason>" in available)
    action: str = ""
    gating: bool = True  # False: informational, never fails preflight


def _missing(fn: Callable) -> Callable:
    """fn, with Service Quotas' NoSuchResourceException (quota never raised, or not listed) as None."""
    def call():
        try:
            return fn()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "NoSuchResourceException":
                return None
            raise
    return call


def _quota_value(calls: Calls, quotas, service: str, code: str) -> float | None:
    found = calls.call(quotas, "GetServiceQuota", _missing(lambda: quotas.get_service_quota(
        ServiceCode=service, QuotaCode=code)))
    if found is None:  # never raised in this account: the AWS default applies
        found = calls.call(quotas, "GetAWSDefaultServiceQuota", _missing(lambda: quotas.get_aws_default_service_quota(
            ServiceCode=service, QuotaCode=code)))
    return None if found is None else found["Quota"]["Value"]


def quota_group(family: str) -> str | None:
    for prefix in ("inf", "trn", "p", "g"):
        if family.startswith(prefix):
            return prefix
    return None


def _quota_check(calls: Calls, plan: Plan, itype: InstanceType, sagemaker_quotas: dict[str, dict]) -> Check:
    region, nodes = plan.choice.region, plan.choice.nodes
    quotas = calls.client("service-quotas", region)
    if plan.choice.deploy_target == "sagemaker":
        name = f"ml.{itype.name} for endpoint usage"
        check = Check(plan.workload, f"SageMaker quota '{name}'", f"{nodes} instances", "", None)
        if region not in sagemaker_quotas:
            sagemaker_quotas[region] = {q["QuotaName"]: q for q in
                                        calls.pages(quotas, "list_service_quotas", "Quotas", ServiceCode="sagemaker")}
        quota = sagemaker_quotas[region].get(name)
        have = quota["Value"] if quota else 0.0
        code = quota["QuotaCode"] if quota else "(not listed)"
        check.available, check.ok = f"{have:g} ({code})", have >= nodes
        check.action = f"request {name} ≥ {nodes} in Service Quotas ({region}, {code})"
        return check
    group = quota_group(itype.family)
    if group is None:
        return Check(plan.workload, "EC2 quota", "", f"unknown: no EC2 quota group known for family {itype.family}", None)
    code, title = EC2_QUOTAS[(group, "spot" if plan.choice.purchase == "spot" else "on-demand")]
    need = nodes * (itype.vcpus or 0)
    have = _quota_value(calls, quotas, "ec2", code)
    return Check(plan.workload, f"EC2 quota '{title}'", f"{need} vCPUs",
                 f"unknown: quota {code} not listed" if have is None else f"{have:g} vCPUs ({code})",
                 None if have is None else have >= need,
                 f"request {title} ({code}) ≥ {need} vCPUs in Service Quotas ({region})")


def _checked(workload: str, title: str, required: str, fn: Callable[[], Check], gating: bool = True) -> list[Check]:
    """One check's result, or the check marked unknown with the reason its source gave."""
    try:
        return [fn()]
    except Unavailable as exc:
        return [Check(workload, title, required, f"unknown: {exc}", None, "re-run preflight when AWS answers",
                      gating)]


def preflight(plans: list[Plan], catalog: Catalog, subnets: dict[str, str] | None = None,
              make_client: ClientFactory | None = None) -> list[Check]:
    """What each plan needs from the account and region, against what it has; each check on its own."""
    calls = Calls(make_client or aws_calls.client)
    checks: list[Check] = []
    subnets = subnets or {}
    sagemaker_quotas: dict[str, dict] = {}
    for plan in plans:
        region, itype, nodes = plan.choice.region, catalog.instance(plan.choice.instance_type), plan.choice.nodes
        ec2 = calls.client("ec2", region)
        checks += _checked(plan.workload, "quota", f"{nodes} instances",
                           lambda: _quota_check(calls, plan, itype, sagemaker_quotas))
        zones: list[str] | None = None

        def offerings() -> Check:
            nonlocal zones
            zones = sorted({o["Location"] for o in calls.pages(
                ec2, "describe_instance_type_offerings", "InstanceTypeOfferings", LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": [itype.name]}])})
            return Check(plan.workload, f"{itype.name} offered in {region}", "≥ 1 zone", ", ".join(zones) or "none",
                         bool(zones), f"choose another region or type; {itype.name} is not offered in {region}")

        checks += _checked(plan.workload, f"{itype.name} offered in {region}", "≥ 1 zone", offerings)
        subnet = subnets.get(plan.workload)
        if subnet and plan.choice.deploy_target == "ec2":
            def subnet_zone() -> Check:
                found = calls.pages(ec2, "describe_subnets", "Subnets", SubnetIds=[subnet])
                zone = found[0]["AvailabilityZone"] if found else "unknown"
                if zones is None:
                    return Check(plan.workload, f"subnet {subnet} zone offers {itype.name}", "", f"{zone} (unknown: "
                                 "the zones that offer the type could not be read)", None)
                return Check(plan.workload, f"subnet {subnet} zone offers {itype.name}", ", ".join(zones) or "none",
                             zone, zone in zones, f"use a subnet in {', '.join(zones) or 'a zone that offers it'}")

            checks += _checked(plan.workload, f"subnet {subnet} zone offers {itype.name}", "", subnet_zone)

        def reservations() -> Check:
            found = calls.pages(ec2, "describe_capacity_reservations", "CapacityReservations",
                                Filters=[{"Name": "instance-type", "Values": [itype.name]},
                                         {"Name": "state", "Values": ["active"]}])
            available = sum(r.get("AvailableInstanceCount", 0) for r in found)
            return Check(plan.workload, "capacity reservations (informational)", f"{nodes} instances",
                         f"{available} reserved and free in {len(found)} reservation(s)", True,
                         "" if available >= nodes else "on-demand capacity for large GPU types is scarce: consider "
                         "an On-Demand Capacity Reservation or a Capacity Block", gating=False)

        checks += _checked(plan.workload, "capacity reservations (informational)", f"{nodes} instances", reservations,
                           gating=False)
    return checks
