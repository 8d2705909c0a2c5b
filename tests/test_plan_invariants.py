"""An independent check of every chosen plan over generated specs (issue 9): recomputed here from
the roofs, not from the estimators' own numbers. A plan never exceeds a roof, never puts more
requests in flight than `concurrent_requests`, fits its memory (ZeRO-3 working set included), a
SageMaker replica fits one instance, and a training plan meets the deadline it claims."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.hardware.catalog import bundled
from planner.workload.errors import InfeasibleError
from planner.workload.presets import presets
from planner.pipeline import plan_workload
from planner.workload.spec import parse_workloads

MODELS = ["llama-3.1-8b", "llama-2-7b", "mistral-7b", "llama-2-13b", "llama-3-70b", "mixtral-8x7b"]
SLACK = 1 + 1e-9


def _spec(draw_kind, fields):
    # Lengths past a model's trained context are asked for explicitly (issue 31); the invariants hold either way.
    workload = {"name": "w", "kind": draw_kind, "allow_context_extension": True, **fields}
    return parse_workloads({"workloads": [workload]}, "generated").workloads[0]


serving_specs = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS).map(lambda m: {"preset": m}),
    "precision": st.sampled_from(["bf16", "fp8", "int8", "int4"]),
    "serving": st.fixed_dictionaries({
        "max_context_tokens": st.sampled_from([2048, 4096, 8192, 32768]),
        "prompt_tokens": st.sampled_from([128, 512, 1024]),
        "output_tokens": st.sampled_from([64, 256, 512]),
        "concurrent_requests": st.integers(1, 128),
        "target_output_tokens_per_s": st.one_of(st.none(), st.floats(10, 20000)),
        "max_inter_token_latency_ms": st.one_of(st.none(), st.floats(5, 200)),
        "max_time_to_first_token_ms": st.one_of(st.none(), st.floats(50, 5000)),
    }),
    "constraints": st.fixed_dictionaries({"deploy_target": st.sampled_from(["auto", "ec2"]),
                                          "max_nodes": st.integers(1, 16)}),
})

training_specs = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS[:5]).map(lambda m: {"preset": m}),
    "precision": st.sampled_from(["bf16", "fp8"]),
    "training": st.fixed_dictionaries({
        "method": st.sampled_from(["full", "lora", "qlora"]),
        "tokens": st.floats(1e8, 1e11),
        "sequence_length": st.sampled_from([1024, 2048, 4096, 8192]),
        "deadline_hours": st.one_of(st.none(), st.floats(1, 2000)),
    }),
    "constraints": st.fixed_dictionaries({"max_nodes": st.integers(1, 32)}),
})


def _check_serving(plan, w, catalog):
    itype, accel = catalog.sharded(catalog.instance(plan.choice.instance_type))  # NeuronCores on Neuron types
    lay, perf, s = plan.layout, plan.performance, w.serving
    assert lay.sequences_in_flight <= s.concurrent_requests
    assert lay.replicas * lay.batch_per_replica >= lay.sequences_in_flight
    assert lay.replicas * (lay.batch_per_replica - 1) < s.concurrent_requests  # the spread is even
    devices = lay.tensor_parallel * lay.pipeline_parallel
    assert devices * lay.replicas <= plan.choice.nodes * itype.accelerators_per_node
    if plan.choice.deploy_target == "sagemaker":
        assert lay.pipeline_parallel == 1 and lay.tensor_parallel <= itype.accelerators_per_node
    # Roofs: a decode step reads every weight once at no more than peak bandwidth (stages in turn),
    # and computes 2 FLOPs per active parameter per sequence at no more than peak FLOP/s.
    arch = w.architecture
    # MoE: at least the active parameters' share of the weights is read (the experts a batch touches)
    weight_b = plan.memory.per_device_bytes["weights"] * devices * arch.params_per_token / arch.params
    bandwidth_roof = weight_b / lay.tensor_parallel / (accel.memory_bandwidth_gb_s * 1e9)
    peak = max(v for v in accel.tflops.values() if v) * 1e12
    compute_roof = lay.batch_per_replica * 2 * arch.params_per_token / (lay.tensor_parallel * peak)
    fastest_step = max(bandwidth_roof, compute_roof)
    assert perf.inter_token_latency_s * SLACK >= fastest_step
    assert perf.output_tokens_per_s_per_replica <= lay.batch_per_replica / fastest_step * SLACK
    assert perf.output_tokens_per_s <= lay.replicas * perf.output_tokens_per_s_per_replica * SLACK
    if s.target_output_tokens_per_s:
        assert perf.output_tokens_per_s * SLACK >= s.target_output_tokens_per_s
    if s.max_inter_token_latency_ms:
        assert perf.inter_token_latency_s * 1e3 <= s.max_inter_token_latency_ms * SLACK


def _check_training(plan, w, catalog):
    itype, accel = catalog.sharded(catalog.instance(plan.choice.instance_type))  # NeuronCores on Neuron types
    lay, perf, t = plan.layout, plan.performance, w.training
    devices = lay.tensor_parallel * lay.pipeline_parallel * lay.data_parallel
    assert devices == plan.choice.nodes * itype.accelerators_per_node
    assert lay.tensor_parallel <= itype.accelerators_per_node
    peak = accel.peak_flops(w.precision if w.precision in ("fp8",) else "bf16")
    assert perf.achieved_tflops_per_device * 1e12 <= peak * SLACK
    assert 0 < perf.model_flops_utilization < 1
    assert perf.time_to_train_s == t.tokens / perf.training_tokens_per_s
    if t.deadline_hours:
        assert perf.time_to_train_s <= t.deadline_hours * 3600 * SLACK
    if lay.zero_stage == 3 and lay.data_parallel > 1:  # the working set is counted
        arch = w.architecture
        block = (arch.params - arch.embedding_params) / arch.layers / lay.tensor_parallel
        assert plan.memory.per_device_bytes["weights"] >= block * 0.5  # at least two NF4 blocks


def _check_memory(plan):
    parts = plan.memory.per_device_bytes
    assert abs(sum(parts.values()) - plan.memory.required_per_device_bytes) < 1
    assert plan.memory.required_per_device_bytes <= plan.memory.usable_per_device_bytes * SLACK


def _feasible(w):
    """The plan, or None where the generated spec has none (an infeasible spec has nothing to check)."""
    try:
        return plan_workload(w, bundled())
    except InfeasibleError:
        return None


def _examples(count: int):
    """Fixed, reproducible examples (derandomized) with no per-example deadline: each plans a spec."""
    return settings(max_examples=count, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@_examples(300)
@given(serving_specs)
def test_serving_plans_keep_every_invariant(fields):
    if fields["serving"]["prompt_tokens"] + fields["serving"]["output_tokens"] > fields["serving"]["max_context_tokens"]:
        fields["serving"]["max_context_tokens"] = 4096
    w = _spec("inference", fields)
    plan = _feasible(w)
    if plan is not None:
        _check_memory(plan)
        _check_serving(plan, w, bundled())


@_examples(220)
@given(training_specs)
def test_training_plans_keep_every_invariant(fields):
    w = _spec("training" if fields["training"]["method"] == "full" else "fine-tuning", fields)
    plan = _feasible(w)
    if plan is not None:
        _check_memory(plan)
        _check_training(plan, w, bundled())


def test_presets_cover_the_generated_models():
    assert set(MODELS) <= set(presets())
