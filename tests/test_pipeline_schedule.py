"""Issue 25, pipelines: the schedule is a layout choice with its own bubble, activation memory and p2p
traffic (Narayanan et al. 2021; Korthikanti et al. 2022; Qi et al. 2023), chosen by the search and shown
in the plan; a published row that states its schedule is predicted with it."""

from __future__ import annotations

import pytest

from bench.reference_sources import stated_schedules
from planner.physics.memory import TrainingSetup, training_memory, training_model_states
from planner.physics.pipeline_schedule import bubble_fraction, p2p_factor, schedule_options
from planner.report.markdown import layout_text
from planner.pipeline import plan_workload
from planner.physics.training_time import TrainingLayout, training_step, training_work
from tests.conftest import workload


def test_bubble_of_each_schedule():
    assert bubble_fraction("1f1b", 8, 8) == pytest.approx(7 / 8)
    assert bubble_fraction("interleaved", 8, 8, 12) == pytest.approx(7 / 96)
    assert bubble_fraction("zb-h1", 8, 8) == pytest.approx(7 / 24)
    assert bubble_fraction("1f1b", 1, 8) == 0.0
    assert p2p_factor("interleaved", 4) == 4 and p2p_factor("zb-h1", 4) == 1


def test_plain_1f1b_at_pp8_with_8_microbatches_pays_its_whole_bubble(catalog, arch):
    """The issue's case: a plain 1F1B run at PP 8 with 8 micro-batches was predicted 65% high because the
    bubble was always divided by 3 virtual stages. Under 1F1B the bubble is 7/8 of the compute."""
    a, itype = arch["gpt-3-175b"], catalog.instance("p4de.24xlarge")
    accel = catalog.accelerator(itype.accelerator)
    setup = TrainingSetup("full", "bf16", "adamw", "auto", 16, 2048)
    state = sum(training_model_states(a, setup, 8, 8, 1, 1))

    def step(schedule, v):
        layout = TrainingLayout(8, 8, 1, 1, 1, 8, "selective", schedule, v)
        return training_step(a, itype, accel, "bf16", 2048, layout, state, training_work(a, setup)).step_time_s

    plain, three, twelve = step("1f1b", 1), step("interleaved", 3), step("interleaved", 12)
    assert plain / three > 1.3  # 1 + 7/8 against 1 + 7/24 of the compute, less the shared optimizer and comms
    assert twelve < three < plain
    assert step("zb-h1", 1) < plain


def test_interleaving_costs_activation_memory_zero_bubble_does_not(arch):
    a = arch["gpt-3-175b"]
    setup = TrainingSetup("full", "bf16", "adamw", "auto", 16, 2048)

    def activations(v):
        return training_memory(a, setup, 8, 8, 1, 1, 1, 64, "selective", True, v).activations

    # Korthikanti §4.2.3: (1 + (p−1)/(p·v)) times 1F1B's first-stage activations (logits aside)
    assert activations(2) > activations(4) > activations(1)


def test_options_split_a_stage_evenly():
    assert schedule_options(1, 96) == [("1f1b", 1)]
    assert schedule_options(8, 96) == [("1f1b", 1), ("zb-h1", 1), ("interleaved", 2), ("interleaved", 3),
                                       ("interleaved", 4), ("interleaved", 6), ("interleaved", 12)]
    assert ("zb-h1", 1) not in schedule_options(8, 96, zero_bubble=False)
    assert all(o[0] != "interleaved" for o in schedule_options(5, 96))  # 96 layers do not split into 5 stages


def test_a_stated_schedule_is_pinned():
    assert stated_schedules({"pp": 8, "schedule": "1f1b"}, 96) == [("1f1b", 1)]
    assert stated_schedules({"pp": 8, "schedule": "interleaved", "virtual_stages": 12}, 96) == [("interleaved", 12)]
    assert len(stated_schedules({"pp": 8, "schedule": "not stated"}, 96)) == 7


def test_interleaved_over_uneven_stages_tries_every_v_a_stage_holds():
    """Llama 3 405B: 126 layers over PP 16, interleaved with v unstated (arXiv 2407.21783 §3.3.2: the first and
    last stages hold a layer fewer). No v splits 126/16 evenly; up to 7 chunks of about a layer each fit."""
    assert stated_schedules({"pp": 16, "schedule": "interleaved"}, 126) == [("interleaved", v) for v in range(2, 8)]


def test_plan_shows_the_chosen_schedule(catalog):
    spec = workload(kind="training", model={"preset": "llama-2-70b"},
                    training={"tokens": 1e10, "sequence_length": 4096, "global_batch_tokens": 4e6},
                    layout={"pipeline_parallel": 4, "tensor_parallel": 8, "nodes": 4},
                    constraints={"families": ["p4de"]})
    plan = plan_workload(spec, catalog)
    assert plan.layout.pipeline_parallel == 4
    assert plan.layout.pipeline_schedule in ("1f1b", "interleaved", "zb-h1")
    assert (plan.layout.virtual_stages is not None) == (plan.layout.pipeline_schedule == "interleaved")
    assert "schedule" in layout_text(plan)


def test_tags_carry_the_virtual_stages_the_memory_recheck_uses(catalog):
    """The deploy-time gate recomputes memory from the tags: an interleaved plan's v travels with them."""
    from planner.workload.plan import PlanLayout
    from planner.report.tags import plan_tags, read_tags, required_memory

    spec = workload(kind="training", model={"preset": "llama-2-70b"},
                    training={"tokens": 1e10, "sequence_length": 4096, "global_batch_tokens": 4e6},
                    layout={"pipeline_parallel": 4, "tensor_parallel": 8, "nodes": 4},
                    constraints={"families": ["p4de"]})
    plan = plan_workload(spec, catalog)
    layout = plan.layout.model_dump()
    interleaved = plan.model_copy(update={"layout": PlanLayout(**{**layout, "pipeline_schedule": "interleaved",
                                                                   "virtual_stages": 4})})
    one_f_one_b = plan.model_copy(update={"layout": PlanLayout(**{**layout, "pipeline_schedule": "1f1b",
                                                                   "virtual_stages": None})})
    tags = plan_tags(interleaved, spec)
    assert "vs=4" in tags["gpuplan:layout"]
    itype = plan.choice.instance_type
    assert (required_memory(read_tags(tags), catalog, itype).activations
            > required_memory(read_tags(plan_tags(one_f_one_b, spec)), catalog, itype).activations)
