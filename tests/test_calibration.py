"""The committed constants of planner/efficiency.py are the fit of bench/calibrate.py on the fitting
half: nobody tuned them by hand against the checking half."""

from __future__ import annotations

import pytest

from bench import calibrate
from bench.reference_cases import reference


def test_split_is_fixed_and_balanced():
    for table in ("decode", "serving", "training", "neuron_serving", "neuron_training"):
        halves = [row["half"] for row in reference()[table]]
        assert set(halves) == {"fit", "check"}
        assert abs(halves.count("fit") - halves.count("check")) <= 1


def test_every_reference_row_has_a_source():
    data = reference()
    for table in ("serving", "training", "neuron_serving", "neuron_training"):
        for row in data[table]:
            assert row["source"] in data["sources"] and row["source"] in data["source_dates"]


def test_committed_constants_are_the_fit():
    committed = {name: get() for name, (get, _, _) in calibrate.ALL_PARAMETERS.items()}
    try:
        fitted = calibrate.fit()
    finally:
        for name, (_, put, _) in calibrate.ALL_PARAMETERS.items():
            put(committed[name])
    for name, value in committed.items():
        assert fitted[name] == pytest.approx(value), f"{name}: committed {value}, fit {fitted[name]}"


def test_catalog_rebuilds_from_data_inside_the_repository():
    """scripts/build_catalog.py needs nothing outside the clone (prices with their provenance README)."""
    import importlib.util
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("build_catalog", root / "scripts" / "build_catalog.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.PRICES.is_file() and (module.PRICES.parent / "aws-accelerator-prices.README.md").is_file()
    assert module.build(module.PRICES) == yaml.safe_load((root / "planner" / "data" / "catalog.yaml").read_text())
