"""`gpuplan frontier` (issue 14): the non-dominated plans on cost and latency, the chosen plan among
them, targets that move along it, renderers pinned by golden files, and the chart file."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuplan.cli import app
from planner.pipeline import frontier
from planner.report.frontier import pins, ranked_usd_per_month, render_markdown, values
from planner.pipeline import plan_workload
from tests.conftest import ROOT, workload, write_yaml
from tests.golden_files import assert_golden

EXAMPLE = ROOT / "examples" / "workloads.yaml"
CHAT = {"kind": "inference", "model": {"preset": "llama-3.1-70b"},
        "serving": {"max_context_tokens": 8192, "prompt_tokens": 1024, "output_tokens": 256, "concurrent_requests": 32,
                    "max_inter_token_latency_ms": 50},
        "constraints": {"confidence": "expected"}}  # judged on the estimates the frontier plots, as TRAIN below
TRAIN = {"kind": "training", "model": {"preset": "llama-3-8b"},
         "training": {"tokens": 2e11, "sequence_length": 4096, "deadline_hours": 720},
         # the frontier's values are expected estimates: the plan is judged on them too, not at the `likely` edge
         # (issue 25), whose slow edge passes over the cheapest point within the deadline
         "constraints": {"max_nodes": 32, "confidence": "expected"}}


@pytest.fixture(scope="module", params=["serving", "training"])
def case(request, catalog):
    w = workload(**(CHAT if request.param == "serving" else TRAIN))
    return w, frontier(w, catalog)


def dominates(a: list[float], b: list[float]) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def test_no_point_is_dominated(case):
    """Costs compared as the planner ranks them (3 significant figures): p6-b200 × 1..32 all cost
    $33.8k/run to within $2. At a tied cost the planner's tie-break (fewer nodes) ranks a point ahead,
    so only a strictly cheaper point, or a tied one ranked ahead, may not dominate it."""
    _, f = case
    assert len(f.points) >= 3
    coords = [[float(f"{v[0]:.3g}"), *v[1:]] for v in (values(f, p) for p in f.points)]
    for i, a in enumerate(coords):
        assert not any(dominates(b, a) and (b[0] < a[0] or j < i) for j, b in enumerate(coords) if j != i), \
            f.points[i].choice


def test_the_chosen_plan_is_on_the_frontier(case, catalog):
    w, f = case
    chosen = plan_workload(w, catalog)
    point = f.points[f.chosen]
    assert (point.choice.instance_type, point.choice.nodes, point.layout.tensor_parallel, point.layout.pipeline_parallel) == \
        (chosen.choice.instance_type, chosen.choice.nodes, chosen.layout.tensor_parallel, chosen.layout.pipeline_parallel)


def test_the_chosen_plan_is_the_cheapest_point_that_meets_the_targets(case):
    w, f = case
    limit = w.serving.max_inter_token_latency_ms if w.kind == "inference" else w.training.deadline_hours
    meeting = [values(f, p) for p in f.points if values(f, p)[1] <= limit]
    assert values(f, f.points[f.chosen])[0] == pytest.approx(min(v[0] for v in meeting), rel=1e-3)


def test_moving_the_latency_target_selects_the_matching_point(catalog):
    """Each frontier point's ITL, set as the target, makes `gpuplan plan` choose that point's cost:
    the cheapest frontier plan at or under that latency."""
    base = workload(**CHAT)
    f = frontier(base, catalog)
    for p in f.points[:6]:
        itl_ms = values(f, p)[1] * (1 + 1e-9)
        # judged at the expected estimate, as the frontier's ITL values are (not at the `likely` edge, issue 25)
        w = workload(**{**CHAT, "serving": {**CHAT["serving"], "max_inter_token_latency_ms": itl_ms},
                        "constraints": {"confidence": "expected"}})
        cheapest = min(values(f, q)[0] for q in f.points if values(f, q)[1] <= itl_ms)
        assert ranked_usd_per_month(plan_workload(w, catalog)) == pytest.approx(cheapest, rel=1e-3)


def test_each_point_pins_back_to_itself(catalog):
    f = frontier(workload(**CHAT), catalog)
    p = f.points[-1]
    pinned = workload(**{**CHAT, **pins(p), "serving": {**CHAT["serving"], "max_inter_token_latency_ms": None}})
    again = plan_workload(pinned, catalog)
    assert (again.choice.instance_type, again.choice.nodes) == (p.choice.instance_type, p.choice.nodes)
    assert again.performance.inter_token_latency_s == pytest.approx(p.performance.inter_token_latency_s)


def test_markdown_golden_with_mermaid_chart(catalog):
    f = frontier(workload(**CHAT), catalog)
    text = render_markdown([f])
    assert "```mermaid\nxychart-beta" in text and "★" in text
    assert_golden("frontier.md", text)


def test_cli_table_json_and_chart_files(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["frontier", str(EXAMPLE), "--workload", "chat-70b", "--format", "json"])
    assert result.exit_code == 0, result.output
    [data] = json.loads(result.output)["frontiers"]
    assert data["workload"] == "chat-70b" and len(data["pins"]) == len(data["points"])
    for suffix in ("svg", "png", "html"):
        path = tmp_path / f"frontier.{suffix}"
        result = runner.invoke(app, ["frontier", str(EXAMPLE), "--workload", "pretrain-70b", "--chart", str(path)])
        assert result.exit_code == 0, result.output
        assert path.stat().st_size > 1000
    assert (tmp_path / "frontier.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert (tmp_path / "frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_refuses_a_chart_it_cannot_draw(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["frontier", str(EXAMPLE), "--chart", str(tmp_path / "f.svg")])
    assert result.exit_code == 2 and "--chart draws one workload" in result.output
    result = runner.invoke(app, ["frontier", str(EXAMPLE), "--workload", "chat-8b", "--chart", str(tmp_path / "f.pdf")])
    assert result.exit_code == 2 and "chart file must end in .svg, .png, .html" in result.output


def test_infeasible_workload_exits_1_with_nearest_misses(tmp_path):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{"name": "huge", **CHAT,
                                                           "constraints": {"max_usd_per_month": 100}}]})
    result = CliRunner().invoke(app, ["frontier", str(path)])
    assert result.exit_code == 1 and "nearest misses" in result.output
