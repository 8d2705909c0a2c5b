"""Files and numbers (issue 24): overlay paths stay inside the project, YAML is read with bounded
aliases and YAML 1.2 numbers, stack settings and tag values have the shapes AWS accepts, catalog
refresh keeps file modes and refuses broken answers, `check` shares searches, regions are validated,
and `cost --base-ref` reads the base from the ref. Every case exits 2 (or 1) with one line, never a
traceback."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from typer.testing import CliRunner

from gpuplan.cli import app
from tests.conftest import ROOT, write_yaml

LLAMA_8B = {"name": "m", "kind": "inference", "model": {"preset": "llama-3.1-8b"}}
SHADOW = "root:*:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\n"
runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def example_stack() -> dict:
    return yaml.safe_load((ROOT / "Pulumi.example.yaml").read_text())


# 1. overlay paths --------------------------------------------------------------------------------

@pytest.fixture
def project(tmp_path):
    (tmp_path / "secret.yaml").write_text(SHADOW)
    proj = tmp_path / "proj"
    proj.mkdir()
    return proj


@pytest.mark.parametrize("named", ["../secret.yaml", "../missing.yaml", "/etc/shadow", "../../../../etc/shadow",
                                   "sub/../../secret.yaml"])
def test_an_overlay_outside_the_project_is_refused_alike_whether_or_not_it_exists(project, named):
    path = write_yaml(project / "w.yaml", {"workloads": [LLAMA_8B], "catalog": named})
    result = invoke("plan", path)
    assert result.exit_code == 2, result.output
    assert "catalog: the overlay must be a file inside the project" in result.output
    assert "20228" not in result.output and "not found" not in result.output and "root:" not in result.output


def test_a_symlink_out_of_the_project_is_refused(project):
    (project / "link.yaml").symlink_to(project.parent / "secret.yaml")
    path = write_yaml(project / "w.yaml", {"workloads": [LLAMA_8B], "catalog": "link.yaml"})
    result = invoke("plan", path)
    assert result.exit_code == 2 and "inside the project" in result.output and "20228" not in result.output


def test_an_overlay_that_is_not_a_mapping_is_not_echoed(project):
    (project / "odd.yaml").write_text(SHADOW)
    path = write_yaml(project / "w.yaml", {"workloads": [LLAMA_8B], "catalog": "odd.yaml"})
    result = invoke("plan", path)
    assert result.exit_code == 2 and "20228" not in result.output and "daemon" not in result.output, result.output


def test_an_overlay_in_the_repository_above_the_stack_is_allowed(tmp_path):
    (tmp_path / ".git").mkdir()
    write_yaml(tmp_path / "overlay.yaml", {"instance_types": []})
    (tmp_path / "stacks").mkdir()
    path = write_yaml(tmp_path / "stacks" / "w.yaml", {"workloads": [LLAMA_8B], "catalog": "../overlay.yaml"})
    assert invoke("plan", path).exit_code == 0


# 2. alias bombs ----------------------------------------------------------------------------------

def alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines)


def bombed_stack(tmp_path):
    text = yaml.safe_dump(example_stack())
    bomb = "\n".join("  " + line for line in alias_bomb().splitlines())
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text.replace("config:\n", "config:\n  other:bomb:\n" + "\n".join(
        "  " + line for line in bomb.splitlines()) + "\n", 1))
    assert path.stat().st_size < 4000
    return path


@pytest.mark.parametrize("command", [["plan"], ["check"], ["cost", "--base"]])
def test_an_alias_bomb_is_refused_before_it_expands(tmp_path, command):
    path = bombed_stack(tmp_path)
    args = [*command, path] if command[0] != "cost" else ["cost", "--base", path, "--head", path]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "aliases expand to more than" in result.output


def test_a_self_referencing_alias_is_refused(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("x: &x [*x]\nworkloads: []\n")
    result = invoke("plan", path)
    assert result.exit_code == 2 and "refers to itself" in result.output, result.output


def test_every_yaml_load_goes_through_the_safe_loader():
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    direct = [name for name in tracked if name != "planner/workload/yamlsafe.py" and not name.startswith("tests/")
              and ("yaml.safe_load(" in (ROOT / name).read_text() or "yaml.load(" in (ROOT / name).read_text())]
    assert direct == []


# 3. numbers --------------------------------------------------------------------------------------

def test_numbers_are_read_as_yaml_1_2_reads_them(tmp_path):
    from planner.workload.spec import load_workloads

    path = tmp_path / "w.yaml"
    path.write_text("workloads:\n  - name: m\n    kind: inference\n    model: {preset: llama-3.1-8b}\n"
                    "    serving: {concurrent_requests: 010, target_output_tokens_per_s: 1e3}\n")
    serving = load_workloads(path).workloads[0].serving
    assert serving.concurrent_requests == 10 and serving.target_output_tokens_per_s == 1000.0


@pytest.mark.parametrize("value, expected", [
    ("1:30", "workloads[0].serving.concurrent_requests: Input should be a valid integer"),
    ("1" * 5000, "concurrent_requests: an integer of 5000 digits"),
    ("0x1_0", "workloads[0].serving.concurrent_requests: Input should be a valid integer"),
])
def test_numbers_yaml_1_1_would_misread_are_refused(tmp_path, value, expected):
    path = tmp_path / "w.yaml"
    path.write_text("workloads:\n  - name: m\n    kind: inference\n    model: {preset: llama-3.1-8b}\n"
                    f"    serving: {{concurrent_requests: {value}}}\n")
    result = invoke("plan", path)
    assert result.exit_code == 2 and expected in result.output, result.output


def test_a_vanishing_checkpoint_interval_is_refused(tmp_path):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{
        "name": "t", "kind": "training", "model": {"preset": "llama-3.1-8b"},
        "training": {"tokens": 1e9, "checkpoint_interval_minutes": 1e-300}}]})
    result = invoke("plan", path)
    assert result.exit_code == 2, result.output
    assert "workloads[0].training.checkpoint_interval_minutes: Input should be greater than or equal to 1" \
        in result.output


# 4-6. stack settings, tags, deployment ids -------------------------------------------------------

@pytest.mark.parametrize("key, value, expected", [
    ("gpuplan:vpcId", 5, "config.gpuplan:vpcId: must be a VPC id (vpc- and 8 or 17 hex digits)"),
    ("gpuplan:vpcId", "vpc-zz", "config.gpuplan:vpcId: must be a VPC id"),
    ("gpuplan:environment", 5, "config.gpuplan:environment: must be text"),
    ("gpuplan:subnetIds", {"a": 1}, "config.gpuplan:subnetIds: must be a list of subnet ids"),
    ("gpuplan:subnetIds", ["subnet-1; rm"], "config.gpuplan:subnetIds[0]: must be a subnet id"),
    ("gpuplan:kmsKeyArn", 7, "config.gpuplan:kmsKeyArn: must be a KMS key ARN"),
    ("gpuplan:environment", "x" * 300, "config.gpuplan:environment: at most 256 characters"),
    ("gpuplan:environment", "prod$();<b>", "config.gpuplan:environment: AWS tag values allow only letters"),
    ("gpuplan:environment", "prod\nx", "config.gpuplan:environment: AWS tag values allow only letters"),
])
@pytest.mark.parametrize("command", ["plan", "check"])
def test_stack_settings_have_the_shapes_aws_accepts(tmp_path, key, value, expected, command):
    stack = example_stack()
    stack["config"][key] = value
    result = invoke(command, write_yaml(tmp_path / "Pulumi.dev.yaml", stack))
    assert result.exit_code == 2, result.output
    assert expected in result.output, result.output


@pytest.mark.parametrize("target, key, value, expected", [
    ("pretrain-70b", "subnetId", "subnet-xyz; rm -rf /", "subnetId: must be a subnet id"),
    ("pretrain-70b", "capacityReservationId", "cr-1", "capacityReservationId: must be a capacity reservation id"),
    ("pretrain-70b", "capacityBlockId", "cb-0123456789abcdef0", "capacityBlockId: must be a capacity reservation id"),
    ("chat-70b", "imageUri", "not an image", "imageUri: must be a container image URI"),
    ("chat-70b", "imageUri", "x" * 300, "imageUri: must be a container image URI"),
])
def test_deployment_ids_are_checked_at_plan_time(tmp_path, target, key, value, expected):
    stack = example_stack()
    stack["config"]["gpuplan:deployments"][target][key] = value
    result = invoke("plan", write_yaml(tmp_path / "Pulumi.dev.yaml", stack))
    assert result.exit_code == 2, result.output
    assert f"gpuplan:deployments.{target}.{expected}" in result.output, result.output


def test_well_formed_ids_and_images_pass():
    from components.config import Deployment

    Deployment.model_validate({"subnetId": "subnet-0123456789abcdef0", "capacityBlockId": "cr-0123456789abcdef0",
                               "imageUri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.31.0-lmi13"})
    Deployment.model_validate({"imageUri": "ghcr.io/huggingface/text-generation-inference@sha256:" + "a" * 64})


def test_every_tag_value_the_program_writes_matches_the_aws_pattern():
    from planner.report.tags import tag_value_problem

    assert tag_value_problem("tp=8 pp=1") is None
    assert "allow only" in tag_value_problem("tp=8,pp=1")
    assert tag_value_problem("Straße 1 ½") is None
    assert "allow only" in tag_value_problem("a;b")
    assert "256" in tag_value_problem("a" * 257)


# 7. catalog refresh ------------------------------------------------------------------------------

def test_refresh_keeps_the_target_files_mode(tmp_path):
    from gpuplan.commands.catalog import write_catalog
    from planner.hardware.catalog import bundled

    out = tmp_path / "catalog.yaml"
    out.write_text("old\n")
    out.chmod(0o644)
    write_catalog(bundled(), out)
    assert oct(out.stat().st_mode & 0o777) == oct(0o644)
    fresh = tmp_path / "new.yaml"
    umask = os.umask(0o022)
    os.umask(umask)
    write_catalog(bundled(), fresh)
    assert oct(fresh.stat().st_mode & 0o777) == oct(0o666 & ~umask)


class _Paginator:
    def __init__(self, pages):
        self._pages = pages

    def paginate(self, **_):
        return iter(self._pages)


class _Client:
    def __init__(self, answers):
        self.answers = answers

    def get_paginator(self, operation):
        return _Paginator([self.answers[operation]])


def _refresh(gpus: int = 1, on_demand: str = "1.006", spot: str = "0.4"):
    import json

    from gpuplan.aws.refresh import refresh_catalog
    from planner.hardware.catalog import bundled

    info = {"InstanceType": "g5.xlarge", "GpuInfo": {"Gpus": [{"Name": "A10G", "Count": gpus,
                                                              "MemoryInfo": {"SizeInMiB": 23028}}]}}
    item = json.dumps({"terms": {"OnDemand": {"t": {"priceDimensions": {"d": {"unit": "Hrs",
                                                                                 "pricePerUnit": {"USD": on_demand}}}}}}})
    ec2 = _Client({"describe_instance_types": {"InstanceTypes": [info]},
                   "describe_instance_type_offerings": {"InstanceTypeOfferings": [{"InstanceType": "g5.xlarge"}]},
                   "describe_spot_price_history": {"SpotPriceHistory": [{"InstanceType": "g5.xlarge", "SpotPrice": spot}]}})
    pricing = _Client({"get_products": {"PriceList": [item]}})
    return refresh_catalog(bundled(), ["us-east-1"], ["g5.xlarge"],
                           make_client=lambda service, region: pricing if service == "pricing" else ec2, today="2026-11-23")


@pytest.mark.parametrize("answer, reason", [
    ({"gpus": 0}, "g5.xlarge: unknown: EC2 reports 0 accelerators"),
    ({"on_demand": "1e400", "spot": "-1"}, "g5.xlarge us-east-1 EC2 spot: unknown: price -1 is not a positive"),
    ({"on_demand": "-5"}, "g5.xlarge us-east-1 EC2 on-demand: unknown: price -5 is not a positive finite number"),
    ({"on_demand": "NaN"}, "g5.xlarge us-east-1 EC2 on-demand: unknown: price nan is not a positive finite number"),
    ({"on_demand": "1e400"}, "g5.xlarge us-east-1 EC2 on-demand: unknown: price inf is not a positive finite number"),
    ({"spot": "abc"}, "g5.xlarge us-east-1 EC2 spot: unknown: price 'abc' is not a number"),
])
def test_refresh_refuses_broken_answers_per_item(answer, reason):
    from planner.hardware.catalog import bundled
    from planner.economics.price_review import review

    result = _refresh(**answer)
    assert any(line.startswith(reason) for line in result.unknown), result.unknown
    g5 = result.catalog.instance("g5.xlarge")
    assert g5.accelerators_per_node == 1
    review(bundled(), result.catalog)  # no ZeroDivisionError


def test_the_price_review_survives_a_type_without_accelerators():
    from planner.hardware.catalog import bundled
    from planner.economics.price_review import review

    fresh = bundled().model_copy(deep=True)
    g5 = fresh.instance("g5.xlarge")
    object.__setattr__(g5, "accelerators_per_node", 0)
    g5.prices["us-east-1"]["ec2"].on_demand = 9.0
    flags = review(bundled(), fresh)
    assert [f.why for f in flags if f.instance_type == "g5.xlarge"] == ["the type has no accelerators"]


# 8. check shares searches ------------------------------------------------------------------------

def test_check_searches_each_shape_once(tmp_path, monkeypatch):
    import planner
    import planner.pipeline

    calls = []
    real = planner.pipeline.plan_workload

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(planner, "plan_workload", counted)
    monkeypatch.setattr(planner.pipeline, "plan_workload", counted)
    workloads = [{**LLAMA_8B, "name": f"m{i}"} for i in range(30)]
    path = write_yaml(tmp_path / "w.yaml", {"workloads": workloads})
    result = invoke("check", path)
    assert result.exit_code == 0, result.output
    assert len(calls) == 1


# 9. regions --------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["plan", ROOT / "examples" / "workloads.yaml", "--region", "us-east-1; rm -rf /"],
                                  ["catalog", "list", "--region", "bogus"],
                                  ["catalog", "refresh", "--region", "bogus", "--out", "/tmp/never-written.yaml"],
                                  ["frontier", ROOT / "examples" / "workloads.yaml", "--region", "mars-1"]])
def test_regions_are_validated_where_they_are_read(args):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert "--region: unknown region" in result.output and "us-east-1" in result.output, result.output
    assert "no instance type" not in result.output


def test_a_workload_region_the_catalog_does_not_price_is_refused(tmp_path):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{**LLAMA_8B, "constraints": {"region": "zz-west-1"}}]})
    result = invoke("plan", path)
    assert result.exit_code == 2, result.output
    assert "workloads[0].constraints.region: the catalog prices no instance type in zz-west-1" in result.output
    assert "gpuplan catalog refresh --region zz-west-1" in result.output


# 10. cost --base-ref -----------------------------------------------------------------------------

def test_a_base_overlay_outside_the_repository_is_not_read_from_disk(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    write_yaml(tmp_path / "x.yaml", {"instance_types": []})
    write_yaml(repo / "w.yaml", {"workloads": [LLAMA_8B], "catalog": "../x.yaml"})

    def git(*args):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.email=a@b", "-c", "user.name=a", "add", "w.yaml")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "base")
    result = invoke("cost", "--head", repo / "w.yaml", "--base-ref", "HEAD", "--no-policies")
    assert result.exit_code == 2, result.output
    assert "+$" not in result.output and "inside the project" in result.output, result.output


def test_a_base_overlay_outside_the_repository_is_a_note_when_the_head_moved_it_inside(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    write_yaml(tmp_path / "x.yaml", {"instance_types": []})
    write_yaml(repo / "inside.yaml", {"instance_types": []})
    write_yaml(repo / "w.yaml", {"workloads": [LLAMA_8B], "catalog": "../x.yaml"})
    for args in (["init", "-q"], ["add", "w.yaml", "inside.yaml"], ["commit", "-qm", "base"]):
        subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=a", *args], cwd=repo, check=True,
                       capture_output=True)
    write_yaml(repo / "w.yaml", {"workloads": [LLAMA_8B], "catalog": "inside.yaml"})
    result = invoke("cost", "--head", repo / "w.yaml", "--base-ref", "HEAD", "--no-policies", "--format", "json")
    assert result.exit_code == 0, result.output
    note = json.loads(result.stdout)["notes"][0]
    assert note.startswith("the base cannot be planned (HEAD:w.yaml: catalog: the overlay must be a file inside the "
                           "project (the repository at HEAD)"), note


@pytest.mark.parametrize("change, expected", [
    (lambda c: c.__setitem__("gpuplan:catalog", "../../../../etc/shadow"),
     "config gpuplan:catalog: the overlay must be a file inside the project"),
    (lambda c: c.__setitem__("gpuplan:vpcId", "vpc-zz"), "config gpuplan:vpcId: must be a VPC id"),
    (lambda c: c.__setitem__("gpuplan:environment", "a;b"), "config gpuplan:environment: AWS tag values allow only"),
    (lambda c: c.__setitem__("gpuplan:subnetIds", {"a": 1}), "config gpuplan:subnetIds: must be a list of subnet ids"),
])
def test_the_program_refuses_what_plan_refuses(change, expected):
    import pulumi

    from tests.pulumi_harness import run_program, stack_config

    config = stack_config()
    change(config)
    with pytest.raises(pulumi.RunError) as raised:
        run_program(config)
    assert expected in str(raised.value)


def test_a_stack_region_that_is_not_a_region_is_named_as_the_stack_key(tmp_path):
    import pulumi

    from tests.pulumi_harness import run_program

    stack = example_stack()
    stack["config"]["aws:region"] = "us-east-1; rm -rf /"
    result = invoke("plan", write_yaml(tmp_path / "Pulumi.dev.yaml", stack))
    assert result.exit_code == 2 and "config.aws:region: must be an AWS region name" in result.output, result.output
    with pytest.raises(pulumi.RunError) as raised:
        run_program(stack["config"])
    assert "config aws:region: must be an AWS region name" in str(raised.value)


def test_check_links_each_resource_by_lookup_not_by_scanning_every_resource(tmp_path, monkeypatch):
    """check on 10,000 endpoints was quadratic: each endpoint configuration scanned every resource for
    its model. The candidates are indexed once per resource list and type."""
    from policies import facts

    built = []
    real = facts.Candidates

    def counted(*args):
        built.append(1)
        return real(*args)

    monkeypatch.setattr(facts, "Candidates", counted)
    workloads = [{**LLAMA_8B, "name": f"m{i}"} for i in range(30)]
    result = invoke("check", write_yaml(tmp_path / "w.yaml", {"workloads": workloads}))
    assert result.exit_code == 0, result.output
    assert len(built) <= 2  # SageMaker models, launch templates
