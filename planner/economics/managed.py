"""Self-hosting against a managed per-token API (Amazon Bedrock on-demand) for the same model: the
cost per request each way at the spec's prompt and output lengths, and the traffic where they cross."""

from __future__ import annotations

from functools import cache

from planner.workload.plan import ManagedApi
from planner.workload.spec import Workload


@cache
def managed_prices() -> dict:
    from planner.workload.bundled import load  # compiled JSON while current (planner/workload/bundled.py)

    return load("managed")


def compare_managed(w: Workload, usd_per_hour: float, output_tokens_per_s: float) -> ManagedApi | None:
    """None when no managed API in the data serves this preset in this region.

    Self-hosted: the endpoint runs its autoscaling floor (the plan's nodes) every hour it is up; above
    what the floor serves, target tracking adds instances in step with the mean load, so each extra
    request costs usd_per_hour ÷ (requests/s the floor serves × 3600). Managed: tokens × list price.
    They cross where the floor's monthly cost equals the managed bill, if the extra-request cost is
    below the managed per-request price (else managed stays cheaper at any traffic)."""
    data = managed_prices()
    entry = data["models"].get(w.model.preset or "")
    region = (entry or {}).get("regions", {}).get(w.constraints.region)
    if not region:
        return None
    s = w.serving
    per_in, per_out = region["usd_per_million_input_tokens"], region["usd_per_million_output_tokens"]
    per_request = (s.prompt_tokens * per_in + s.output_tokens * per_out) / 1e6
    tokens_per_request = s.prompt_tokens + s.output_tokens
    days = s.hours_per_month / 24
    floor_usd = usd_per_hour * s.hours_per_month
    floor_rps = output_tokens_per_s / s.output_tokens  # requests/s the floor completes at its planned load
    extra_request_usd = usd_per_hour / (floor_rps * 3600)
    break_even = floor_usd / (days * per_request) if extra_request_usd < per_request else None
    result = ManagedApi(service=data["service"], model_id=entry["model_id"], usd_per_million_input_tokens=per_in,
                        usd_per_million_output_tokens=per_out, price_source=data["source"],
                        price_date=str(data["date"]), usd_per_request=per_request,
                        self_hosted_usd_per_month_floor=floor_usd,
                        self_hosted_max_requests_per_day=floor_rps * 86400 / s.peak_to_mean,
                        break_even_requests_per_day=break_even,
                        note=region.get("note", "") and f"managed price: {region['note']}")
    if s.requests_per_day is None:
        return result
    monthly_requests = s.requests_per_day * days
    mean_rps = s.requests_per_day / 86400
    self_usd = max(floor_usd, mean_rps / floor_rps * floor_usd)
    managed_usd = monthly_requests * per_request
    notes = [result.note] if result.note else []
    if floor_rps < mean_rps * s.peak_to_mean <= 2 * floor_rps:
        notes.append(f"peak {mean_rps * s.peak_to_mean:,.1f} req/s is over what the planned nodes serve "
                     f"({floor_rps:,.1f} req/s): the endpoint scales out at peak; the self-hosted cost counts "
                     "instance-hours at the mean load, so it is a lower bound")
    if mean_rps * s.peak_to_mean > 2 * floor_rps:
        notes.append(f"peak {mean_rps * s.peak_to_mean:,.1f} req/s is over twice what the planned nodes serve "
                     f"({floor_rps:,.1f} req/s): raise serving.concurrent_requests so the plan is sized for it")
    return result.model_copy(update=dict(
        requests_per_day=s.requests_per_day, managed_usd_per_month=managed_usd, self_hosted_usd_per_month=self_usd,
        self_hosted_usd_per_million_tokens=self_usd / (monthly_requests * tokens_per_request / 1e6),
        managed_usd_per_million_tokens=per_request / tokens_per_request * 1e6,
        cheaper="self-hosted" if self_usd < managed_usd else "managed", note="; ".join(notes)))
