"""Issue 29, the search's speed-ups must leave every answer as it was: step_parts' memo gives the very floats
a fresh evaluation gives, the tokens/s ceiling (planner/search/step_floor.py) is never below a layout's
tokens/s, and skipping the layouts it rules out changes no plan, frontier or near miss."""

from __future__ import annotations

import itertools
import math

import pytest

import planner.search.training as search_training
from planner.hardware.catalog import bundled
from planner.physics.memory import TrainingSetup
from planner.physics.pipeline_schedule import schedule_options
from planner.physics.training_time import TrainingLayout, step_from_parts, step_parts, training_work
from planner.pipeline import frontier, plan_workload
from planner.search.step_floor import layout_tokens_per_s_ceiling, tokens_per_s_ceiling
from planner.search.tables import clear_search_tables
from planner.workload.errors import InfeasibleError
from planner.workload.spec import parse_workloads


@pytest.fixture(autouse=True)
def _one_process(monkeypatch):
    """These tests count the search's work through patched functions, so all of it runs in this process (a
    forked helper, planner/search/split.py, would count its share in its own memory)."""
    monkeypatch.setenv("GPUPLAN_WORKERS", "1")


# (model, method, precision, type, accelerator): dense and MoE, full and adapters (QLoRA dequantises),
# FP8, GPUs inside and across nodes, a type with one GPU, and Neuron (no zero-bubble schedule).
CASES = [
    ("llama-3.1-405b", "full", "bf16", "p5.48xlarge", "H100-80GB"),
    ("llama-3-70b", "full", "fp8", "p5en.48xlarge", "H200-141GB"),
    ("llama-3.1-8b", "qlora", "bf16", "g6e.12xlarge", "L40S"),
    ("llama-3.1-8b", "lora", "bf16", "g5.48xlarge", "A10G"),
    ("mixtral-8x7b", "full", "bf16", "p4de.24xlarge", "A100-80GB"),
    ("llama-3-70b", "full", "bf16", "trn1.32xlarge", "Trainium"),
]


def _layouts(arch, apn: int, moe: bool):
    """A spread of layouts: TP inside and beyond the node, PP with each schedule, DP 1 to 512, every
    ZeRO stage and recompute mode, micro-batches 1 to 16 and their micro-batch counts, EP where MoE."""
    for tp, pp, dp, zero, mb, ck in itertools.product((1, 2, apn, 2 * apn), (1, 2, 4, 8), (1, 4, 64, 512), (0, 1, 2, 3),
                                                      (1, 4, 16), ("none", "selective", "full")):
        if pp > arch.layers or (tp > 1 and arch.attention_heads % tp):
            continue
        m = max(1, math.ceil(2048 / (dp * mb)))
        for ep in ((1, 2, 8) if moe else (1,)):
            if dp % ep == 0:
                yield tp, pp, dp, zero, mb, m, ck, ep


@pytest.mark.parametrize("model,method,precision,type_name,accel_name", CASES)
def test_memoised_parts_and_the_ceiling_against_a_fresh_step(arch, catalog, model, method, precision, type_name,
                                                             accel_name):
    a, itype = arch[model], catalog.instance(type_name)
    accel = catalog.accelerator(accel_name)
    if accel.is_neuron:
        itype, accel = catalog.sharded(itype)
    setup = TrainingSetup(method, precision, "adamw", "auto", 16, 4096)
    work = training_work(a, setup)
    memo: dict = {}
    checked = tight = 0
    for tp, pp, dp, zero, mb, m, ck, ep in _layouts(a, itype.accelerators_per_node, a.is_moe):
        base = TrainingLayout(tp, pp, dp, zero, mb, m, ck, ep=ep)
        fresh = step_parts(a, itype, accel, precision, 4096, base, work)
        assert step_parts(a, itype, accel, precision, 4096, base, work, memo) == fresh  # every float, bit for bit
        ceiling = tokens_per_s_ceiling(a, itype, accel, precision, 4096, work, tp, pp, dp, mb, m, ck, memo)
        # with its exposed data-parallel time: lower, and still above every schedule's tokens/s
        with_dp = layout_tokens_per_s_ceiling(a, itype, accel, precision, 4096, work, tp, pp, dp, mb, m, ck, zero, ep, memo)
        assert with_dp <= ceiling
        for schedule, v in schedule_options(pp, a.layers, not accel.is_neuron):
            layout = TrainingLayout(tp, pp, dp, zero, mb, m, ck, schedule, v, ep)
            est = step_from_parts(fresh, a, 4096, layout, 1.0e9, work)
            assert est.tokens_per_s <= with_dp
            checked += 1
            tight += est.tokens_per_s > 0.9 * with_dp
    assert checked > 500
    assert tight > checked / 10  # a ceiling that holds because it is far above every layout would spare nothing


def _spec(raw: dict):
    return parse_workloads({"workloads": [raw]}, "test").workloads[0]


WORKLOADS = [
    {"name": "t405", "kind": "training", "model": {"preset": "llama-3.1-405b"},
     "training": {"tokens": 1.0e12, "sequence_length": 8192, "global_batch_tokens": 1.6e7, "deadline_hours": 2160},
     "constraints": {"max_nodes": 512}},
    {"name": "t70-fp8", "kind": "training", "model": {"preset": "llama-3-70b"}, "precision": "fp8",
     "training": {"tokens": 2.0e11, "sequence_length": 4096, "deadline_hours": 720},
     "constraints": {"max_nodes": 64, "purchase": "auto"}},
    {"name": "ft-qlora", "kind": "fine-tuning", "model": {"preset": "llama-3.1-8b"},
     "training": {"method": "qlora", "tokens": 1.0e9, "sequence_length": 2048}, "constraints": {"max_nodes": 8}},
    {"name": "moe", "kind": "training", "model": {"preset": "mixtral-8x7b"},
     "training": {"tokens": 5.0e10, "sequence_length": 4096, "deadline_hours": 720}, "constraints": {"max_nodes": 32}},
]


def _outcome(w, catalog):
    clear_search_tables()
    try:
        plan = plan_workload(w, catalog).model_dump_json()
    except InfeasibleError as exc:
        plan = str(exc)
    clear_search_tables()
    try:
        points = repr(frontier(w, catalog).points)
    except InfeasibleError as exc:
        points = str(exc)
    return plan, points


@pytest.mark.parametrize("raw", WORKLOADS, ids=[w["name"] for w in WORKLOADS])
def test_the_ceiling_skips_layouts_and_moves_no_plan(raw, monkeypatch):
    """The same plan (every field), frontier and near misses with the ceiling as without it, and fewer
    layouts timed with it (the 405B and the MoE cases at least)."""
    catalog, w = bundled(), _spec(raw)
    timed = []
    real_parts = search_training.step_parts

    def counted(*args, **kwargs):
        timed.append(1)
        return real_parts(*args, **kwargs)

    monkeypatch.setattr(search_training, "step_parts", counted)
    with_ceiling, timed_with = _outcome(w, catalog), len(timed)
    monkeypatch.setattr(search_training, "tokens_per_s_ceiling", lambda *args: math.inf)
    monkeypatch.setattr(search_training, "layout_tokens_per_s_ceiling", lambda *args: math.inf)
    timed.clear()
    without = _outcome(w, catalog)
    assert with_ceiling == without
    assert timed_with <= len(timed)
    if raw["name"] in ("t405", "moe"):
        assert timed_with < len(timed)


@pytest.mark.parametrize("model,method,precision,type_name,accel_name", CASES)
def test_the_largest_ceiling_is_at_the_least_recompute(arch, catalog, model, method, precision, type_name, accel_name):
    """degrees_ceiling asks only the modes that recompute least: the same figure as the largest over every mode."""
    from planner.search.step_floor import degrees_ceiling, degrees_ceilings

    a, itype = arch[model], catalog.instance(type_name)
    accel = catalog.accelerator(accel_name)
    if accel.is_neuron:
        itype, accel = catalog.sharded(itype)
    setup = TrainingSetup(method, precision, "adamw", "auto", 16, 4096)
    work, memo, checked = training_work(a, setup), {}, 0
    modes = ("none", "selective", "full")
    for tp, pp, dp in itertools.product((1, 2, itype.accelerators_per_node), (1, 2, 8), (1, 4, 64, 512)):
        if tp > 1 and a.attention_heads % tp:
            continue
        for kept in (modes, modes[1:], modes[2:]):
            everything = max(degrees_ceilings(a, itype, accel, precision, 4096, work, tp, pp, dp, 2048,
                                              (16, 8, 4, 2, 1), kept, memo), default=0.0)
            assert degrees_ceiling(a, itype, accel, precision, 4096, work, tp, pp, dp, 2048, (16, 8, 4, 2, 1), kept,
                                   memo) == everything
            checked += 1
    assert checked > 50
