"""planner.shared_searches (issue 29): `check` and `cost` plan a stack, then the Pulumi program plans it
again from its config; within the block a shape searched against the same catalog is not searched twice."""

from __future__ import annotations

from pathlib import Path

import planner.pipeline
from gpuplan.check import check_file
from planner import plan_workloads, shared_searches
from planner.workload.spec import load_workloads, parse_workloads

ROOT = Path(__file__).resolve().parent.parent
SPEC = {"workloads": [{"name": "a", "kind": "inference", "model": {"preset": "llama-3-8b"},
                       "serving": {"max_context_tokens": 4096, "concurrent_requests": 4}},
                      {"name": "b", "kind": "inference", "model": {"preset": "llama-3-8b"},
                       "serving": {"max_context_tokens": 4096, "concurrent_requests": 8}}]}


def _counting(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = planner.pipeline.plan_workload

    def counted(w, catalog):
        calls.append(w.name)
        return real(w, catalog)

    monkeypatch.setattr(planner.pipeline, "plan_workload", counted)
    return calls


def test_within_the_block_a_second_plan_of_the_same_shapes_reuses_the_searches(monkeypatch):
    calls = _counting(monkeypatch)
    spec = parse_workloads(SPEC, "w.yaml")
    renamed = parse_workloads({"workloads": [{**w, "name": f"x-{w['name']}"} for w in SPEC["workloads"]]}, "other.yaml")
    with shared_searches():
        first = plan_workloads(spec)
        second = plan_workloads(renamed)
    assert calls == ["a", "b"]
    assert [p.workload for p in second.plans] == ["x-a", "x-b"]
    assert [p.model_dump(exclude={"workload"}) for p in second.plans] == \
        [p.model_dump(exclude={"workload"}) for p in first.plans]


def test_outside_the_block_every_call_searches(monkeypatch):
    calls = _counting(monkeypatch)
    spec = parse_workloads(SPEC, "w.yaml")
    plan_workloads(spec)
    plan_workloads(spec)
    assert calls == ["a", "b", "a", "b"]


def test_check_searches_each_shape_of_the_example_stack_once(monkeypatch):
    calls = _counting(monkeypatch)
    path = ROOT / "Pulumi.example.yaml"
    report = check_file(path)
    names = [w.name for w in load_workloads(path).workloads]
    assert report.passed and sorted(calls) == sorted(names)


def test_cost_plans_each_shape_of_base_and_head_once(monkeypatch):
    """The base's searches serve the head's unchanged workloads (a pull request changes a few of many):
    `cost --base X --head X` searches each workload of X once, not once per side (issue 29)."""
    from typer.testing import CliRunner

    from gpuplan.cli import app

    calls = _counting(monkeypatch)
    path = str(ROOT / "Pulumi.example.yaml")
    done = CliRunner().invoke(app, ["cost", "--base", path, "--head", path, "--no-frontier", "--no-policies"])
    assert done.exit_code == 0, done.output
    assert sorted(calls) == sorted(w.name for w in load_workloads(path).workloads)


def test_a_base_workload_with_no_plan_is_searched_once_and_stays_a_note(monkeypatch, tmp_path):
    """An infeasible base workload is not kept in the shared searches: it becomes the base's note."""
    from gpuplan.costdiff import plan_base

    calls = _counting(monkeypatch)
    base = tmp_path / "base.yaml"
    infeasible = {**SPEC["workloads"][0], "name": "c", "constraints": {"max_usd_per_month": 1}}
    import yaml

    base.write_text(yaml.safe_dump({"workloads": [*SPEC["workloads"], infeasible]}))
    with shared_searches():
        plans, notes = plan_base(base)
        again, _ = plan_base(base)
    assert calls == ["a", "b", "c", "c"]
    assert [p.workload for p in plans.plans] == ["a", "b"] == [p.workload for p in again.plans]
    assert len(notes) == 1 and notes[0].startswith("base workload 'c' had no feasible plan")
