"""Correction factors from a team's own measurements, and the one place a plan's performance figures
are multiplied by them.

A factor is measured ÷ predicted for one (accelerator, engine, metric), the geometric mean over the
results it came from (ratios multiply, so their mean is taken in log space); its spread is the
geometric standard deviation of those ratios. A corrected figure never passes a physical roof: the
estimators reach a roof's share `efficiency` (planner/physics/efficiency.py), so a speed-up is capped at
1 / efficiency of the roof that binds (MFU ≤ 1 for training), and the plan says when it was capped.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml
from pydantic import BaseModel, Field, ValidationError

from planner.physics import efficiency
from planner.workload.errors import SpecError
from planner.workload.plan import Plan
from planner.workload.yamlsafe import load_text

# metric → (the PlanPerformance field it corrects, True when a larger value is faster)
METRICS: dict[str, tuple[str, bool]] = {
    "output_tokens_per_s": ("output_tokens_per_s", True),
    "time_to_first_token_s": ("time_to_first_token_s", False),
    "inter_token_latency_s": ("inter_token_latency_s", False),
    "training_tokens_per_s": ("training_tokens_per_s", True),
}
LABELS = {"output_tokens_per_s": "output tokens/s", "time_to_first_token_s": "TTFT",
          "inter_token_latency_s": "ITL", "training_tokens_per_s": "training tokens/s"}


class Evidence(BaseModel):
    """One measured result, against what the planner predicted for the same hardware and layout."""
    source: str  # the file it was read from
    date: str
    instance_type: str
    model: str
    layout: str
    measured: float
    predicted: float


class Factor(BaseModel):
    accelerator: str
    engine: str
    metric: str
    factor: float = Field(gt=0)  # measured ÷ predicted, geometric mean
    spread: float = Field(ge=1)  # geometric standard deviation of the ratios (1 = they all agree)
    instance_types: list[str]
    results: list[Evidence]

    @property
    def newest(self) -> str:
        return max(r.date for r in self.results)


class Calibration(BaseModel):
    factors: list[Factor]

    def find(self, accelerator: str, engine: str, metric: str) -> Factor | None:
        for f in self.factors:
            if f.accelerator == accelerator and f.engine == engine and f.metric == metric:
                return f
        return None


def fit(accelerator: str, engine: str, metric: str, results: list[Evidence]) -> Factor:
    """The geometric mean of measured/predicted and its geometric standard deviation."""
    logs = [math.log(r.measured / r.predicted) for r in results]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)) if len(logs) > 1 else 0.0
    return Factor(accelerator=accelerator, engine=engine, metric=metric, factor=math.exp(mean),
                  spread=math.exp(sd), instance_types=sorted({r.instance_type for r in results}), results=results)


def fit_all(evidence: dict[tuple[str, str, str], list[Evidence]]) -> Calibration:
    return Calibration(factors=[fit(a, e, m, rows) for (a, e, m), rows in sorted(evidence.items())])


def load(path: str | Path) -> Calibration:
    """A calibration file written by `gpuplan calibrate`; a bad one is a SpecError naming the field."""
    path = Path(path)
    try:
        data = load_text(path.read_text())
    except OSError as exc:
        raise SpecError(f"cannot read ({exc.strerror})", path="--calibration", file=str(path)) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"not YAML ({str(exc).splitlines()[0]})", path="--calibration", file=str(path)) from None
    try:
        cal = Calibration.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise SpecError(f"{where}: {err['msg']}", path="--calibration", file=str(path)) from None
    for f in cal.factors:
        if f.metric not in METRICS:
            raise SpecError(f"factors: metric {f.metric!r} is not one of {', '.join(METRICS)}",
                            path="--calibration", file=str(path))
    return cal


def dump(cal: Calibration) -> str:
    return ("# Written by `gpuplan calibrate`: measured ÷ predicted per (accelerator, engine, metric).\n"
            + yaml.safe_dump(cal.model_dump(mode="json"), sort_keys=False, width=120, allow_unicode=True))


def speedup_cap(plan: Plan) -> float:
    """The most a figure may speed up before the binding roof is passed: 1 / the share of it the
    estimator assumed (training: 1 / MFU, since MFU cannot exceed 1)."""
    perf = plan.performance
    if plan.kind == "training" and perf.model_flops_utilization:
        return 1 / perf.model_flops_utilization
    neuron = plan.choice.accelerator_vendor == "aws-neuron"
    if perf.bound == "compute":
        return 1 / (efficiency.NEURON_GEMM_EFFICIENCY if neuron
                    else max(efficiency.DECODE_GEMM_EFFICIENCY_BY_GENERATION.values()))
    # the highest share any GPU's stream is assumed to reach (HBM or GDDR), as for compute: no part passes its roof
    return 1 / (efficiency.NEURON_MEMORY_BANDWIDTH_EFFICIENCY if neuron
                else max(efficiency.MEMORY_BANDWIDTH_EFFICIENCY, efficiency.GDDR_BANDWIDTH_EFFICIENCY))


def _engine(plan: Plan) -> str:
    return plan.engine or ("neuron" if plan.choice.accelerator_vendor == "aws-neuron" else "training")


def apply(plan: Plan, cal: Calibration) -> Plan:
    """The plan with every figure a factor covers multiplied by it, each saying so in the warnings.
    Dependent figures (per replica, $/1M tokens, step time, time to train) move with their metric."""
    perf = plan.performance.model_dump()
    cost = plan.cost.model_dump()
    band = perf.get("band") or {}
    notes: list[str] = []
    cap = speedup_cap(plan)
    for metric, (field, faster_is_larger) in METRICS.items():
        found = cal.find(plan.choice.accelerator, _engine(plan), metric)
        if found is None or perf.get(field) is None:
            continue
        speedup = found.factor if faster_is_larger else 1 / found.factor
        capped = speedup > cap
        speedup = min(speedup, cap)
        scale = speedup if faster_is_larger else 1 / speedup
        moved = {field: scale}
        if metric == "output_tokens_per_s":
            moved["output_tokens_per_s_per_replica"] = scale
            if cost.get("usd_per_million_output_tokens") is not None:
                cost["usd_per_million_output_tokens"] /= scale
        if metric == "training_tokens_per_s":
            moved.update({dependent: 1 / scale for dependent in ("step_time_s", "time_to_train_s", "wall_clock_s")})
            moved.update({dependent: scale for dependent in ("achieved_tflops_per_device", "model_flops_utilization")})
            if cost.get("usd_per_training_run") is not None:
                cost["usd_per_training_run"] /= scale
        for name, by in moved.items():
            if perf.get(name) is not None:
                band_before = band.get(name)
                perf[name] *= by
                if band_before is not None:
                    band[name] = calibrated_band(name, perf[name], by, band_before, found, cap)
        notes.append(note(metric, perf[field], scale, found, capped))
    if not notes:
        return plan
    return plan.model_copy(update={"performance": plan.performance.model_validate(perf),
                                   "cost": plan.cost.model_validate(cost), "warnings": [*plan.warnings, *notes]})


# Two-sided 80% interval of a normal distribution: ±1.2816 standard deviations (in log space here).
Z_80 = 1.2816


def calibrated_band(name: str, value: float, scale: float, band: list[float], f: Factor,
                    cap: float) -> list[float]:
    """The 80% band of a calibrated figure. From two or more results it narrows to the calibration's own
    spread (geometric standard deviation, so value ÷ spread^z … value × spread^z); a single result says
    nothing of spread, so the estimator's band only moves with the factor. Either way no edge passes the
    physical roof: a figure that grows with speed (throughput) at most `cap` × the uncorrected estimate,
    one that shrinks (a time) at least the uncorrected estimate ÷ `cap`."""
    if len(f.results) >= 2:
        low, high = value / f.spread ** Z_80, value * f.spread ** Z_80
    else:
        low, high = band[0] * scale, band[1] * scale
    estimate = value / scale
    if not (name.endswith("_s") and not name.endswith("per_s")):  # a rate or a share: grows with speed
        high = min(high, estimate * cap)
    else:
        low = max(low, estimate / cap)
    return [low, high]


def shown(metric: str, value: float) -> str:
    if metric.endswith("_s") and not metric.endswith("per_s"):
        return f"{value * 1e3:,.0f} ms" if value >= 0.1 else f"{value * 1e3:,.1f} ms"
    return f"{value:,.0f}"


def note(metric: str, value: float, scale: float, f: Factor, capped: bool) -> str:
    """"ITL 31 ms, ×1.18 from 6 measurements on g6e.12xlarge / vLLM, 2026-11-20"."""
    text = (f"calibrated: {LABELS[metric]} {shown(metric, value)}, ×{scale:.2f} from {len(f.results)} measurement(s) "
            f"on {', '.join(f.instance_types)} / {f.engine}, {f.newest} (spread ×{f.spread:.2f})")
    if capped:
        text += "; capped at the physical roof (the measured factor would pass it)"
    return text
