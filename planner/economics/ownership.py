"""Rent vs buy: a node an overlay says can be bought (`owned:`) against the cloud options for the
same hardware. Owning costs the same every year whether the node is busy or not; renting costs in
proportion to use, so owning wins above the utilisation where the two are equal."""

from __future__ import annotations

from planner.hardware.catalog import Catalog, InstanceType
from planner.workload.plan import OwnedBreakEven, PurchaseOption

HOURS_PER_YEAR = 8760.0


def owned_equivalents(catalog: Catalog, chosen: InstanceType) -> list[InstanceType]:
    """Owned nodes with the chosen node's hardware: the same accelerator, as many per node."""
    return [t for t in catalog.instance_types if t.owned is not None and t.accelerator == chosen.accelerator
            and t.accelerators_per_node == chosen.accelerators_per_node]


def rent_vs_buy(catalog: Catalog, chosen: InstanceType, nodes: int, options: list[PurchaseOption]) -> list[OwnedBreakEven]:
    """Per owned equivalent and cloud option: break-even utilisation = owned cost per year ÷ the
    cloud option's cost for a year of use; above 100% the cloud option is cheaper even when busy."""
    out: list[OwnedBreakEven] = []
    for owned in owned_equivalents(catalog, chosen):
        o = owned.owned
        owned_year = o.usd_per_year * nodes
        for option in options:
            cloud_year = option.usd_per_hour * HOURS_PER_YEAR
            share = owned_year / cloud_year if cloud_year > 0 else None
            note = (f"${o.capex_usd:,.0f} over {o.lifetime_years:g} years, {o.power_kw:g} kW × PUE {o.pue:g} at "
                    f"${o.usd_per_kwh:g}/kWh every hour, ${o.opex_usd_per_year:,.0f}/year operations, per node")
            if o.source:
                note += f"; figures from {o.source}" + (f" ({o.date})" if o.date else "")
            if option.commitment_years:
                note += f"; {option.purchase} bills every hour of its term, so it is compared at full use only"
            out.append(OwnedBreakEven(owned_type=owned.name, purchase=option.purchase, owned_usd_per_year=owned_year,
                                      cloud_usd_per_year_at_full_use=cloud_year,
                                      break_even_utilization=share if share is not None and share <= 1 else None,
                                      note=note))
    return out
