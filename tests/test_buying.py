"""What to buy (issue 15): purchase options with spot's interruptions and a Capacity Block's whole days
priced, the option `purchase: auto` picks, storage sizing, the managed-API break-even and rent vs buy."""

from __future__ import annotations

import math

import pytest

from planner.hardware.catalog import with_overlay
from planner.workload.errors import InfeasibleError
from planner.economics.managed import managed_prices
from planner.economics.purchase import (BAND_INTERRUPTIONS_PER_MONTH, CAPACITY_BLOCK_MAX_INSTANCES, capacity_block_days,
                                        interruptions_per_month, spot_run)
from planner.pipeline import plan_workload
from planner.economics.storage import S3_MB_S_PER_NODE, checkpoint_bytes, dataset_bytes_per_token, size_fsx
from planner.hardware.units import GIB, HOURS_PER_MONTH
from tests.conftest import workload

PRETRAIN = dict(kind="training", model={"preset": "llama-3-70b"},
                training={"tokens": 2e11, "sequence_length": 4096, "global_batch_tokens": 4e6, "deadline_hours": 720},
                constraints={"max_nodes": 64, "instance_types": ["p5.48xlarge"], "confidence": "expected"},
                layout={"nodes": 16, "tensor_parallel": 2, "pipeline_parallel": 16})


def _pretrain(**constraints):
    spec = {**PRETRAIN, "constraints": {**PRETRAIN["constraints"], **constraints}}
    return spec


# --- spot: Young/Daly checkpointing against the cluster's interruption rate ---------------------------------

def test_spot_run_is_young_daly():
    train_s, nodes, per_month, write_s, restart_s = 100 * 3600, 16, 0.10, 60.0, 600.0
    run = spot_run(train_s, nodes, per_month, write_s, restart_s)
    mtbi = HOURS_PER_MONTH * 3600 / (nodes * per_month)  # any of 16 nodes reclaimed stops the job
    tau = math.sqrt(2 * write_s * mtbi)
    lost = write_s / (tau + write_s) + (tau / 2 + restart_s) / mtbi
    assert run.checkpoint_interval_s == pytest.approx(tau)
    assert run.wall_s == pytest.approx(train_s / (1 - lost))
    assert run.expected_interruptions == pytest.approx(run.wall_s / mtbi)
    # more nodes, more interruptions: the stretch grows with the cluster
    assert spot_run(train_s, 64, per_month, write_s, restart_s).wall_s > run.wall_s


def test_spot_that_cannot_progress_is_refused():
    assert spot_run(3600 * 24, 4096, 1.0, 3600.0, 3600.0) is None


def test_interruption_rate_comes_from_the_band_or_the_spec():
    assert interruptions_per_month("5-10%", None) == (0.10, "Spot Instance Advisor band 5-10% (upper edge)")
    assert interruptions_per_month(">20%", None)[0] == BAND_INTERRUPTIONS_PER_MONTH[">20%"] == 0.25
    assert interruptions_per_month(None, None)[0] == 0.05
    assert interruptions_per_month("<5%", 0.5) == (0.5, "constraints.spot_interruptions_per_month")


@pytest.mark.parametrize("hours, days", [(1, 1), (24, 1), (25, 2), (14 * 24, 14), (14 * 24 + 1, 21), (30 * 24, 35),
                                         (182 * 24, 182), (182 * 24 + 1, None)])
def test_capacity_block_lengths(hours, days):
    """1-14 days in days, then whole weeks to 182 days (EC2 User Guide, How Capacity Blocks work)."""
    assert capacity_block_days(hours * 3600) == days


# --- the option the search buys ---------------------------------------------------------------------------

def test_auto_buys_spot_for_the_pretraining_run(catalog):
    plan = plan_workload(workload(**_pretrain(purchase="auto")), catalog)
    assert (plan.choice.instance_type, plan.choice.nodes, plan.choice.purchase) == ("p5.48xlarge", 16, "spot")
    options = {o.purchase: o for o in plan.purchase_options}
    spot, on_demand, block = options["spot"], options["on-demand"], options["capacity-block"]
    # p5.48xlarge us-east-1: spot 13.2182, band 5-10%; Capacity Block 39.33; on-demand 55.04 (catalog)
    assert spot.usd_per_hour == pytest.approx(16 * 13.2182) and on_demand.usd_per_hour == pytest.approx(16 * 55.04)
    launch_s = on_demand.wall_clock_s - plan.performance.time_to_train_s  # one launch: 10 min + a checkpoint read
    assert spot.wall_clock_s > on_demand.wall_clock_s and 600 < launch_s < 700
    # the run also pays its 16 gp3 root volumes while it runs (issue 27: everything provisioned is priced)
    [root] = plan.cost.provisioned
    assert root.item == "EBS gp3 root volume per node" and root.quantity == 16
    volumes_h = root.usd_per_hour
    assert spot.usd_per_training_run == pytest.approx((16 * 13.2182 + volumes_h) * spot.wall_clock_s / 3600)
    assert plan.cost.usd_per_training_run == pytest.approx(spot.usd_per_training_run)
    assert plan.performance.wall_clock_s == spot.wall_clock_s
    days = capacity_block_days(on_demand.wall_clock_s)
    assert block.usd_per_training_run == pytest.approx(16 * 39.33 * 24 * days + volumes_h * block.wall_clock_s / 3600)
    assert "bought spot at" in plan.choice.reason and "capacity-block" in plan.choice.reason
    assert any("not guaranteed capacity" in w for w in plan.warnings)


def test_auto_leaves_spot_when_its_interruptions_miss_the_deadline(catalog):
    on_demand = plan_workload(workload(**PRETRAIN), catalog)
    deadline_h = on_demand.performance.time_to_train_s / 3600 * 1.001  # spot's stretch does not fit
    spec = _pretrain(purchase="auto")
    spec["training"] = {**spec["training"], "deadline_hours": deadline_h}
    plan = plan_workload(workload(**spec), catalog)
    assert plan.choice.purchase == "capacity-block"  # cheaper than on-demand, in time
    spot = next(o for o in plan.purchase_options if o.purchase == "spot")
    assert spot.meets_deadline is False and "spot" in plan.choice.reason and "misses the deadline" in plan.choice.reason


def test_a_high_interruption_rate_prices_spot_out(catalog):
    plan = plan_workload(workload(**_pretrain(purchase="auto", spot_interruptions_per_month=1.0)), catalog)
    spot = next(o for o in plan.purchase_options if o.purchase == "spot")
    assert "100%/month per instance" in spot.note
    low = plan_workload(workload(**_pretrain(purchase="auto")), catalog)
    assert spot.usd_per_training_run > next(o for o in low.purchase_options if o.purchase == "spot").usd_per_training_run


def test_capacity_block_over_64_nodes_is_refused(catalog):
    spec = _pretrain(purchase="capacity-block", max_nodes=128)
    spec["layout"] = {"nodes": 128, "tensor_parallel": 2, "pipeline_parallel": 16}
    with pytest.raises(InfeasibleError, match=f"exceed a block's {CAPACITY_BLOCK_MAX_INSTANCES} instances"):
        plan_workload(workload(**spec), catalog)


def test_serving_lists_commitments_billed_every_hour(catalog):
    plan = plan_workload(workload(kind="inference", model={"preset": "llama-3-8b"},
                                  serving={"hours_per_month": 200},
                                  constraints={"instance_types": ["g5.2xlarge"], "deploy_target": "ec2"}), catalog)
    options = {o.purchase: o for o in plan.purchase_options}
    assert options["on-demand"].usd_per_month == pytest.approx(1.212 * 200 * plan.choice.nodes)
    assert options["savings-plan-3y"].usd_per_month == pytest.approx(0.52358 * HOURS_PER_MONTH * plan.choice.nodes)
    assert options["savings-plan-3y"].commitment_years == 3 and options["on-demand"].chosen


def test_sagemaker_savings_plan_from_an_overlay(catalog):
    overlay = {"instance_types": [{**catalog.instance("g5.2xlarge").model_dump(exclude={"prices"}),
                                   "prices": {"us-east-1": {"sagemaker": {"on_demand": 1.515, "savings_plan_1y": 1.0,
                                                                          "source": "my rate card", "date": "2026-11-01"}}}}]}
    priced = with_overlay(catalog, overlay, "o.yaml")
    plan = plan_workload(workload(kind="inference", model={"preset": "llama-3-8b"},
                                  constraints={"instance_types": ["g5.2xlarge"], "purchase": "savings-plan-1y"}), priced)
    assert plan.cost.usd_per_hour == 1.0 * plan.choice.nodes and plan.cost.price_source == "my rate card"


def test_floor_value_spot_prices_are_not_carried(catalog):
    """The CSV's spot values of exactly 10% of on-demand (inf2, trn1 in us-east-1) are floors, not prices."""
    trn1 = catalog.instance("trn1.32xlarge").price("us-east-1", "ec2")
    assert trn1.spot is None and "floor value" in trn1.note
    assert catalog.instance("trn1.32xlarge").price("us-west-2", "ec2").spot is not None


def test_commitment_figures_carry_their_own_source(catalog):
    price = catalog.instance("p4d.24xlarge").price("us-east-1", "ec2")
    source, day = price.origin("reserved_3y")
    assert "Spot Instance Advisor" in catalog.source_text(source) and day == "2025-11-30"
    assert price.origin("capacity_block") == (price.source, price.date)  # no block for p4d in us-east-1
    block = catalog.instance("p5.48xlarge").price("us-east-1", "ec2")
    assert block.capacity_block == 39.33 and block.origin("capacity_block")[1] == "2024-12-31"


# --- storage ----------------------------------------------------------------------------------------------

def test_checkpoint_holds_trained_weights_and_optimizer(arch):
    arch = arch["llama-3-8b"]
    full = checkpoint_bytes(arch, "full", "bf16", "adamw", 16)
    assert full == arch.params * (2 + 4 + 8)  # bf16 weights, fp32 master, Adam m and v
    lora = checkpoint_bytes(arch, "lora", "bf16", "adamw", 16)
    assert lora < full / 100  # the frozen base is not saved


def test_dataset_bytes_per_token_follow_the_vocabulary():
    assert dataset_bytes_per_token("tokenized", 32000) == 2.0  # Llama 2: uint16 ids
    assert dataset_bytes_per_token("tokenized", 128256) == 4.0  # Llama 3: int32 ids
    assert dataset_bytes_per_token("text", 128256) == 4.0


def test_pretraining_storage_from_its_throughputs(catalog):
    plan = plan_workload(workload(**PRETRAIN), catalog)
    s = plan.storage
    arch = workload(**PRETRAIN).architecture
    assert s.read_mb_s == pytest.approx(plan.performance.training_tokens_per_s * 4 / 1e6)
    assert s.checkpoint_bytes == arch.params * 14
    assert s.write_mb_s == pytest.approx(s.checkpoint_bytes / (0.05 * 3600) / 1e6)
    assert s.recommendation == "s3" and s.write_mb_s / 16 <= S3_MB_S_PER_NODE


def test_frequent_checkpoints_need_fsx(catalog):
    spec = {**PRETRAIN, "training": {**PRETRAIN["training"], "checkpoint_interval_minutes": 10,
                                      "max_checkpoint_share": 0.02}}
    s = plan_workload(workload(**spec), catalog).storage
    assert s.recommendation == "fsx" and "checkpoint writes" in s.reason
    assert s.fsx.throughput_mb_s >= s.write_mb_s
    assert s.fsx.storage_capacity_gib * GIB >= s.dataset_bytes + 2 * s.checkpoint_bytes
    # the cheapest tier: no other tier's valid size meets the throughput for less
    from planner.economics.storage import FSX_FIRST_GIB, FSX_STEP_GIB
    for tier, rate in ((125, 0.145), (250, 0.21), (500, 0.34), (1000, 0.60)):
        needed = max((s.dataset_bytes + 2 * s.checkpoint_bytes) / GIB, s.write_mb_s / tier * 1024)
        gib = FSX_FIRST_GIB if needed <= FSX_FIRST_GIB else math.ceil(needed / FSX_STEP_GIB) * FSX_STEP_GIB
        assert s.fsx.usd_per_month <= gib * rate + 1e-6


def test_fsx_outside_us_east_1_is_flagged():
    assert size_fsx("eu-west-1", 100, 1e12).price_estimated and not size_fsx("us-east-1", 100, 1e12).price_estimated


# --- managed API ------------------------------------------------------------------------------------------

def _serving(preset="llama-3-8b", **serving):
    return workload(kind="inference", model={"preset": preset},
                    serving={"prompt_tokens": 512, "output_tokens": 256, "concurrent_requests": 16, **serving})


def test_break_even_is_the_floor_over_the_managed_bill(catalog):
    # 64 requests in flight: a floor whose capacity reaches the break-even (at 16, inf2.xlarge was that floor
    # until its 16 GiB of host memory was found unable to load the 8B model, issue 27)
    plan = plan_workload(_serving(requests_per_day=20000, concurrent_requests=64), catalog)
    m = plan.managed
    price = managed_prices()["models"]["llama-3-8b"]["regions"]["us-east-1"]
    per_request = (512 * price["usd_per_million_input_tokens"] + 256 * price["usd_per_million_output_tokens"]) / 1e6
    assert m.model_id == "meta.llama3-8b-instruct-v1:0" and m.usd_per_request == pytest.approx(per_request)
    floor = plan.cost.usd_per_hour * 730
    assert m.self_hosted_usd_per_month_floor == pytest.approx(floor)
    assert m.break_even_requests_per_day == pytest.approx(floor / (730 / 24 * per_request))
    assert m.managed_usd_per_month == pytest.approx(20000 * 730 / 24 * per_request)
    assert m.cheaper == ("self-hosted" if 20000 > m.break_even_requests_per_day else "managed")
    busy = plan_workload(_serving(requests_per_day=m.break_even_requests_per_day * 1.2, concurrent_requests=64),
                         catalog).managed
    assert busy.cheaper == "self-hosted"


def test_never_breaks_even_when_a_busy_node_costs_more_per_request(catalog):
    m = plan_workload(_serving("llama-3.1-70b"), catalog).managed
    assert m.break_even_requests_per_day is None and m.requests_per_day is None


def test_no_managed_comparison_without_a_managed_model(catalog):
    assert plan_workload(_serving("qwen2.5-7b"), catalog).managed is None
    eu = workload(kind="inference", model={"preset": "llama-3.1-8b"}, constraints={"region": "eu-west-1"})
    assert plan_workload(eu, catalog).managed is None  # Bedrock has no Llama 3.1 price for eu-west-1 in the data


# --- rent vs buy ------------------------------------------------------------------------------------------

def test_owned_node_break_even_utilisation(catalog):
    owned = {"name": "owned-hgx-h100", "family": "owned", "accelerator": "H100-80GB", "accelerators_per_node": 8,
             "inter_node_gbps": 3200, "efa": True,
             "owned": {"capex_usd": 300000, "lifetime_years": 4, "power_kw": 10.2, "usd_per_kwh": 0.10, "pue": 1.3,
                       "opex_usd_per_year": 15000, "source": "vendor quote", "date": "2026-10-01"}}
    overlaid = with_overlay(catalog, {"instance_types": [owned]}, "owned.yaml")
    plan = plan_workload(workload(**_pretrain(purchase="auto")), overlaid)
    per_year = 300000 / 4 + 15000 + 10.2 * 1.3 * 8760 * 0.10
    rows = {r.purchase: r for r in plan.rent_vs_buy}
    on_demand = rows["on-demand"]
    assert on_demand.owned_type == "owned-hgx-h100" and on_demand.owned_usd_per_year == pytest.approx(16 * per_year)
    assert on_demand.break_even_utilization == pytest.approx(per_year / (55.04 * 8760))
    assert rows["spot"].break_even_utilization == pytest.approx(per_year / (13.2182 * 8760))
    assert "vendor quote" in on_demand.note
    # the owned node has no cloud price: it is never the chosen plan, only the comparison
    assert plan.choice.instance_type == "p5.48xlarge"



def test_every_run_pays_one_launch(catalog):
    """A run starts with one launch (restart_minutes plus reading a checkpoint-sized state back), billed
    like the training: without it a 4-minute QLoRA run on 8 B200s tied a 4-hour run on one L40S at $7."""
    from planner.economics.cost import HourlyPrice
    from planner.economics.run_pricing import run_quotes, run_storage

    w = workload(**_pretrain())
    storage = run_storage(w, 1e6, 16)
    quote = run_quotes(w, {"on-demand": HourlyPrice(55.04, "test", "2026-01-01")}, 16, 100 * 3600, 1e6, storage)["on-demand"]
    launch_s = 10 * 60 + storage.checkpoint_write_s  # restart_minutes defaults to 10
    assert quote.wall_s == pytest.approx(100 * 3600 + launch_s)
    assert quote.usd_per_run == pytest.approx(55.04 * 16 * (100 * 3600 + launch_s) / 3600)
    small = workload(kind="fine-tuning", model={"preset": "llama-2-7b"},
                     training={"method": "qlora", "tokens": 5e7, "sequence_length": 2048, "global_batch_tokens": 65536,
                               "deadline_hours": 48})
    # one GPU, not eight B200s for minutes: a g6e.xlarge (L40S) until the peak-memory band was widened to hold a
    # source it never saw (x1.36 high edge: its 40.3 GiB passes the L40S's 40.2 usable), then a 96 GB g7e.2xlarge, and
    # the L40S again since the training fit weighs every source the same: at micro-batch 1 it fits, and its step, with
    # 204 bytes of non-GEMM traffic per token and hidden unit through GDDR6 instead of 408, makes it the cheaper run
    assert plan_workload(small, catalog).choice.instance_type == "g6e.xlarge"
