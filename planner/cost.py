"""Prices with provenance, and the cost figures of a plan: per hour, per month, per million output
tokens, per training run; on-demand, spot and reserved; EC2 and SageMaker priced separately."""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog import Catalog, InstanceType

PURCHASE_FIELD = {"on-demand": "on_demand", "spot": "spot", "reserved-1y": "reserved_1y",
                  "reserved-3y": "reserved_3y"}


def deploy_target(kind: str, requested: str) -> str:
    """auto: serving goes to SageMaker real-time endpoints, training to EC2 clusters (design.md)."""
    if requested != "auto":
        return requested
    return "sagemaker" if kind == "inference" else "ec2"


@dataclass(frozen=True)
class HourlyPrice:
    usd_per_hour: float  # one instance
    source: str
    date: str
    estimated: bool = False


def hourly_price(catalog: Catalog, itype: InstanceType, region: str, target: str, purchase: str) -> HourlyPrice | str:
    """The per-instance price, or the reason there is none (which rejects the type)."""
    field = PURCHASE_FIELD[purchase]
    if target == "sagemaker" and purchase == "spot":
        return "SageMaker real-time endpoints have no spot pricing; use purchase on-demand or deploy_target ec2"
    ec2 = itype.price(region, "ec2")
    if target == "sagemaker":
        sm = itype.price(region, "sagemaker")
        value = getattr(sm, field) if sm else None
        if value is not None:
            return HourlyPrice(value, catalog.source_text(sm.source), sm.date)
        base = getattr(ec2, field) if ec2 else None
        if base is None:
            return f"no {purchase} price for ml.{itype.name} or {itype.name} in {region} in the catalog"
        ratio, pairs = catalog.sagemaker_markup
        return HourlyPrice(base * ratio, f"estimated: EC2 {purchase} price × {ratio:.3f} (median ml.*/EC2 ratio "
                           f"of {pairs} catalog pairs); EC2 price from {catalog.source_text(ec2.source)}",
                           ec2.date, estimated=True)
    value = getattr(ec2, field) if ec2 else None
    if value is None:
        if ec2 is None:
            return f"not offered or not priced in {region} (no EC2 price in the catalog)"
        return f"no {purchase} price for {itype.name} in {region} in the catalog (add one with a catalog overlay)"
    return HourlyPrice(value, catalog.source_text(ec2.source), ec2.date)


def usd_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float:
    return usd_per_hour / (tokens_per_s * 3600) * 1e6 if tokens_per_s > 0 else float("inf")
