"""Issue 26, second pass: GuideLLM reports, --calibration on frontier/check/cost, observe --out round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuplan import measurements
from gpuplan.cli import app
from planner.physics.calibration import load

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures" / "measurements"
GUIDELLM = FIXTURES / "guidellm-benchmarks-stripped.json"


def test_published_guidellm_report_is_read_unchanged():
    [m] = measurements.read(GUIDELLM)
    assert m.model_id == "example_model" and m.date == "2025-06-05" and m.engine is None
    # a synchronous run: one stream; 46 successful requests of 257 (mean 257.1) prompt and 128 output tokens
    assert m.concurrency == 1 and m.prompt_tokens == 257 and m.output_tokens == 128
    assert m.metrics == pytest.approx({"output_tokens_per_s": 5888.0 / 29.997201442718506,
                                       "time_to_first_token_s": 0.016792535781860348,
                                       "inter_token_latency_s": 0.004941609043733832})


def test_guidellm_report_calibrates(tmp_path):
    out = tmp_path / "c.yaml"
    run = runner.invoke(app, ["calibrate", str(GUIDELLM), "--model", "llama-3.1-8b", "--instance-type", "g6e.xlarge",
                              "--engine", "vllm", "--tensor-parallel", "1", "--out", str(out)])
    assert run.exit_code == 0, run.output
    f = load(out).find("L40S", "vllm", "inter_token_latency_s")
    assert f.results[0].measured == pytest.approx(0.004941609043733832) and f.results[0].date == "2025-06-05"


@pytest.mark.parametrize("edit, message", [
    (lambda b: b["metrics"].pop("time_to_first_token_ms"), "benchmarks[0].metrics.time_to_first_token_ms.successful: missing"),
    (lambda b: b["metrics"]["inter_token_latency_ms"]["successful"].update(mean="x"),
     "benchmarks[0].metrics.inter_token_latency_ms.successful.mean: missing or not a non-negative number"),
    (lambda b: b.update(duration=0), "benchmarks[0].duration: must be above 0"),
    (lambda b: b.update(type_="generative_text_response"), "benchmarks[0].type_: expected generative_benchmark"),
])
def test_bad_guidellm_report_exit_2_naming_the_field(tmp_path, edit, message):
    report = json.loads(GUIDELLM.read_text())
    edit(report["benchmarks"][0])
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(report))
    run = runner.invoke(app, ["calibrate", str(path), "--instance-type", "g6e.xlarge", "--model", "llama-3.1-8b",
                              "--engine", "vllm"])
    assert run.exit_code == 2 and message in run.output and "Traceback" not in run.output


SERVING = {"name": "chat", "kind": "inference", "model": {"preset": "llama-3.1-8b"}, "precision": "bf16",
           "serving": {"engine": "vllm", "prompt_tokens": 1000, "output_tokens": 250, "max_context_tokens": 1250,
                       "concurrent_requests": 16},
           "constraints": {"instance_types": ["g6e.xlarge", "g6e.2xlarge", "g6.xlarge"]}}
TRAINING = {"name": "ft", "kind": "training", "model": {"preset": "llama-3.1-8b"}, "precision": "bf16",
            "training": {"tokens": 2e9, "sequence_length": 4096, "global_batch_tokens": 1048576},
            "constraints": {"instance_types": ["p5.48xlarge", "p4d.24xlarge"]}}


def calibration_file(tmp_path: Path, accelerator: str, engine: str, metric: str, factor: float) -> Path:
    path = tmp_path / "calibration.yaml"
    evidence = {"source": "run.json", "date": "2026-11-20", "instance_type": "x", "model": "llama-3.1-8b",
                "layout": "TP 1 × PP 1 × DP 1", "measured": factor, "predicted": 1.0}
    path.write_text(yaml.safe_dump({"factors": [{"accelerator": accelerator, "engine": engine, "metric": metric,
                                                 "factor": factor, "spread": 1.0, "instance_types": ["x"],
                                                 "results": [evidence]}]}))
    return path


def frontier_json(tmp_path: Path, workload: dict, *extra: str) -> dict:
    spec = tmp_path / "w.yaml"
    spec.write_text(yaml.safe_dump({"workloads": [workload]}))
    run = runner.invoke(app, ["frontier", str(spec), "--format", "json", *extra])
    assert run.exit_code == 0, run.output
    return json.loads(run.output)["frontiers"][0]


def _points(f: dict) -> list[tuple]:
    return [(p["choice"]["instance_type"], p["choice"]["nodes"], p["performance"].get("inter_token_latency_s"),
             p["performance"].get("time_to_train_s")) for p in f["points"]]


@pytest.mark.parametrize("workload", [SERVING, TRAINING])
def test_frontier_with_a_calibration_that_matches_nothing_is_unchanged(tmp_path, workload):
    plain = frontier_json(tmp_path, workload)
    cal = calibration_file(tmp_path, "Gaudi3", "vllm", "inter_token_latency_s", 2.0)
    same = frontier_json(tmp_path, workload, "--calibration", str(cal))
    assert _points(same) == _points(plain) and same["chosen"] == plain["chosen"]


def test_frontier_points_carry_the_factor_and_the_sweep_runs_on_corrected_figures(tmp_path):
    plain = frontier_json(tmp_path, SERVING)
    cal = calibration_file(tmp_path, "L40S", "vllm", "inter_token_latency_s", 3.0)
    slow = frontier_json(tmp_path, SERVING, "--calibration", str(cal))
    plain_itl = {(p["choice"]["instance_type"], json.dumps(p["layout"], sort_keys=True)): p["performance"]["inter_token_latency_s"]
                 for p in plain["points"]}
    compared = 0
    for p in slow["points"]:
        key = (p["choice"]["instance_type"], json.dumps(p["layout"], sort_keys=True))
        if p["choice"]["accelerator"] == "L40S":
            assert any(w.startswith("calibrated: ITL") and "×3.00" in w for w in p["warnings"])
            if key in plain_itl:
                assert p["performance"]["inter_token_latency_s"] == pytest.approx(3 * plain_itl[key])
                compared += 1
        else:
            assert not any(w.startswith("calibrated:") for w in p["warnings"])
    assert compared > 0 and len(slow["points"]) != len(plain["points"])
    # no point is beaten on every axis by a no costlier one (the chosen plan excepted)
    axes = [(p["cost"]["usd_per_hour"], p["performance"]["inter_token_latency_s"], p["performance"]["time_to_first_token_s"])
            for p in slow["points"]]
    for i, a in enumerate(axes):
        if i != slow["chosen"]:
            assert not any(b[0] <= a[0] and b[1] <= a[1] and b[2] <= a[2] for j, b in enumerate(axes) if j < i)


def test_frontier_honours_gpuplan_calibration_in_stack_config(tmp_path):
    cal = calibration_file(tmp_path, "L40S", "vllm", "inter_token_latency_s", 3.0)
    stack = tmp_path / "Pulumi.dev.yaml"
    stack.write_text(yaml.safe_dump({"config": {"gpuplan:calibration": cal.name, "gpuplan:workloads": [SERVING]}}))
    run = runner.invoke(app, ["frontier", str(stack), "--format", "json"])
    assert run.exit_code == 0, run.output
    assert any(w.startswith("calibrated: ITL") for p in json.loads(run.output)["frontiers"][0]["points"] for w in p["warnings"])


def test_check_and_cost_take_calibration(tmp_path):
    spec = tmp_path / "w.yaml"
    spec.write_text(yaml.safe_dump({"workloads": [TRAINING]}))
    bad = tmp_path / "bad.yaml"
    bad.write_text("factors: 3\n")
    run = runner.invoke(app, ["check", str(spec), "--calibration", str(bad)])
    assert run.exit_code == 2 and "--calibration" in run.output and "factors" in run.output
    plain = runner.invoke(app, ["plan", str(spec), "--format", "json"])
    accelerator = json.loads(plain.output)["plans"][0]["choice"]["accelerator"]
    cal = calibration_file(tmp_path, accelerator, "training", "training_tokens_per_s", 0.5)
    assert runner.invoke(app, ["check", str(spec), "--calibration", str(cal)]).exit_code == 0
    costs = [json.loads(runner.invoke(app, ["cost", "--head", str(spec), "--base", str(spec), "--format", "json",
                                            "--no-policies", *extra]).output)["workloads"][0]
             for extra in ([], ["--calibration", str(cal)])]
    # half the measured throughput: the run takes twice as long and costs twice as much, on both sides
    assert costs[0]["cost_unit"] == "usd_per_training_run" and costs[1]["change_usd"] == 0
    assert costs[1]["after_usd"] == pytest.approx(2 * costs[0]["after_usd"], rel=1e-3)
    assert costs[1]["before_usd"] == pytest.approx(2 * costs[0]["before_usd"], rel=1e-3)


def _plan(spec: Path) -> dict:
    run = runner.invoke(app, ["plan", str(spec), "--format", "json"])
    assert run.exit_code == 0, run.output
    return {p["workload"]: p for p in json.loads(run.output)["plans"]}


def test_observe_out_round_trips_through_calibrate(aws_env, tmp_path):
    """Serving 25% slower per token and training at 75% of the planned tokens/s, as CloudWatch shows
    them: observe --out, calibrate that file, and the corrected plans land within 5% of what was seen."""
    import boto3
    from datetime import datetime, timedelta, timezone

    from gpuplan.observe import endpoint_name
    from planner import load_workloads, plan_workloads
    from planner.physics.calibration import apply

    spec = tmp_path / "w.yaml"
    spec.write_text(yaml.safe_dump({"workloads": [SERVING, TRAINING]}))
    plans = _plan(spec)
    chat, ft = plans["chat"]["performance"], plans["ft"]["performance"]
    seen_itl_s = chat["inter_token_latency_s"] / 0.75
    latency_us = (chat["time_to_first_token_s"] + 249 * seen_itl_s) * 1e6
    seen_tokens_per_s = 0.75 * ft["training_tokens_per_s"]
    dims = [{"Name": "EndpointName", "Value": endpoint_name("chat", plans["chat"]["choice"]["instance_type"])},
            {"Name": "VariantName", "Value": "AllTraffic"}]
    cw = boto3.client("cloudwatch", region_name="us-east-1")
    # a minute back: moto (as CloudWatch) excludes points at or after EndTime, which it truncates to the second
    now = datetime.now(timezone.utc) - timedelta(minutes=1)
    cw.put_metric_data(Namespace="AWS/SageMaker", MetricData=[
        {"MetricName": "ModelLatency", "Dimensions": dims, "Timestamp": now, "Value": latency_us, "Unit": "Microseconds"}])
    cw.put_metric_data(Namespace="gpuplan/training", MetricData=[
        {"MetricName": "TokensPerSecond", "Dimensions": [{"Name": "Workload", "Value": "ft"}], "Timestamp": now,
         "Value": seen_tokens_per_s, "Unit": "Count/Second"}])
    seen = tmp_path / "observed.json"
    run = runner.invoke(app, ["observe", str(spec), "--since", "1h", "--out", str(seen)])
    assert run.exit_code == 0, run.output
    records = {r["workload"]: r for r in json.loads(seen.read_text())["observations"]}
    assert records["chat"]["metrics"]["inter_token_latency_s"] == pytest.approx(seen_itl_s, rel=1e-6)
    assert records["ft"]["metrics"]["training_tokens_per_s"] == pytest.approx(seen_tokens_per_s, rel=1e-6)
    cal = tmp_path / "c.yaml"
    run = runner.invoke(app, ["calibrate", str(seen), "--out", str(cal)])
    assert run.exit_code == 0, run.output
    after = {p.workload: apply(p, load(cal)) for p in plan_workloads(load_workloads(spec)).plans}
    assert abs(after["chat"].performance.inter_token_latency_s / seen_itl_s - 1) < 0.05
    assert abs(after["ft"].performance.training_tokens_per_s / seen_tokens_per_s - 1) < 0.05


def test_bad_observation_file_exit_2_naming_the_field(tmp_path):
    path = tmp_path / "observed.json"
    record = {"workload": "chat", "kind": "serving", "model": "llama-3.1-8b", "instance_type": "g6e.xlarge",
              "engine": "vllm", "nodes": 1, "tensor_parallel": 1, "pipeline_parallel": 1, "data_parallel": 1,
              "concurrency": 16, "prompt_tokens": 1000, "output_tokens": 250, "date": "2026-11-20", "source": "cw",
              "metrics": {"itl": 0.02}}
    path.write_text(json.dumps({"format": "gpuplan-observation", "version": 1, "observations": [record]}))
    run = runner.invoke(app, ["calibrate", str(path)])
    assert run.exit_code == 2 and "observations[0].metrics.itl: not one of" in run.output
    record["metrics"] = {"inter_token_latency_s": 0.02}
    record["concurrency"] = 0
    path.write_text(json.dumps({"format": "gpuplan-observation", "version": 1, "observations": [record]}))
    run = runner.invoke(app, ["calibrate", str(path)])
    assert run.exit_code == 2 and "observations[0].concurrency: missing or not a whole number above 0" in run.output


def test_cli_module_runs_as_a_program():
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "gpuplan.cli", "calibrate", "--help"], capture_output=True, text=True,
                         check=False, cwd=Path(__file__).parent.parent)
    words = " ".join(run.stdout.split())  # help wraps at the terminal width
    assert run.returncode == 0 and "GuideLLM report" in words and "--out" in words
