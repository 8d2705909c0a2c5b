"""Start-up (issue 29), second pass: what `plan` no longer loads or builds. Behaviour only (which modules,
which commands, which bytes), never timings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in {**os.environ, "PYTHONPATH": str(ROOT)}.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
SERVE = {"workloads": [{"name": "serve", "kind": "inference", "model": {"preset": "llama-3-8b"},
                        "serving": {"max_context_tokens": 4096, "concurrent_requests": 4}}]}
ENTRY = ("import atexit, sys\natexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules))))\n"
         "from gpuplan.cli import main\nmain()")


def _entry(*argv: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, set[str]]:
    done = subprocess.run([sys.executable, "-c", ENTRY, *argv], cwd=ROOT, env=env or ENV, capture_output=True, text=True)
    return done, set(done.stderr.rsplit("MODULES ", 1)[1].split())


def _serve_file(tmp_path: Path) -> str:
    spec = tmp_path / "w.yaml"
    spec.write_text(yaml.safe_dump(SERVE))
    return str(spec)


def test_plan_through_the_entry_point_never_imports_importlib_metadata(tmp_path):
    """pydantic's plugin loader imports importlib.metadata (~10 ms) only to be told plugins are off."""
    done, loaded = _entry("plan", _serve_file(tmp_path), "--format", "json", "--workload", "serve")
    assert done.returncode == 0, done.stderr
    assert "importlib.metadata" not in loaded
    assert "pydantic.plugin._loader" in loaded  # the stand-in answered pydantic's question


def test_a_user_who_set_the_switch_gets_pydantics_own_loader(tmp_path):
    done, loaded = _entry("plan", _serve_file(tmp_path), "--format", "json",
                          env={**ENV, "PYDANTIC_DISABLE_PLUGINS": ""})
    assert done.returncode == 0, done.stderr
    assert "importlib.metadata" in loaded


def test_the_stand_in_answers_as_pydantics_loader_for_every_switch_value():
    """Under each value pydantic reads as "off" the stand-in returns what pydantic's get_plugins returns;
    under any other value it hands over to pydantic's own loader (so a pydantic upgrade that changes the
    contract fails here, not in a user's plan)."""
    probe = ("import os, sys\nfrom gpuplan.startup import PluginsOff\n"
             "import pydantic.plugin._loader as real\n"
             "for value in ('__all__', '1', 'true', 'some-plugin'):\n"
             "    os.environ['PYDANTIC_DISABLE_PLUGINS'] = value\n"
             "    print(value, list(PluginsOff.get_plugins()) == list(real.get_plugins()))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["__all__", "True", "1", "True", "true", "True", "some-plugin", "True"]


def test_plan_parses_no_bundled_yaml_only_the_users_file(tmp_path):
    """Every bundled file a plan reads (the accuracy bands too) comes from its compiled JSON while that is
    current; the one YAML parse left is the workload file itself."""
    probe = ("import sys\nimport planner.workload.yamlsafe as y\ncalls = []\nreal = y.load_text\n"
             "def counted(text, bundled=False):\n    calls.append(bundled)\n    return real(text, bundled)\n"
             "y.load_text = counted\nimport planner.physics.bands, planner.workload.bundled\n"
             "planner.physics.bands.load_text = planner.workload.bundled.load_text = counted\n"
             "from gpuplan.cli import app\ntry:\n    app(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "sys.stderr.write(f'CALLS {calls}')")
    done = subprocess.run([sys.executable, "-c", probe, "plan", _serve_file(tmp_path), "--format", "json"], cwd=ROOT,
                          env=ENV, capture_output=True, text=True)
    assert done.stderr.rsplit("CALLS ", 1)[1] == "[False]", done.stderr


COMMANDS = ("plan", "frontier", "check", "cost", "calibrate", "observe", "models", "preflight", "schema")


def test_the_entry_point_builds_only_the_command_it_runs():
    """typer turns every registered command into a click command on each run (~4 ms of a plan);
    `gpuplan plan` needs plan alone (the catalog group keeps it a group, as the full app is)."""
    from gpuplan.cli import app, app_for

    for name in COMMANDS:
        pruned = app_for([name, "--help"])
        assert [c.name or c.callback.__name__ for c in pruned.registered_commands] in ([name], [f"{name}_command"])
        assert [g.name for g in pruned.registered_groups] == ["catalog"]
    for argv in ([], ["--help"], ["catalog", "list"], ["pln", "x"], ["--format", "json", "plan"]):
        assert app_for(argv) is app


def test_each_commands_help_and_usage_errors_are_the_same_bytes_as_the_full_apps():
    from typer.testing import CliRunner

    from gpuplan.cli import app, app_for

    runner = CliRunner()
    for name in COMMANDS:
        for argv in ([name, "--help"], [name], [name, "--no-such-flag"], [name, "a", "b", "c"]):
            full, pruned = runner.invoke(app, argv), runner.invoke(app_for(argv), argv)
            assert (pruned.exit_code, pruned.output) == (full.exit_code, full.output), argv


def test_the_collector_stays_on_with_start_up_objects_frozen_and_a_larger_first_generation(tmp_path):
    """Collections still run (a fleet's long search frees its cycles), but never rescan what start-up
    loaded, and the first generation is collected every 5,000 allocations instead of 700."""
    probe = ("import atexit, gc, sys\n"
             "atexit.register(lambda: sys.stderr.write(f'GC {gc.isenabled()} {gc.get_threshold()[0]} {gc.get_freeze_count() > 1000}'))\n"
             "from gpuplan.cli import main\nmain()")
    done = subprocess.run([sys.executable, "-c", probe, "plan", _serve_file(tmp_path), "--format", "json"], cwd=ROOT,
                          env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.rsplit("GC ", 1)[1] == "True 5000 True"
