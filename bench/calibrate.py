"""Fit the constants of planner/efficiency.py on the FITTING half of bench/data/reference.yaml.

    python bench/calibrate.py            # prints the fitted values and both halves' errors

Coordinate descent over a grid per constant, minimising the sum over metrics of the median absolute
error on fitting rows only; the checking rows never enter the objective. Paste the result into
planner/efficiency.py (tests/test_calibration.py checks the committed values are this fit).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.accuracy import median_errors  # noqa: E402
from bench.reference_cases import all_rows  # noqa: E402
from planner import efficiency  # noqa: E402
from planner.catalog import bundled  # noqa: E402


def _grid(lo: float, hi: float, step: float) -> list[float]:
    return [round(lo + i * step, 4) for i in range(int(round((hi - lo) / step)) + 1)]


# name -> (getter, setter, grid)
def _scalar(name: str, grid: list[float]):
    return (lambda: getattr(efficiency, name), lambda v: setattr(efficiency, name, v), grid)


def _keyed(name: str, key: str, grid: list[float]):
    table = getattr(efficiency, name)
    return (lambda: table[key], lambda v: table.__setitem__(key, v), grid)


PARAMETERS = {
    "MEMORY_BANDWIDTH_EFFICIENCY": _scalar("MEMORY_BANDWIDTH_EFFICIENCY", _grid(0.50, 0.90, 0.01)),
    "QUANTISED_BANDWIDTH_FACTOR[int8]": _keyed("QUANTISED_BANDWIDTH_FACTOR", "int8", _grid(0.50, 1.00, 0.01)),
    "QUANTISED_BANDWIDTH_FACTOR[int4]": _keyed("QUANTISED_BANDWIDTH_FACTOR", "int4", _grid(0.40, 1.00, 0.01)),
    "PREFILL_EFFICIENCY": _scalar("PREFILL_EFFICIENCY", _grid(0.30, 0.90, 0.01)),
    "PROMPT_ARRIVAL_VARIABILITY": _scalar("PROMPT_ARRIVAL_VARIABILITY", _grid(0.0, 6.0, 0.1)),
    "REQUEST_OVERHEAD_S": _scalar("REQUEST_OVERHEAD_S", _grid(0.0, 0.03, 0.001)),
    "GEMM_EFFICIENCY_BY_GENERATION[8]": _keyed("GEMM_EFFICIENCY_BY_GENERATION", "8", _grid(0.40, 0.90, 0.01)),
    "GEMM_EFFICIENCY_BY_GENERATION[9]": _keyed("GEMM_EFFICIENCY_BY_GENERATION", "9", _grid(0.30, 0.90, 0.01)),
    "FP8_GEMM_EFFICIENCY_FACTOR": _scalar("FP8_GEMM_EFFICIENCY_FACTOR", _grid(0.40, 1.40, 0.02)),
    "NONMATMUL_BYTES_PER_TOKEN_HIDDEN": _scalar("NONMATMUL_BYTES_PER_TOKEN_HIDDEN", [34 * k for k in range(1, 13)]),
    "COMM_OVERLAP": _scalar("COMM_OVERLAP", _grid(0.0, 1.0, 0.05)),
}
# Neuron constants move Neuron rows only (and GPU constants GPU rows only, except the two byte and
# overlap constants both share), so each platform is fitted on its own rows.
NEURON_PARAMETERS = {
    "NEURON_MEMORY_BANDWIDTH_EFFICIENCY": _scalar("NEURON_MEMORY_BANDWIDTH_EFFICIENCY", _grid(0.30, 0.95, 0.01)),
    "NEURON_COLLECTIVE_LATENCY_S": _scalar("NEURON_COLLECTIVE_LATENCY_S", _grid(0.0, 200e-6, 5e-6)),
    "NEURON_LINK_EFFICIENCY": _scalar("NEURON_LINK_EFFICIENCY", _grid(0.10, 1.00, 0.05)),
    "NEURON_REQUEST_OVERHEAD_S": _scalar("NEURON_REQUEST_OVERHEAD_S", _grid(0.0, 0.03, 0.001)),
    "NEURON_PREFILL_EFFICIENCY": _scalar("NEURON_PREFILL_EFFICIENCY", _grid(0.10, 0.90, 0.01)),
    "NEURON_GEMM_EFFICIENCY": _scalar("NEURON_GEMM_EFFICIENCY", _grid(0.10, 0.90, 0.01)),
}
ALL_PARAMETERS = {**PARAMETERS, **NEURON_PARAMETERS}


def objective(catalog, platform: str | None = None) -> float:
    rows = [r for r in all_rows(catalog, platform) if r.half == "fit"]
    return sum(median_errors(rows).values())


def fit(rounds: int = 4) -> dict[str, float]:
    """Coordinate descent from the committed values; returns the fitted value of every constant."""
    for platform, parameters in (("gpu", PARAMETERS), ("neuron", NEURON_PARAMETERS)):
        _descend(parameters, platform, rounds)
    return {name: get() for name, (get, _, _) in ALL_PARAMETERS.items()}


def _descend(parameters: dict, platform: str, rounds: int) -> None:
    catalog = bundled()
    for _ in range(rounds):
        changed = False
        for get, put, grid in parameters.values():
            start = get()
            scores = []
            for value in grid:
                put(value)
                scores.append((round(objective(catalog, platform), 6), abs(value - start), value))
            best = min(scores)[2]
            put(best)
            changed |= best != start
        if not changed:
            break


def main() -> None:
    fitted = fit()
    for name, value in fitted.items():
        print(f"{name} = {value}")
    rows = all_rows(bundled())
    for (platform, metric, half), value in sorted(median_errors(rows).items()):
        print(f"  {platform:<6} {metric:<20} {half:<6} median |error| {value:.1%}")
    print(f"  fitting objective (sum of medians): {objective(bundled()):.4f}; "
          f"checking rows: {statistics.median(abs(r.error) for r in rows if r.half == 'check'):.1%} overall")


if __name__ == "__main__":
    main()
