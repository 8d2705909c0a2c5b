"""`gpuplan catalog refresh`: live specs and zone offerings from EC2, on-demand prices from the Price
List API and spot prices from EC2, merged over a base catalog; a source that fails keeps its figures."""

from __future__ import annotations

import json
import math
import dataclasses
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Callable

from gpuplan.aws import calls as aws_calls
from gpuplan.aws.calls import Calls, ClientFactory, Unavailable
from planner.hardware.catalog import Catalog, InstanceType, Price

PRICING_REGION = "us-east-1"  # the Price List API answers in us-east-1 (and ap-south-1)
EC2_PRICE_FILTERS = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"}

# Figures the Price List refresh does not fetch: kept from the base catalog with their own provenance.
CARRIED_TERMS = ("reserved_1y", "reserved_3y", "savings_plan_1y", "savings_plan_3y", "capacity_block",
                 "spot_interruption")


def carried_terms(old: Price | None) -> dict:
    """Commitment rates, Capacity Block rate and spot band of the base price, each still naming where
    and when it was read (the refreshed price's own source is the Price List API)."""
    if old is None:
        return {}
    kept = {field: getattr(old, field) for field in CARRIED_TERMS if getattr(old, field) is not None}
    provenance = {}
    for field in kept:
        source, day = old.origin(field)
        own = old.provenance.get(field)
        provenance[field] = {"source": source, "date": day, "note": own.note if own else ""}
    return {**kept, "provenance": provenance} if kept else {}


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


def price_problem(value: object) -> str | None:
    """Why a price an API answered cannot be a price (text, negative, NaN, infinite), or None."""
    try:
        usd = float(value)
    except (TypeError, ValueError):
        return f"price {str(value)[:20]!r} is not a number"
    if not math.isfinite(usd) or usd < 0:
        return f"price {usd:g} is not a positive finite number"
    return None


def _on_demand_usd(price_item: str) -> float | None:
    product = json.loads(price_item)
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is not None and dimension.get("unit", "Hrs") in ("Hrs", "Hours", "Hour"):
                return float(usd)
    return None


def _price_list(calls: Calls, pricing, service_code: str, filters: dict[str, str]) -> float | None:
    """The on-demand $/h of the one product the filters select, None when the list has none."""
    terms = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()]
    items = calls.pages(pricing, "get_products", "PriceList", ServiceCode=service_code, Filters=terms,
                        FormatVersion="aws_v1")
    try:
        return next((v for v in map(_on_demand_usd, items) if v), None)
    except (ValueError, TypeError, AttributeError):
        raise Unavailable(f"GetProducts {service_code}: the answer was not Price List JSON") from None


@dataclass
class Refresh:
    """A refreshed catalog, what changed against the base, and the sources that could not answer
    (their figures kept from the base catalog)."""

    catalog: Catalog
    changes: list[Change]
    unknown: list[str]
    answered: int  # calls that succeeded


def _checked(usd: float | None, what: str, unknown: dict[str, None]) -> float | None:
    """The price, or None (the base's figure stays) with the reason recorded as unknown."""
    problem = None if usd is None else price_problem(usd)
    if problem:
        unknown[f"{what}: unknown: {problem}; kept from the base catalog"] = None
        return None
    return usd


def _specs(itype: InstanceType, info: dict, api_source: str, today: str) -> None:
    network = info.get("NetworkInfo", {})
    itype.vcpus = info.get("VCpuInfo", {}).get("DefaultVCpus", itype.vcpus)
    itype.memory_gib = info.get("MemoryInfo", {}).get("SizeInMiB", 0) / 1024 or itype.memory_gib
    itype.efa = bool(network.get("EfaSupported", itype.efa))
    itype.network_cards = int(network.get("MaximumNetworkCards", itype.network_cards))
    peak = sum(card.get("PeakBandwidthInGbps", 0) for card in network.get("NetworkCards", []))
    itype.inter_node_gbps = peak or itype.inter_node_gbps
    itype.source, itype.source_date = api_source, today


@dataclass
class _Refreshing:
    """One refresh's state as each source answers or fails: the types and accelerators being rebuilt,
    the sources cited, what changed, what stayed unknown, and how many calls answered."""
    calls: Calls
    today: str
    names: list[str]
    types: dict[str, InstanceType]
    accelerators: dict
    sources: dict[str, str]
    progress: Callable[[str], None]
    changes: list[Change] = dataclasses.field(default_factory=list)
    unknown: dict[str, None] = dataclasses.field(default_factory=dict)  # ordered, each reason once
    answered: int = 0

    def specs(self, ec2, region: str) -> None:
        """DescribeInstanceTypes: accelerator count and memory, and the specs EC2 reports."""
        api_source = f"src-ec2-{region}-{self.today}"
        self.sources[api_source] = f"EC2 DescribeInstanceTypes / DescribeInstanceTypeOfferings / DescribeSpotPriceHistory, {region}, gpuplan catalog refresh {self.today}"
        self.progress(f"{region}: DescribeInstanceTypes")
        try:
            infos = self.calls.pages(ec2, "describe_instance_types", "InstanceTypes", InstanceTypes=self.names)
            self.answered += 1
        except Unavailable as exc:
            self.unknown[f"{region} EC2 specs: unknown: {exc}; kept from the base catalog"] = None
            infos = []
        for info in infos:
            name = info["InstanceType"]
            accel = _accelerator_of(info, list(self.accelerators.values()))
            if accel is None:
                self.changes.append(Change(name, "accelerator not in the catalog: add it under accelerators:"))
                continue
            accel_name, count, mib = accel
            if count < 1:
                self.unknown[f"{name}: unknown: EC2 reports {count} accelerators; its specs kept from the base catalog"] = None
                continue
            itype = self.types.get(name) or InstanceType(name=name, family=name.split(".")[0], accelerator=accel_name,
                                                         accelerators_per_node=count)
            if name not in self.types:
                self.changes.append(Change(name, "new instance type"))
            if self.accelerators[accel_name].memory_mib != mib:
                self.changes.append(Change(name, f"{accel_name} memory {self.accelerators[accel_name].memory_mib:g} → {mib:g} MiB"))
                self.accelerators[accel_name].memory_mib = mib
            itype.accelerators_per_node = count
            _specs(itype, info, api_source, self.today)
            self.types[name] = itype

    def offerings(self, ec2, region: str, offered: dict[str, set[str]] | None) -> dict[str, set[str]] | None:
        """DescribeInstanceTypeOfferings into `offered`; None once any region's answer is unknown."""
        self.progress(f"{region}: DescribeInstanceTypeOfferings")
        try:
            for offer in self.calls.pages(ec2, "describe_instance_type_offerings", "InstanceTypeOfferings",
                                          LocationType="availability-zone",
                                          Filters=[{"Name": "instance-type", "Values": self.names}]):
                if offered is not None:
                    offered.setdefault(offer["InstanceType"], set()).add(region)
            self.answered += 1
        except Unavailable as exc:
            self.unknown[f"{region} EC2 offerings: unknown: {exc}; offered regions kept from the base catalog"] = None
            return None  # one region unknown: no type's region list can be rebuilt
        return offered

    def spot_prices(self, ec2, region: str) -> dict[str, float] | None:
        """The lowest zone's spot price per type now; None when the history is unknown."""
        self.progress(f"{region}: DescribeSpotPriceHistory")
        spot: dict[str, float] = {}
        try:
            for entry in self.calls.pages(ec2, "describe_spot_price_history", "SpotPriceHistory",
                                          InstanceTypes=self.names, ProductDescriptions=["Linux/UNIX"],
                                          StartTime=datetime.now(timezone.utc)):
                problem = price_problem(entry.get("SpotPrice"))
                if problem:
                    self.unknown[f"{entry['InstanceType']} {region} EC2 spot: unknown: {problem}; not used"] = None
                    continue
                value = float(entry["SpotPrice"])
                spot[entry["InstanceType"]] = min(value, spot.get(entry["InstanceType"], value))
            self.answered += 1
        except Unavailable as exc:
            self.unknown[f"{region} EC2 spot prices: unknown: {exc}; kept from the base catalog"] = None
            return None
        return spot

    def list_price(self, pricing, service: str, filters: dict[str, str]) -> float | None:
        try:
            usd = _price_list(self.calls, pricing, service, filters)
            self.answered += 1
            return usd
        except Unavailable as exc:
            self.unknown[f"Price List API: unknown: {exc}; prices kept from the base catalog"] = None
            return None

    def prices(self, pricing, region: str, spot: dict[str, float] | None) -> None:
        """Price List on-demand EC2 and SageMaker hosting per type, spot beside EC2; terms carried over."""
        price_source = f"src-pricelist-{region}-{self.today}"
        self.sources[price_source] = f"AWS Price List API (AmazonEC2 Linux shared on-demand; AmazonSageMaker Hosting), {region}, gpuplan catalog refresh {self.today}"
        for name in (n for n in self.names if n in self.types):
            self.progress(f"{region}: Price List {name}")
            slot = self.types[name].prices.setdefault(region, {})
            old, old_sm = slot.get("ec2"), slot.get("sagemaker")
            usd = self.list_price(pricing, "AmazonEC2", {"regionCode": region, "instanceType": name, **EC2_PRICE_FILTERS})
            usd = _checked(usd, f"{name} {region} EC2 on-demand", self.unknown)
            if usd is not None:
                if old and old.on_demand and abs(usd - old.on_demand) / old.on_demand > 0.005:
                    self.changes.append(Change(name, f"{region} EC2 on-demand ${old.on_demand:g} → ${usd:g}/h "
                                                     f"({(usd - old.on_demand) / old.on_demand:+.1%})"))
                kept_spot = spot is None and old is not None and old.spot is not None
                slot["ec2"] = Price(on_demand=usd, spot=old.spot if kept_spot else (spot or {}).get(name),
                                    source=price_source, date=self.today,
                                    note=f"spot kept from {old.date}" if kept_spot else "spot: lowest zone at refresh",
                                    **carried_terms(old))
            sm_usd = self.list_price(pricing, "AmazonSageMaker", {"regionCode": region, "instanceName": f"ml.{name}",
                                                                  "component": "Hosting"})
            sm_usd = _checked(sm_usd, f"{name} {region} SageMaker on-demand", self.unknown)
            if sm_usd is not None:
                slot["sagemaker"] = Price(on_demand=sm_usd, source=price_source, date=self.today,
                                          note="SageMaker hosting", **carried_terms(old_sm))
            if not slot:
                self.types[name].prices.pop(region)


def refresh_catalog(base: Catalog, regions: list[str], only: list[str] | None = None,
                    make_client: ClientFactory | None = None, progress: Callable[[str], None] = lambda _: None,
                    today: str | None = None) -> Refresh:
    """Live specs, zone offerings, spot and on-demand EC2 prices and SageMaker hosting prices for the
    catalog's instance types, merged over `base` (bandwidth and TFLOPS stay: no API reports them).
    A source that fails leaves the base's figures in place and is reported as unknown."""
    names = only or [t.name for t in base.instance_types]
    run = _Refreshing(Calls(make_client or aws_calls.client), today or date.today().isoformat(), names,
                      {t.name: t.model_copy(deep=True) for t in base.instance_types if t.name in names},
                      {a.name: a.model_copy(deep=True) for a in base.accelerators}, dict(base.sources), progress)
    pricing = run.calls.client("pricing", PRICING_REGION)
    offered: dict[str, set[str]] | None = {n: set() for n in names}
    for region in regions:
        ec2 = run.calls.client("ec2", region)
        run.specs(ec2, region)
        offered = run.offerings(ec2, region, offered)
        spot = run.spot_prices(ec2, region)
        run.prices(pricing, region, spot)
    types = run.types
    for name, regions_offered in (offered or {}).items():
        if name in types:
            types[name].offered_regions = sorted(regions_offered)
            if not regions_offered:
                run.changes.append(Change(name, f"not offered in {', '.join(regions)}"))
    kept = [types.get(t.name, t) for t in base.instance_types] + [t for n, t in types.items() if base.instance(n) is None]
    return Refresh(Catalog(sources=run.sources, accelerators=list(run.accelerators.values()), instance_types=kept),
                   run.changes, list(run.unknown), run.answered)
