"""Readers for the benchmark files teams already produce, unchanged: `vllm bench serve --save-result`
JSON, GuideLLM benchmark reports, NVIDIA AIPerf / genai-perf profile exports, and gpuplan's
documented training-run CSV.

Each reader returns Measurements in SI units (seconds, tokens/s); a file missing a field the
comparison needs is a SpecError naming the file and the field (exit 2)."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from planner.workload.errors import SpecError

TRAINING_COLUMNS = ("model", "instance_type", "nodes", "tensor_parallel", "pipeline_parallel", "data_parallel",
                    "precision", "sequence_length", "global_batch_sequences", "tokens_per_s_per_device",
                    "peak_memory_per_device_gib", "date")


@dataclass
class Measurement:
    source: str
    kind: str  # "serving" or "training"
    model_id: str
    date: str
    instance_type: str | None = None
    engine: str | None = None
    tensor_parallel: int | None = None
    concurrency: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # planner/physics/calibration.py METRICS names, SI units
    training: dict[str, object] = field(default_factory=dict)


def _fail(path: Path, what: str) -> SpecError:
    return SpecError(what, path="RESULTS", file=str(path))


def _number(path: Path, data: dict, key: str, where: str = "") -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise _fail(path, f"{where}{key}: missing or not a non-negative number (got {json.dumps(value)[:40]})")
    return float(value)


def _positive(path: Path, data: dict, key: str, where: str = "") -> float:
    value = _number(path, data, key, where)
    if value <= 0:
        raise _fail(path, f"{where}{key}: must be above 0 (got {value:g})")
    return value


def read_vllm(path: Path, data: dict) -> Measurement:
    """vLLM `bench serve --save-result`: totals over `completed` requests, latencies in ms. Concurrency
    is `max_concurrency`, else the peak vLLM saw, else Little's law: throughput × mean request time."""
    completed = _positive(path, data, "completed")
    prompt = _positive(path, data, "total_input_tokens") / completed
    output = _positive(path, data, "total_output_tokens") / completed
    ttft_s = _positive(path, data, "mean_ttft_ms") / 1e3
    itl_key = "mean_itl_ms" if "mean_itl_ms" in data else "mean_tpot_ms"
    itl_s = _positive(path, data, itl_key) / 1e3
    throughput = _positive(path, data, "output_throughput")
    concurrency = data.get("max_concurrency") or data.get("max_concurrent_requests")
    if not concurrency:
        concurrency = _positive(path, data, "request_throughput") * (ttft_s + (output - 1) * itl_s)
    model = data.get("model_id")
    if not isinstance(model, str) or not model:
        raise _fail(path, "model_id: missing; the model the benchmark ran")
    date = str(data.get("date", ""))
    date = f"{date[:4]}-{date[4:6]}-{date[6:8]}" if len(date) >= 8 and date[:8].isdigit() else ""
    return Measurement(str(path), "serving", model, date, data.get("instance_type"), "vllm",
                       data.get("tensor_parallel_size"), max(1, round(concurrency)), round(prompt), round(output),
                       {"output_tokens_per_s": throughput, "time_to_first_token_s": ttft_s,
                        "inter_token_latency_s": itl_s})


def _guidellm_mean(path: Path, metrics: dict, key: str, where: str) -> float:
    block = (metrics.get(key) or {}).get("successful")
    if not isinstance(block, dict):
        raise _fail(path, f"{where}metrics.{key}.successful: missing (a GuideLLM distribution with mean)")
    return _positive(path, block, "mean", f"{where}metrics.{key}.successful.")


def _guidellm_concurrency(path: Path, bench: dict, metrics: dict, where: str) -> int:
    """The strategy's streams when it fixed them (synchronous = 1, concurrent = streams), else the
    mean concurrency GuideLLM measured (request_concurrency)."""
    strategy = ((bench.get("args") or bench.get("config") or {}).get("strategy") or {})
    if strategy.get("type_") == "synchronous":
        return 1
    if strategy.get("type_") == "concurrent" and isinstance(strategy.get("streams"), int):
        return strategy["streams"]
    return max(1, round(_guidellm_mean(path, metrics, "request_concurrency", where)))


def read_guidellm(path: Path, data: dict) -> list[Measurement]:
    """GuideLLM `benchmarks.json` (GenerativeBenchmarksReport): one generative_benchmark per strategy,
    each metric a distribution over successful requests (`metrics.X.successful.mean`), latencies in ms.
    Throughput is total output tokens ÷ benchmark duration, as vLLM's is (the per-second series'
    mean counts idle ramp seconds)."""
    report_model = (data.get("config") or {}).get("model") if isinstance(data.get("config"), dict) else None
    out = []
    for n, bench in enumerate(data["benchmarks"]):
        where = f"benchmarks[{n}]."
        if not isinstance(bench, dict) or bench.get("type_") != "generative_benchmark":
            raise _fail(path, f"{where}type_: expected generative_benchmark")
        metrics = bench.get("metrics")
        if not isinstance(metrics, dict):
            raise _fail(path, f"{where}metrics: missing")
        model = (bench.get("worker") or {}).get("backend_model") or report_model
        if not isinstance(model, str) or not model:
            raise _fail(path, f"{where}worker.backend_model: missing; the model the benchmark ran")
        output_total = (metrics.get("output_token_count") or {}).get("successful") or {}
        throughput = _positive(path, output_total, "total_sum", f"{where}metrics.output_token_count.successful.") \
            / _positive(path, bench, "duration", where)
        start = bench.get("start_time")
        date = (datetime.fromtimestamp(start, timezone.utc).strftime("%Y-%m-%d")
                if isinstance(start, (int, float)) and start > 0 else "")
        out.append(Measurement(
            f"{path}#{n}" if len(data["benchmarks"]) > 1 else str(path), "serving", model, date, data.get("instance_type"),
            None, None, _guidellm_concurrency(path, bench, metrics, where),
            round(_guidellm_mean(path, metrics, "prompt_token_count", where)),
            round(_guidellm_mean(path, metrics, "output_token_count", where)),
            {"output_tokens_per_s": throughput,
             "time_to_first_token_s": _guidellm_mean(path, metrics, "time_to_first_token_ms", where) / 1e3,
             "inter_token_latency_s": _guidellm_mean(path, metrics, "inter_token_latency_ms", where) / 1e3}))
    if not out:
        raise _fail(path, "benchmarks: empty; the report holds no benchmark")
    return out


def _whole(path: Path, record: dict, key: str, where: str) -> int:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _fail(path, f"{where}{key}: missing or not a whole number above 0 (got {json.dumps(value)[:40]})")
    return value


def read_observation(path: Path, data: dict) -> list[Measurement]:
    """`gpuplan observe --out` (gpuplan/observe_out.py): one record per observed workload, its setup
    pinned and its figures already in METRICS names and SI units."""
    records = data.get("observations")
    if not isinstance(records, list):
        raise _fail(path, "observations: missing; a list of observed workloads")
    out = []
    for n, r in enumerate(records):
        where = f"observations[{n}]."
        if not isinstance(r, dict) or r.get("kind") not in ("serving", "training"):
            raise _fail(path, f"{where}kind: expected serving or training")
        for key in ("model", "instance_type", "date", "source"):
            if not isinstance(r.get(key), str) or not r[key]:
                raise _fail(path, f"{where}{key}: missing")
        metrics = r.get("metrics")
        if not isinstance(metrics, dict) or not metrics:
            raise _fail(path, f"{where}metrics: missing")
        from planner.physics.calibration import METRICS

        unknown = next((k for k in metrics if k not in METRICS), None)
        if unknown is not None:
            raise _fail(path, f"{where}metrics.{unknown}: not one of {', '.join(METRICS)}")
        figures = {k: _positive(path, metrics, k, f"{where}metrics.") for k in metrics}
        layout = {k: _whole(path, r, k, where) for k in ("nodes", "tensor_parallel", "pipeline_parallel", "data_parallel")}
        if r["kind"] == "training":
            out.append(Measurement(r["source"], "training", r["model"], r["date"], r["instance_type"], "training",
                                   layout["tensor_parallel"], metrics=figures, training={
                                       **layout, "precision": str(r.get("precision") or "bf16"),
                                       "sequence_length": _whole(path, r, "sequence_length", where),
                                       "global_batch_sequences": _whole(path, r, "global_batch_sequences", where)}))
            continue
        if not isinstance(r.get("engine"), str):
            raise _fail(path, f"{where}engine: missing")
        out.append(Measurement(r["source"], "serving", r["model"], r["date"], r["instance_type"], r["engine"],
                               layout["tensor_parallel"], _whole(path, r, "concurrency", where),
                               _whole(path, r, "prompt_tokens", where), _whole(path, r, "output_tokens", where), figures))
    return out


def _stat(path: Path, data: dict, key: str) -> float:
    block = data.get(key)
    if not isinstance(block, dict):
        raise _fail(path, f"{key}: missing (an AIPerf/genai-perf metric block with avg)")
    return _positive(path, block, "avg", f"{key}.")


def _ms(path: Path, data: dict, key: str) -> float:
    unit = (data.get(key) or {}).get("unit", "ms")
    if unit != "ms":
        raise _fail(path, f"{key}.unit: expected ms (got {unit!r})")
    return _stat(path, data, key) / 1e3


def read_aiperf(path: Path, data: dict) -> Measurement:
    """AIPerf `profile_export_aiperf.json` / genai-perf `profile_export_genai_perf.json`: one block per
    metric (unit, avg, percentiles), the run's settings under input_config."""
    config = data.get("input_config") or {}
    endpoint = config.get("endpoint") or {}
    names = endpoint.get("model_names") or config.get("model") or []
    model = names[0] if isinstance(names, list) and names else names
    if not isinstance(model, str) or not model:
        raise _fail(path, "input_config.endpoint.model_names: missing; the model the benchmark ran")
    loadgen = config.get("loadgen") or {}
    concurrency = loadgen.get("concurrency") or config.get("concurrency")
    if not isinstance(concurrency, int) or concurrency <= 0:
        raise _fail(path, "input_config.loadgen.concurrency: missing; calibration needs a concurrency-mode run")
    output = _stat(path, data, "output_sequence_length")
    if "input_sequence_length" in data:
        prompt = _stat(path, data, "input_sequence_length")
    else:
        prompt = _stat(path, data, "total_isl") / _stat(path, data, "request_count")
    if "output_token_throughput" in data:
        throughput = _stat(path, data, "output_token_throughput")
    else:
        throughput = _stat(path, data, "total_osl") / _stat(path, data, "benchmark_duration")
    metrics = {"output_tokens_per_s": throughput, "time_to_first_token_s": _ms(path, data, "time_to_first_token")}
    if "inter_token_latency" in data:
        metrics["inter_token_latency_s"] = _ms(path, data, "inter_token_latency")
    date = str(data.get("start_time", ""))[:10]
    return Measurement(str(path), "serving", model, date, data.get("instance_type"), None, None,
                       concurrency, round(prompt), round(output), metrics)


def read_training_csv(path: Path, text: str) -> list[Measurement]:
    """gpuplan's training-run CSV (README "Plan, measure, calibrate, observe"): one run per row."""
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise _fail(path, "no rows; the header is " + ",".join(TRAINING_COLUMNS))
    missing = [c for c in TRAINING_COLUMNS if c not in rows[0]]
    if missing:
        raise _fail(path, f"column {missing[0]}: missing; the header is " + ",".join(TRAINING_COLUMNS))
    out = []
    for n, row in enumerate(rows, start=2):
        where = f"line {n}: "
        try:
            ints = {c: int(row[c]) for c in ("nodes", "tensor_parallel", "pipeline_parallel", "data_parallel",
                                             "sequence_length", "global_batch_sequences")}
        except (TypeError, ValueError):
            bad = next(c for c in ("nodes", "tensor_parallel", "pipeline_parallel", "data_parallel",
                                   "sequence_length", "global_batch_sequences") if not str(row[c] or "").isdigit())
            raise _fail(path, f"{where}{bad}: not a whole number (got {row[bad]!r})") from None
        numbers = {c: _csv_float(path, where, row, c) for c in ("tokens_per_s_per_device", "peak_memory_per_device_gib")}
        if any(v <= 0 for v in ints.values()):
            bad = next(c for c, v in ints.items() if v <= 0)
            raise _fail(path, f"{where}{bad}: must be above 0")
        devices = ints["tensor_parallel"] * ints["pipeline_parallel"] * ints["data_parallel"]
        out.append(Measurement(f"{path}:{n}", "training", row["model"], row["date"], row["instance_type"], "training",
                               ints["tensor_parallel"],
                               metrics={"training_tokens_per_s": numbers["tokens_per_s_per_device"] * devices},
                               training={**ints, "precision": row["precision"] or "bf16",
                                         "peak_memory_per_device_gib": numbers["peak_memory_per_device_gib"]}))
    return out


def _csv_float(path: Path, where: str, row: dict, column: str) -> float:
    try:
        value = float(row[column])
    except (TypeError, ValueError):
        raise _fail(path, f"{where}{column}: not a number (got {row[column]!r})") from None
    if not math.isfinite(value) or value <= 0:
        raise _fail(path, f"{where}{column}: must be a number above 0 (got {row[column]!r})")
    return value


def read(path: Path) -> list[Measurement]:
    """Every measurement in one file, its format told by its content."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise _fail(path, f"cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise _fail(path, "not a text file") from None
    if path.suffix.lower() == ".csv":
        return read_training_csv(path, text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, f"not JSON ({exc.msg}, line {exc.lineno}) nor a .csv training file") from None
    if isinstance(data, dict) and "output_throughput" in data:
        return [read_vllm(path, data)]
    if isinstance(data, dict) and isinstance(data.get("time_to_first_token"), dict):
        return [read_aiperf(path, data)]
    if isinstance(data, dict) and data.get("format") == "gpuplan-observation":
        return read_observation(path, data)
    if isinstance(data, dict) and isinstance(data.get("benchmarks"), list):
        return read_guidellm(path, data)
    raise _fail(path, "unknown format: expected vLLM bench serve JSON (output_throughput), a GuideLLM report "
                "(benchmarks), an AIPerf/genai-perf profile export (time_to_first_token.avg) or a training CSV")
