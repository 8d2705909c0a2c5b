"""The planner's collectives across nodes against published multi-node nccl-tests runs
(bench/data/collectives/across-nodes.yaml).

    python bench/collective_check.py          # per curve: measured and planned time, the fit and the check errors

planner/physics/collectives.py's two latency constants across nodes are measured here, not fitted to training runs:
INTER_NODE_RING_STEP_S on the `fit` all-gathers (NCCL runs them only as rings, so their time grows with every
rank), then INTER_NODE_TREE_LEVEL_S on the `fit` all-reduces with the ring step held. Each is the grid value with
the least median absolute log error; the `check` curves, from other sources, took no part.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.hardware.catalog import Catalog, bundled  # noqa: E402
from planner.physics import collectives  # noqa: E402
from planner.workload.yamlsafe import load_text  # noqa: E402

CURVES = Path(__file__).resolve().parent / "data" / "collectives" / "across-nodes.yaml"
PHASES = {"all_gather": 1, "reduce_scatter": 1, "all_reduce": 2}
RING_STEP_GRID_S = [k * 0.5e-6 for k in range(0, 61)]  # 0-30 µs
TREE_LEVEL_GRID_S = [k * 10e-6 for k in range(0, 41)]  # 0-400 µs


@cache
def curves() -> tuple[dict, ...]:
    return tuple(load_text(CURVES.read_text(), bundled=True)["curves"])


def measured_s(curve: dict) -> list[tuple[int, float]]:
    """(size in bytes, seconds) per row: nccl-tests' time, or size / algbw where only bandwidth is published."""
    if curve["measure"] == "time_us":
        return [(int(size), t * 1e-6) for size, t in curve["points"]]
    return [(int(size), size / (algbw * 1e9)) for size, algbw in curve["points"]]


def log_errors(curve: dict, catalog: Catalog) -> list[float]:
    """ln(planned / measured) per row, with the planner's group_collective_s over the curve's nodes."""
    accel, itype = catalog.accelerator(curve["accelerator"]), catalog.instance(curve["instance"])
    if curve.get("inter_node_gbps"):  # a cluster outside EC2: the catalog type with the network the source states
        itype = itype.model_copy(update={"inter_node_gbps": curve["inter_node_gbps"]})
    per_node = curve["gpus_per_node"]
    ranks = curve["nodes"] * per_node
    return [math.log(collectives.group_collective_s(size, ranks, per_node, accel, itype,
                                                    PHASES[curve["collective"]]) / t)
            for size, t in measured_s(curve)]


def median_abs(errors: list[float]) -> float:
    return statistics.median(abs(e) for e in errors)


def relative(errors: list[float]) -> tuple[float, float]:
    """Median |planned / measured − 1| and the signed median, from log errors."""
    return statistics.median(abs(math.expm1(e)) for e in errors), math.expm1(statistics.median(errors))


@contextmanager
def constants(ring_step_s: float, tree_level_s: float) -> Iterator[None]:
    saved = collectives.INTER_NODE_RING_STEP_S, collectives.INTER_NODE_TREE_LEVEL_S
    collectives.INTER_NODE_RING_STEP_S, collectives.INTER_NODE_TREE_LEVEL_S = ring_step_s, tree_level_s
    try:
        yield
    finally:
        collectives.INTER_NODE_RING_STEP_S, collectives.INTER_NODE_TREE_LEVEL_S = saved


def pooled(catalog: Catalog, use: str, collective: str | None = None, network: str | None = None) -> list[float]:
    return [e for c in curves() if c["use"] == use and collective in (None, c["collective"])
            and network in (None, c["network"]) for e in log_errors(c, catalog)]


def measure(catalog: Catalog) -> tuple[float, float]:
    """(ring step, tree level) in seconds: the ring step on the fit all-gathers (the tree does not enter them), then
    the tree level on the fit all-reduces with that step."""
    def ring_error(step: float) -> float:
        with constants(step, collectives.INTER_NODE_TREE_LEVEL_S):
            return median_abs(pooled(catalog, "fit", "all_gather"))
    step = min(RING_STEP_GRID_S, key=ring_error)

    def tree_error(level: float) -> float:
        with constants(step, level):
            return median_abs(pooled(catalog, "fit", "all_reduce"))
    return step, min(TREE_LEVEL_GRID_S, key=tree_error)


def main() -> None:
    catalog = bundled()
    step, level = measure(catalog)
    print(f"measured: ring step {step * 1e6:.1f} µs, tree level {level * 1e6:.0f} µs "
          f"(planner: {collectives.INTER_NODE_RING_STEP_S * 1e6:.1f} µs, "
          f"{collectives.INTER_NODE_TREE_LEVEL_S * 1e6:.0f} µs)")
    for curve in curves():
        absolute, signed = relative(log_errors(curve, catalog))
        print(f"{curve['use']:5s} {curve['network']:10s} {curve['collective']:14s} {curve['nodes']:2d} nodes "
              f"median |error| {absolute:5.1%}, signed {signed:+6.1%}   {curve['source'].split('@')[0]}")
    for use, network in (("fit", "efa"), ("check", "efa"), ("check", "not stated"), ("check", "infiniband"),
                         ("check", "roce")):
        errors = pooled(catalog, use, network=network)
        absolute, signed = relative(errors)
        print(f"{use} {network}: {len(errors)} rows, median |error| {absolute:.1%}, signed {signed:+.1%}")


if __name__ == "__main__":
    main()
