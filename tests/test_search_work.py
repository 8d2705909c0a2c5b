"""The training search does each piece of work once (issue 29): a layout's memory is sized once per
search (it depends on the model and the layout, not on the instance type), and a surviving candidate's
storage and purchase options are priced once, not once for the storage check and again for the quotes."""

from __future__ import annotations

import pytest

import planner.economics.run_pricing as rp
import planner.search.training as st
from planner.hardware.catalog import bundled
from planner.pipeline import plan_workload
from planner.search.tables import clear_search_tables
from planner.workload.errors import InfeasibleError
from planner.workload.spec import parse_workloads


@pytest.fixture(autouse=True)
def _one_process(monkeypatch):
    """These tests count the search's work through patched functions, so all of it runs in this process (a
    forked helper, planner/search/split.py, would count its share in its own memory)."""
    monkeypatch.setenv("GPUPLAN_WORKERS", "1")


TRAINING_405B = {"name": "train-405b", "kind": "training", "model": {"preset": "llama-3.1-405b"},
                 "training": {"tokens": 1.0e12, "sequence_length": 8192, "global_batch_tokens": 1.6e7,
                              "deadline_hours": 2160}, "constraints": {"max_nodes": 512}}


def _workload(spec: dict = TRAINING_405B):
    return parse_workloads({"workloads": [spec]}, "t.yaml").workloads[0]


def test_each_layout_memory_is_sized_once_across_the_catalog(monkeypatch):
    clear_search_tables()
    sized: list[tuple] = []
    real = st.training_memory

    def counted(arch, setup, *layout):
        sized.append(layout)
        return real(arch, setup, *layout)

    monkeypatch.setattr(st, "training_memory", counted)
    plan = plan_workload(_workload(), bundled())
    assert plan.choice.instance_type  # a real search ran
    assert len(sized) > 1000
    assert len(sized) == len(set(sized))


def test_a_surviving_candidate_storage_is_planned_once(monkeypatch):
    planned: list[tuple] = []
    real = rp.plan_storage

    def counted(arch, **kwargs):
        planned.append((kwargs["tokens_per_s"], kwargs["nodes"]))
        return real(arch, **kwargs)

    monkeypatch.setattr(rp, "plan_storage", counted)
    w = _workload()
    catalog = bundled()
    itype = catalog.instance("p6-b200.48xlarge")
    sharded, device = catalog.sharded(itype)
    from planner.economics.cost import price_book, purchase_options

    book = price_book(catalog, itype, w.constraints.region, "ec2", purchase_options(w.kind, "auto"))
    found = st.best_training(w, sharded, device, rp.BookPrices(w, book))
    assert found.nodes >= 1 and len(planned) > 5
    assert len(planned) == len(set(planned))


def test_cached_memory_is_the_memory_the_formula_gives():
    clear_search_tables()
    w = _workload()
    catalog = bundled()
    fresh = plan_workload(w, catalog)
    cached = plan_workload(w, catalog)  # every layout's memory now comes from the table
    assert cached.memory.per_device_bytes == fresh.memory.per_device_bytes
    assert cached.layout == fresh.layout and cached.cost.usd_per_training_run == fresh.cost.usd_per_training_run


def test_frontier_times_each_layout_once_for_the_spec_and_its_deadline_free_twin(monkeypatch):
    from planner.pipeline import frontier

    clear_search_tables()
    timed: list[tuple] = []
    real = st._fastest_fit

    def counted(arch, itype, accel, w, setup, work, usable, tp, pp, dp, *rest):
        timed.append((itype.name, tp, pp, dp))
        return real(arch, itype, accel, w, setup, work, usable, tp, pp, dp, *rest)

    monkeypatch.setattr(st, "_fastest_fit", counted)
    found = frontier(_workload({**TRAINING_405B, "constraints": {"max_nodes": 128}}), bundled())
    assert len(found.points) >= 2 and len(timed) > 100
    assert len(timed) == len(set(timed))


def _search_all(w, monkeypatch=None):
    from planner.pipeline import checked_target, search_types

    clear_search_tables()
    catalog = bundled()
    feasible, misses = search_types(w, catalog, checked_target(w, catalog))
    return ([(c.itype.name, c.nodes, c.tp, c.pp, c.dp, c.zero, c.micro_batch, c.checkpointing, c.purchase,
              c.objective, c.wall_s) for c in feasible], {name: m.reason for name, m in misses.items()})


SHAPES = [
    TRAINING_405B,
    {"name": "ft", "kind": "fine-tuning", "model": {"preset": "llama-3-8b"},
     "training": {"method": "lora", "tokens": 2.0e8, "sequence_length": 4096, "deadline_hours": 6}},
    {"name": "pre70", "kind": "training", "model": {"preset": "llama-3.1-70b"},
     "training": {"tokens": 2.0e11, "sequence_length": 4096, "global_batch_tokens": 4.0e6, "deadline_hours": 500},
     "constraints": {"max_nodes": 64}},
    {"name": "spot-only", "kind": "training", "model": {"preset": "llama-3.1-70b"},
     "training": {"tokens": 1.0e11, "sequence_length": 4096}, "constraints": {"max_nodes": 32, "purchase": "spot"}},
]


def test_layouts_left_unpriced_change_no_type_best_nor_any_reason(monkeypatch):
    """Every type's best and every miss are those of pricing every layout."""
    for spec in SHAPES:
        w = _workload(spec)
        skipping = _search_all(w)
        with monkeypatch.context() as m:
            m.setattr(rp, "unpriced_verdict", lambda *a: None)
            pricing_all = _search_all(w)
        assert skipping == pricing_all, spec["name"]
        assert skipping[0], spec["name"]


def test_a_layout_that_cannot_win_is_left_unpriced(monkeypatch):
    # the verdict's own saving: the late-at-ceiling skip (tests/test_late_ceiling.py) would spare some of it first
    monkeypatch.setattr(st._TrainingSearch, "late_at_ceiling", lambda *a: False)
    planned: list[int] = []
    real = rp.plan_storage
    monkeypatch.setattr(rp, "plan_storage", lambda arch, **kw: planned.append(kw["nodes"]) or real(arch, **kw))
    _search_all(_workload(SHAPES[2]))
    skipping = len(planned)
    planned.clear()
    monkeypatch.setattr(rp, "unpriced_verdict", lambda *a: None)
    _search_all(_workload(SHAPES[2]))
    assert skipping < 0.7 * len(planned)  # 760 of 1,281 when written


def test_nearest_miss_is_the_first_of_the_least_whether_worded_then_or_deferred():
    """Miss.nearer folded in order: the least (−stage, shortfall) wins, the earlier of equals; a deferred miss
    takes its place in that order when read, and is worded only then."""
    from planner.search.candidates import Miss, NearestMiss

    worded: list[str] = []

    def later(reason, shortfall, stage=2):
        return lambda: worded.append(reason) or Miss(reason, shortfall, stage=stage)

    log = NearestMiss()
    log.note(Miss("memory", 1.5, stage=1))
    log.defer(later("late a", 1.2))
    log.note(Miss("late b", 1.2, stage=2))  # equal to the deferred one, after it: the deferred one wins
    log.defer(later("late c", 1.1))
    assert worded == []
    assert log.nearest.reason == "late c" and worded == ["late a", "late c"]
    assert log.nearest.reason == "late c" and worded == ["late a", "late c"]  # worded once

    ties = NearestMiss()
    ties.note(Miss("first", 1.2, stage=2))
    ties.defer(later("second", 1.2))
    assert ties.nearest.reason == "first"

    # a floor above the nearest so far spares the wording; a floor at or below it does not
    worded.clear()
    floors = NearestMiss()
    floors.note(Miss("late d", 1.3, stage=2))
    floors.defer(later("late e", 2.0), (-2, 1.9))
    floors.defer(later("late f", 1.3), (-2, 1.3))  # ties "late d" but comes later: "late d" stays
    assert floors.nearest.reason == "late d" and worded == ["late f"]
    worded.clear()
    floors.defer(later("late g", 1.25), (-2, 1.0))
    floors.defer(later("late h", 1.28), (-2, 1.27))  # its floor is above "late g" once that is worded
    assert floors.nearest.reason == "late g" and worded == ["late g"]


def test_a_late_run_is_priced_only_when_its_type_has_nothing_in_time(monkeypatch):
    """A type with a feasible run never prices the late layouts met before it; a type with none words the
    nearest of them exactly as pricing each would (the chosen-plan corpus pins the texts)."""
    from planner.economics import run_pricing

    offers = []
    real = run_pricing.BookPrices.offer

    def counted(self, nodes, *rest):
        offers.append(nodes)
        return real(self, nodes, *rest)

    monkeypatch.setattr(run_pricing.BookPrices, "offer", counted)
    clear_search_tables()
    w = _workload({**TRAINING_405B, "constraints": {"max_nodes": 512, "instance_types": ["p5.48xlarge"]}})
    plan = plan_workload(w, bundled())
    assert plan.choice.instance_type == "p5.48xlarge"
    # the walk meets node counts too small for the deadline first: none of them is priced
    assert min(offers) >= plan.choice.nodes // 2
    late = _workload({**TRAINING_405B, "constraints": {"max_nodes": 64, "instance_types": ["p5.48xlarge"]}})
    # 5,146 h at the training band's slow edge (0.725 of the estimate since the rounded roofline's LOSO run; 5,109 h
    # at 0.730, 5,118 h at 0.729); 4,776 h since the NVLink leg of its collectives runs at nccl-tests' measured bus
    # bandwidth, NVLink SHARP's included, at its size (planner/physics/collectives.py); 4,840 h since the band is
    # widened to hold 80% of a source it never saw (bench/accuracy.py band_classes: slow edge 0.74 -> 0.73); 5,464 h since
    # the training fit weighs every source the same (slow edge 0.73 -> 0.66: the held-out sources need the band x1.45);
    # 6,228 h since collectives across nodes are measured and Hopper's eager GEMM share refitted 0.58 -> 0.49; 6,221 h
    # since NeMo's two B200 rows joined the training class (slow edge 0.6669 -> 0.6676); 5,568 h since
    # the non-GEMM traffic and the HBM weight stream are measured (Hopper's eager GEMM share 0.49 -> 0.53); slow edge 0.67 -> 0.70);
    # 5,581 h since a fit reads every row of a source (the held-out training folds move: slow edge 0.70 -> 0.69)
    with pytest.raises(InfeasibleError, match=r"p5\.48xlarge: 5,581 h to train \(likely: the 80% band's slow edge\) > "
                                              r"deadline 2160 h at 64 node\(s\), TP 2 × PP 1 × DP 256$"):
        plan_workload(late, bundled())


def fits_timed(monkeypatch, run, replaced: tuple[str, object] | None = None) -> tuple[int, object]:
    """How many (TP, PP, DP)s `run()` times (_fastest_fit calls), with one _TrainingSearch method replaced by a
    constant answer when given; and what run returned."""
    timed: list[int] = []
    real = st._fastest_fit
    with monkeypatch.context() as m:
        m.setattr(st, "_fastest_fit", lambda *a: timed.append(1) or real(*a))
        if replaced:
            m.setattr(st._TrainingSearch, replaced[0], lambda *a: replaced[1])
        result = run()
    return len(timed), result


def test_a_type_with_nothing_in_time_times_only_the_layouts_that_could_word_its_nearest_miss(monkeypatch):
    """405B on p5.48xlarge at 64 nodes misses 2,160 h at every layout: the (TP, PP, DP)s whose ceiling is already
    late are timed only while their miss could be the nearest, and the miss is the one timing them all words."""
    late = _workload({**TRAINING_405B, "constraints": {"max_nodes": 64, "instance_types": ["p5.48xlarge"]}})

    def refusal() -> str:
        clear_search_tables()
        with pytest.raises(InfeasibleError) as exc:
            plan_workload(late, bundled())
        return str(exc.value)

    lazy, lazy_text = fits_timed(monkeypatch, refusal)
    eager, eager_text = fits_timed(monkeypatch, refusal, ("late_at_ceiling", False))
    assert lazy_text == eager_text and "5,581 h to train" in lazy_text
    assert lazy < 0.8 * eager, (lazy, eager)
