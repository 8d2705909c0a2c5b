"""Which regions a plan can be priced in: the ones the catalog has prices for. A region read from a
flag, a workload or a stack is checked against them, so a typo (or `us-east-1; rm -rf /`) is named as
a region problem, not reported as "no instance type fits"."""

from __future__ import annotations

import re

from planner.hardware.catalog import Catalog
from planner.workload.errors import SpecError, shown
from planner.workload.spec import AWS_REGION_PATTERN


def priced_regions(catalog: Catalog) -> list[str]:
    return sorted({region for itype in catalog.instance_types for region in itype.prices})


def _unpriced(region: str, catalog: Catalog) -> str:
    """A well-formed region the catalog prices nothing in: the regions it does price and how to add this one."""
    counts: dict[str, int] = {}
    for itype in catalog.instance_types:
        for priced in itype.prices:
            counts[priced] = counts.get(priced, 0) + 1
    listed = ", ".join(f"{name} ({n} types)" for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return (f"the catalog prices no instance type in {region}; it prices {listed}. Add the region with "
            f"`gpuplan catalog refresh --region {region}` (then --catalog catalog.refreshed.yaml) or price "
            f"types there in a catalog overlay (instance_types[].prices.{region})")


def check_region(region: object, catalog: Catalog, path: str, file: str = "") -> None:
    """SpecError unless `region` is an AWS region name the catalog prices (any well-formed name when an
    overlay type prices itself in every region with usd_per_hour)."""
    priced = priced_regions(catalog)
    anywhere = any(itype.usd_per_hour is not None for itype in catalog.instance_types)
    well_formed = isinstance(region, str) and re.match(AWS_REGION_PATTERN, region) is not None
    if well_formed and (anywhere or region in priced):
        return
    if well_formed:
        raise SpecError(_unpriced(region, catalog), path=path, file=file)
    raise SpecError(f"unknown region {shown(region)}; the catalog prices {', '.join(priced)}", path=path, file=file)


def check_region_name(region: object, path: str) -> None:
    """SpecError unless `region` is shaped like an AWS region name (for a refresh, which may add one)."""
    if not (isinstance(region, str) and re.match(AWS_REGION_PATTERN, region)):
        raise SpecError(f"unknown region {shown(region)}: not an AWS region name such as us-east-1", path=path)
