"""Predicted vs published for every reference case, and the median error per class.

    python bench/accuracy.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.reference_cases import DECODE_CASES, TRAINING_CASES, predict_decode, predict_training  # noqa: E402
from planner.catalog import bundled  # noqa: E402


def main() -> None:
    catalog = bundled()
    classes = {
        "inference: batch-1 decode tokens/s (gpt-fast, A100-80GB)": [
            (c.id, f"{c.model} TP{c.tp} {c.precision}", predict_decode(catalog, c), c.measured) for c in DECODE_CASES],
        "training: MFU % (Korthikanti; MosaicML)": [
            (c.id, f"{c.model} {c.instance_type} TP{c.tp} PP{c.pp} DP{c.dp}", predict_training(catalog, c), c.measured)
            for c in TRAINING_CASES],
    }
    for title, rows in classes.items():
        print(f"\n{title}")
        print(f"  {'case':<10} {'setup':<44} {'predicted':>10} {'published':>10} {'error':>8}")
        errors = []
        for case_id, setup, predicted, measured in rows:
            error = predicted / measured - 1
            errors.append(abs(error))
            print(f"  {case_id:<10} {setup:<44} {predicted:>10.2f} {measured:>10.2f} {error:>+8.1%}")
        print(f"  median absolute error: {statistics.median(errors):.1%}  (max {max(errors):.1%}, n={len(errors)})")


if __name__ == "__main__":
    main()
