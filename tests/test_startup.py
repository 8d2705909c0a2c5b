"""Start-up (issue 29): what each command loads, and the entry point's early exit after the Pulumi
runtime has run. Behaviour only (which modules, which exit code, which bytes), never timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from gpuplan.cli import app

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
HEAVY = ("rich", "pulumi", "pulumi_aws", "boto3", "botocore", "components", "policies")
SERVE = {"workloads": [{"name": "serve", "kind": "inference", "model": {"preset": "llama-3-8b"},
                        "serving": {"max_context_tokens": 4096, "concurrent_requests": 4}}]}


def _loaded_after(*argv: str) -> tuple[set[str], int]:
    """The top-level packages and planner modules loaded by one CLI run in a fresh interpreter."""
    probe = ("import sys, json, io, contextlib\nfrom gpuplan.cli import app\ncode = 0\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    try:\n        app(sys.argv[1:])\n    except SystemExit as exc:\n        code = exc.code\n"
             "print(json.dumps([sorted(sys.modules), code]))")
    done = subprocess.run([sys.executable, "-c", probe, *argv], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          check=True)
    modules, code = json.loads(done.stdout)
    return {m.split(".")[0] for m in modules} | {m for m in modules if m.startswith("planner.")}, code


def test_help_loads_neither_the_planner_nor_rich_pulumi_or_boto3():
    loaded, code = _loaded_after("--help")
    assert code == 0
    assert not loaded & set(HEAVY)
    assert loaded & {"planner.hardware.catalog", "planner.pipeline", "planner.workload.spec", "pydantic", "yaml"} == set()


def test_plan_as_json_loads_no_rich_pulumi_boto3_nor_a_yaml_parse_of_the_catalog(tmp_path):
    spec = tmp_path / "w.yaml"
    spec.write_text(yaml.safe_dump(SERVE))
    loaded, code = _loaded_after("plan", str(spec), "--format", "json")
    assert code in (0, None)
    assert not loaded & set(HEAVY)
    assert "planner.search.frontier" not in loaded and "gpuplan.aws" not in loaded


def _entry_point(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from gpuplan.cli import main; main()", *argv], cwd=ROOT, env=ENV,
                          capture_output=True, text=True)


def test_check_exits_early_with_its_code_and_all_its_output():
    """The passing example: exit 0, the same report as in-process (nothing lost to os._exit)."""
    done = _entry_point("check", "Pulumi.example.yaml", "--format", "json")
    in_process = CliRunner().invoke(app, ["check", "Pulumi.example.yaml", "--format", "json"])
    assert done.returncode == 0 == in_process.exit_code
    assert json.loads(done.stdout) == json.loads(in_process.stdout)
    assert done.stdout.endswith("}\n")


def test_check_with_a_mandatory_violation_exits_1_through_the_early_exit(tmp_path):
    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"endpoint-availability": "mandatory"}))
    done = _entry_point("check", "Pulumi.example.yaml", "--policy-config", str(config), "--format", "markdown")
    assert done.returncode == 1, done.stderr
    assert "**mandatory** `endpoint-availability` on `chat-8b-config`" in done.stdout
    assert "Traceback" not in done.stderr


def test_bad_input_still_exits_2_without_a_traceback(tmp_path):
    done = _entry_point("check", str(tmp_path / "missing.yaml"))
    assert done.returncode == 2 and "error:" in done.stderr and "Traceback" not in done.stderr


def test_the_many_workloads_bench_generates_distinct_training_shapes():
    """Issue 29: 5,000 DISTINCT training workloads, so no two share a search."""
    sys.path.insert(0, str(ROOT))
    from bench.many_workloads import distinct_training

    base = next(w for w in yaml.safe_load((ROOT / "examples" / "workloads.yaml").read_text())["workloads"]
                if w["kind"] == "training")
    assert base["kind"] == "training"
    made = distinct_training(base, 5000)
    shapes = {json.dumps({k: v for k, v in w.items() if k != "name"}, sort_keys=True) for w in made}
    assert len(made) == len(shapes) == 5000
    assert {w["kind"] for w in made} == {"training"}


def test_plan_as_json_of_a_workload_file_loads_no_stack_checks_calibration_or_text_renderers(tmp_path):
    """Issue 29: a workload file has no stack settings or tags to check, no calibration applies and JSON
    needs no table or Markdown renderer; none of them is loaded."""
    spec = tmp_path / "w.yaml"
    spec.write_text(yaml.safe_dump(SERVE))
    probe = ("import sys, json, io, contextlib\nfrom gpuplan.cli import app\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    try:\n        app(sys.argv[1:])\n    except SystemExit:\n        pass\n"
             "print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe, "plan", str(spec), "--format", "json"], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert loaded & {"gpuplan.check", "planner.physics.calibration", "planner.report.markdown",
                     "planner.report.summary", "components"} == set()


def _plugins_scanned(env: dict) -> tuple[str, str]:
    """Whether pydantic scanned the installed distributions for plugins during one `plan` through the
    entry point, and the plan's stdout."""
    probe = ("import atexit, sys\nimport pydantic.plugin._loader as loader\n"
             "atexit.register(lambda: sys.stderr.write(f'scanned={loader._plugins is not None}\\n'))\n"
             "from gpuplan.cli import main\nmain()")
    done = subprocess.run([sys.executable, "-c", probe, "plan", "examples/workloads.yaml", "--format", "json"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().splitlines()[-1], done.stdout


def test_the_entry_point_skips_pydantics_plugin_scan_unless_the_user_set_the_switch():
    env = {k: v for k, v in ENV.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    skipped, plans = _plugins_scanned(env)
    assert skipped == "scanned=False"
    scanned, same_plans = _plugins_scanned({**env, "PYDANTIC_DISABLE_PLUGINS": ""})  # the user's value is kept
    assert scanned == "scanned=True"
    assert plans == same_plans
