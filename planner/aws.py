"""The one module that talks to AWS (boto3): catalog refresh from EC2 and the Price List API, and the
preflight of quotas, zone offerings and capacity reservations. Planning never imports it.

The standard AWS environment applies: profile, region, AWS_ENDPOINT_URL; botocore's standard retry
mode absorbs throttling; every list call is paged to the end."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Callable

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from planner.catalog import Catalog, InstanceType, Price
from planner.plan import Plan

RETRIES = Config(retries={"mode": "standard", "max_attempts": 10})
PRICING_REGION = "us-east-1"  # the Price List API answers in us-east-1 (and ap-south-1)
EC2_PRICE_FILTERS = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}
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

ClientFactory = Callable[[str, str], object]


class AwsError(Exception):
    """A call AWS refused or could not be made: one message, no traceback, at the CLI edge (exit 2)."""


def client(service: str, region: str):
    """A boto3 client with standard retries; AWS_ENDPOINT_URL and the profile come from the environment."""
    return boto3.session.Session().client(service, region_name=region, config=RETRIES)


def _call(what: str, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except NoCredentialsError:
        raise AwsError("no AWS credentials found (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)") from None
    except NoRegionError:
        raise AwsError("no AWS region (set AWS_REGION or pass --region)") from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise AwsError(f"{what}: {error.get('Code', 'error')}: {error.get('Message', str(exc))}") from None
    except BotoCoreError as exc:
        raise AwsError(f"{what}: {exc}") from None


def _pages(c, operation: str, key: str, **kwargs) -> list:
    def collect():
        items = []
        for page in c.get_paginator(operation).paginate(**kwargs):
            items += page.get(key, [])
        return items
    return _call(operation, collect)


# --- catalog refresh ---------------------------------------------------------------------------------

@dataclass
class Change:
    instance_type: str
    what: str


def _accelerator_of(info: dict, accelerators: list) -> tuple[str, int, float] | None:
    """(catalog accelerator, count, MiB) from DescribeInstanceTypes' GpuInfo or NeuronInfo."""
    devices = (info.get("GpuInfo") or {}).get("Gpus") or (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if not devices:
        return None
    device = devices[0]
    name, mib = device.get("Name", ""), device.get("MemoryInfo", {}).get("SizeInMiB", 0)
    # API names are bare ("H100", "A100"); the catalog's carry the memory ("A100-80GB"): match on both.
    for accel in accelerators:
        if accel.name.split("-")[0] == name and abs(accel.memory_mib - mib) <= 0.02 * mib:
            return accel.name, int(device.get("Count", 1)), mib
    return None


def _on_demand_usd(price_item: str) -> float | None:
    product = json.loads(price_item)
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is not None and dimension.get("unit", "Hrs") in ("Hrs", "Hours", "Hour"):
                return float(usd)
    return None


def _price_list(pricing, service_code: str, filters: dict[str, str]) -> list[str]:
    terms = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()]
    return _pages(pricing, "get_products", "PriceList", ServiceCode=service_code, Filters=terms, FormatVersion="aws_v1")


def refresh_catalog(base: Catalog, regions: list[str], only: list[str] | None = None,
                    make_client: ClientFactory | None = None, progress: Callable[[str], None] = lambda _: None,
                    today: str | None = None) -> tuple[Catalog, list[Change]]:
    """Live specs, zone offerings, spot and on-demand EC2 prices and SageMaker hosting prices for the
    catalog's instance types, merged over `base` (bandwidth and TFLOPS stay: no API reports them)."""
    make_client = make_client or client
    today = today or date.today().isoformat()
    names = only or [t.name for t in base.instance_types]
    types = {t.name: t.model_copy(deep=True) for t in base.instance_types if t.name in names}
    accelerators = {a.name: a.model_copy(deep=True) for a in base.accelerators}
    sources = dict(base.sources)
    changes: list[Change] = []
    pricing = make_client("pricing", PRICING_REGION)
    offered: dict[str, set[str]] = {n: set() for n in names}
    for region in regions:
        ec2 = make_client("ec2", region)
        api_source = f"src-ec2-{region}-{today}"
        sources[api_source] = f"EC2 DescribeInstanceTypes / DescribeInstanceTypeOfferings / DescribeSpotPriceHistory, {region}, gpuplan catalog refresh {today}"
        progress(f"{region}: DescribeInstanceTypes")
        infos = _pages(ec2, "describe_instance_types", "InstanceTypes", InstanceTypes=names)
        for info in infos:
            name = info["InstanceType"]
            accel = _accelerator_of(info, list(accelerators.values()))
            if accel is None:
                changes.append(Change(name, "accelerator not in the catalog: add it under accelerators:"))
                continue
            accel_name, count, mib = accel
            itype = types.get(name) or InstanceType(name=name, family=name.split(".")[0], accelerator=accel_name,
                                                    accelerators_per_node=count)
            if name not in types:
                changes.append(Change(name, "new instance type"))
            if accelerators[accel_name].memory_mib != mib:
                changes.append(Change(name, f"{accel_name} memory {accelerators[accel_name].memory_mib:g} → {mib:g} MiB"))
                accelerators[accel_name].memory_mib = mib
            network = info.get("NetworkInfo", {})
            itype.accelerators_per_node = count
            itype.vcpus = info.get("VCpuInfo", {}).get("DefaultVCpus", itype.vcpus)
            itype.memory_gib = info.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024 or itype.memory_gib
            itype.efa = bool(network.get("EfaSupported", itype.efa))
            itype.network_cards = int(network.get("MaximumNetworkCards", itype.network_cards))
            peak = sum(card.get("PeakBandwidthInGbps", 0) for card in network.get("NetworkCards", []))
            itype.inter_node_gbps = peak or itype.inter_node_gbps
            itype.source, itype.source_date = api_source, today
            types[name] = itype
        progress(f"{region}: DescribeInstanceTypeOfferings")
        for offer in _pages(ec2, "describe_instance_type_offerings", "InstanceTypeOfferings",
                            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": names}]):
            offered.setdefault(offer["InstanceType"], set()).add(region)
        progress(f"{region}: DescribeSpotPriceHistory")
        spot: dict[str, float] = {}
        for entry in _pages(ec2, "describe_spot_price_history", "SpotPriceHistory", InstanceTypes=names,
                            ProductDescriptions=["Linux/UNIX"], StartTime=datetime.now(timezone.utc)):
            value = float(entry["SpotPrice"])
            spot[entry["InstanceType"]] = min(value, spot.get(entry["InstanceType"], value))
        price_source = f"src-pricelist-{region}-{today}"
        sources[price_source] = f"AWS Price List API (AmazonEC2 Linux shared on-demand; AmazonSageMaker Hosting), {region}, gpuplan catalog refresh {today}"
        for name in names:
            if name not in types:
                continue
            progress(f"{region}: Price List {name}")
            slot = types[name].prices.setdefault(region, {})
            ec2_items = _price_list(pricing, "AmazonEC2", {"regionCode": region, "instanceType": name, **EC2_PRICE_FILTERS})
            usd = next((v for v in map(_on_demand_usd, ec2_items) if v), None)
            old = slot.get("ec2")
            if usd is not None or name in spot:
                if old and old.on_demand and usd and abs(usd - old.on_demand) / old.on_demand > 0.005:
                    changes.append(Change(name, f"{region} EC2 on-demand ${old.on_demand:g} → ${usd:g}/h "
                                                f"({(usd - old.on_demand) / old.on_demand:+.1%})"))
                slot["ec2"] = Price(on_demand=usd, spot=spot.get(name), source=price_source, date=today,
                                    note="spot: lowest zone at refresh")
            sm_items = _price_list(pricing, "AmazonSageMaker", {"regionCode": region, "instanceName": f"ml.{name}",
                                                                 "component": "Hosting"})
            sm_usd = next((v for v in map(_on_demand_usd, sm_items) if v), None)
            if sm_usd is not None:
                slot["sagemaker"] = Price(on_demand=sm_usd, source=price_source, date=today, note="SageMaker hosting")
    for name, regions_offered in offered.items():
        if name in types:
            types[name].offered_regions = sorted(regions_offered)
            if not regions_offered:
                changes.append(Change(name, f"not offered in {', '.join(regions)}"))
    kept = [types.get(t.name, t) for t in base.instance_types] + [t for n, t in types.items() if base.instance(n) is None]
    return Catalog(sources=sources, accelerators=list(accelerators.values()), instance_types=kept), changes


# --- preflight ---------------------------------------------------------------------------------------

@dataclass
class Check:
    workload: str
    check: str
    required: str
    available: str
    ok: bool
    action: str = ""


def _quota_value(quotas, service: str, code: str) -> float | None:
    try:
        return quotas.get_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") != "NoSuchResourceException":
            raise AwsError(f"GetServiceQuota {code}: {error.get('Code')}: {error.get('Message')}") from None
    except (NoCredentialsError, BotoCoreError) as exc:
        raise AwsError(f"GetServiceQuota {code}: {exc}") from None
    try:  # never raised in this account: the AWS default applies
        return quotas.get_aws_default_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchResourceException":
            return None
        raise AwsError(f"GetAWSDefaultServiceQuota {code}: {exc}") from None


def quota_group(family: str) -> str:
    for prefix in ("inf", "trn", "p", "g"):
        if family.startswith(prefix):
            return prefix
    raise AwsError(f"no EC2 quota group known for family {family}")


def preflight(plans: list[Plan], catalog: Catalog, subnets: dict[str, str] | None = None,
              make_client: ClientFactory | None = None) -> list[Check]:
    """What each plan needs from the account and region, against what it has."""
    make_client = make_client or client
    checks: list[Check] = []
    subnets = subnets or {}
    sagemaker_quotas: dict[str, dict] = {}
    for plan in plans:
        region, itype = plan.choice.region, catalog.instance(plan.choice.instance_type)
        ec2, quotas = make_client("ec2", region), make_client("service-quotas", region)
        if plan.choice.deploy_target == "sagemaker":
            if region not in sagemaker_quotas:
                sagemaker_quotas[region] = {q["QuotaName"]: q for q in
                                            _pages(quotas, "list_service_quotas", "Quotas", ServiceCode="sagemaker")}
            name = f"ml.{itype.name} for endpoint usage"
            quota = sagemaker_quotas[region].get(name)
            have = quota["Value"] if quota else 0.0
            code = quota["QuotaCode"] if quota else "(not listed)"
            checks.append(Check(plan.workload, f"SageMaker quota '{name}'", f"{plan.choice.nodes} instances",
                                f"{have:g} ({code})", have >= plan.choice.nodes,
                                f"request {name} ≥ {plan.choice.nodes} in Service Quotas ({region}, {code})"))
        else:
            code, title = EC2_QUOTAS[(quota_group(itype.family), "spot" if plan.choice.purchase == "spot" else "on-demand")]
            need = plan.choice.nodes * (itype.vcpus or 0)
            have = _quota_value(quotas, "ec2", code)
            checks.append(Check(plan.workload, f"EC2 quota '{title}'", f"{need} vCPUs", "unknown" if have is None else
                                f"{have:g} vCPUs ({code})", have is not None and have >= need,
                                f"request {title} ({code}) ≥ {need} vCPUs in Service Quotas ({region})"))
        zones = sorted({o["Location"] for o in _pages(
            ec2, "describe_instance_type_offerings", "InstanceTypeOfferings", LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [itype.name]}])})
        checks.append(Check(plan.workload, f"{itype.name} offered in {region}", "≥ 1 zone",
                            ", ".join(zones) or "none", bool(zones), f"choose another region or type; {itype.name} "
                            f"is not offered in {region}"))
        subnet = subnets.get(plan.workload)
        if subnet and plan.choice.deploy_target == "ec2":
            found = _pages(ec2, "describe_subnets", "Subnets", SubnetIds=[subnet])
            zone = found[0]["AvailabilityZone"] if found else "unknown"
            checks.append(Check(plan.workload, f"subnet {subnet} zone offers {itype.name}", ", ".join(zones) or "none",
                                zone, zone in zones, f"use a subnet in {', '.join(zones) or 'a zone that offers it'}"))
        reservations = _pages(ec2, "describe_capacity_reservations", "CapacityReservations",
                              Filters=[{"Name": "instance-type", "Values": [itype.name]}, {"Name": "state", "Values": ["active"]}])
        available = sum(r.get("AvailableInstanceCount", 0) for r in reservations)
        checks.append(Check(plan.workload, "capacity reservations (informational)", f"{plan.choice.nodes} instances",
                            f"{available} reserved and free in {len(reservations)} reservation(s)", True,
                            "" if available >= plan.choice.nodes else "on-demand capacity for large GPU types is "
                            "scarce: consider an On-Demand Capacity Reservation or a Capacity Block"))
    return checks
