"""What the Pulumi CLI and a non-editable install would trip over: the project files against Pulumi's
own schemas, the wheel with its data files, and a policy pack that installs from PyPI alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import ROOT

SCHEMAS = ROOT / "tests" / "schemas"


def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((SCHEMAS / name).read_text()))


def test_pulumi_yaml_is_a_valid_pulumi_project():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert [e.message for e in _validator("pulumi-project.json").iter_errors(project)] == []
    assert project["runtime"]["options"]["virtualenv"] == ".venv"


def test_the_schema_rejects_the_array_declaration_the_first_release_shipped():
    # `type: array` without `items` made every pulumi command fail to load the project.
    old = {"name": "gpuplan", "runtime": "python",
           "config": {"gpuplan:workloads": {"type": "array", "description": "workloads"}}}
    assert list(_validator("pulumi-project.json").iter_errors(old))
    objects = {"name": "gpuplan", "runtime": "python",
               "config": {"gpuplan:workloads": {"type": "array", "items": {"type": "object"}}}}
    assert list(_validator("pulumi-project.json").iter_errors(objects))


def test_declared_config_defaults_have_their_declared_type():
    config = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    python_type = {"string": str, "array": list, "integer": int, "boolean": bool}
    for key, declaration in config.items():
        assert key.startswith("gpuplan:"), key  # only the project's own namespace may declare types
        assert isinstance(declaration["default"], python_type[declaration["type"]]), key


def test_policy_pack_yaml_is_valid():
    pack = yaml.safe_load((ROOT / "policies" / "PulumiPolicy.yaml").read_text())
    assert [e.message for e in _validator("pulumi-policy-pack.json").iter_errors(pack)] == []


def test_policy_requirements_name_published_packages_only():
    lines = [line.strip() for line in (ROOT / "policies" / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines and all(not line.startswith(("-e", ".", "/", "file:")) and "@" not in line for line in lines)
    assert "policies/venv/" in (ROOT / ".gitignore").read_text().splitlines()


def test_built_policy_pack_is_self_contained(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from build_policy_pack import build
    finally:
        sys.path.pop(0)
    pack = build(tmp_path / "pack")
    assert {p.name for p in pack.iterdir()} == {"PulumiPolicy.yaml", "requirements.txt", "__main__.py",
                                                "planner", "policies"}
    assert (pack / "planner" / "data" / "catalog.yaml").is_file()
    # Import the rules the way the analyzer does, from the pack's directory, and check nothing beyond
    # requirements.txt (pulumi-policy, pydantic, PyYAML) and the bundled planner is needed.
    probe = ("import sys; sys.path.insert(0, '.');"
             "from policies.pack import build_policies; import planner;"
             "assert planner.__file__.startswith(sys.argv[1]), planner.__file__;"
             "extra = {'rich', 'typer', 'boto3', 'pulumi_aws', 'components', 'gpuplan'} & set(sys.modules);"
             "assert not extra, extra; print(len(build_policies()))")
    run = subprocess.run([sys.executable, "-c", probe, str(pack)], cwd=pack, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) >= 8


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory) -> Path:
    """The project built as a wheel and installed (not editable) in a fresh venv whose dependencies come
    from this environment's site-packages: the workflow's `pip install .` without the network."""
    base = tmp_path_factory.mktemp("wheel")
    # Build from the tracked files only, as a fresh checkout would: an egg-info left by the editable
    # install lists every file and would hide a package missing from pyproject.toml.
    source = base / "source"
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(base / "dist")], check=True, capture_output=True)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # a path, not a site dir
    wheel = next((base / "dist").glob("gpuplan-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                    "--no-deps", "--no-index", "-q", str(wheel)], check=True, capture_output=True)
    return venv


def test_wheel_ships_the_component_data_and_gpuplan_check_runs_from_it(installed_wheel, tmp_path):
    stack = tmp_path / "Pulumi.example.yaml"
    stack.write_text((ROOT / "Pulumi.example.yaml").read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run([str(installed_wheel / "bin" / "python"), "-c",
                            "import components.settings as s; print(s.__file__); print(len(s._images()['images']))"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(installed_wheel))
    run = subprocess.run([str(installed_wheel / "bin" / "gpuplan"), "check", str(stack)],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASSED: 0 mandatory" in run.stdout
