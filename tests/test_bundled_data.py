"""The compiled bundled data (planner/data/compiled/) is a build of the YAML: it must equal a fresh compile,
and a stale one must never be used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planner.workload import bundled
from planner.workload.yamlsafe import load_text

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "planner" / "data"


@pytest.mark.parametrize("name", bundled.DATA_FILES)
def test_compiled_file_equals_a_fresh_compile_of_its_yaml(name):
    """A YAML edit without `python scripts/compile_data.py` fails here."""
    fresh = bundled.compile_text((DATA / f"{name}.yaml").read_text(), name)
    assert (DATA / "compiled" / f"{name}.json").read_text() == fresh


@pytest.mark.parametrize("name", bundled.DATA_FILES)
def test_start_up_reads_the_same_content_as_the_yaml(name):
    bundled.load.cache_clear()
    assert bundled.load(name) == load_text((DATA / f"{name}.yaml").read_text(), bundled=True)


def test_check_mode_passes_on_the_checked_in_build():
    done = subprocess.run([sys.executable, "scripts/compile_data.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_stale_compiled_file_is_ignored_for_the_yaml(tmp_path, monkeypatch):
    """The digest no longer matches after an edit: the YAML (the source) wins, not the old build."""
    data_dir = tmp_path / "data"
    (data_dir / "compiled").mkdir(parents=True)
    (data_dir / "models.yaml").write_text("models: {a: 1}\n")
    (data_dir / "compiled" / "models.json").write_text(bundled.compile_text("models: {a: 1}\n", "models"))
    monkeypatch.setattr(bundled.resources, "files", lambda package: data_dir)
    bundled.load.cache_clear()
    try:
        assert bundled.load("models") == {"models": {"a": 1}}
        (data_dir / "models.yaml").write_text("models: {a: 2}\n")
        bundled.load.cache_clear()
        assert bundled.load("models") == {"models": {"a": 2}}
        compiled = json.loads((data_dir / "compiled" / "models.json").read_text())
        assert compiled["data"] == {"models": {"a": 1}}  # still there, not used
    finally:
        bundled.load.cache_clear()


def test_compiled_content_is_read_without_parsing_yaml(tmp_path, monkeypatch):
    """While current, the compiled JSON is what start-up reads (the YAML parser is not run)."""
    data_dir = tmp_path / "data"
    (data_dir / "compiled").mkdir(parents=True)
    (data_dir / "managed.yaml").write_text("x: 1\n")
    (data_dir / "compiled" / "managed.json").write_text(bundled.compile_text("x: 1\n", "managed"))
    monkeypatch.setattr(bundled.resources, "files", lambda package: data_dir)
    monkeypatch.setattr(bundled, "parse_yaml", lambda text, name: pytest.fail("parsed the YAML"))
    bundled.load.cache_clear()
    try:
        assert bundled.load("managed") == {"x": 1}
    finally:
        bundled.load.cache_clear()


def test_a_repeated_key_in_bundled_yaml_is_refused_at_compile():
    with pytest.raises(yaml.YAMLError, match="appears twice"):
        bundled.compile_text("a: 1\na: 2\n", "models")


def test_a_value_json_cannot_carry_is_refused_at_compile():
    with pytest.raises(ValueError, match="JSON cannot carry"):
        bundled.compile_text("125: 0.145\n", "models")  # a number as a key (storage.yaml's tiers) would come back as text
