"""Issue 26, second pass: GuideLLM reports, --calibration on frontier/check/cost, observe --out round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuplan import measurements
from gpuplan.cli import app
from planner.calibration import load

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
