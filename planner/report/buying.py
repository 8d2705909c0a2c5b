"""The buying decisions of a plan as text: purchase options, the managed API, storage and rent vs buy.
Pure functions of the plan model, shared by the Markdown and table renderers and the PR cost comment."""

from __future__ import annotations

from planner.report.mdsafe import md_text
from planner.workload.plan import Plan, PurchaseOption
from planner.hardware.units import GIB

TB = 1e12


def _usd(value: float) -> str:
    return f"${value:,.2f}" if value < 100 else f"${value:,.0f}"


def _option_cost(p: Plan, o: PurchaseOption) -> str:
    committed = f" of {_usd(o.usd_per_hour * 8760 * o.commitment_years)} committed" if o.commitment_years else ""
    if p.kind == "inference":
        return f"{_usd(o.usd_per_month)}/month{committed}"
    if o.usd_per_training_run is None:
        return "cannot"
    return f"{_usd(o.usd_per_training_run)}/run{committed}"


def _option_time(o: PurchaseOption) -> str:
    if o.wall_clock_s is None:
        return ""
    late = " (misses deadline)" if o.meets_deadline is False else ""
    return f"{o.wall_clock_s / 3600:,.0f} h{late}"


def purchase_rows(p: Plan) -> list[tuple[str, str, str, str, str]]:
    """(option, $/h, cost, time, note) per option, the chosen one marked ★."""
    return [(("★ " if o.chosen else "") + o.purchase, f"{o.usd_per_hour:,.2f}", _option_cost(p, o), _option_time(o),
             (o.note + "; " if o.note else "") + f"price {o.price_date}" + (" (estimate)" if o.price_estimated else ""))
            for o in p.purchase_options]


def managed_lines(p: Plan) -> list[str]:
    m = p.managed
    if m is None:
        return []
    lines = [f"{m.service} {m.model_id}: ${m.usd_per_million_input_tokens:g} in / ${m.usd_per_million_output_tokens:g} "
             f"out per 1M tokens (price {m.price_date}); ${m.usd_per_request * 1000:,.3f} per 1,000 requests"]
    if m.break_even_requests_per_day is None:
        lines.append(f"self-hosting never breaks even: at full use a request costs more than the managed "
                     f"${m.usd_per_request:.6f} (floor ${m.self_hosted_usd_per_month_floor:,.0f}/month)")
    else:
        lines.append(f"self-hosting breaks even at {m.break_even_requests_per_day:,.0f} requests/day (floor "
                     f"${m.self_hosted_usd_per_month_floor:,.0f}/month serves up to "
                     f"{m.self_hosted_max_requests_per_day:,.0f}/day at this peak-to-mean)")
    if m.requests_per_day is not None:
        lines.append(f"at {m.requests_per_day:,.0f} requests/day: self-hosted ${m.self_hosted_usd_per_month:,.0f}/month "
                     f"(${m.self_hosted_usd_per_million_tokens:,.2f} per 1M tokens) vs managed "
                     f"${m.managed_usd_per_month:,.0f}/month (${m.managed_usd_per_million_tokens:,.2f} per 1M): "
                     f"{m.cheaper} is cheaper")
    if m.note:
        lines.append(m.note)
    return lines


def storage_lines(p: Plan) -> list[str]:
    s = p.storage
    if s is None:
        return []
    lines = [f"reads {s.read_mb_s:,.1f} MB/s ({s.dataset_bytes / TB:,.2f} TB dataset); checkpoint "
             f"{s.checkpoint_bytes / GIB:,.0f} GiB every {s.checkpoint_interval_s / 60:g} min needs "
             f"{s.write_mb_s:,.0f} MB/s (written in {s.checkpoint_write_s:,.0f} s)", s.reason]
    f = s.fsx
    lines.append(f"FSx for Lustre, if provisioned: {f.deployment_type} {f.storage_capacity_gib:,} GiB at "
                 f"{f.per_unit_storage_throughput} MB/s/TiB = {f.throughput_mb_s:,.0f} MB/s, ${f.usd_per_month:,.0f}/month"
                 + (" (us-east-1 rate)" if f.price_estimated else ""))
    return lines


def rent_lines(p: Plan) -> list[str]:
    lines = []
    for r in p.rent_vs_buy:
        if r.break_even_utilization is None:
            verdict = "renting stays cheaper even at 100% use"
        else:
            verdict = f"owning wins above {r.break_even_utilization:.0%} utilisation"
        lines.append(f"{r.owned_type} vs {r.purchase}: owned ${r.owned_usd_per_year:,.0f}/year vs "
                     f"${r.cloud_usd_per_year_at_full_use:,.0f}/year rented at full use: {verdict}")
    return lines


def markdown_sections(p: Plan) -> list[str]:
    out: list[str] = []
    if p.purchase_options:
        out += ["| purchase | $/h | cost | time | note |", "|---|---:|---:|---:|---|"]
        out += [f"| {' | '.join(md_text(cell) for cell in row)} |" for row in purchase_rows(p)] + [""]
    for title, lines in (("Managed API", managed_lines(p)), ("Storage", storage_lines(p)),
                         ("Rent vs buy", rent_lines(p))):
        if lines:
            out += [f"**{title}**", ""] + [f"- {md_text(line)}" for line in lines] + [""]
    return out


def buying_summary(p: Plan) -> str:
    """One line per plan for the PR comment: what it buys, the best alternative purchase, the managed
    API verdict and the storage it needs."""
    parts = []
    chosen = next((o for o in p.purchase_options if o.chosen), None)
    others = [o for o in p.purchase_options if not o.chosen and o.meets_deadline is not False
              and (o.usd_per_training_run or o.usd_per_month) is not None]
    if chosen is not None:
        parts.append(f"buys {chosen.purchase} at {_option_cost(p, chosen)}")
        if others:
            best = others[0]
            parts.append(f"cheapest other: {best.purchase} at {_option_cost(p, best)}"
                         + (f" ({best.commitment_years}-year commitment)" if best.commitment_years else ""))
    m = p.managed
    if m is not None:
        if m.break_even_requests_per_day is None:
            parts.append(f"{m.model_id} on Bedrock is cheaper at any traffic")
        else:
            parts.append(f"self-hosting beats Bedrock above {m.break_even_requests_per_day:,.0f} requests/day")
        if m.cheaper is not None:
            parts.append(f"at {m.requests_per_day:,.0f}/day {m.cheaper} is cheaper")
    if p.storage is not None:
        parts.append("storage: S3 streaming" if p.storage.recommendation == "s3" else
                     f"storage: FSx for Lustre {p.storage.fsx.storage_capacity_gib:,} GiB at "
                     f"{p.storage.fsx.per_unit_storage_throughput} MB/s/TiB")
    best_own = min((r for r in p.rent_vs_buy if r.break_even_utilization is not None and r.purchase == "on-demand"),
                   key=lambda r: r.break_even_utilization, default=None)
    if best_own is not None:
        parts.append(f"owning {best_own.owned_type} wins above {best_own.break_even_utilization:.0%} use")
    return "; ".join(parts)
