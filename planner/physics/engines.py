"""What each serving engine reads from its container environment (data/engine-options.yaml): the
components write these names from a plan, and the policy pack reads them back as facts."""

from __future__ import annotations

from functools import cache


@cache
def engine_table() -> dict:
    from planner.workload.bundled import load  # compiled JSON while current (planner/workload/bundled.py)

    return load("engine-options")


def quantize_precision(value: str) -> str | None:
    """The weight precision a quantisation setting loads, or None for a value no engine documents."""
    return engine_table()["quantize_precision"].get(value.strip().lower())
