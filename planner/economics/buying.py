"""What to buy for a chosen layout: every purchase option priced side by side, and the storage a
training run needs. The search picks the option (planner/search/training.py, at the prices of
planner/economics/run_pricing.py); this lists them all."""

from __future__ import annotations

from planner.physics.bands import slow_factor
from planner.search.candidates import Candidate
from planner.hardware.catalog import Catalog
from planner.economics.cost import PURCHASE_FIELD, hourly_price, purchase_options
from planner.workload.plan import PlanFsx, PlanStorage, PurchaseOption
from planner.economics.purchase import COMMITMENT_YEARS
from planner.economics.run_pricing import run_quotes, run_storage
from planner.workload.spec import Workload
from planner.economics.storage import storage_source
from planner.hardware.units import HOURS_PER_MONTH


def purchase_table(w: Workload, cand: Candidate, catalog: Catalog, target: str) -> list[PurchaseOption]:
    """The chosen type and layout under every option the catalog prices, cheapest first."""
    itype = catalog.instance(cand.itype.name)
    book = {purchase: price for purchase in PURCHASE_FIELD
            if not isinstance(price := hourly_price(catalog, itype, w.constraints.region, target, purchase), str)}
    quotes = run_quotes(w, book, cand.nodes, w.training.tokens / cand.perf.tokens_per_s, cand.perf.tokens_per_s) \
        if w.kind != "inference" else {}
    out: list[PurchaseOption] = []
    slow = slow_factor("neuron" if cand.accel.is_neuron else "gpu", "training", w.constraints.confidence)
    for purchase, price in book.items():
        years = COMMITMENT_YEARS.get(purchase)
        common = dict(purchase=purchase, usd_per_hour=cand.nodes * price.usd_per_hour, commitment_years=years,
                      price_source=price.source, price_date=price.date, price_estimated=price.estimated,
                      chosen=purchase == cand.purchase)
        if w.kind == "inference":
            hours = HOURS_PER_MONTH if years else w.serving.hours_per_month
            note = f"billed all {HOURS_PER_MONTH:g} h of every month for {years} year(s)" if years else ""
            if purchase == "spot":
                note = "an interrupted instance drops its in-flight requests (2-minute notice)"
            out.append(PurchaseOption(usd_per_month=cand.nodes * price.usd_per_hour * hours, note=note, **common))
            continue
        q = quotes[purchase]
        if isinstance(q, str):
            out.append(PurchaseOption(note=q, meets_deadline=False, **common))
            continue
        deadline = w.training.deadline_hours
        # the run's figure covers its root volumes and FSx too (they accrue as the run does); $/h is the nodes'
        out.append(PurchaseOption(usd_per_training_run=q.usd_per_run + cand.storage_usd_per_hour * q.wall_s / 3600,
                                  wall_clock_s=q.wall_s,
                                  meets_deadline=None if not deadline else q.wall_s * slow <= deadline * 3600,
                                  note=q.note, **common))
    # pay-as-you-go first, then commitments (whose per-run figure assumes other work fills the term)
    return sorted(out, key=lambda o: (o.commitment_years is not None, o.usd_per_training_run is None,
                                      o.usd_per_training_run or o.usd_per_month or 0))


def purchase_reason(w: Workload, cand: Candidate, table: list[PurchaseOption]) -> str:
    """Why the chosen option, in the figure it won on; empty when the spec named the option."""
    if w.constraints.purchase != "auto":
        return ""
    chosen = next(o for o in table if o.chosen)
    auto = purchase_options(w.kind, "auto")
    weighed = [o for o in table if o.purchase in auto and not o.chosen]
    if w.kind == "inference":
        return f"bought {chosen.purchase} (serving's auto weighs no commitment; see purchase_options)"
    beaten = [f"{o.purchase} ${o.usd_per_training_run:,.0f}" + (" misses the deadline" if o.meets_deadline is False else "")
              for o in weighed if o.usd_per_training_run is not None]
    missing = [o for o in auto if o not in {x.purchase for x in table}]
    text = f"bought {chosen.purchase} at ${chosen.usd_per_training_run:,.0f}/run"
    if beaten:
        text += " vs " + ", ".join(beaten)
    if missing:
        text += f" ({'/'.join(missing)} not priced for {cand.itype.name})"
    return text


def storage_section(w: Workload, cand: Candidate) -> PlanStorage:
    s = run_storage(w, cand.perf.tokens_per_s, cand.nodes)
    source, day = storage_source()
    fsx = s.fsx
    return PlanStorage(dataset_bytes=s.dataset_bytes, checkpoint_bytes=s.checkpoint_bytes,
                       checkpoint_interval_s=s.checkpoint_interval_s, read_mb_s=s.read_mb_s, write_mb_s=s.write_mb_s,
                       checkpoint_write_s=s.checkpoint_write_s, recommendation=s.recommendation, reason=s.reason,
                       fsx=PlanFsx(deployment_type=fsx.deployment_type,
                                   per_unit_storage_throughput=fsx.per_unit_storage_throughput,
                                   storage_capacity_gib=fsx.storage_capacity_gib, throughput_mb_s=fsx.throughput_mb_s,
                                   usd_per_month=fsx.usd_per_month, price_source=source, price_date=day,
                                   price_estimated=fsx.price_estimated))
