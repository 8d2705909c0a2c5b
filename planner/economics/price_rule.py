"""One price rule per ranking (issue 27). A SageMaker plan can rank a published ml.* price from 2024
(before AWS cut P4/P5 prices by up to 45 % in June 2025) against an estimate built from a 2025 EC2 price;
the cheaper-looking type then wins on vintage, not on cost. When any candidate's price is estimated or
older than MAX_PRICE_AGE_DAYS before the catalog's newest, every candidate is ranked on one rule: its
EC2 on-demand price (one vintage) × the catalog's one median ml.*/EC2 ratio. The plan is still charged
at each type's best known price; only the ranking is like with like."""

from __future__ import annotations

from planner.search.candidates import Candidate
from planner.hardware.catalog import Catalog
from planner.economics.cost import MAX_PRICE_AGE_DAYS, HourlyPrice, _day

OWN_PRICE = "each type's own {purchase} price"


def _why_mixed(prices: list[tuple[str, HourlyPrice]], newest: str | None) -> str | None:
    """Why these prices cannot be ranked as they are: an estimate among them, or one too old."""
    estimated = sorted(name for name, p in prices if p.estimated)
    latest = _day(newest or "")
    old = sorted((p.date, name) for name, p in prices
                 if latest and (d := _day(p.date)) and (latest - d).days > MAX_PRICE_AGE_DAYS)
    why = []
    if estimated:
        why.append(f"{_list(estimated)} {'is' if len(estimated) == 1 else 'are'} estimated")
    if old:
        why.append(f"{_list([n for _, n in old])} {'is' if len(old) == 1 else 'are'} priced as of {old[0][0]}, "
                   f"over {MAX_PRICE_AGE_DAYS} days before the catalog's newest price ({latest})")
    return " and ".join(why) or None


def _list(names: list[str], most: int = 3) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def rank_on_one_rule(feasible: list[Candidate], catalog: Catalog, region: str, target: str) -> str:
    """Sets each candidate's ranking_objective and returns the rule that ranked, as the plan states it."""
    purchase = feasible[0].purchase if feasible else "on-demand"
    own = OWN_PRICE.format(purchase=purchase)
    if target != "sagemaker" or len(feasible) < 2 or any(c.purchase != "on-demand" for c in feasible):
        return own  # nothing to rank; EC2 prices carry no second vintage; SageMaker commitments are published only
    why = _why_mixed([(c.itype.name, c.price) for c in feasible], catalog.newest_price_date)
    bases = {c.itype.name: _ec2_on_demand(catalog, c.itype.name, region) for c in feasible}
    if why is None or any(b is None for b in bases.values()):
        return own  # a type without an EC2 price cannot be ranked on the rule: say so by the prices' notes
    ratio, pairs = catalog.sagemaker_markup
    for c in feasible:  # a type served on EC2 (search/sweep.py type_target) pays, and ranks at, its EC2 price
        c.ranking_objective = c.objective if c.deploy_target == "ec2" else \
            c.objective * bases[c.itype.name].usd_per_hour * ratio / c.price.usd_per_hour
    dates = sorted({b.date for b in bases.values()})
    span = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}"
    return (f"each type's EC2 on-demand price × {ratio:.3f} (the median ml.*/EC2 ratio of {pairs} catalog pairs; "
            f"EC2 prices of {span}), because {why}; charged at each type's published ml.* price where there is one")


def _ec2_on_demand(catalog: Catalog, name: str, region: str) -> HourlyPrice | None:
    itype = catalog.instance(name)
    ec2 = itype.price(region, "ec2") if itype else None
    if ec2 is None or ec2.on_demand is None:
        return None
    return HourlyPrice(ec2.on_demand, catalog.source_text(ec2.source), ec2.origin("on_demand")[1])


def one_rule_reason(catalog: Catalog, chosen: Candidate) -> str:
    """The reason's line for a plan ranked on the rule: the ratio, and the figure the plan is charged."""
    ratio, _ = catalog.sagemaker_markup
    kind = "estimated" if chosen.price.estimated else f"published {chosen.price.date}"
    return (f"ranked on one rule: each type's EC2 on-demand price × {ratio:.3f} (cost.ranking_rule); charged "
            f"${chosen.objective:,.2f}/h at its {kind} ml.* price")
