"""Every bad input: exit code 2, one message naming the file, the field path and what is allowed."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from gpuplan.cli import app
from tests.conftest import write_yaml

runner = CliRunner()
GOOD = {"name": "chat", "kind": "inference", "model": {"preset": "llama-3-8b"}}


def plan_error(tmp_path, document) -> str:
    path = write_yaml(tmp_path / "w.yaml", document) if not isinstance(document, str) else tmp_path / "w.yaml"
    if isinstance(document, str):
        path.write_text(document)
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.startswith("error: ")
    assert len(result.output.strip().splitlines()) == 1
    return result.output


@pytest.mark.parametrize("workload, expected", [
    ({**GOOD, "model": {"preset": "llama3-8b"}},
     "workloads[0].model: unknown preset 'llama3-8b'; did you mean llama-3-8b"),
    ({**GOOD, "serving": {"concurrent_requests": -4}},
     "workloads[0].serving.concurrent_requests: Input should be greater than 0 (got -4)"),
    ({**GOOD, "serving": {"max_context_tokens": 10**12}},
     "workloads[0].serving.max_context_tokens: Input should be less than or equal to 10000000"),
    ({**GOOD, "serving": {"tokens": 1e9}},
     "workloads[0].serving.tokens: unknown field 'tokens' here; it belongs in the training: section"),
    ({**GOOD, "training": {"tokens": 1e9}},
     "workloads[0]: training: is only for kind training or fine-tuning (this workload is inference)"),
    ({**GOOD, "precision": "fp4"},
     "workloads[0].precision: must be one of 'fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4', 'mxfp4' or 'nvfp4' (got 'fp4')"),
    ({**GOOD, "kind": "serving"},
     "workloads[0].kind: must be one of 'inference', 'training' or 'fine-tuning' (got 'serving')"),
    ({**GOOD, "name": "Chat_70B"},
     "workloads[0].name: String should match pattern"),
    ({**GOOD, "constraints": {"memory_headroom": 1.5}},
     "workloads[0].constraints.memory_headroom: Input should be less than 0.9 (got 1.5)"),
    ({**GOOD, "serving": {"prompt_tokens": 4000, "output_tokens": 200, "max_context_tokens": 4096}},
     "workloads[0].serving: prompt_tokens + output_tokens (4200) exceeds max_context_tokens (4096)"),
    ({"name": "ft", "kind": "fine-tuning", "model": {"preset": "llama-3-8b"}},
     "workloads[0]: kind fine-tuning needs a training: section with at least tokens"),
    ({"name": "ft", "kind": "training", "model": {"preset": "llama-3-8b"}, "training": {"sequence_length": 2048}},
     "workloads[0].training.tokens: required field is missing"),
    ({**GOOD, "model": {"preset": "llama-3-8b", "architecture": {"kv_heads": 64}}},
     None),
])
def test_bad_workloads_name_file_field_and_allowed(tmp_path, workload, expected):
    output = plan_error(tmp_path, {"workloads": [workload]})
    assert str(tmp_path / "w.yaml") in output
    if expected:
        assert expected in output


def test_architecture_override_is_validated(tmp_path):
    output = plan_error(tmp_path, {"workloads": [{**GOOD, "model": {"preset": "llama-3-8b", "architecture": {"kv_heads": 64}}}]})
    assert "kv_heads cannot exceed attention_heads" in output


def test_malformed_yaml_names_line(tmp_path):
    output = plan_error(tmp_path, "workloads:\n  - name: a\n    kind: [inference\n")
    assert "malformed YAML" in output and "line 4" in output


def test_missing_file(tmp_path):
    result = runner.invoke(app, ["plan", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert result.output == f"error: {tmp_path / 'nope.yaml'}: file not found\n"


def test_duplicate_names_and_empty_list(tmp_path):
    assert "repeated: chat" in plan_error(tmp_path, {"workloads": [GOOD, GOOD]})
    assert "workloads: List should have at least 1 item" in plan_error(tmp_path, {"workloads": []})


def test_unknown_family_and_instance_type(tmp_path):
    output = plan_error(tmp_path, {"workloads": [{**GOOD, "constraints": {"families": ["p9"]}}]})
    assert "constraints.families: unknown family p9; catalog families: g5, g6, g6e, g6f, g7e, inf2" in output
    output = plan_error(tmp_path, {"workloads": [{**GOOD, "constraints": {"instance_types": ["p7.huge"]}}]})
    assert "unknown instance type(s) p7.huge" in output


def test_stack_file_without_workloads(tmp_path):
    output = plan_error(tmp_path, {"config": {"aws:region": "us-east-1"}})
    assert "config: stack file has no gpuplan:workloads" in output


def test_stack_file_workloads_are_read(tmp_path):
    path = write_yaml(tmp_path / "Pulumi.dev.yaml", {"config": {"aws:region": "us-east-1", "gpuplan:workloads": [GOOD]}})
    result = runner.invoke(app, ["plan", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert '"workload": "chat"' in result.output


def test_training_on_sagemaker_is_rejected(tmp_path):
    output = plan_error(tmp_path, {"workloads": [{"name": "t", "kind": "training", "model": {"preset": "llama-3-8b"},
                                                  "training": {"tokens": 1e9}, "constraints": {"deploy_target": "sagemaker"}}]})
    assert "deploy_target sagemaker is for inference" in output


def test_bad_catalog_overlay(tmp_path):
    workloads = write_yaml(tmp_path / "w.yaml", {"workloads": [GOOD]})
    overlay = write_yaml(tmp_path / "extra.yaml", {"instance_types": [{"name": "x", "family": "x", "accelerator": "Z100",
                                                                       "accelerators_per_node": 8}]})
    result = runner.invoke(app, ["plan", str(workloads), "--catalog", str(overlay)])
    assert result.exit_code == 2
    assert "extra.yaml" in result.output and "unknown accelerator 'Z100'" in result.output


def test_a_stack_files_region_is_every_workloads_region(tmp_path):
    from planner.workload.errors import SpecError
    from planner.workload.spec import load_workloads

    stack = {"config": {"aws:region": "eu-west-1", "gpuplan:workloads": [
        {"name": "a", "kind": "inference", "model": {"preset": "llama-3.1-8b"}},
        {"name": "b", "kind": "inference", "model": {"preset": "llama-3.1-8b"}, "constraints": {"region": "eu-west-1"}}]}}
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(stack))
    assert [w.constraints.region for w in load_workloads(path).workloads] == ["eu-west-1", "eu-west-1"]
    stack["config"]["gpuplan:workloads"][1]["constraints"]["region"] = "us-east-1"
    path.write_text(yaml.safe_dump(stack))
    with pytest.raises(SpecError) as err:
        load_workloads(path)
    assert str(err.value) == (f"{path}: gpuplan:workloads[1].constraints.region: 'us-east-1' disagrees with the stack's "
                              "aws:region 'eu-west-1': a stack deploys in one region; drop constraints.region or set "
                              "aws:region to it")
