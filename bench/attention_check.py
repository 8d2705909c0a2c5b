"""Measure how long one decode-attention thread block takes per query head and cached position, on the published
steps whose attention ran one block per (sequence, KV head) (planner/physics/unsplit_attention.py).

    python bench/attention_check.py          # per configuration, and the median the constant is set to

The measurement is a difference, so no fitted constant enters it: for each configuration of NVIDIA's TensorRT-LLM 0.9.0
sweep (bench/data/reference/trtllm-v09-dli-sweep.yaml) that ran Llama 2 70B at one sequence both at 128/128 and at
2,048/2,048 tokens (same part, TP and precision), the step at the long rows' mean context minus the step at the short
rows' is what the context costs; every other term of the step (weights, all-reduces, per-step costs) is the same in
both and cancels. The constant is the value at which the estimate's difference equals the published one, the median
over the configurations with a 16-bit KV cache. Llama 2 70B is the model the sweep runs through XQA (eight query heads per KV head, the case
TensorRT-LLM's gpt-attention.md names); its figures are the sweep's, so the sweep's inter-token latencies are no longer
a held-out check of this one constant, while NIM's one-client runs (nim-dli-sweep.yaml, which no constant is fitted
on) are.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.reference_serving import serving_kv, serving_weights  # noqa: E402
from bench.reference_sources import INSTANCE_FOR, row_accelerator, sources  # noqa: E402
from planner.hardware.catalog import bundled  # noqa: E402
from planner.physics import unsplit_attention  # noqa: E402
from planner.physics.performance import decode_step  # noqa: E402
from planner.workload.presets import presets  # noqa: E402

SOURCE, MODEL = "trtllm-v09-dli-sweep", "llama-2-70b"
SHORT, LONG = (128, 128), (2048, 2048)
# 16-bit KV caches only: a block that reads an FP8 cache is faster per position (0.73-0.90 ns on the sweep's seven FP8
# configurations against 1.20-1.21 on its FP16 ones), which one constant per position does not follow; NIM's caches and
# those of the engines' defaults are 16-bit.
SIXTEEN_BIT_KV = ("fp16", "bf16")
GRID_NS = [round(0.01 * i, 2) for i in range(401)]  # 0 to 4 ns per query head and position


def pairs() -> list[tuple[dict, dict]]:
    """(short row, long row) of each configuration that ran both at one sequence."""
    rows = [r for r in sources()[SOURCE]["rows"] if r["model"] == MODEL and r["concurrency"] == 1 and r.get("itl_ms")
            and r["kv_precision"] in SIXTEEN_BIT_KV]
    by_config: dict[tuple, dict] = {}
    for r in rows:
        by_config.setdefault((r["accelerator"], r["precision"], r["tp"]), {})[(r["prompt_tokens"], r["output_tokens"])] = r
    return [(shapes[SHORT], shapes[LONG]) for _, shapes in sorted(by_config.items()) if SHORT in shapes and LONG in shapes]


def _step_ms(row: dict, catalog, context: float) -> float:
    itype = catalog.instance(INSTANCE_FOR[row["accelerator"]])
    accel = row_accelerator(catalog, itype, row)
    return 1e3 * decode_step(presets()[row["model"]], accel, serving_weights(row), serving_kv(row), row["tp"], 1, 1,
                             context, itype=itype, unsplit_attention=True).seconds


def measured_ns(short: dict, long: dict, catalog) -> float:
    """The block time per query head and position at which the estimate's step grows from the short rows' mean context
    to the long rows' by as much as the published step does."""
    published = long["itl_ms"] - short["itl_ms"]

    def gap(ns: float) -> float:
        with mock.patch.object(unsplit_attention, "UNSPLIT_ATTENTION_NS_PER_HEAD_POSITION", ns):
            grown = (_step_ms(long, catalog, long["prompt_tokens"] + long["output_tokens"] / 2)
                     - _step_ms(short, catalog, short["prompt_tokens"] + short["output_tokens"] / 2))
        return abs(grown - published)
    return min(GRID_NS, key=gap)


def measurements() -> list[tuple[str, float, float]]:
    """(configuration, published growth in ms, measured ns) for every pair."""
    catalog = bundled()
    return [(f"{s['accelerator']} {s['precision']} TP{s['tp']}", l["itl_ms"] - s["itl_ms"], measured_ns(s, l, catalog))
            for s, l in pairs()]


def measured_constant() -> float:
    return statistics.median(ns for _, _, ns in measurements())


def main() -> None:
    for config, grown_ms, ns in measurements():
        print(f"{config:28s} step grows {grown_ms:5.2f} ms from 192 to 3,072 positions: {ns:.2f} ns per head-position")
    print(f"median {measured_constant():.2f} ns (planner/physics/unsplit_attention.py: "
          f"{unsplit_attention.UNSPLIT_ATTENTION_NS_PER_HEAD_POSITION})")


if __name__ == "__main__":
    main()
