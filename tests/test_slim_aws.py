"""gpuplan/slim_aws.py (issue 29): pulumi_aws services loaded file by file for the offline check give the
program the very classes the full packages export, and the check the same report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _run(code: str, *argv: str) -> subprocess.CompletedProcess:
    """In a fresh interpreter: what it does to sys.modules must not leak into the test process."""
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, env=ENV, capture_output=True, text=True)


def test_names_resolve_to_the_full_packages_objects_loading_only_their_files():
    done = _run("""
import sys
from gpuplan.slim_aws import install
install(("ec2", "sagemaker", "ssm", "iam"))
import pulumi_aws as aws
picked = {"LaunchTemplate": aws.ec2.LaunchTemplate, "LaunchTemplateIamInstanceProfileArgs":
          aws.ec2.LaunchTemplateIamInstanceProfileArgs, "ModelPrimaryContainerArgs": aws.sagemaker.ModelPrimaryContainerArgs,
          "get_parameter_output": aws.ssm.get_parameter_output, "outputs": aws.iam.outputs}
ec2_files = sum(m.startswith("pulumi_aws.ec2.") for m in sys.modules)
assert ec2_files < 10, ec2_files
try:
    aws.ec2.NoSuchResource
    raise SystemExit("no error for an unknown name")
except AttributeError as exc:
    assert "NoSuchResource" in str(exc)
everything = {**vars(aws.ec2), **vars(aws.sagemaker), **vars(aws.ssm), **vars(aws.iam)}
assert sum(m.startswith("pulumi_aws.ec2.") for m in sys.modules) > 100  # the fallback ran ec2's own __init__
assert aws.ec2.Vpc.__module__ == "pulumi_aws.ec2.vpc"
for name, value in picked.items():
    assert everything[name] is value, name
print("ok")
""")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_check_reports_the_same_with_and_without_the_slim_packages():
    slim = _run("from gpuplan.cli import main; main()", "check", "Pulumi.example.yaml", "--format", "json")
    full = _run("import gpuplan.slim_aws as s\ns.install = lambda services: None\nfrom gpuplan.cli import main; main()",
                "check", "Pulumi.example.yaml", "--format", "json")
    assert slim.returncode == full.returncode == 0, (slim.stderr[-2000:], full.stderr[-2000:])
    assert slim.stdout == full.stdout and '"passed": true' in slim.stdout


def test_an_already_loaded_service_is_left_as_it_is():
    done = _run("""
import pulumi_aws as aws, sys
aws.fsx.LustreFileSystem  # the full package, loaded before
before = sys.modules["pulumi_aws.fsx"]
from gpuplan.slim_aws import install, SlimService
install(("fsx",))
assert sys.modules["pulumi_aws.fsx"] is before and not isinstance(before, SlimService)
print("ok")
""")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
