"""Property tests of the spec and overlay models over hostile values (issue 11): any value in any
field either plans, is infeasible with the nearest misses, or is one SpecError naming the file and the
field; never another exception, never a plan with a negative or non-finite figure."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.hardware.catalog import bundled, with_overlay
from planner.workload.errors import InfeasibleError, SpecError
from planner.pipeline import plan_workload
from planner.workload.spec import parse_workloads

EXAMPLES = 2000
anything = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                     st.text(max_size=12), st.lists(st.integers(0, 9), max_size=2),
                     st.dictionaries(st.text(max_size=4), st.integers(0, 9), max_size=2))


def maybe(valid, weight: float = 0.8):
    """Mostly a sensible value, sometimes anything at all."""
    return st.one_of(valid, anything) if weight < 1 else valid


SERVING = st.fixed_dictionaries({}, optional={
    "max_context_tokens": maybe(st.sampled_from([2048, 8192])), "prompt_tokens": maybe(st.sampled_from([128, 1024])),
    "output_tokens": maybe(st.sampled_from([64, 256])), "concurrent_requests": maybe(st.integers(1, 64)),
    "target_output_tokens_per_s": maybe(st.floats(10, 5000)), "max_inter_token_latency_ms": maybe(st.floats(5, 200)),
    "engine": maybe(st.sampled_from(["auto", "vllm", "tgi"])), "kv_cache_precision": maybe(st.sampled_from(["fp16", "fp8"])),
    "hours_per_month": maybe(st.floats(1, 744)), "bogus": anything})
TRAINING = st.fixed_dictionaries({"tokens": maybe(st.floats(1e8, 1e10))}, optional={
    "method": maybe(st.sampled_from(["full", "lora", "qlora"])), "sequence_length": maybe(st.sampled_from([1024, 4096])),
    "deadline_hours": maybe(st.floats(1, 1000)), "global_batch_tokens": maybe(st.floats(1e5, 4e6)),
    "lora_rank": maybe(st.integers(1, 256))})
LAYOUT = st.fixed_dictionaries({}, optional={"nodes": maybe(st.integers(1, 4)), "tensor_parallel": maybe(st.sampled_from([1, 2, 8])),
                                             "replicas": maybe(st.integers(1, 4)), "micro_batch": maybe(st.integers(1, 8))})
MODEL = st.one_of(st.fixed_dictionaries({"preset": maybe(st.sampled_from(["llama-3.1-8b", "mistral-7b", "mixtral-8x7b"]))}),
                  st.fixed_dictionaries({"preset": st.just("llama-3.1-8b"), "architecture": st.fixed_dictionaries(
                      {}, optional={"params": maybe(st.floats(1e9, 1e10)), "experts": maybe(st.integers(0, 16)),
                                    "active_experts": maybe(st.integers(0, 16)), "kv_heads": maybe(st.sampled_from([1, 8]))})}))
WORKLOAD = st.one_of(
    st.fixed_dictionaries({"name": maybe(st.just("w")), "kind": st.just("inference"), "model": MODEL},
                          optional={"precision": maybe(st.sampled_from(["bf16", "fp8", "int4"])), "serving": SERVING,
                                    "layout": LAYOUT}),
    st.fixed_dictionaries({"name": st.just("w"), "kind": st.sampled_from(["training", "fine-tuning"]), "model": MODEL,
                           "training": TRAINING}, optional={"precision": maybe(st.sampled_from(["bf16", "fp8"])),
                                                            "layout": LAYOUT}))
FAST = {"instance_types": ["g6e.xlarge", "g6e.12xlarge", "p4d.24xlarge"], "max_nodes": 4}


def _sound(plan) -> None:
    figures = [plan.cost.usd_per_hour, plan.cost.usd_per_month, plan.memory.required_per_device_bytes]
    figures += [v for v in plan.performance.model_dump().values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    assert all(math.isfinite(v) and v >= 0 for v in figures), figures


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(WORKLOAD)
def test_any_spec_plans_or_is_one_clear_error(workload):
    document = {"workloads": [{**workload, "constraints": FAST}]}
    try:
        parsed = parse_workloads(document, "hostile.yaml").workloads[0]
    except SpecError as exc:
        assert exc.file == "hostile.yaml" and exc.path.startswith("workloads"), exc
        assert len(str(exc)) < 1000
        return
    try:
        _sound(plan_workload(parsed, bundled()))
    except InfeasibleError as exc:
        assert exc.nearest and exc.path == "workloads[0]"
    except SpecError as exc:
        assert exc.file == "hostile.yaml" and exc.path.startswith("workloads[0]"), exc


NUMBER = st.floats(0.5, 5000)
ACCELERATOR = st.fixed_dictionaries({"name": st.just("X1"), "memory_mib": maybe(st.sampled_from([24576, 81920])),
                                     "memory_bandwidth_gb_s": maybe(NUMBER), "intra_node_gb_s": maybe(NUMBER),
                                     "tflops": st.one_of(st.dictionaries(st.sampled_from(["bf16", "fp16", "fp8", "tf32"]),
                                                                         maybe(NUMBER), max_size=3), anything)},
                                    optional={"supports": st.fixed_dictionaries({}, optional={
                                        "fp8": maybe(st.booleans()), "bf16": maybe(st.booleans()),
                                        "training": maybe(st.booleans())}),
                                        "vendor": maybe(st.sampled_from(["nvidia", "other"])),
                                        "neuron_cores": maybe(st.integers(1, 8))})
NODE = st.fixed_dictionaries({"name": st.just("x1.8xl"), "family": st.just("x1"), "accelerator": maybe(st.just("X1")),
                              "accelerators_per_node": maybe(st.sampled_from([1, 8]))},
                             optional={"usd_per_hour": maybe(NUMBER), "inter_node_gbps": maybe(NUMBER),
                                       "efa": maybe(st.booleans()), "vcpus": maybe(st.integers(1, 192)),
                                       "memory_gib": maybe(NUMBER), "network_cards": maybe(st.integers(1, 32))})
OVERLAY = st.fixed_dictionaries({"accelerators": st.one_of(st.lists(ACCELERATOR, min_size=1, max_size=1), anything),
                                 "instance_types": st.one_of(st.lists(NODE, min_size=1, max_size=1), anything)},
                                optional={"sources": st.one_of(st.dictionaries(st.text(max_size=4), st.text(max_size=8)),
                                                               anything)})
SMALL = parse_workloads({"workloads": [{"name": "w", "kind": "inference", "model": {"preset": "llama-3.1-8b"},
                                        "constraints": {"families": ["x1"], "max_nodes": 2}}]}, "w.yaml").workloads[0]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OVERLAY)
def test_any_overlay_loads_or_is_one_clear_error(overlay):
    try:
        catalog = with_overlay(bundled(), overlay, "overlay.yaml")
    except SpecError as exc:
        assert exc.file == "overlay.yaml" and len(str(exc)) < 1000, exc
        assert exc.path.split("[")[0].split(".")[0] in ("accelerators", "instance_types", "sources"), exc
        return
    try:
        _sound(plan_workload(SMALL, catalog))
    except InfeasibleError as exc:
        assert exc.nearest
    except SpecError as exc:  # the overlay defined no x1 type: the workload's filter names nothing
        assert "x1.8xl" not in [t.name for t in catalog.instance_types] and "unknown family x1" in str(exc)
