"""Run the real program under Pulumi's unit-test mocks with a stack file's config."""

from __future__ import annotations

import runpy
from pathlib import Path

import pulumi
import yaml

from gpuplan.offline import PLACEHOLDER_AMI as AMI  # noqa: F401 (re-exported for the tests)
from gpuplan.offline import Recorder, synthesize

ROOT = Path(__file__).resolve().parent.parent


def stack_config(path: Path = ROOT / "Pulumi.example.yaml") -> dict:
    return yaml.safe_load(path.read_text())["config"]


def run_program(config: dict, preview: bool = False) -> Recorder:
    return synthesize(config, preview=preview)


def run_main_py(config: dict) -> Recorder:
    """The repository's __main__.py itself, as `pulumi up` runs it, for a fresh program per call."""
    import json

    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="gpuplan", stack="test")
    pulumi.runtime.set_all_config({k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()})
    pulumi.runtime.test(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"))()
    return recorder
