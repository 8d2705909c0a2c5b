"""The search makes sensible choices on realistic workloads and explains every rejection."""

from __future__ import annotations

import pytest

from planner.workload.errors import InfeasibleError
from planner.pipeline import plan_workload
from planner.hardware.units import GIB
from tests.conftest import workload

SINGLE_GPU_24GB = {"g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.16xlarge",
                   "g6.xlarge", "g6.2xlarge", "g6.4xlarge", "g6.8xlarge", "g6.16xlarge"}


def test_8b_chat_lands_on_a_cheap_single_accelerator_type(catalog):
    w = workload(kind="inference", model={"preset": "llama-3.1-8b"},
                 serving={"max_context_tokens": 4096, "concurrent_requests": 8, "target_output_tokens_per_s": 200},
                 constraints={"deploy_target": "ec2"})
    plan = plan_workload(w, catalog)
    assert plan.choice.family != "p5"
    assert plan.choice.accelerators_per_node == 1
    assert plan.cost.usd_per_hour < 5
    assert plan.memory.required_per_device_bytes <= plan.memory.usable_per_device_bytes


def test_70b_bf16_8k_never_lands_on_one_24gb_gpu(catalog):
    w = workload(kind="inference", model={"preset": "llama-3.1-70b"},
                 serving={"max_context_tokens": 8192, "concurrent_requests": 16})
    plan = plan_workload(w, catalog)
    assert plan.choice.instance_type not in SINGLE_GPU_24GB
    reasons = {r.instance_type: r.reason for r in plan.rejected}
    assert "needs" in reasons["g5.xlarge"] and "GiB per device" in reasons["g5.xlarge"]
    # 141 GB of weights alone cannot be split below 17 GiB per device over 8 devices
    assert plan.layout.tensor_parallel * plan.layout.pipeline_parallel * 80 * GIB >= 141e9


def test_qlora_7b_fits_a_24gb_gpu(catalog):
    w = workload(kind="fine-tuning", model={"preset": "llama-2-7b"},
                 training={"method": "qlora", "tokens": 1e7, "sequence_length": 2048, "global_batch_tokens": 32768},
                 constraints={"instance_types": ["g5.xlarge"]})
    plan = plan_workload(w, catalog)
    assert plan.choice.instance_type == "g5.xlarge"
    assert plan.memory.required_per_device_bytes < 22888 * 2**20 * 0.9


def test_full_finetune_7b_adamw_does_not_fit_a_24gb_gpu(catalog):
    w = workload(kind="fine-tuning", model={"preset": "llama-2-7b"},
                 training={"method": "full", "tokens": 1e7, "sequence_length": 2048, "global_batch_tokens": 32768},
                 constraints={"instance_types": ["g5.xlarge"]})
    with pytest.raises(InfeasibleError) as err:
        plan_workload(w, catalog)
    message = str(err.value)
    assert "multi-node training needs EFA or another inter-node network: g5.xlarge lacks EFA" in message
    assert message.count("lacks EFA") == 1  # said once, not once per layout tried
    with pytest.raises(InfeasibleError) as err:
        plan_workload(w.model_copy(update={"layout": w.layout.model_copy(update={"nodes": 1})}), catalog)
    message = str(err.value)
    assert "g5.xlarge: 1 × 22.4 GiB (20.1 GiB usable), needs" in message
    # 18 B/param model states alone are ~113 GiB, and ZeRO has no peers to shard over on one GPU
    needed = float(message.split("needs ")[1].split(" GiB")[0])
    assert needed > 100


def test_multinode_training_uses_efa_types_and_meets_the_deadline(catalog):
    w = workload(kind="training", model={"preset": "llama-3-70b"},
                 training={"tokens": 2e11, "sequence_length": 4096, "deadline_hours": 720})
    plan = plan_workload(w, catalog)
    assert plan.choice.nodes > 1
    assert catalog.instance(plan.choice.instance_type).efa
    assert plan.performance.time_to_train_s <= 720 * 3600
    assert plan.layout.tensor_parallel <= plan.choice.accelerators_per_node
    # the run pays its training time and one launch (restart_minutes, 10 by default, plus a checkpoint-sized read)
    launch_s = plan.performance.wall_clock_s - plan.performance.time_to_train_s
    assert 600 < launch_s < 900
    assert plan.cost.usd_per_training_run == pytest.approx(plan.cost.usd_per_hour * plan.performance.wall_clock_s / 3600)
    assert 0 < plan.performance.model_flops_utilization < 1


def test_pins_are_honoured(catalog):
    w = workload(kind="inference", model={"preset": "llama-3.1-70b"},
                 constraints={"instance_types": ["p4de.24xlarge"]},
                 layout={"tensor_parallel": 4, "replicas": 2})
    plan = plan_workload(w, catalog)
    # A SageMaker instance runs one serving container, one model copy: two replicas take two instances.
    assert (plan.layout.tensor_parallel, plan.layout.replicas, plan.choice.nodes) == (4, 2, 2)
    w = w.model_copy(update={"constraints": w.constraints.model_copy(update={"deploy_target": "ec2"})})
    plan = plan_workload(w, catalog)
    assert (plan.layout.tensor_parallel, plan.layout.replicas, plan.choice.nodes) == (4, 2, 1)


def test_every_other_type_is_rejected_with_a_reason(catalog):
    w = workload(kind="inference", model={"preset": "llama-3-8b"}, constraints={"families": ["g5"]})
    plan = plan_workload(w, catalog)
    listed = {plan.choice.instance_type} | {a.instance_type for a in plan.alternatives} | \
        {r.instance_type for r in plan.rejected}
    assert listed == {t.name for t in catalog.instance_types}
    assert {r.reason for r in plan.rejected if not r.instance_type.startswith("g5")} == \
        {f"family {t} not in constraints.families" for t in {"p4d", "p4de", "p5", "p5e", "p5en", "g6", "g6e", "inf2", "trn1",
                                                                     "p6-b200", "p6-b300", "p6e-gb200", "g6f", "g7e", "trn2"}}


def test_infeasible_targets_explain_nearest_misses(catalog):
    w = workload(kind="inference", model={"preset": "llama-3.1-70b"},
                 serving={"concurrent_requests": 4, "max_inter_token_latency_ms": 1},
                 constraints={"families": ["p5", "p5en"]})
    with pytest.raises(InfeasibleError) as err:
        plan_workload(w, catalog)
    assert "inter-token latency" in str(err.value) and "> target 1 ms" in str(err.value)


def test_budget_is_a_hard_constraint(catalog):
    w = workload(kind="inference", model={"preset": "llama-3.1-70b"},
                 constraints={"max_usd_per_month": 1000, "families": ["p4de", "p5en"]})
    with pytest.raises(InfeasibleError) as err:
        plan_workload(w, catalog)
    assert "max_usd_per_month $1,000" in str(err.value)


def test_fp8_needs_fp8_hardware(catalog):
    w = workload(kind="inference", model={"preset": "llama-3-8b"}, precision="fp8")
    plan = plan_workload(w, catalog)
    reasons = {r.instance_type: r.reason for r in plan.rejected}
    assert reasons["p4d.24xlarge"] == "A100-40GB has no fp8 support"
    assert catalog.accelerator(plan.choice.accelerator).supports.fp8


def test_sagemaker_prices_are_separate_from_ec2(catalog):
    common = dict(kind="inference", model={"preset": "llama-3-8b"}, constraints={"instance_types": ["g5.2xlarge"]})
    sm = plan_workload(workload(**common), catalog)
    ec2 = plan_workload(workload(**{**common, "constraints": {**common["constraints"], "deploy_target": "ec2"}}), catalog)
    assert sm.cost.usd_per_hour == 1.515 * sm.choice.nodes  # ml.g5.2xlarge hosting, us-east-1
    assert ec2.cost.instances_usd_per_hour == 1.212 * ec2.choice.nodes  # beside it: the EC2 volumes
    assert sm.cost.usd_per_million_output_tokens > ec2.cost.usd_per_million_output_tokens


def test_missing_sagemaker_price_is_estimated_and_flagged(catalog):
    w = workload(kind="inference", model={"preset": "llama-3-8b"}, constraints={"instance_types": ["g6e.xlarge"]})
    plan = plan_workload(w, catalog)
    ratio, pairs = catalog.sagemaker_markup
    assert plan.cost.price_estimated and pairs >= 10
    assert plan.cost.usd_per_hour == pytest.approx(1.861 * ratio * plan.choice.nodes)
    assert any("price is an estimate" in warning for warning in plan.warnings)


def test_spot_and_unpriced_purchase_options(catalog):
    spot = plan_workload(workload(kind="inference", model={"preset": "llama-3-8b"},
                                  constraints={"instance_types": ["g5.2xlarge"], "purchase": "spot",
                                               "deploy_target": "ec2"}), catalog)
    assert spot.cost.instances_usd_per_hour == 0.3744 * spot.choice.nodes
    reserved = plan_workload(workload(kind="inference", model={"preset": "llama-3-8b"},
                                      constraints={"instance_types": ["g5.2xlarge"], "purchase": "reserved-1y",
                                                   "deploy_target": "ec2"}), catalog)
    # the Standard RI 1-year no-upfront rate (vantage snapshot), billed every hour of the month
    assert reserved.cost.instances_usd_per_hour == 0.76356 * reserved.choice.nodes
    assert reserved.choice.purchase == "reserved-1y"
    with pytest.raises(InfeasibleError, match="no capacity-block price for g5.2xlarge"):
        plan_workload(workload(kind="inference", model={"preset": "llama-3-8b"},
                               constraints={"instance_types": ["g5.2xlarge"], "purchase": "capacity-block",
                                            "deploy_target": "ec2"}), catalog)
    with pytest.raises(InfeasibleError, match="SageMaker has no Reserved Instances; use savings-plan-1y"):
        plan_workload(workload(kind="inference", model={"preset": "llama-3-8b"},
                               constraints={"instance_types": ["g5.2xlarge"], "purchase": "reserved-1y"}), catalog)


def test_region_without_the_type(catalog):
    w = workload(kind="inference", model={"preset": "llama-3-8b"},
                 constraints={"region": "eu-west-1", "instance_types": ["p5.48xlarge"], "deploy_target": "ec2"})
    with pytest.raises(InfeasibleError, match="not offered or not priced in eu-west-1"):
        plan_workload(w, catalog)
