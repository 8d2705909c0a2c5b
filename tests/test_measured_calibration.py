"""`gpuplan calibrate` and `--calibration`: published benchmark files read unchanged, a measured result
moves the prediction onto itself, nothing passes a physical roof, bad files are refused with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuplan import measurements
from gpuplan.cli import app
from planner.hardware import catalog as catalog_mod
from planner.physics import efficiency
from planner.physics.calibration import apply, load
from planner.pipeline import plan_workload
from planner.workload.spec import Workload

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures" / "measurements"
SETUP = {"name": "chat", "kind": "inference", "model": {"preset": "llama-3.1-8b"}, "precision": "bf16",
         "serving": {"engine": "vllm", "prompt_tokens": 1000, "output_tokens": 250, "max_context_tokens": 1250,
                     "concurrent_requests": 16},
         "constraints": {"instance_types": ["g6e.xlarge"], "deploy_target": "ec2"},
         "layout": {"tensor_parallel": 1, "pipeline_parallel": 1, "replicas": 1, "nodes": 1}}


def predicted():
    return plan_workload(Workload.model_validate(SETUP), catalog_mod.load(None))


def vllm_result(tmp_path: Path, tokens_per_s: float, itl_s: float, ttft_s: float, name: str = "run.json") -> Path:
    """A `vllm bench serve --save-result` record with the fields the real one has (fixture above)."""
    record = json.loads((FIXTURES / "vllm-bench-serve-llama-3.2-3b.json").read_text())
    record.update({"model_id": "meta-llama/Llama-3.1-8B-Instruct", "date": "20261120-101500", "max_concurrency": 16,
                   "completed": 200, "total_input_tokens": 200 * 1000, "total_output_tokens": 200 * 250,
                   "output_throughput": tokens_per_s, "mean_itl_ms": itl_s * 1e3, "mean_ttft_ms": ttft_s * 1e3})
    path = tmp_path / name
    path.write_text(json.dumps(record))
    return path


def test_published_vllm_file_is_read_unchanged():
    [m] = measurements.read(FIXTURES / "vllm-bench-serve-llama-3.2-3b.json")
    assert m.model_id == "meta-llama/Llama-3.2-3B-Instruct" and m.date == "2025-05-30" and m.engine == "vllm"
    assert m.prompt_tokens == 999 and m.output_tokens == 270
    assert m.metrics == pytest.approx({"output_tokens_per_s": 2249.247363167692, "time_to_first_token_s": 0.054577085783294024,
                                       "inter_token_latency_s": 0.013505887271504633})
    # no max_concurrency (a request-rate run): Little's law, 8.33 req/s × (TTFT + 269 × ITL) = 30.7
    assert m.concurrency == 31


def test_published_aiperf_export_is_read_unchanged():
    [m] = measurements.read(FIXTURES / "profile_export_aiperf.json")
    assert m.model_id == "openai/gpt-oss-20b" and m.concurrency == 100 and m.date == "2025-10-17"
    assert m.prompt_tokens == 550 and m.output_tokens == 97
    assert m.metrics["output_tokens_per_s"] == pytest.approx(19370.0 / 15.196591969000002)
    assert m.metrics["time_to_first_token_s"] == pytest.approx(1.588797775365)


def test_round_trip_a_result_25_percent_slower_moves_the_prediction_onto_it(tmp_path):
    before = predicted().performance
    measured_tps = 0.75 * before.output_tokens_per_s
    measured_itl = before.inter_token_latency_s / 0.75
    result = vllm_result(tmp_path, measured_tps, measured_itl, before.time_to_first_token_s * 1.1)
    out = tmp_path / "calibration.yaml"
    run = runner.invoke(app, ["calibrate", str(result), "--instance-type", "g6e.xlarge", "--tensor-parallel", "1",
                              "--out", str(out)])
    assert run.exit_code == 0, run.output
    assert "L40S / vllm: output tokens/s ×0.750" in run.output
    after = apply(predicted(), load(out))
    assert abs(after.performance.output_tokens_per_s - measured_tps) / measured_tps < 0.05
    assert abs(after.performance.inter_token_latency_s - measured_itl) / measured_itl < 0.05
    note = next(w for w in after.warnings if w.startswith("calibrated: ITL"))
    assert "×1.33 from 1 measurement(s) on g6e.xlarge / vllm, 2026-11-20" in note
    factor = load(out).find("L40S", "vllm", "output_tokens_per_s")
    assert factor.results[0].layout == "TP 1 × PP 1 × DP 1" and factor.spread == 1.0


def test_spread_is_the_geometric_sd_of_the_ratios(tmp_path):
    base = predicted().performance
    files = [vllm_result(tmp_path, base.output_tokens_per_s * r, base.inter_token_latency_s, base.time_to_first_token_s,
                         f"r{i}.json") for i, r in enumerate((0.8, 1.25))]
    out = tmp_path / "c.yaml"
    assert runner.invoke(app, ["calibrate", *map(str, files), "--instance-type", "g6e.xlarge", "--tensor-parallel", "1",
                               "--out", str(out)]).exit_code == 0
    f = load(out).find("L40S", "vllm", "output_tokens_per_s")
    assert f.factor == pytest.approx(1.0) and f.spread == pytest.approx(1.25 ** (2 ** 0.5), rel=1e-6)


def test_no_roof_is_passed_after_calibration(tmp_path):
    base = predicted().performance
    result = vllm_result(tmp_path, base.output_tokens_per_s * 5, base.inter_token_latency_s / 5, base.time_to_first_token_s)
    out = tmp_path / "c.yaml"
    assert runner.invoke(app, ["calibrate", str(result), "--instance-type", "g6e.xlarge", "--tensor-parallel", "1",
                               "--out", str(out)]).exit_code == 0
    after = apply(predicted(), load(out))
    assert base.bound == "memory-bandwidth"
    cap = 1 / efficiency.MEMORY_BANDWIDTH_EFFICIENCY
    assert after.performance.output_tokens_per_s == pytest.approx(base.output_tokens_per_s * cap)
    assert after.performance.inter_token_latency_s == pytest.approx(base.inter_token_latency_s / cap)
    assert any("capped at the physical roof" in w for w in after.warnings)


def test_plan_with_calibration_says_so(tmp_path):
    base = predicted().performance
    result = vllm_result(tmp_path, base.output_tokens_per_s * 0.75, base.inter_token_latency_s / 0.75,
                         base.time_to_first_token_s)
    cal = tmp_path / "c.yaml"
    runner.invoke(app, ["calibrate", str(result), "--instance-type", "g6e.xlarge", "--tensor-parallel", "1", "--out", str(cal)])
    spec = tmp_path / "w.yaml"
    spec.write_text(yaml.safe_dump({"workloads": [SETUP]}))
    run = runner.invoke(app, ["plan", str(spec), "--calibration", str(cal)])
    assert run.exit_code == 0, run.output
    assert "calibrated: output tokens/s" in run.output and "×0.75 from 1 measurement(s) on g6e.xlarge / vllm" in run.output


def test_training_csv_calibrates_training_throughput(tmp_path):
    out = tmp_path / "c.yaml"
    run = runner.invoke(app, ["calibrate", str(FIXTURES / "training-runs.csv"), "--out", str(out)])
    assert run.exit_code == 0, run.output
    f = load(out).find("H100-80GB", "training", "training_tokens_per_s")
    assert f.results[0].measured == 9000 * 8 and f.results[0].layout == "TP 1 × PP 1 × DP 8"


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.pop("output_throughput") and r.pop("total_output_tokens"), "unknown format"),
    (lambda r: r.pop("total_output_tokens"), "total_output_tokens: missing or not a non-negative number"),
    (lambda r: r.update(mean_ttft_ms="fast"), "mean_ttft_ms: missing or not a non-negative number"),
    (lambda r: r.update(completed=0), "completed: must be above 0"),
])
def test_bad_vllm_file_exit_2_naming_the_field(tmp_path, edit, message):
    record = json.loads((FIXTURES / "vllm-bench-serve-llama-3.2-3b.json").read_text())
    edit(record)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(record))
    run = runner.invoke(app, ["calibrate", str(path), "--instance-type", "g6e.xlarge", "--model", "llama-3.1-8b"])
    assert run.exit_code == 2 and message in run.output and "Traceback" not in run.output


def test_bad_csv_and_unmatched_results_exit_2(tmp_path):
    bad = tmp_path / "runs.csv"
    bad.write_text((FIXTURES / "training-runs.csv").read_text().replace(",9000,", ",lots,"))
    run = runner.invoke(app, ["calibrate", str(bad)])
    assert run.exit_code == 2 and "line 2: tokens_per_s_per_device: not a number (got 'lots')" in run.output
    unmatched = runner.invoke(app, ["calibrate", str(FIXTURES / "vllm-bench-serve-llama-3.2-3b.json"),
                                    "--instance-type", "g6e.xlarge"])
    assert unmatched.exit_code == 2
    assert "model 'meta-llama/Llama-3.2-3B-Instruct' maps to no preset; pass --model PRESET" in unmatched.output
    no_type = runner.invoke(app, ["calibrate", str(FIXTURES / "vllm-bench-serve-llama-3.2-3b.json"), "--model", "llama-3.1-8b"])
    assert no_type.exit_code == 2 and "the file names no instance type; pass --instance-type" in no_type.output
    no_engine = runner.invoke(app, ["calibrate", str(FIXTURES / "profile_export_aiperf.json"), "--model", "llama-3.1-8b",
                                    "--instance-type", "g6e.xlarge"])
    assert no_engine.exit_code == 2 and "names no serving engine; pass --engine" in no_engine.output


def test_bad_calibration_file_exit_2(tmp_path):
    cal = tmp_path / "c.yaml"
    cal.write_text("factors:\n- accelerator: L40S\n  engine: vllm\n  metric: itl\n  factor: -1\n")
    spec = tmp_path / "w.yaml"
    spec.write_text(yaml.safe_dump({"workloads": [SETUP]}))
    run = runner.invoke(app, ["plan", str(spec), "--calibration", str(cal)])
    assert run.exit_code == 2 and "factors.0.factor" in run.output


def test_observe_reads_cloudwatch_plan_against_actual(aws_env, tmp_path):
    import boto3
    from datetime import datetime, timedelta, timezone

    from gpuplan.observe import endpoint_name

    spec = tmp_path / "w.yaml"
    serving = {**SETUP, "constraints": {"instance_types": ["g6e.xlarge"]}}
    serving.pop("layout")
    spec.write_text(yaml.safe_dump({"workloads": [serving]}))
    plan = runner.invoke(app, ["plan", str(spec), "--format", "json"])
    itype = json.loads(plan.output)["plans"][0]["choice"]["instance_type"]
    dims = [{"Name": "EndpointName", "Value": endpoint_name("chat", itype)}, {"Name": "VariantName", "Value": "AllTraffic"}]
    cw = boto3.client("cloudwatch", region_name="us-east-1")
    # a minute back: moto (as CloudWatch) excludes points at or after EndTime, which it truncates to the second
    now = datetime.now(timezone.utc) - timedelta(minutes=1)
    cw.put_metric_data(Namespace="AWS/SageMaker", MetricData=[
        {"MetricName": "ModelLatency", "Dimensions": dims, "Timestamp": now, "Value": 4_000_000, "Unit": "Microseconds"},
        {"MetricName": "Invocations", "Dimensions": dims, "Timestamp": now, "Value": 3600, "Unit": "Count"}])
    run = runner.invoke(app, ["observe", str(spec), "--since", "1h", "--format", "json"])
    assert run.exit_code == 0, run.output
    rows = {r["metric"]: r for r in json.loads(run.output)}
    assert rows["request latency"]["actual"] == pytest.approx(4.0)
    assert rows["requests/s"]["actual"] == pytest.approx(1.0)
    assert rows["concurrent requests"]["actual"] is None


def test_observe_aws_fault_is_one_line(aws_env, tmp_path, monkeypatch):
    spec = tmp_path / "w.yaml"
    spec.write_text(yaml.safe_dump({"workloads": [SETUP]}))
    monkeypatch.setenv("AWS_ENDPOINT_URL", "not a url")
    run = runner.invoke(app, ["observe", str(spec)])
    assert run.exit_code == 2 and len(run.output.strip().splitlines()) == 1 and "Traceback" not in run.output


def test_observe_endpoint_name_matches_the_component():
    from components.inference import endpoint_name as component_name
    from gpuplan.observe import endpoint_name

    assert endpoint_name("chat-8b", "g6e.xlarge") == component_name("chat-8b", "g6e.xlarge")
    assert endpoint_name("x" * 70, "p5.48xlarge") == component_name("x" * 70, "p5.48xlarge")


def test_a_calibrated_band_narrows_to_the_calibrations_spread(tmp_path):
    """Issue 26: with several results the 80% band is the calibration's own (value ÷ g^1.2816 … value ×
    g^1.2816, g the geometric SD of the ratios); with one it keeps the estimator's width, moved by the factor."""
    base = predicted().performance
    files = [vllm_result(tmp_path, base.output_tokens_per_s * r, base.inter_token_latency_s, base.time_to_first_token_s,
                         f"r{i}.json") for i, r in enumerate((0.70, 0.75, 0.80))]
    out = tmp_path / "c.yaml"
    assert runner.invoke(app, ["calibrate", *map(str, files), "--instance-type", "g6e.xlarge", "--tensor-parallel", "1",
                               "--out", str(out)]).exit_code == 0
    cal = load(out)
    g = cal.find("L40S", "vllm", "output_tokens_per_s").spread
    after = apply(predicted(), cal).performance
    low, high = after.band["output_tokens_per_s"]
    assert (low, high) == pytest.approx((after.output_tokens_per_s / g ** 1.2816, after.output_tokens_per_s * g ** 1.2816))
    assert high / low < base.band["output_tokens_per_s"][1] / base.band["output_tokens_per_s"][0]  # narrower
    assert after.band["output_tokens_per_s_per_replica"] == pytest.approx([low, high])

    one = tmp_path / "one.yaml"
    assert runner.invoke(app, ["calibrate", str(files[1]), "--instance-type", "g6e.xlarge", "--tensor-parallel", "1",
                               "--out", str(one)]).exit_code == 0
    moved = apply(predicted(), load(one)).performance
    assert moved.band["output_tokens_per_s"] == pytest.approx([edge * 0.75 for edge in base.band["output_tokens_per_s"]])


def test_a_calibrated_band_never_passes_the_roof(tmp_path):
    base = predicted().performance
    result = vllm_result(tmp_path, base.output_tokens_per_s * 5, base.inter_token_latency_s / 5, base.time_to_first_token_s)
    out = tmp_path / "c.yaml"
    assert runner.invoke(app, ["calibrate", str(result), "--instance-type", "g6e.xlarge", "--tensor-parallel", "1",
                               "--out", str(out)]).exit_code == 0
    after = apply(predicted(), load(out)).performance
    assert after.band["output_tokens_per_s"][1] <= after.output_tokens_per_s * (1 + 1e-9)  # the capped figure is the roof
    assert after.band["inter_token_latency_s"][0] >= after.inter_token_latency_s * (1 - 1e-9)
