"""Prices with provenance, and the cost figures of a plan: per hour, per month, per million output
tokens, per training run; on-demand, spot, Reserved Instances, Savings Plans and Capacity Blocks;
EC2 and SageMaker priced separately."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from planner.hardware.catalog import Catalog, InstanceType

PURCHASE_FIELD = {"on-demand": "on_demand", "spot": "spot", "reserved-1y": "reserved_1y",
                  "reserved-3y": "reserved_3y", "savings-plan-1y": "savings_plan_1y",
                  "savings-plan-3y": "savings_plan_3y", "capacity-block": "capacity_block"}
# What `purchase: auto` weighs: for training, the options without a commitment that outlives the run
# (planner/economics/purchase.py prices spot's interruptions and a block's whole days); serving stays on-demand,
# its commitments are listed beside the plan, not chosen for it.
AUTO_OPTIONS = {"training": ("on-demand", "spot", "capacity-block"), "inference": ("on-demand",)}


def deploy_target(kind: str, requested: str) -> str:
    """auto: serving goes to SageMaker real-time endpoints, training to EC2 clusters (design.md)."""
    if requested != "auto":
        return requested
    return "sagemaker" if kind == "inference" else "ec2"


def purchase_options(kind: str, requested: str) -> tuple[str, ...]:
    if requested != "auto":
        return (requested,)
    return AUTO_OPTIONS["inference" if kind == "inference" else "training"]


@dataclass(frozen=True)
class HourlyPrice:
    usd_per_hour: float  # one instance
    source: str
    date: str
    estimated: bool = False
    purchase: str = "on-demand"
    spot_interruption: str | None = None  # the type's Spot Instance Advisor band, spot only


_SAGEMAKER_NONE = {
    "spot": "SageMaker real-time endpoints have no spot pricing; use purchase on-demand or deploy_target ec2",
    "reserved-1y": "SageMaker has no Reserved Instances; use savings-plan-1y (SageMaker Savings Plans)",
    "reserved-3y": "SageMaker has no Reserved Instances; use savings-plan-3y (SageMaker Savings Plans)",
    "capacity-block": "Capacity Blocks for ML reserve EC2 instances, not SageMaker real-time endpoints",
}


def hourly_price(catalog: Catalog, itype: InstanceType, region: str, target: str, purchase: str) -> HourlyPrice | str:
    """The per-instance price, or the reason there is none (which rejects the type), with the catalog's
    no_price_reason where it says why AWS publishes none."""
    found = _hourly_price(catalog, itype, region, target, purchase)
    if isinstance(found, str) and "price" in found and itype.no_price_reason and not itype.prices:
        return f"{found}: {itype.no_price_reason}"
    return found


def _hourly_price(catalog: Catalog, itype: InstanceType, region: str, target: str, purchase: str) -> HourlyPrice | str:
    field = PURCHASE_FIELD[purchase]
    if target == "sagemaker" and purchase in _SAGEMAKER_NONE:
        return _SAGEMAKER_NONE[purchase]
    ec2 = itype.price(region, "ec2")
    if target == "sagemaker" and not itype.sagemaker_hosting:
        return (f"SageMaker hosting does not offer ml.{itype.name} (botocore 1.44.5 sagemaker "
                "ProductionVariantInstanceType)")
    if target == "sagemaker":
        sm = itype.price(region, "sagemaker")
        value = getattr(sm, field) if sm else None
        if value is not None:
            source, day = sm.origin(field)
            return HourlyPrice(value, catalog.source_text(source), day, purchase=purchase)
        base = getattr(ec2, field) if ec2 and purchase == "on-demand" else None
        if base is None and purchase == "on-demand":
            return f"no on-demand price for ml.{itype.name} or {itype.name} in {region} in the catalog"
        if base is None:
            return (f"no {purchase} price for ml.{itype.name} in {region} in the catalog (add one with a catalog "
                    f"overlay: prices.{region}.sagemaker.{field})")
        ratio, pairs = catalog.sagemaker_markup
        return HourlyPrice(base * ratio, f"estimated: EC2 {purchase} price × {ratio:.3f} (median ml.*/EC2 ratio "
                           f"of {pairs} catalog pairs); EC2 price from {catalog.source_text(ec2.source)}",
                           ec2.date, estimated=True, purchase=purchase)
    value = getattr(ec2, field) if ec2 else None
    if value is None:
        if ec2 is None:
            return f"not offered or not priced in {region} (no EC2 price in the catalog)"
        return f"no {purchase} price for {itype.name} in {region} in the catalog (add one with a catalog overlay)"
    source, day = ec2.origin(field)
    return HourlyPrice(value, catalog.source_text(source), day, purchase=purchase,
                       spot_interruption=ec2.spot_interruption if purchase == "spot" else None)


def price_book(catalog: Catalog, itype: InstanceType, region: str, target: str,
               options: tuple[str, ...]) -> dict[str, HourlyPrice] | str:
    """Every option's price for one type, or why none of the options has one."""
    book: dict[str, HourlyPrice] = {}
    reasons: list[str] = []
    for option in options:
        found = hourly_price(catalog, itype, region, target, option)
        if isinstance(found, str):
            reasons.append(found)
        else:
            book[option] = found
    if book:
        return book
    return reasons[0] if len(reasons) == 1 else f"no {'/'.join(options)} price for {itype.name} in {region}"


def usd_per_million_tokens(usd_per_hour: float, tokens_per_s: float) -> float:
    return usd_per_hour / (tokens_per_s * 3600) * 1e6 if tokens_per_s > 0 else float("inf")


# Prices more than this far apart were set under different price lists (AWS moved P4/P5 by up to −45 %
# in June 2025): ranking them together is comparing vintages, said in the plan (design: issue 16).
MAX_PRICE_AGE_DAYS = 180


def _day(text: str) -> date | None:
    try:
        return date.fromisoformat(text[:10])
    except (TypeError, ValueError):
        return None


def price_vintage_notes(chosen: HourlyPrice, ranked: list[HourlyPrice], newest: str | None) -> tuple[list[str], list[str]]:
    """(reason notes, warnings) for a ranking: estimated prices ranked against published ones, prices of
    vintages more than MAX_PRICE_AGE_DAYS apart, and prices that old against the catalog's newest."""
    reasons: list[str] = []
    if any(p.estimated != chosen.estimated for p in ranked):
        reasons.append("ranked an estimated price against published ones" if chosen.estimated
                       else "ranked against estimated prices")
    days = sorted(d for d in (_day(p.date) for p in [chosen, *ranked]) if d)
    if days and (days[-1] - days[0]).days > MAX_PRICE_AGE_DAYS:
        reasons.append(f"prices of different vintages ranked together ({days[0]} to {days[-1]})")
    warnings: list[str] = []
    latest = _day(newest or "")
    chosen_day = _day(chosen.date)
    if latest and chosen_day and (latest - chosen_day).days > MAX_PRICE_AGE_DAYS:
        warnings.append(f"price dated {chosen_day} is {(latest - chosen_day).days} days older than the catalog's "
                        f"newest ({latest}); refresh it with `gpuplan catalog refresh`")
    return reasons, warnings
