"""Issue 28, finished: the fleet's prices are explained where a region has none."""

from __future__ import annotations

from typer.testing import CliRunner

from gpuplan.cli import app


def test_catalog_list_says_where_p6_b300_has_a_price():
    """p6-b300.48xlarge is priced in us-west-2 only (vantage 2025-11-30): us-east-1 says so, not a bare dash."""
    out = CliRunner().invoke(app, ["catalog", "list"]).output
    row = next(line for line in out.splitlines() if line.startswith(" p6-b300.48xlarge"))
    assert row.rstrip().endswith("only in us-west-2")
    west = CliRunner().invoke(app, ["catalog", "list", "--region", "us-west-2"]).output
    row = next(line for line in west.splitlines() if line.startswith(" p6-b300.48xlarge"))
    assert "142.4160" in row and "2025-11-30" in row


# --- MoE expert parallelism (planner/expert_parallel.py) ---------------------------------------------------

import pytest  # noqa: E402

from planner.catalog import bundled  # noqa: E402
from planner.expert_parallel import all_to_all_s, routed_expert_bytes  # noqa: E402
from planner.memory import inference_memory  # noqa: E402
from planner.presets import presets  # noqa: E402
from planner.search import plan_workload  # noqa: E402
from tests.conftest import workload  # noqa: E402

R1_SERVING = {"max_context_tokens": 8192, "prompt_tokens": 1024, "output_tokens": 256, "concurrent_requests": 64}


def _r1(constraints: dict, layout: dict | None = None):
    return plan_workload(workload(kind="inference", model={"preset": "deepseek-r1"}, precision="fp8",
                                  serving=R1_SERVING, constraints=constraints, layout=layout or {}), bundled())


def test_deepseek_r1_spreads_experts_over_one_p5en_node():
    plan = _r1({"instance_types": ["p5en.48xlarge"]})
    assert (plan.choice.instance_type, plan.choice.nodes) == ("p5en.48xlarge", 1)
    assert (plan.layout.tensor_parallel, plan.layout.pipeline_parallel, plan.layout.expert_parallel) == (8, 1, 8)


def test_deepseek_r1_across_p5_nodes_uses_expert_parallelism_not_pipeline_stages():
    """Issue 28: on 80 GB H100s R1 needs two nodes; it used to plan PP 2, now EP 16 over both nodes."""
    plan = _r1({"instance_types": ["p5.48xlarge"], "deploy_target": "ec2"})
    assert (plan.choice.nodes, plan.layout.tensor_parallel, plan.layout.pipeline_parallel,
            plan.layout.expert_parallel) == (2, 8, 1, 16)
    pp = _r1({"instance_types": ["p5.48xlarge"], "deploy_target": "ec2"}, {"pipeline_parallel": 2})
    assert pp.layout.pipeline_parallel == 2 and pp.layout.expert_parallel == 8
    # PP's two stages take turns each decode step; EP's two nodes read their halves of the experts at once
    assert plan.performance.inter_token_latency_s == pytest.approx(0.03847, rel=1e-3)
    assert pp.performance.inter_token_latency_s == pytest.approx(0.04719, rel=1e-3)


def test_all_to_all_cost_by_hand():
    """16 tokens over 2 p5 nodes: each node's 8 tokens × top-8 × 7168 × 2 B, half of it leaving, over a
    device's share of 3,200 Gb/s (×0.8), plus a 16-rank latency; dispatch + combine on 58 MoE layers."""
    r1, p5 = presets()["deepseek-r1"], bundled().instance("p5.48xlarge")
    h100 = bundled().accelerator("H100-80GB")
    leaving = 8 * 8 * 7168 * 2 / 2
    one_way = leaving / 8 / (3200e9 / 8 / 8 * 0.8) + (15e-6 + 15 * 1.5e-6)
    assert r1.moe_layers == 58
    assert all_to_all_s(r1, 16, 2, p5, h100) == pytest.approx(2 * 58 * one_way)
    assert all_to_all_s(r1, 16, 1, p5, h100) == 0.0


def test_expert_parallelism_halves_the_experts_a_device_holds():
    r1 = presets()["deepseek-r1"]
    one = inference_memory(r1, "fp8", "bf16", 8, 1, 16, 8192)
    two = inference_memory(r1, "fp8", "bf16", 8, 1, 16, 8192, ep_nodes=2)
    assert one.weights - two.weights == pytest.approx(routed_expert_bytes(r1, "fp8") / 16)
    assert two.kv_cache == pytest.approx(one.kv_cache / 2)  # DP attention: 8 of the 16 sequences per node


def test_expert_parallel_pin_on_a_dense_model_is_refused(tmp_path):
    spec = tmp_path / "w.yaml"
    spec.write_text("workloads:\n- name: w\n  kind: inference\n  model: {preset: llama-3.1-8b}\n"
                    "  layout: {expert_parallel: 8}\n")
    result = CliRunner().invoke(app, ["plan", str(spec)])
    assert result.exit_code == 2
    assert "layout.expert_parallel applies to MoE models (experts > 1); this model is dense" in result.output
