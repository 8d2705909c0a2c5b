"""Where the serving estimate misses NVIDIA's TensorRT-LLM 0.9.0 sweep (bench/data/reference/trtllm-v09-dli-sweep.yaml,
never fitted), grouped so a miss points at an effect rather than a row (issue 25).

    python bench/sweep_residuals.py              # median |error| and signed median per metric × part, × model, × TP,
                                                 # × batch band, then the serving memory estimate against its peaks

Every figure is a prediction by the committed constants, which never saw the sweep (bench/calibrate.py
EVALUATED_ONLY_SOURCES). What it showed when added (docs/calibration-log.md, 2026-12-07): Mixtral 8x7B misses every
metric (its decode steps 21-78% long at one sequence); small FP8 models' single-sequence steps are 10-17% long; the
memory estimate lacks 4-7 GB per GPU at TP 4-8.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.reference_cases import Row, all_rows  # noqa: E402
from bench.reference_serving import serving_kv, serving_weights  # noqa: E402
from bench.reference_sources import row_architecture, sources  # noqa: E402
from planner.hardware.catalog import Catalog, bundled  # noqa: E402
from planner.physics.memory import inference_memory  # noqa: E402

SOURCE = "trtllm-v09-dli-sweep"
BATCH_BANDS = ((1, "1"), (8, "2-8"), (64, "16-64"), (1 << 30, "96+"))  # upper bound (inclusive), label


def _batch_band(setup: str) -> str:
    batch = int(setup.split(" c=")[1].split()[0])
    return next(label for upper, label in BATCH_BANDS if batch <= upper)


def _keys(r: Row) -> dict[str, str]:
    """The groupings of one row: its part, model, TP degree and batch band (read from the bench's setup string)."""
    model, _, tp = r.setup.split()[:3]
    return {"part": r.accelerator, "model": model, "tp": tp, "batch": _batch_band(r.setup)}


def grouped(rows: list[Row]) -> dict[tuple[str, str, str], tuple[int, float, float]]:
    """(metric, grouping, value) -> (rows, median |error|, signed median)."""
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in rows:
        for grouping, value in _keys(r).items():
            groups[(r.metric, grouping, value)].append(r.error)
    return {key: (len(errors), statistics.median(abs(e) for e in errors), statistics.median(errors))
            for key, errors in sorted(groups.items())}


def memory_errors(catalog: Catalog) -> dict[int, list[float]]:
    """Per TP degree, memory.inference_memory at the batch's whole context ÷ the published device peak − 1
    (gptSessionBenchmark's GB are 1e9 bytes)."""
    out: dict[int, list[float]] = defaultdict(list)
    for r in sources()[SOURCE]["rows"]:
        if r.get("gpu_peak_memory_gb") is None:
            continue
        need = inference_memory(row_architecture(r), serving_weights(r), serving_kv(r), r["tp"], 1, r["concurrency"],
                                r["prompt_tokens"] + r["output_tokens"]).total
        out[r["tp"]].append(need / (r["gpu_peak_memory_gb"] * 1e9) - 1)
    return dict(sorted(out.items()))


def main() -> None:
    catalog = bundled()
    rows = [r for r in all_rows(catalog) if r.source == SOURCE]
    print(f"{'metric':<18} {'by':<6} {'value':<16} {'rows':>5} {'median |error|':>15} {'signed':>8}")
    for (metric, grouping, value), (n, absolute, signed) in grouped(rows).items():
        print(f"{metric:<18} {grouping:<6} {value:<16} {n:>5} {absolute:>15.1%} {signed:>+8.1%}")
    print("\nserving memory (estimate ÷ published peak − 1) by TP:")
    for tp, errors in memory_errors(catalog).items():
        print(f"  TP {tp}: {len(errors)} peaks, median {statistics.median(errors):+.1%}, "
              f"|median| {statistics.median(abs(e) for e in errors):.1%}")


if __name__ == "__main__":
    main()
