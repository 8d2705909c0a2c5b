"""80% bands around every predicted figure, from how far the estimators miss on sources never fitted.

bench/accuracy.py --write-bands predicts each published source with the constants of
planner/physics/efficiency.py fitted WITHOUT it (leave-one-source-out) and stores, per class (platform ×
metric; a GPU mixture-of-experts model's rows as a class of their own where two sources measured it), the 10th and
90th percentile of measured / predicted in planner/data/accuracy_bands.yaml
with the rows, sources and date it used, widened about its centre until the band drawn without a source
holds 80% of that source's rows (bench/accuracy.py band_classes: sources differ more than rows of one
source do). A prediction p of that class then lies in [p · q10, p · q90] for 80% of the runs of a source
it never saw; a time derived from a throughput inverts it. A first-token class may carry `offset_s`, a fixed
request-path cost the estimate leaves out (bench/accuracy.py OFFSET_METRICS): its band is (p + offset) · [q10, q90].
`constraints.confidence: likely` checks deadlines and latency targets at the band's slow edge.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from planner.workload.bundled import load


DATA = Path(__file__).resolve().parents[1] / "data" / "accuracy_bands.yaml"

# Plan field -> how it scales with the class's measured metric. direct: like the metric (a
# throughput, or a latency against a latency class); inverse: a time that scales as 1/throughput.
TRAINING_FIELDS = {"achieved_tflops_per_device": "direct", "training_tokens_per_s": "direct",
                   "model_flops_utilization": "direct", "step_time_s": "inverse", "time_to_train_s": "inverse",
                   "wall_clock_s": "inverse"}
SERVING_FIELDS = {"output_tokens_per_s": ("serving tokens/s", "direct"),
                  "output_tokens_per_s_per_replica": ("serving tokens/s", "direct"),
                  "time_to_first_token_s": ("TTFT", "direct"), "inter_token_latency_s": ("ITL", "direct")}
MEMORY_METRIC = "training peak memory"


@cache
def bands() -> dict:
    """accuracy_bands.yaml's content, from its compiled JSON while that is current (planner/workload/bundled.py)."""
    return load("accuracy_bands")


def ratio_quantiles(platform: str, metric: str, moe: bool = False, adapters: bool = False) -> tuple[float, float] | None:
    """(q10, q90) of measured / predicted for the class, or None where no source measured it. A mixture-of-experts
    model on a GPU takes the MoE rows' own class where one is stored (two or more sources: bench/accuracy.py
    MODEL_CLASS_MIN_SOURCES): routing, expert GEMMs and all-to-all miss in ways dense rows never show (its
    throughput rows sit 23% fast, and the GPU class's band held 59% of them); a LoRA or QLoRA run's peak memory
    (`adapters`) the adapter runs' class (bench/accuracy.py ADAPTER_CLASS)."""
    entry = _entry(platform, metric, moe, adapters)
    return (entry["q10"], entry["q90"]) if entry else None


def _entry(platform: str, metric: str, moe: bool, adapters: bool = False) -> dict | None:
    classes = bands()["classes"]
    return ((moe and platform == "gpu" and classes.get(f"moe/{metric}"))
            or (adapters and platform == "gpu" and classes.get(f"lora/{metric}")) or classes.get(f"{platform}/{metric}"))


def _training_metric(platform: str) -> str:
    return "training sequences/s" if platform == "neuron" else "training TFLOP/s"


def offset_s(platform: str, metric: str, moe: bool = False) -> float:
    """The class's fixed request-path allowance in seconds (0 where its band has none)."""
    return (_entry(platform, metric, moe) or {}).get("offset_s", 0.0)


def _edge(value: float, q: tuple[float, float], how: str, offset: float = 0.0) -> list[float]:
    low, high = ((value + offset) * q[0], (value + offset) * q[1]) if how == "direct" else (value / q[1], value / q[0])
    return [low, high]


def performance_band(platform: str, kind: str, fields: dict[str, float | None],
                     moe: bool = False) -> dict[str, list[float]]:
    """[low, high] for every predicted field that has a value and a measured class (`moe`: ratio_quantiles)."""
    out = {}
    for name, value in fields.items():
        if value is None:
            continue
        if kind != "inference" and name in TRAINING_FIELDS:
            metric, how = _training_metric(platform), TRAINING_FIELDS[name]
        elif kind == "inference" and name in SERVING_FIELDS:
            metric, how = SERVING_FIELDS[name]
        else:
            continue
        q = ratio_quantiles(platform, metric, moe)
        if q:
            out[name] = _edge(value, q, how, offset_s(platform, metric, moe))
    return out


def memory_band(platform: str, required_bytes: float, adapters: bool = False) -> dict[str, list[float]]:
    q = ratio_quantiles(platform, MEMORY_METRIC, adapters=adapters)
    return {"required_bytes": _edge(required_bytes, q, "direct")} if q else {}


def memory_fit_factor(platform: str, confidence: str, adapters: bool = False) -> float:
    """Multiplier on a training run's predicted per-device memory when checking that it fits: 1 for
    `expected`; for `likely`, q90 of measured / predicted peaks (the band's high edge), never below
    the estimate itself (a class whose runs all peaked lower is not a reason to pack tighter)."""
    if confidence == "expected":
        return 1.0
    q = ratio_quantiles(platform, MEMORY_METRIC, adapters=adapters)
    return max(1.0, q[1]) if q else 1.0


def slow_edge(platform: str, metric: str, confidence: str, value: float, moe: bool = False) -> float:
    """A predicted latency in seconds at the band's slow edge: (value + offset) · q90 under `likely`, never below the
    estimate (slow_factor); the estimate itself under `expected`. Rises with `value`, so the search's fewest nodes
    that meet a target stay the fewest."""
    if confidence == "expected":
        return value
    return max(value, (value + offset_s(platform, metric, moe)) * slow_factor(platform, metric, confidence, moe))


def slow_factor(platform: str, metric: str, confidence: str, moe: bool = False) -> float:
    """Multiplier on a predicted time (or divisor of a throughput) at the band's slow edge:
    1 for `expected`; for `likely`, 1/q10 of a throughput class or q90 of a latency class, never below
    1 (as memory_fit_factor): a class whose runs all beat the estimate (neuron ITL's q90 < 1) must not
    let `likely` pass a target that the estimate itself misses."""
    if confidence == "expected":
        return 1.0
    if metric == "training":
        metric = _training_metric(platform)
    q = ratio_quantiles(platform, metric, moe)
    if q is None:
        return 1.0
    return max(1.0, q[1] if metric in ("TTFT", "ITL") else 1 / q[0])
