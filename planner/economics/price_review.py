"""What a catalog refresh may not change without a person saying so: a price that moved by more than
half, or one below any accelerator's real price. The planner ranks by price, so one bad figure from
an API (a unit mix-up, a promotional SKU, a stray zero) would pick every plan; pure functions, no AWS."""

from __future__ import annotations

from dataclasses import dataclass

from planner.hardware.catalog import Catalog, InstanceType, Price

# AWS changes list prices by tens of percent at most (the June 2025 P4/P5 cut was −33 % to −45 %); a
# move beyond ±50 % between two refreshes is more likely a wrong figure than a price change.
PRICE_MOVE_LIMIT = 0.50
# No accelerator instance lists below ~$0.10 per device-hour even at spot (g4dn/g6 spot ≈ $0.2 per
# GPU-hour, inf2 ≈ $0.25 per chip-hour in 2025): a figure under this floor is a unit or parsing error.
PRICE_FLOOR_USD_PER_DEVICE_HOUR = 0.05


@dataclass(frozen=True)
class Flag:
    instance_type: str
    region: str
    service: str
    field: str  # on_demand | spot
    before_usd_per_hour: float | None
    after_usd_per_hour: float
    why: str

    def __str__(self) -> str:
        return f"{self.instance_type} {self.region} {self.service} {self.field.replace('_', '-')}: {self.why}"


def _figures(itype: InstanceType | None) -> dict[tuple[str, str, str], float]:
    found: dict[tuple[str, str, str], float] = {}
    for region, services in (itype.prices if itype else {}).items():
        for service, price in services.items():
            for field in ("on_demand", "spot"):
                value = getattr(price, field)
                if value is not None:
                    found[(region, service, field)] = value
    return found


def review(base: Catalog, fresh: Catalog) -> list[Flag]:
    """Every refreshed price below the floor or moved beyond the limit against the base catalog."""
    flags: list[Flag] = []
    for itype in fresh.instance_types:
        before = _figures(base.instance(itype.name))
        for (region, service, field), after in sorted(_figures(itype).items()):
            old = before.get((region, service, field))
            if old == after:
                continue
            if itype.accelerators_per_node < 1:  # refresh refuses such answers; a hand-edited file may not
                flags.append(Flag(itype.name, region, service, field, old, after, "the type has no accelerators"))
                continue
            per_device = after / itype.accelerators_per_node
            if per_device < PRICE_FLOOR_USD_PER_DEVICE_HOUR:
                flags.append(Flag(itype.name, region, service, field, old, after,
                                  f"${after:g}/h is ${per_device:.4g} per device-hour, below the "
                                  f"${PRICE_FLOOR_USD_PER_DEVICE_HOUR:g} floor"))
            elif old and abs(after - old) / old > PRICE_MOVE_LIMIT:
                flags.append(Flag(itype.name, region, service, field, old, after,
                                  f"${old:g} → ${after:g}/h ({(after - old) / old:+.1%}), beyond "
                                  f"±{PRICE_MOVE_LIMIT:.0%}"))
    return flags


def keep_previous(fresh: Catalog, base: Catalog, flags: list[Flag]) -> Catalog:
    """The refreshed catalog with each flagged figure put back to the base's (its source and date
    included), for a refresh that writes what it trusts and reports the rest."""
    fresh = fresh.model_copy(deep=True)
    for flag in flags:
        itype = fresh.instance(flag.instance_type)
        old_type = base.instance(flag.instance_type)
        old: Price | None = old_type.price(flag.region, flag.service) if old_type else None
        services = itype.prices.setdefault(flag.region, {})
        if old is None:
            services.pop(flag.service, None)
        else:
            services[flag.service] = old.model_copy()
    return fresh
