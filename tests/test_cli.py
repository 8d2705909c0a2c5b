"""`gpuplan plan`, `models` and `catalog`: output pinned by golden files, exit codes, JSON shape."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from gpuplan.cli import app
from tests.conftest import ROOT, write_yaml
from tests.golden_files import assert_golden

runner = CliRunner()
EXAMPLES = str(ROOT / "examples" / "workloads.yaml")


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_plan_renderers_match_golden_files():
    for fmt, name in (("json", "plan.json"), ("markdown", "plan.md"), ("table", "plan.txt")):
        result = invoke("plan", EXAMPLES, "--format", fmt)
        assert result.exit_code == 0, result.output
        assert_golden(name, result.output)


def test_plan_json_has_design_shape_and_numbers():
    data = json.loads(invoke("plan", EXAMPLES, "--format", "json").output)
    plans = {p["workload"]: p for p in data["plans"]}
    assert set(plans) == {"chat-8b", "chat-70b", "finetune-7b-qlora", "pretrain-70b"}
    serve, train = plans["chat-70b"], plans["pretrain-70b"]
    for section in ("choice", "layout", "memory", "performance", "cost", "alternatives", "rejected", "warnings"):
        assert section in serve
    assert set(serve["memory"]["per_device_bytes"]) == {"weights", "kv_cache", "activations", "gradients",
                                                       "optimizer", "overhead"}
    for key in ("output_tokens_per_s", "output_tokens_per_s_per_replica", "time_to_first_token_s", "inter_token_latency_s"):
        assert isinstance(serve["performance"][key], float)
    for key in ("training_tokens_per_s", "step_time_s", "achieved_tflops_per_device", "model_flops_utilization",
                "time_to_train_s"):
        assert isinstance(train["performance"][key], float)
    assert isinstance(serve["cost"]["usd_per_month"], float) and serve["cost"]["price_date"]
    assert train["cost"]["usd_per_training_run"] > 0
    assert all(isinstance(r["reason"], str) and r["reason"] for r in serve["rejected"])


def test_plan_one_workload_and_region_override():
    data = json.loads(invoke("plan", EXAMPLES, "--workload", "chat-8b", "--format", "json", "--region", "us-west-2").output)
    assert [p["workload"] for p in data["plans"]] == ["chat-8b"]
    assert data["plans"][0]["choice"]["region"] == "us-west-2"
    result = invoke("plan", EXAMPLES, "--workload", "nope")
    assert result.exit_code == 2 and "no workload named 'nope'" in result.output


def test_infeasible_exits_1_with_nearest_misses(tmp_path):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{
        "name": "huge", "kind": "inference", "model": {"preset": "llama-3.1-405b"},
        "constraints": {"families": ["g5"], "max_nodes": 2}}]})
    result = invoke("plan", str(path))
    assert result.exit_code == 1
    assert f"error: {path}: workloads[0]: workload 'huge': no instance type in the catalog can run this inference workload" in result.output
    assert "nearest misses:" in result.output and "g5.48xlarge: 8 × 22.4 GiB (20.1 GiB usable), needs" in result.output


def test_catalog_overlay_adds_an_onprem_node(tmp_path):
    overlay = write_yaml(tmp_path / "extra.yaml", {"instance_types": [{
        "name": "onprem-dgx-a100", "family": "dgx", "accelerator": "A100-80GB", "accelerators_per_node": 8,
        "inter_node_gbps": 1600, "efa": True, "usd_per_hour": 12.5}]})  # a price of 0 is refused (issue 24)
    spec = write_yaml(tmp_path / "w.yaml", {"catalog": "extra.yaml", "workloads": [{
        "name": "chat", "kind": "inference", "model": {"preset": "llama-3-70b"},
        "constraints": {"instance_types": ["onprem-dgx-a100"], "deploy_target": "ec2"}}]})
    data = json.loads(invoke("plan", str(spec), "--format", "json").output)
    assert data["plans"][0]["choice"]["instance_type"] == "onprem-dgx-a100"
    cost = data["plans"][0]["cost"]
    assert cost["instances_usd_per_hour"] == 12.5  # EC2 also bills the node's root and model volumes
    assert cost["usd_per_hour"] == 12.5 + sum(i["usd_per_hour"] for i in cost["provisioned"])
    assert str(overlay) == data["catalog"]


def test_models_lists_presets():
    result = invoke("models")
    assert result.exit_code == 0
    for preset in ("llama-3.1-405b", "mixtral-8x22b", "qwen2.5-72b", "gemma-2-27b", "deepseek-moe-16b", "gpt-3-175b"):
        assert preset in result.output
    assert "46.70B" in result.output and "12.88B" in result.output  # Mixtral 8x7B total and active


def test_catalog_list_and_show():
    listing = invoke("catalog", "list", "--region", "us-east-1")
    assert listing.exit_code == 0 and "p5.48xlarge" in listing.output and "55.0400" in listing.output
    shown = invoke("catalog", "show", "p4d.24xlarge")
    assert shown.exit_code == 0
    assert "memory_mib: 40960" in shown.output and "tsaol/aws-gpu" in shown.output and "2025-11-30" in shown.output
    missing = invoke("catalog", "show", "p5.48xlarg")
    assert missing.exit_code == 2 and "did you mean p5.48xlarge" in missing.output


def test_planning_never_imports_pulumi_or_boto3():
    code = ("import sys; from gpuplan.cli import app; from typer.testing import CliRunner; "
            f"r = CliRunner().invoke(app, ['plan', {EXAMPLES!r}, '--format', 'json']); assert r.exit_code == 0; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pulumi', 'pulumi_aws', 'boto3', 'botocore'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
