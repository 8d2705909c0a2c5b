"""Inputs a hostile or careless user hands the CLI (issue 11): each one exits 2 with one line naming
the file and the field as written, or exits 1 with the nearest misses, and never exits 0 with a plan
built on a value that was silently read as something else."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from gpuplan.cli import app
from tests.conftest import write_yaml

LLAMA_8B = {"name": "m", "kind": "inference", "model": {"preset": "llama-3.1-8b"}}
MOE = {"params": 1.0e9, "layers": 32, "hidden_size": 4096, "attention_heads": 32, "kv_heads": 8, "head_dim": 128,
       "ffn_hidden_size": 14336, "vocab_size": 32000, "experts": 8, "active_experts": 2}


def plan(path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize("workload, expected", [
    ({"name": "m", "kind": "inference", "model": {"architecture": MOE}},
     "workloads[0].model: architecture: params 1e+09 is smaller than the idle experts alone"),
    ({"name": "m", "kind": "inference", "model": {"preset": "deepseek-moe-16b", "architecture": {"shared_experts": 64}}},
     "workloads[0].model: architecture: shared_experts must be fewer than experts"),
    ({**LLAMA_8B, "serving": {"concurrent_requests": True}},
     "workloads[0].serving.concurrent_requests: expected a number or text, not true/false"),
    ({**LLAMA_8B, "layout": {"data_parallel": 2}},
     "workloads[0]: layout.data_parallel is a training setting and does not apply to kind inference"),
    ({"name": "t", "kind": "training", "model": {"preset": "llama-3.1-8b"}, "training": {"tokens": 1e9},
      "layout": {"replicas": 2}}, "workloads[0]: layout.replicas is a serving setting and does not apply to kind training"),
])
def test_values_that_used_to_plan_silently_are_errors(tmp_path, workload, expected):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [workload]})
    code, output = plan(path)
    assert code == 2 and f"error: {path}: {expected}" in output.replace("\n", " "), output


def test_a_pinned_tp_that_splits_no_heads_evenly_is_infeasible(tmp_path):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{**LLAMA_8B, "layout": {"tensor_parallel": 3}}]})
    code, output = plan(path)
    assert code == 1, output
    assert "p5.48xlarge: tensor_parallel 3 does not split the node's 8 devices and 32 attention heads evenly" in output


@pytest.mark.parametrize("text, expected", [
    ("workloads:\n  - name: m\n    kind: inference\n    model: {preset: llama-3.1-8b}\n    model: {preset: llama-3.1-70b}\n",
     "line 5, column 5: malformed YAML: key 'model' appears twice (first on line 4)"),
    ("1: x\nworkloads: []\n", "line 1, column 1: malformed YAML: key '1' is not text"),
    ("[" * 5000 + "]" * 5000, "malformed YAML: nested too deeply to read"),
])
def test_yaml_that_would_be_misread_is_refused(tmp_path, text, expected):
    path = tmp_path / "w.yaml"
    path.write_text(text)
    code, output = plan(path)
    assert code == 2 and f"error: {path}: {expected}" in output, output


def test_files_that_are_not_files_are_refused_without_hanging(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # reading it would block forever
    for path in (fifo, "/dev/zero", tmp_path):
        code, output = plan(path)
        assert code == 2 and "not a regular file" in output, (path, output)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (10 * 1024 * 1024 + 1))
    assert plan(big) == (2, f"error: {big}: file is larger than 10 MiB\n")


def test_policy_config_must_be_a_json_object_file(tmp_path):
    from tests.conftest import ROOT

    runner = CliRunner()
    listed = tmp_path / "p.json"
    listed.write_text('["all"]')
    for config, expected in ((tmp_path, "not a regular file"), (listed, "expected a JSON object")):
        result = runner.invoke(app, ["check", str(ROOT / "Pulumi.example.yaml"), "--policy-config", str(config)])
        assert result.exit_code == 2 and expected in result.output, result.output


X1 = {"name": "X1", "memory_mib": 81920, "memory_bandwidth_gb_s": 3000, "intra_node_gb_s": 450, "tflops": {"bf16": 500}}
X1_NODE = {"name": "x1.8xl", "family": "x1", "accelerator": "X1", "accelerators_per_node": 8, "usd_per_hour": 10}


@pytest.mark.parametrize("overlay, expected", [
    ({"accelerators": [{**X1, "tflops": {}}]},
     "accelerators[0]: tflops: give the dense peak TFLOP/s of at least one precision"),
    ({"accelerators": [{**X1, "tflops": {"bf16": 0}}]}, "accelerators[0].tflops.bf16: must be from 0.01 to 100000 TFLOP/s (got 0)"),
    ({"accelerators": [{**X1, "tflops": {"bf16": -5}}]}, "accelerators[0].tflops.bf16: must be from 0.01 to 100000 TFLOP/s (got -5)"),
    ({"accelerators": [{**X1, "tflops": {"bf16": float("nan")}}]}, "accelerators[0].tflops.bf16: Input should be a finite number"),
    ({"accelerators": [{**X1, "tflops": {"bf-16": 500}}]}, "accelerators[0].tflops.bf-16: Input should be 'fp32'"),
    ({"accelerators": [{**X1, "supports": {"fp8": True}}]},
     "accelerators[0]: supports.fp8 is true but tflops.fp8 is missing"),
    ({"accelerators": ["X1"]}, "accelerators[0]: expected a mapping (got 'X1')"),
    ({"accelerators": [None]}, "accelerators[0]: expected a mapping (got None)"),
    ({"sources": ["a", "b"]}, "sources: expected a mapping (got ['a', 'b'])"),
    ({"instance_types": 5}, "instance_types: Input should be a valid list (got 5)"),
    ({"instance_types": [{**X1_NODE, "accelerator": "H100-80GB", "instance_type": "x1.8xl"}]},
     "instance_types[0].instance_type: unknown field 'instance_type'"),
    ({"instance_types": [{**X1_NODE, "accelerator": "H100-80GB", "efa": True}]},
     "instance_types[0]: efa is true but inter_node_gbps is 0"),
    ({"instance_types": [X1_NODE]}, "instance_types[0].accelerator: unknown accelerator 'X1'"),
    ({"accelerators": [X1], "instance_types": [{**X1_NODE, "usd_per_hour": float("inf")}]},
     "instance_types[0].usd_per_hour: Input should be a finite number"),
])
def test_overlay_errors_point_into_the_overlay_as_written(tmp_path, overlay, expected):
    """Each of these was a traceback or an index into the merged catalog (issue 11)."""
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [LLAMA_8B]})
    catalog = tmp_path / "overlay.yaml"
    catalog.write_text(__import__("yaml").safe_dump(overlay))
    result = CliRunner().invoke(app, ["plan", str(path), "--catalog", str(catalog)])
    assert result.exit_code == 2 and f"error: {catalog}: {expected}" in result.output, result.output


def test_an_accelerator_without_the_workloads_rate_is_a_rejection_not_a_crash(tmp_path):
    fp16_only = {**X1, "tflops": {"fp16": 500}, "supports": {"bf16": False}}
    overlay = write_yaml(tmp_path / "o.yaml", {"accelerators": [fp16_only], "instance_types": [X1_NODE]})
    for precision, reason in (("bf16", "X1 has no bf16 support"), ("fp32", "X1 has no tf32 peak TFLOP/s in the catalog")):
        path = write_yaml(tmp_path / "w.yaml", {"workloads": [{**LLAMA_8B, "precision": precision,
                                                                 "constraints": {"families": ["x1"]}}]})
        result = CliRunner().invoke(app, ["plan", str(path), "--catalog", str(overlay)])
        assert result.exit_code == 1 and f"x1.8xl: {reason}" in result.output, result.output
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{**LLAMA_8B, "precision": "fp16",
                                                             "constraints": {"families": ["x1"]}}]})
    assert CliRunner().invoke(app, ["plan", str(path), "--catalog", str(overlay)]).exit_code == 0


def test_planner_errors_name_the_file_and_the_workload_index(tmp_path):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [
        LLAMA_8B, {**LLAMA_8B, "name": "n", "constraints": {"families": ["zz9"]}}]})
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {path}: workloads[1].constraints.families: unknown family zz9"), result.output


def test_stack_file_errors_use_the_config_key_as_written(tmp_path):
    stack = write_yaml(tmp_path / "Pulumi.dev.yaml", {"config": {
        "aws:region": "us-east-1", "gpuplan:workloads": [{**LLAMA_8B, "serving": {"prompt_tokens": -1}}]}})
    result = CliRunner().invoke(app, ["plan", str(stack)])
    assert result.exit_code == 2
    assert f"error: {stack}: gpuplan:workloads[0].serving.prompt_tokens: " in result.output, result.output


def test_many_workloads_share_searches_and_report_progress(tmp_path):
    """5,000 workloads in one file (issue 11): identical shapes are searched once; `plan` advances a
    progress bar on stderr and keeps stdout the report."""
    from planner import load_workloads, plan_workloads

    workloads = [{**LLAMA_8B, "name": f"m{i}", "serving": {"concurrent_requests": 8 * (1 + i % 2)}} for i in range(25)]
    path = write_yaml(tmp_path / "w.yaml", {"workloads": workloads})
    told: list[tuple[int, int]] = []
    plans = plan_workloads(load_workloads(path), progress=lambda done, total: told.append((done, total))).plans
    assert [p.workload for p in plans] == [f"m{i}" for i in range(25)]
    assert told == [(i, 25) for i in range(1, 26)]
    assert all(p.choice == plans[i % 2].choice and p.layout == plans[i % 2].layout for i, p in enumerate(plans))
    assert plans[0].layout != plans[1].layout  # the two shapes were searched apart
    result = CliRunner().invoke(app, ["plan", str(path), "--format", "json"])
    assert result.exit_code == 0
    import json

    assert [p["workload"] for p in json.loads(result.stdout)["plans"]] == [f"m{i}" for i in range(25)]


def test_the_repository_stands_alone():
    """Nothing tracked points at the design folder beside the checkout, which a user's clone does not have."""
    import subprocess

    from tests.conftest import ROOT

    sibling = "/".join(["..", "shared"])  # spelt apart so this file does not match itself
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    hits = [name for name in tracked if (ROOT / name).is_file() and sibling in (ROOT / name).read_text(errors="ignore")]
    assert hits == []


def test_pinned_replicas_that_need_more_nodes_than_allowed_are_infeasible(tmp_path):
    """`replicas: 8` on one g6e.xlarge used to plan 8× the throughput one instance gives."""
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{**LLAMA_8B, "layout": {"replicas": 8},
                                                             "constraints": {"instance_types": ["g6e.xlarge"],
                                                                             "max_nodes": 1}}]})
    code, output = plan(path)
    assert code == 1 and "g6e.xlarge: needs 8 nodes at TP 1 × PP 1, over constraints.max_nodes 1" in output, output


@pytest.mark.parametrize("overlay_text", ["fsx: \"false\"", "maxInstanceCount: 2.5"])
def test_deployment_values_are_not_coerced(tmp_path, overlay_text):
    import yaml

    from tests.conftest import ROOT

    stack = yaml.safe_load((ROOT / "Pulumi.example.yaml").read_text())
    key, value = overlay_text.split(": ")
    target = "pretrain-70b" if key == "fsx" else "chat-70b"
    stack["config"]["gpuplan:deployments"][target][key] = yaml.safe_load(value)
    path = write_yaml(tmp_path / "Pulumi.dev.yaml", stack)
    for command in (["plan", str(path)], ["check", str(path)]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2 and f"gpuplan:deployments.{target}.{key}" in result.output, result.output
