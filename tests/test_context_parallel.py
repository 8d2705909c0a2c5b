"""Issue 25: context parallelism in training (planner/physics/context_parallel.py), the search, the plan
and the reference rows that ran with it."""

from __future__ import annotations

import pytest

from bench import reference_sources as rs
from planner.physics.context_parallel import (attention_forward_flops, cp_link_bytes_per_s, cp_step_s,
                                              exposed_forward_s, kv_block_bytes)
from planner.physics.memory import TrainingSetup, training_memory
from planner.pipeline import plan_workload
from planner.report.markdown import layout_text
from planner.workload.errors import InfeasibleError, SpecError
from tests.conftest import workload

H100_ATTENTION_FLOPS = 989.4e12 * 0.43  # the docstring's worked example


def test_cp_ring_worked_example(catalog, arch):
    """The module docstring's numbers: Llama 3.1 8B at 32,768 tokens on p5."""
    itype = catalog.instance("p5.48xlarge")
    accel = catalog.accelerator(itype.accelerator)
    a = arch["llama-3.1-8b"]
    assert kv_block_bytes(a, 32768, 1, 8, 2) == 8_388_608
    assert cp_link_bytes_per_s(itype, accel, 8, 2) == 40e9  # TP 8 × CP 2 spans two nodes: EFA
    assert cp_link_bytes_per_s(itype, accel, 1, 2) == pytest.approx(360e9)  # inside the node: NVLink
    assert attention_forward_flops(a, 32768, 1, 8, 2) == pytest.approx(5.4976e11, rel=1e-4)
    hidden = exposed_forward_s(8_388_608, 40e9, attention_forward_flops(a, 32768, 1, 8, 2) / H100_ATTENTION_FLOPS, 2)
    assert hidden == 0.0
    block = kv_block_bytes(a, 32768, 1, 8, 8)
    assert block == 2_097_152
    exposed = exposed_forward_s(block, 40e9, attention_forward_flops(a, 32768, 1, 8, 8) / H100_ATTENTION_FLOPS, 8)
    assert exposed == pytest.approx(199.8e-6, rel=1e-3)
    step = cp_step_s(a, itype, accel, 32768, 8, 1, 8, 1, 4, "selective", H100_ATTENTION_FLOPS)
    assert step == pytest.approx(76.7e-3, rel=1e-3)
    # full recompute runs the forward ring once more: 4 passes instead of 3
    assert cp_step_s(a, itype, accel, 32768, 8, 1, 8, 1, 4, "full", H100_ATTENTION_FLOPS) == pytest.approx(step * 4 / 3)
    assert cp_step_s(a, itype, accel, 32768, 8, 1, 1, 1, 4, "full", H100_ATTENTION_FLOPS) == 0.0


def test_cp_shares_activations_and_shards_states_over_dp_times_cp(arch):
    a = arch["llama-3.1-405b"]
    setup = TrainingSetup("full", "bf16", "adamw", "auto", 16, 131072)
    one = training_memory(a, setup, 8, 16, 8, 1, 1, 16, "selective", True)
    sixteen = training_memory(a, setup, 8, 16, 8, 1, 1, 16, "selective", True, cp=16)
    short = training_memory(a, setup.__class__(**{**setup.__dict__, "seq": 8192}), 8, 16, 128, 1, 1, 16, "selective", True)
    # seq/CP tokens per rank: CP 16 at 131,072 holds what 8,192 tokens hold, optimizer sharded over DP × CP = 128
    assert sixteen.activations == pytest.approx(short.activations)
    assert sixteen.optimizer == pytest.approx(short.optimizer)
    assert sixteen.weights == one.weights
    assert one.activations == pytest.approx(16 * sixteen.activations)


def _long_405b(catalog, layout=None, seq=131072):
    return plan_workload(workload(kind="training", model={"preset": "llama-3.1-405b"},
                                  training={"tokens": 1e11, "sequence_length": seq, "global_batch_tokens": 16 * 2**20},
                                  constraints={"instance_types": ["p5.48xlarge"], "max_nodes": 2048},
                                  layout=layout or {}), catalog)


def test_405b_at_131072_tokens_plans_with_cp_where_cp1_does_not_fit(catalog):
    plan = _long_405b(catalog)
    lay = plan.layout
    assert lay.context_parallel > 1
    assert lay.tensor_parallel * lay.pipeline_parallel * lay.data_parallel * lay.context_parallel \
        == plan.choice.nodes * plan.choice.accelerators_per_node
    assert plan.memory.required_per_device_bytes <= plan.memory.usable_per_device_bytes
    assert f"× CP {lay.context_parallel}" in layout_text(plan)
    assert plan.model_dump(mode="json")["layout"]["context_parallel"] == lay.context_parallel
    # held at CP 1 the search finds a dearer run (micro-batches of whole 131,072-token sequences)
    cp1 = _long_405b(catalog, {"context_parallel": 1})
    assert cp1.layout.context_parallel == 1 and cp1.cost.usd_per_training_run > plan.cost.usd_per_training_run
    # at TP 8 × PP 16 × DP 8 a whole sequence per rank needs 114.0 GiB at the band's high edge (x1.14, full training's
    # own class; 135.9 GiB at x1.36 while LoRA / QLoRA peaks were in the class, 120.9 GiB at x1.21 before the band
    # was widened to hold a source it never saw); CP 16 splits it to fit
    with pytest.raises(InfeasibleError, match=r"needs 114.0 GiB per device at 128 node\(s\), TP 8 × PP 16 × DP 8,"):
        _long_405b(catalog, {"nodes": 128, "tensor_parallel": 8, "pipeline_parallel": 16, "data_parallel": 8})


def test_llama3_cp16_run_plans_at_its_layout(catalog):
    """Llama 3 405B long-context stage: 16,384 H100, TP 8 × CP 16 × PP 16 × DP 8, 131,072 tokens."""
    plan = _long_405b(catalog, {"nodes": 2048, "tensor_parallel": 8, "pipeline_parallel": 16, "data_parallel": 8,
                                "context_parallel": 16, "micro_batch": 1})
    lay = plan.layout
    assert (plan.choice.nodes, lay.tensor_parallel, lay.pipeline_parallel, lay.data_parallel, lay.context_parallel) \
        == (2048, 8, 16, 8, 16)
    assert plan.memory.required_per_device_bytes <= plan.memory.usable_per_device_bytes


def test_short_sequences_keep_cp_1(catalog):
    plan = _long_405b(catalog, seq=8192)
    assert plan.layout.context_parallel == 1


def test_a_cp_pin_that_does_not_split_the_sequence_is_refused():
    with pytest.raises(SpecError, match="layout.context_parallel"):
        workload(kind="training", model={"preset": "llama-3.1-8b"}, training={"tokens": 1e9, "sequence_length": 8190},
                 layout={"context_parallel": 4})


def test_published_cp_rows_are_compared(catalog):
    rows = [r for d in rs.sources().values() for r in d["rows"] if (r.get("cp") or 1) > 1 and "seq" in r]
    reasons = {r["id"]: rs.why_not(r, catalog) for r in rows}
    dgxc = [i for i in reasons if i.startswith("dgxc-") and "gb200" not in i]
    assert len(dgxc) >= 20 and all(reasons[i] is None for i in dgxc)
    cp16 = next(r for r in rows if r["id"] == "llama3-405b-16384gpu-cp16-128k")
    assert any(rs.why_not(v, catalog) is None for v in rs.as_planned(cp16))
    # expert parallelism stays out
    assert rs.why_not({**rows[0], "ep": 2}, catalog) == "expert parallelism is not modelled"


def test_cp_travels_to_the_tags_the_gate_rechecks_and_to_the_nodes(catalog):
    """The deploy-time gate recomputes memory from the tags: without cp it would size a CP 16 plan as if
    each rank held the whole 131,072-token sequence and block a plan that fits. The nodes get the degree."""
    from components.training import user_data
    from planner.report.tags import plan_tags, read_tags, required_memory
    from policies.facts import TRAINING_EXPORTS

    spec = workload(kind="training", model={"preset": "llama-3.1-405b"},
                    training={"tokens": 1e11, "sequence_length": 131072, "global_batch_tokens": 16 * 2**20},
                    constraints={"instance_types": ["p5.48xlarge"], "max_nodes": 2048})
    plan = plan_workload(spec, catalog)
    cp = plan.layout.context_parallel
    assert cp > 1
    tags = plan_tags(plan, spec)
    assert f"cp={cp}" in tags["gpuplan:layout"].split()
    need = required_memory(read_tags(tags), catalog, plan.choice.instance_type)
    assert need.total <= plan.memory.usable_per_device_bytes
    lay = plan.layout
    whole = training_memory(read_tags(tags).architecture, TrainingSetup("full", "bf16", "adamw", "auto", 16, 131072),
                            lay.tensor_parallel, lay.pipeline_parallel, lay.data_parallel, lay.zero_stage,
                            lay.micro_batch, lay.microbatches, lay.activation_checkpointing, True)
    assert need.activations == pytest.approx(whole.activations / cp)
    script = user_data(plan, catalog.instance(plan.choice.instance_type), "c")
    assert f"GPUPLAN_CP={cp}" in script.splitlines() and TRAINING_EXPORTS["GPUPLAN_CP"] == "cp"
    # a short-sequence plan's tags and user data stay as they were (no cp=1 written)
    short = plan_workload(workload(kind="training", model={"preset": "llama-3.1-8b"},
                                   training={"tokens": 1e9, "sequence_length": 8192, "global_batch_tokens": 4e6}), catalog)
    assert "cp=" not in plan_tags(short, spec)["gpuplan:layout"]
