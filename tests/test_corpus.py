"""A generated corpus of malformed inputs (issue 11): every spec field × wrong type, out of range,
NaN/inf; missing and unknown keys; overlays; stack configs and their deployment settings; files that
are not files. Each runs through `plan`, `check` and `cost`: no traceback, never exit 0, and the
message names the file and the field path as the user wrote it, with long values cut."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, get_args

import pytest
import yaml
from annotated_types import Ge, Gt, Le, Lt
from typer.testing import CliRunner

from components.config import Deployment
from gpuplan.cli import app
from planner.hardware.catalog import Accelerator, InstanceType
from planner.workload.spec import Constraints, Layout, Serving, Training

runner = CliRunner()
INFERENCE = {"name": "m", "kind": "inference", "model": {"preset": "llama-3.1-8b"}, "serving": {}, "constraints": {},
             "layout": {}}
TRAINING = {"name": "t", "kind": "training", "model": {"preset": "llama-3.1-8b"},
            "training": {"tokens": 1.0e9}, "constraints": {}, "layout": {}}
SERVING_ONLY, TRAINING_ONLY = {"replicas"}, {"data_parallel", "zero_stage", "micro_batch"}
X1 = {"name": "X1", "memory_mib": 81920, "memory_bandwidth_gb_s": 3000, "intra_node_gb_s": 450, "tflops": {"bf16": 500}}
X1_NODE = {"name": "x1.8xl", "family": "x1", "accelerator": "X1", "accelerators_per_node": 8, "usd_per_hour": 10}
HUGE = "x" * 20_000  # a pasted blob: the message must echo 60 characters of it, not all


@dataclass
class Case:
    id: str
    files: dict[str, Any]  # name -> YAML data (or bytes, or a callable making a non-file)
    named: str  # the file the message must name
    path: str  # the field path it must name ("" where only the file can be named)
    commands: tuple[str, ...] = ("plan", "check", "cost")


def _bad_values(annotation: Any, metadata: list) -> list[tuple[str, Any]]:
    """Wrong types, values just outside the field's bounds, and non-finite numbers."""
    kinds = set(get_args(annotation)) or {annotation}
    literal = [a for a in kinds if getattr(a, "__origin__", None) is not None and str(a).startswith("typing.Literal")]
    out: list[tuple[str, Any]] = [("list", [1]), ("mapping", {"a": 1}), ("huge", HUGE)]
    if kinds & {int, float}:
        out += [("text", "abc"), ("bool", True), ("nan", math.nan), ("inf", math.inf)]
        for bound in metadata:
            if isinstance(bound, Gt):
                out.append(("at-gt", bound.gt))
            elif isinstance(bound, Ge):
                out.append(("below-ge", bound.ge - 1))
            elif isinstance(bound, Lt):
                out.append(("at-lt", bound.lt))
            elif isinstance(bound, Le):
                out.append(("above-le", bound.le * 10 + 1))
        if int in kinds and float not in kinds:
            out.append(("fraction", 2.5))
    elif literal or str(annotation).startswith("typing.Literal"):
        out += [("bogus", "bogus-choice"), ("number", 5)]
    elif kinds & {str}:
        out += [("number", 5), ("bool", True)]
    return out


def _fields(model) -> list[tuple[str, Any, list]]:
    return [(name, f.annotation, f.metadata) for name, f in model.model_fields.items()]


def workload_cases() -> list[Case]:
    cases: list[Case] = []
    sections = [("serving", Serving, INFERENCE), ("training", Training, TRAINING),
                ("constraints", Constraints, INFERENCE), ("layout", Layout, None)]
    for section, model, base in sections:
        for field, annotation, metadata in _fields(model):
            home = base or (TRAINING if field in TRAINING_ONLY else INFERENCE)
            if field in ("families", "instance_types"):
                values = [("text", "g5"), ("numbers", [1]), ("mapping", {"a": 1}), ("huge", [HUGE])]
            else:
                values = _bad_values(annotation, metadata)
            for label, value in values:
                w = {**home, section: {**home.get(section, {}), field: value}}
                path = f"{section}.{field}" + ("[0]" if label == "numbers" and field in ("families", "instance_types") else "")
                cases.append(Case(f"{section}.{field}-{label}", {"w.yaml": {"workloads": [w]}}, "w.yaml",
                                  f"workloads[0].{path}"))
        cases.append(Case(f"{section}-unknown-key", {"w.yaml": {"workloads": [{**(base or INFERENCE), section: {
            **(base or INFERENCE).get(section, {}), "bogus_key": 1}}]}}, "w.yaml", f"workloads[0].{section}.bogus_key"))
        cases.append(Case(f"{section}-not-a-mapping", {"w.yaml": {"workloads": [{**(base or INFERENCE), section: [1]}]}},
                          "w.yaml", f"workloads[0].{section}"))
    for field, values in {"name": [("upper", "Bad Name"), ("number", 5), ("huge", HUGE)],
                          "kind": [("bogus", "serving"), ("number", 1)],
                          "precision": [("bogus", "fp4"), ("number", 16), ("bool", True)],
                          "model": [("text", "llama"), ("empty", {}), ("unknown-preset", {"preset": HUGE})]}.items():
        for label, value in values:
            cases.append(Case(f"{field}-{label}", {"w.yaml": {"workloads": [{**INFERENCE, field: value}]}}, "w.yaml",
                              f"workloads[0].{field}"))
    for field in ("name", "kind", "model"):
        cases.append(Case(f"missing-{field}", {"w.yaml": {"workloads": [
            {k: v for k, v in INFERENCE.items() if k != field}]}}, "w.yaml", f"workloads[0].{field}"))
    cases.append(Case("missing-training-tokens", {"w.yaml": {"workloads": [{**TRAINING, "training": {}}]}}, "w.yaml",
                      "workloads[0].training.tokens"))
    cases.append(Case("unknown-top-key", {"w.yaml": {"workloads": [INFERENCE], "workload": []}}, "w.yaml", "workload"))
    cases.append(Case("unknown-workload-key", {"w.yaml": {"workloads": [{**INFERENCE, "instance_type": "p5.48xlarge"}]}},
                      "w.yaml", "workloads[0].instance_type"))
    cases.append(Case("workloads-not-a-list", {"w.yaml": {"workloads": {"m": INFERENCE}}}, "w.yaml", "workloads"))
    cases.append(Case("workloads-empty", {"w.yaml": {"workloads": []}}, "w.yaml", "workloads"))
    return cases


def as_stack(case: Case) -> Case | None:
    """The same workload mistake in a stack file: paths under gpuplan:workloads."""
    data = case.files["w.yaml"]
    if set(data) != {"workloads"} or not case.path.startswith("workloads"):
        return None
    config = {"aws:region": "us-east-1", "gpuplan:workloads": data["workloads"]}
    return Case(f"stack-{case.id}", {"Pulumi.dev.yaml": {"config": config}}, "Pulumi.dev.yaml", "gpuplan:" + case.path)


def overlay_cases() -> list[Case]:
    cases: list[Case] = []
    for model, key, valid, extra in ((Accelerator, "accelerators", X1, {}),
                                     (InstanceType, "instance_types", {**X1_NODE, "accelerator": "H100-80GB"}, {})):
        for field, annotation, metadata in _fields(model):
            if field in ("tflops", "supports", "prices", "offered_regions", "source", "source_date",
                         "compute_capability", "neuron_generation"):
                continue
            for label, value in _bad_values(annotation, metadata):
                if annotation in (bool, bool | None) and label in ("bool",):
                    continue
                overlay = {key: [{**valid, field: value}], **extra}
                cases.append(Case(f"overlay-{key}.{field}-{label}", {
                    "w.yaml": {"catalog": "overlay.yaml", "workloads": [INFERENCE]}, "overlay.yaml": overlay},
                    "overlay.yaml", f"{key}[0].{field}"))
        cases.append(Case(f"overlay-{key}-unknown-key", {"w.yaml": {"catalog": "overlay.yaml", "workloads": [INFERENCE]},
                                                         "overlay.yaml": {key: [{**valid, "instance_type": "x"}]}},
                          "overlay.yaml", f"{key}[0].instance_type"))
    for label, value in (("bf16-zero", 0), ("bf16-negative", -5), ("bf16-nan", math.nan), ("bf16-text", "fast")):
        cases.append(Case(f"overlay-tflops-{label}", {"w.yaml": {"catalog": "overlay.yaml", "workloads": [INFERENCE]},
                                                      "overlay.yaml": {"accelerators": [{**X1, "tflops": {"bf16": value}}]}},
                          "overlay.yaml", "accelerators[0].tflops.bf16"))
    for label, overlay, path in (("accel-string", {"accelerators": ["X1"]}, "accelerators[0]"),
                                 ("accel-null", {"accelerators": [None]}, "accelerators[0]"),
                                 ("sources-list", {"sources": ["a"]}, "sources"),
                                 ("types-number", {"instance_types": 5}, "instance_types"),
                                 ("unknown-accelerator", {"instance_types": [X1_NODE]}, "instance_types[0].accelerator"),
                                 ("fp8-without-rate", {"accelerators": [{**X1, "supports": {"fp8": True}}]}, "accelerators[0]"),
                                 ("efa-without-bandwidth", {"instance_types": [{**X1_NODE, "accelerator": "H100-80GB",
                                                                                "efa": True}]}, "instance_types[0]"),
                                 ("not-a-mapping", [1, 2], "")):
        cases.append(Case(f"overlay-{label}", {"w.yaml": {"catalog": "overlay.yaml", "workloads": [INFERENCE]},
                                               "overlay.yaml": overlay}, "overlay.yaml", path))
    return cases


def stack_cases() -> list[Case]:
    cases: list[Case] = []
    base = {"aws:region": "us-east-1", "gpuplan:workloads": [INFERENCE]}
    for field, info in Deployment.model_fields.items():
        alias = info.alias
        if info.annotation is bool:
            wrong = [("text", "false"), ("number", 1)]
        elif int in get_args(info.annotation):
            wrong = [("text", "4"), ("fraction", 2.5), ("bool", True)]
        elif "list" in str(info.annotation):
            wrong = [("text", "subnet-1"), ("numbers", [1])]
        else:
            wrong = [("number", 5), ("list", [1])]
        for label, value in wrong:
            config = {**base, "gpuplan:deployments": {"m": {"hfModelId": "meta-llama/Llama-3.1-8B-Instruct", alias: value}}}
            cases.append(Case(f"deployment-{alias}-{label}", {"Pulumi.dev.yaml": {"config": config}}, "Pulumi.dev.yaml",
                              f"gpuplan:deployments.m.{alias}"))
    for label, value, path in (("not-a-map", [1], "gpuplan:deployments"), ("unknown-workload", {"n": {}}, "gpuplan:deployments.n"),
                               ("settings-list", {"m": [1]}, "gpuplan:deployments.m"),
                               ("unknown-key", {"m": {"instanceType": "x"}}, "gpuplan:deployments.m.instanceType")):
        cases.append(Case(f"deployments-{label}", {"Pulumi.dev.yaml": {"config": {**base, "gpuplan:deployments": value}}},
                          "Pulumi.dev.yaml", path))
    for label, config, path in (("unknown-gpuplan-key", {**base, "gpuplan:vpcid": "vpc-1"}, "config.gpuplan:vpcid"),
                                ("workloads-missing", {"aws:region": "us-east-1"}, "config"),
                                ("config-list", [1], "config"),
                                ("region-disagrees", {**base, "gpuplan:workloads": [{**INFERENCE, "constraints": {"region": "eu-west-1"}}]},
                                 "gpuplan:workloads[0].constraints.region")):
        cases.append(Case(f"stack-{label}", {"Pulumi.dev.yaml": {"config": config}}, "Pulumi.dev.yaml", path))
    return cases


def file_cases() -> list[Case]:
    return [Case("empty-file", {"w.yaml": b""}, "w.yaml", ""),
            Case("binary", {"w.yaml": bytes(range(256))}, "w.yaml", ""),
            Case("list-document", {"w.yaml": b"- 1\n- 2\n"}, "w.yaml", ""),
            Case("tab-indented", {"w.yaml": b"workloads:\n\t- name: m\n"}, "w.yaml", ""),
            Case("duplicate-key", {"w.yaml": b"workloads: []\nworkloads: []\n"}, "w.yaml", "line 2"),
            Case("directory", {"w.yaml": "dir"}, "w.yaml", ""),
            Case("fifo", {"w.yaml": "fifo"}, "w.yaml", ""),
            Case("missing", {}, "w.yaml", ""),
            Case("huge-file", {"w.yaml": b"#" * (10 * 1024 * 1024 + 1)}, "w.yaml", ""),
            Case("overlay-directory", {"w.yaml": {"catalog": "overlay.yaml", "workloads": [INFERENCE]},
                                       "overlay.yaml": "dir"}, "overlay.yaml", "")]


CASES = workload_cases()
CASES += [stacked for stacked in map(as_stack, list(CASES)) if stacked]
CASES += overlay_cases() + stack_cases() + file_cases()


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 500, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES)


def materialise(case: Case, root) -> None:
    for name, data in case.files.items():
        target = root / name
        if data == "dir":
            target.mkdir()
        elif data == "fifo":
            os.mkfifo(target)
        elif isinstance(data, bytes):
            target.write_bytes(data)
        else:
            target.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_input_is_refused_naming_file_and_field(case, tmp_path):
    materialise(case, tmp_path)
    target = tmp_path / ("Pulumi.dev.yaml" if "Pulumi.dev.yaml" in case.files else "w.yaml")
    named = str(tmp_path / case.named)
    argv = {"plan": ["plan", str(target)], "check": ["check", str(target)],
            "cost": ["cost", "--base", str(target), "--head", str(target), "--no-frontier"]}
    for command in case.commands:
        result = runner.invoke(app, argv[command])
        where = f"{command} {case.id}: {result.output[-600:]}"
        assert result.exception is None or isinstance(result.exception, SystemExit), (where, result.exception)
        assert result.exit_code == 2, where
        assert "Traceback" not in result.output and len(result.output) < 4000, where
        assert named in result.output, where
        if case.path:
            assert case.path in result.output, where
