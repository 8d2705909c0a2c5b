"""What each serving engine reads from its container environment (data/engine-options.yaml): the
components write these names from a plan, and the policy pack reads them back as facts."""

from __future__ import annotations

from functools import cache
from importlib import resources

from planner.yamlsafe import load_text


@cache
def engine_table() -> dict:
    return load_text(resources.files("planner.data").joinpath("engine-options.yaml").read_text(), bundled=True)


def quantize_precision(value: str) -> str | None:
    """The weight precision a quantisation setting loads, or None for a value no engine documents."""
    return engine_table()["quantize_precision"].get(value.strip().lower())
