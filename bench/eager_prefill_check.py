"""Read vLLM V0's published runs with and without their eager prefill (bench/engine_loop.py): what it does to
AccelMark's first tokens, which no constant is fitted on, and to the one held-out fold that cannot place the KV cache's
bandwidth share (held back while that fold's best start changed with it; read since it does not).

    python bench/eager_prefill_check.py          # AccelMark's V0 first tokens and the pooled GPU classes, both ways
    python bench/eager_prefill_check.py --fold   # and LMDeploy's fold: each start's objective and KV share (~2 min)

The first part is in-sample for every fitted source and held out for AccelMark (never fitted: its held-out figures are
these). The second refits the GPU serving constants without LMDeploy from each of bench/calibrate.py's starts; the
start with the lowest objective is the fold's fit. docs/calibration-log.md (fourth and sixth sessions) records the
figures.
"""

from __future__ import annotations

import statistics
import sys
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import calibrate, engine_loop  # noqa: E402
from bench.accuracy import SOURCES_APART  # noqa: E402
from bench.reference_cases import Row, all_rows  # noqa: E402
from bench.reference_sources import sources  # noqa: E402
from planner.hardware.catalog import bundled  # noqa: E402

ACCELMARK, LMDEPLOY = "accelmark-verified", "lmdeploy-a100-fp16-benchmark"
SHORT_PROMPT_TOKENS = 1000  # AccelMark's suites A, B, C and G (194-245 tokens); suite D's 28,650-token prompts are GPU-bound


@contextmanager
def eager(on: bool):
    with mock.patch.object(engine_loop, "READ_EAGER_PREFILL", on):
        yield


def _medians(errors: list[float]) -> tuple[int, float, float]:
    return len(errors), statistics.median(abs(e) for e in errors), statistics.median(errors)


def accelmark_v0_first_tokens(rows: list[Row]) -> dict[str, tuple[int, float, float]]:
    """(rows, median |error|, signed median) of AccelMark's V0 short-prompt first tokens: dense, one client, Mixtral."""
    v0 = {row["id"]: row for row in sources()[ACCELMARK]["rows"]
          if row.get("engine_loop") == "synchronous" and row["prompt_tokens"] < SHORT_PROMPT_TOKENS}
    mine = [r for r in rows if r.source == ACCELMARK and r.id in v0 and r.metric == "TTFT"]
    return {"dense": _medians([r.error for r in mine if not r.moe]),
            "one client": _medians([r.error for r in mine if not r.moe and v0[r.id]["concurrency"] == 1]),
            "mixtral": _medians([r.error for r in mine if r.moe])}


def pooled_gpu_classes(rows: list[Row]) -> dict[str, tuple[int, float, float]]:
    """The GPU serving classes as the table pools them (the sources kept apart left out)."""
    pooled = [r for r in rows if r.platform == "gpu" and not r.moe and r.source not in SOURCES_APART]
    return {metric: _medians([r.error for r in pooled if r.metric == metric]) for metric in calibrate.SERVING_METRICS}


def fold_starts(without: str) -> list[tuple[object, float, float]]:
    """(start, objective, KV share) of the serving group's descent from each start, fitted without `without`."""
    names = calibrate.GPU_GROUPS["serving"]
    kv = names.index("KV_BANDWIDTH_EFFICIENCY")
    with calibrate.restored():
        results = calibrate.start_results(bundled(), {name: calibrate.PARAMETERS[name] for name in names}, "gpu",
                                          "serving", 6, without)
    return [(start, objective, values[kv]) for start, objective, values in results]


def _line(label: str, figures: tuple[int, float, float]) -> str:
    return f"  {label:<28} {figures[0]:>4} rows  {figures[1]:6.1%}  signed {figures[2]:+6.1%}"


def main() -> None:
    catalog = bundled()
    for on in (False, True):
        with eager(on):
            rows = all_rows(catalog, kind="serving")
            print(f"V0 prefill read {'eagerly (layers x ' + str(engine_loop.EAGER_LAYER_LAUNCH_S * 1e3) + ' ms floor)' if on else 'as the GPU runs it'}:")
            for label, figures in accelmark_v0_first_tokens(rows).items():
                print(_line(f"AccelMark V0 TTFT, {label}", figures))
            for metric, figures in pooled_gpu_classes(rows).items():
                print(_line(f"pooled GPU dense {metric}", figures))
            if "--fold" in sys.argv:
                print(f"  fit without {LMDEPLOY}, serving group, by start:")
                for start, objective, kv in fold_starts(LMDEPLOY):
                    print(f"    start {str(start):<5} objective {objective:.6f}  KV share {kv:.2f}")


if __name__ == "__main__":
    main()
