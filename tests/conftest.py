from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from planner.catalog import bundled
from planner.presets import presets
from planner.spec import parse_workloads

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def catalog():
    return bundled()


@pytest.fixture(scope="session")
def arch():
    return presets()


def workload(**fields):
    """One validated Workload from keyword fields (YAML-shaped dicts)."""
    return parse_workloads({"workloads": [{"name": "w", **fields}]}, "test.yaml").workloads[0]


def write_yaml(path: Path, data) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
