"""Training nodes publish tokens/s and step time where `gpuplan observe` reads them: the hook the
user data installs (/opt/gpuplan/publish-metric), run with stubbed `aws` and `curl`; its role may put
metrics into gpuplan/training only (parliament finds nothing); shellcheck reads the hook."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path

import pytest

from components.training import METRICS_NAMESPACE, NODE_POLICY, PUBLISHER_PATH, publisher
from gpuplan import observe
from tests.iam_lint import lint_policy
from tests.pulumi_harness import run_program, stack_config
from tests.test_user_data import _shellcheck


def _stack_script_and_policy() -> tuple[str, dict]:
    stack = run_program(stack_config())
    [lt] = [r for r in stack.of_type("launchTemplate:LaunchTemplate") if r.name == "pretrain-70b-lt"]
    [policy] = [r for r in stack.of_type("rolePolicy:RolePolicy") if r.name == "pretrain-70b-discovery"]
    return base64.b64decode(lt.inputs["userData"]).decode(), json.loads(policy.inputs["policy"])


SCRIPT, POLICY = _stack_script_and_policy()


def _hook(tmp_path: Path) -> Path:
    """The publisher exactly as the user data writes it."""
    body = re.search(rf"cat > {re.escape(PUBLISHER_PATH)} <<'EOF'\n(.*?)\nEOF\n", SCRIPT, re.S)[1] + "\n"
    path = tmp_path / "publish-metric"
    path.write_text(body)
    path.chmod(0o755)
    return path


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in {"aws": f'printf "%s\\n" "$@" > {tmp_path}/aws-args\n',
                       "curl": 'case "$*" in *api/token*) echo token;; *placement/region*) echo eu-west-1;; *) exit 22;; esac\n'}.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    return subprocess.run([str(_hook(tmp_path)), *args], env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
                          capture_output=True, text=True, check=False)


def test_the_hook_puts_both_metrics_where_observe_reads_them(tmp_path):
    run = _run(tmp_path, "81234.5", "12.7")
    assert run.returncode == 0, run.stderr
    args = (tmp_path / "aws-args").read_text().splitlines()
    assert args[:6] == ["cloudwatch", "put-metric-data", "--region", "eu-west-1", "--namespace", observe.TRAINING_NAMESPACE]
    assert args[6:] == ["--metric-data",
                        "MetricName=TokensPerSecond,Value=81234.5,Unit=Count/Second,Dimensions=[{Name=Workload,Value=pretrain-70b}]",
                        "MetricName=StepTimeSeconds,Value=12.7,Unit=Seconds,Dimensions=[{Name=Workload,Value=pretrain-70b}]"]
    # observe asks for exactly these names under exactly this dimension (gpuplan/observe.py)
    source = Path(observe.__file__).read_text()
    assert '"TokensPerSecond", dims' in source and '"StepTimeSeconds", dims' in source
    assert 'dims = {"Workload": p.workload}' in source
    assert f"GPUPLAN_PUBLISH_METRIC={PUBLISHER_PATH}" in SCRIPT


@pytest.mark.parametrize("args", [(), ("fast", "1"), ("100",), ("-5", "1"), ("1", "2", "3")])
def test_the_hook_refuses_anything_but_two_numbers(tmp_path, args):
    run = _run(tmp_path, *args)
    assert run.returncode == 2 and "usage: publish-metric TOKENS_PER_SECOND STEP_TIME_SECONDS" in run.stderr
    assert not (tmp_path / "aws-args").exists()


def test_put_metric_data_is_held_to_the_training_namespace():
    assert METRICS_NAMESPACE == observe.TRAINING_NAMESPACE == "gpuplan/training"
    statement = next(s for s in POLICY["Statement"] if s["Sid"] == "PublishTrainingMetrics")
    assert statement == {"Sid": "PublishTrainingMetrics", "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"],
                         "Resource": "*", "Condition": {"StringEquals": {"cloudwatch:namespace": "gpuplan/training"}}}
    assert POLICY == NODE_POLICY
    assert lint_policy(POLICY) == []


def test_shellcheck_passes_the_hook(tmp_path):
    result = subprocess.run([_shellcheck(), "--severity=style", str(_hook(tmp_path))], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout
    assert publisher("pretrain-70b") in SCRIPT


def test_the_endpoint_dimensions_are_the_components():
    from components import inference

    assert observe.VARIANT == inference.VARIANT
