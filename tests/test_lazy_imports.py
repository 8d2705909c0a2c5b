"""Start-up (issue 29): a serving plan loads none of the training search. Behaviour only (modules), no timings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENV.pop("PYDANTIC_DISABLE_PLUGINS", None)
SERVE = {"workloads": [{"name": "serve", "kind": "inference", "model": {"preset": "llama-3-8b"},
                        "serving": {"max_context_tokens": 4096, "concurrent_requests": 4}}]}
TRAIN = {"workloads": [{"name": "train", "kind": "training", "model": {"preset": "llama-3.1-8b"},
                        "training": {"tokens": 1e9, "sequence_length": 4096}}]}


def _run(code: str, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, env=env or ENV, capture_output=True, text=True)


ENTRY = ("import atexit, sys\natexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules))))\n"
         "from gpuplan.cli import main\nmain()")


def _modules(done: subprocess.CompletedProcess) -> set[str]:
    return set(done.stderr.rsplit("MODULES ", 1)[1].split())


def test_a_serving_plan_loads_no_training_search_and_a_training_plan_does(tmp_path):
    serve, train = tmp_path / "s.yaml", tmp_path / "t.yaml"
    serve.write_text(yaml.safe_dump(SERVE))
    train.write_text(yaml.safe_dump(TRAIN))
    training_modules = {"planner.search.training", "planner.physics.training_time", "planner.search.step_floor"}
    served, trained = (_run(ENTRY, "plan", str(f), "--format", "json") for f in (serve, train))
    assert served.returncode == 0 == trained.returncode, served.stderr + trained.stderr
    assert _modules(served) & training_modules == set()
    assert training_modules <= _modules(trained)
