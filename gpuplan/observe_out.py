"""`gpuplan observe --out FILE`: what CloudWatch showed, written as calibration input that
`gpuplan calibrate` reads (gpuplan/measurements.py read_observation), one record per workload.

Each record pins what ran (the plan's instance type, engine and layout, the spec's model and token
lengths) and carries the measured figures in planner/physics/calibration.py METRICS names, SI units:
- training: TokensPerSecond, as published by the nodes (whole job) → training_tokens_per_s;
- serving: SageMaker ModelLatency is the whole request, TTFT + (output − 1) × ITL (the decode loop).
  CloudWatch does not split it, so the record keeps the planned TTFT and assigns the rest to ITL:
  ITL = (latency − TTFT_planned) / (output − 1). With long outputs TTFT is a small share of the
  request, so an error in it moves ITL little; a latency below the planned TTFT yields no record."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

from planner.workload.plan import Plan
from planner.workload.spec import Workload

from gpuplan.observe import Observation

FORMAT = "gpuplan-observation"
VERSION = 1


def _actual(rows: list[Observation], workload: str, metric: str) -> float | None:
    return next((r.actual for r in rows if r.workload == workload and r.metric == metric), None)


def _serving(p: Plan, w: Workload, rows: list[Observation]) -> dict | None:
    latency_s = _actual(rows, p.workload, "request latency")
    out = w.serving.output_tokens
    ttft_s = p.performance.time_to_first_token_s
    if latency_s is None or out < 2 or latency_s <= ttft_s or p.layout.pipeline_parallel != 1 or p.engine is None:
        return None
    per_replica = p.layout.batch_per_replica or math.ceil((p.layout.sequences_in_flight or 1) / p.layout.replicas)
    return {"kind": "serving", "engine": p.engine, "concurrency": per_replica, "prompt_tokens": w.serving.prompt_tokens,
            "output_tokens": out, "metrics": {"inter_token_latency_s": (latency_s - ttft_s) / (out - 1)}}


def _training(p: Plan, w: Workload, rows: list[Observation]) -> dict | None:
    tokens_per_s = _actual(rows, p.workload, "training tokens/s")
    lay = p.layout
    if tokens_per_s is None or not (lay.micro_batch and lay.microbatches):
        return None
    return {"kind": "training", "precision": w.precision, "sequence_length": w.training.sequence_length,
            "global_batch_sequences": lay.micro_batch * lay.microbatches * lay.data_parallel,
            "metrics": {"training_tokens_per_s": tokens_per_s}}


def calibration_input(plans: list[Plan], workloads: dict[str, Workload], rows: list[Observation], region: str,
                      since: str, now: datetime | None = None) -> str:
    """The JSON `gpuplan calibrate` reads back; workloads with nothing measured are left out."""
    date = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d")
    records = []
    for p in plans:
        w = workloads[p.workload]
        if w.model.preset is None:
            continue  # calibrate matches by preset; a custom architecture has none
        record = (_serving if p.kind == "inference" else _training)(p, w, rows)
        if record is None:
            continue
        lay = p.layout
        records.append({"workload": p.workload, "model": w.model.preset, "instance_type": p.choice.instance_type,
                        "nodes": p.choice.nodes if p.kind == "training" else 1,
                        "tensor_parallel": lay.tensor_parallel, "pipeline_parallel": lay.pipeline_parallel,
                        "data_parallel": lay.data_parallel, "date": date,
                        "source": f"cloudwatch:{region}:{p.workload}:last {since}", **record})
    return json.dumps({"format": FORMAT, "version": VERSION, "observations": records}, indent=2) + "\n"
