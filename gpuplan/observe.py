"""`gpuplan observe`: plan against actual, from the CloudWatch metrics of each deployed workload.

SageMaker endpoints publish ModelLatency (microseconds, the container's time per request),
Invocations and ConcurrentRequestsPerModel under AWS/SageMaker with EndpointName and VariantName
(SageMaker guide, "Monitor SageMaker AI with Amazon CloudWatch"); training nodes publish tokens/s and
step time under TRAINING_NAMESPACE with a Workload dimension."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

from botocore.exceptions import BotoCoreError, ClientError

from gpuplan.aws.calls import AwsError, _reason, client
from planner.workload.plan import Plan

VARIANT = "AllTraffic"  # components/inference.py VARIANT
TRAINING_NAMESPACE = "gpuplan/training"


def endpoint_name(stem: str, instance_type: str) -> str:
    """The name components/inference.py gives the endpoint (kept equal by a test)."""
    return re.sub(r"[^a-zA-Z0-9]+", "-", f"{stem}-{instance_type}").strip("-")[:63].rstrip("-")


@dataclass
class Observation:
    workload: str
    metric: str
    planned: float | None
    actual: float | None
    unit: str

    @property
    def ratio(self) -> float | None:
        return self.actual / self.planned if self.actual is not None and self.planned else None


def since_seconds(text: str) -> int:
    """'7d', '12h', '30m' → seconds."""
    match = re.fullmatch(r"(\d+)([dhm])", text.strip())
    if not match or int(match.group(1)) == 0:
        raise ValueError("--since: give a duration such as 7d, 12h or 30m")
    return int(match.group(1)) * {"d": 86400, "h": 3600, "m": 60}[match.group(2)]


def _average(cw, namespace: str, metric: str, dims: dict, start, end, stat: str = "Average") -> float | None:
    period = max(60, int((end - start).total_seconds()) // 60 * 60)
    answer = cw.get_metric_statistics(Namespace=namespace, MetricName=metric, StartTime=start, EndTime=end,
                                      Period=period, Statistics=[stat],
                                      Dimensions=[{"Name": k, "Value": v} for k, v in dims.items()])
    points = answer.get("Datapoints", [])
    if not points:
        return None
    return sum(p[stat] for p in points) / len(points) if stat == "Average" else sum(p[stat] for p in points)


def observe(plans: list[Plan], output_tokens: dict[str, int], region: str, since_s: int, now=None) -> list[Observation]:
    """Each plan's figures against CloudWatch's over the last `since_s` seconds; one line on an AWS fault."""
    end = now or datetime.now(timezone.utc)
    start = end - timedelta(seconds=since_s)
    cw = client("cloudwatch", region)
    out: list[Observation] = []
    try:
        for p in plans:
            perf = p.performance
            if p.kind == "inference":
                dims = {"EndpointName": endpoint_name(p.workload, p.choice.instance_type), "VariantName": VARIANT}
                latency_us = _average(cw, "AWS/SageMaker", "ModelLatency", dims, start, end)
                planned_s = perf.time_to_first_token_s + (output_tokens.get(p.workload, 1) - 1) * perf.inter_token_latency_s
                invocations = _average(cw, "AWS/SageMaker", "Invocations", dims, start, end, "Sum")
                concurrent = _average(cw, "AWS/SageMaker", "ConcurrentRequestsPerModel", dims, start, end)
                out += [Observation(p.workload, "request latency", planned_s,
                                    None if latency_us is None else latency_us / 1e6, "s"),
                        Observation(p.workload, "requests/s", None,
                                    None if invocations is None else invocations / since_s, "1/s"),
                        Observation(p.workload, "concurrent requests", p.layout.sequences_in_flight, concurrent, "")]
            else:
                dims = {"Workload": p.workload}
                out += [Observation(p.workload, "training tokens/s", perf.training_tokens_per_s,
                                    _average(cw, TRAINING_NAMESPACE, "TokensPerSecond", dims, start, end), "tokens/s"),
                        Observation(p.workload, "step time", perf.step_time_s,
                                    _average(cw, TRAINING_NAMESPACE, "StepTimeSeconds", dims, start, end), "s")]
    except (ClientError, BotoCoreError) as exc:
        raise AwsError(f"CloudWatch ({region}): {_reason(exc)}") from None
    return out


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:,.3g}"


def render_table(rows: list[Observation]) -> str:
    lines = [f"{'workload':<24} {'metric':<22} {'planned':>10} {'actual':>10} {'actual/plan':>11}"]
    lines += [f"{r.workload:<24} {r.metric:<22} {_cell(r.planned):>10} {_cell(r.actual):>10} {_cell(r.ratio):>11}"
              for r in rows]
    return "\n".join(lines) + "\n"


def render_markdown(rows: list[Observation]) -> str:
    lines = ["| workload | metric | planned | actual | actual/plan |", "|---|---|---:|---:|---:|"]
    lines += [f"| {r.workload} | {r.metric} | {_cell(r.planned)} | {_cell(r.actual)} | {_cell(r.ratio)} |" for r in rows]
    return "\n".join(lines) + "\n"


def render_json(rows: list[Observation]) -> str:
    return json.dumps([{**asdict(r), "ratio": r.ratio} for r in rows], indent=2) + "\n"
