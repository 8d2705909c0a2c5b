"""Which regions a plan can be priced in: the ones the catalog has prices for. A region read from a
flag, a workload or a stack is checked against them, so a typo (or `us-east-1; rm -rf /`) is named as
a region problem, not reported as "no instance type fits"."""

from __future__ import annotations

import re

from planner.catalog import Catalog
from planner.errors import SpecError, shown
from planner.spec import AWS_REGION_PATTERN


def priced_regions(catalog: Catalog) -> list[str]:
    return sorted({region for itype in catalog.instance_types for region in itype.prices})


def check_region(region: object, catalog: Catalog, path: str, file: str = "") -> None:
    """SpecError unless `region` is an AWS region name the catalog prices (any well-formed name when an
    overlay type prices itself in every region with usd_per_hour)."""
    priced = priced_regions(catalog)
    anywhere = any(itype.usd_per_hour is not None for itype in catalog.instance_types)
    well_formed = isinstance(region, str) and re.match(AWS_REGION_PATTERN, region) is not None
    if well_formed and (anywhere or region in priced):
        return
    raise SpecError(f"unknown region {shown(region)}; the catalog prices {', '.join(priced)}", path=path, file=file)


def check_region_name(region: object, path: str) -> None:
    """SpecError unless `region` is shaped like an AWS region name (for a refresh, which may add one)."""
    if not (isinstance(region, str) and re.match(AWS_REGION_PATTERN, region)):
        raise SpecError(f"unknown region {shown(region)}: not an AWS region name such as us-east-1", path=path)
