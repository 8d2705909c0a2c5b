"""Predicted vs published for every reference case, per metric and per half.

    python bench/accuracy.py

The fitting half is what bench/calibrate.py fitted planner/efficiency.py on; the checking half was
never fitted and is the honest error. Targets (issue 9), checking half: training TFLOP/s median
≤ 8%, serving throughput ≤ 10%, TTFT and ITL ≤ 10%.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.reference_cases import Row, all_rows  # noqa: E402
from planner.catalog import bundled  # noqa: E402

METRICS = ("training TFLOP/s", "serving tokens/s", "TTFT", "ITL")
TARGETS = {"training TFLOP/s": 0.08, "serving tokens/s": 0.10, "TTFT": 0.10, "ITL": 0.10}


def median_errors(rows: list[Row]) -> dict[tuple[str, str], float]:
    """Median absolute relative error per (metric, half)."""
    out = {}
    for metric in METRICS:
        for half in ("fit", "check"):
            errors = [abs(r.error) for r in rows if r.metric == metric and r.half == half]
            if errors:
                out[(metric, half)] = statistics.median(errors)
    return out


def main() -> None:
    rows = all_rows(bundled())
    for metric in METRICS:
        print(f"\n{metric}")
        print(f"  {'case':<18} {'half':<6} {'setup':<58} {'predicted':>10} {'published':>10} {'error':>8}")
        for r in (r for r in rows if r.metric == metric):
            print(f"  {r.id:<18} {r.half:<6} {r.setup:<58} {r.predicted:>10.2f} {r.measured:>10.2f} {r.error:>+8.1%}")
    print("\nmedian absolute error     fitting half   checking half   target (checking)")
    for (metric, half), value in sorted(median_errors(rows).items(), key=lambda kv: (METRICS.index(kv[0][0]), kv[0][1] != "fit")):
        if half == "fit":
            check = median_errors(rows).get((metric, "check"))
            print(f"  {metric:<22} {value:>12.1%}   {check:>13.1%}   ≤ {TARGETS[metric]:.0%}")


if __name__ == "__main__":
    main()
