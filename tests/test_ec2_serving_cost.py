"""Issue 28 (h28a), item 2: the EBS volumes EC2 serving creates (components/ec2_inference.py: a gp3 root volume
and a gp3 model volume per launched instance) are in the plan's cost, at the sizes the component creates."""

from __future__ import annotations

import pytest

from planner.hardware.units import HOURS_PER_MONTH
from planner.pipeline import plan_workload
from planner.report.markdown import cost_lines
from tests.conftest import workload
from tests.pulumi_harness import run_program
from tests.test_fleet_deploy import G6F_SERVING, _gb200_serving, _rate_card, _stack


def _g6f_plan(catalog):
    return plan_workload(workload(**{k: v for k, v in G6F_SERVING.items() if k != "name"}), catalog)


def test_g6f_ec2_serving_prices_root_and_model_volumes(catalog):
    """g6f.4xlarge at $0.95/h: 200 GiB root + 30 GiB model volume at $0.08/GB-month add $0.0252/h ($18.40/month)."""
    plan = _g6f_plan(catalog)
    c = plan.cost
    assert plan.choice.deploy_target == "ec2" and c.instances_usd_per_hour == pytest.approx(0.95)
    root, model = c.provisioned
    assert (root.item, root.quantity, root.size_gib) == ("EBS gp3 root volume per instance", 1, 200)
    assert (model.item, model.quantity, model.size_gib) == ("EBS gp3 model volume per instance", 1, 30)
    assert root.usd_per_gib_month == model.usd_per_gib_month == 0.08 and root.price_date == "2026-11-22"
    assert root.usd_per_hour + model.usd_per_hour == pytest.approx(230 * 0.08 / 730)
    assert c.usd_per_hour == pytest.approx(0.95 + 230 * 0.08 / 730) and HOURS_PER_MONTH == 730
    assert c.usd_per_month - c.instances_usd_per_hour * HOURS_PER_MONTH == pytest.approx(18.40)
    assert c.usd_per_million_output_tokens == pytest.approx(c.usd_per_hour / (plan.performance.output_tokens_per_s * 3600) * 1e6)
    shown = "\n".join(cost_lines(plan))
    assert "of which instances $0.95/h" in shown
    assert "EBS gp3 root volume per instance: 1 × 200 GiB at $0.08/GiB-month = $0.02/h" in shown
    assert "EBS gp3 model volume per instance: 1 × 30 GiB" in shown


def test_ec2_serving_volumes_priced_are_the_volumes_created(catalog):
    plan = _g6f_plan(catalog)
    stack = run_program(_stack(G6F_SERVING, {"svc": {"hfModelId": "Qwen/Qwen3-8B"}}))
    [template] = stack.of_type("ec2/launchTemplate:LaunchTemplate")
    sizes = [v["ebs"]["volumeSize"] for v in template.inputs["blockDeviceMappings"]]
    assert sizes == [i.size_gib for i in plan.cost.provisioned]
    [group] = stack.of_type("autoscaling/group:Group")
    assert group.inputs["tags"] and group.inputs["desiredCapacity"] == plan.cost.provisioned[0].quantity


def test_ultraserver_serving_prices_the_volumes_of_every_member(tmp_path):
    """u-p6e-gb200x36 launches as 9 × p6e-gb200.36xlarge, each with both volumes."""
    from planner.hardware.catalog import load

    catalog = load(_rate_card(tmp_path, "u-p6e-gb200x36", 400.0, "ec2"))
    plan = plan_workload(workload(**{k: v for k, v in _gb200_serving().items() if k != "name"}), catalog)
    root, model = plan.cost.provisioned
    assert (root.quantity, model.quantity) == (9, 9) and root.size_gib == 200
    assert plan.cost.usd_per_hour == pytest.approx(400.0 + 9 * (200 + model.size_gib) * 0.08 / 730)
