"""The training search leaves a (TP, PP, DP) untimed when even its tokens/s ceiling misses the deadline
and a best already exists (issue 29; _TrainingSearch.late_at_ceiling): the ceiling is above every layout
the search times, and skipping changes no type's best, no miss, no frontier."""

from __future__ import annotations

import pytest

import planner.search.training as st
from planner.hardware.catalog import bundled
from planner.pipeline import frontier
from planner.search.step_floor import degrees_ceiling
from planner.search.tables import clear_search_tables
from tests.test_search_work import SHAPES, TRAINING_405B, _search_all, _workload, fits_timed


@pytest.fixture(autouse=True)
def _one_process(monkeypatch):
    """These tests count the search's work through patched functions, so all of it runs in this process (a
    forked helper, planner/search/split.py, would count its share in its own memory)."""
    monkeypatch.setenv("GPUPLAN_WORKERS", "1")


AT_4096 = {**TRAINING_405B, "constraints": {"max_nodes": 4096}}
LIKELY_4096 = {**TRAINING_405B, "constraints": {"max_nodes": 4096, "confidence": "likely"}}


def test_skipping_late_degrees_changes_no_best_nor_miss(monkeypatch):
    for spec in [*SHAPES, AT_4096, LIKELY_4096]:
        w = _workload(spec)
        skipping = _search_all(w)
        with monkeypatch.context() as m:
            m.setattr(st._TrainingSearch, "late_at_ceiling", lambda *a: False)
            timing_all = _search_all(w)
        assert skipping == timing_all, spec["name"]
        assert skipping[0], spec["name"]


def test_skipping_late_degrees_changes_no_frontier(monkeypatch):
    w = _workload({**TRAINING_405B, "constraints": {"max_nodes": 256}})
    clear_search_tables()
    skipping = frontier(w, bundled())
    monkeypatch.setattr(st._TrainingSearch, "late_at_ceiling", lambda *a: False)
    clear_search_tables()
    assert frontier(w, bundled()) == skipping


def test_the_ceiling_is_above_every_fastest_layout(monkeypatch):
    """For every (type, TP, PP, DP) the 405B search times, its fastest layout is at most the ceiling."""
    seen: list[tuple[float, float]] = []
    real = st._fastest_fit

    def checked(arch, itype, accel, w, setup, work, usable, tp, pp, dp, seqs, ckpts, zeros, mbs, memory, eps, memo, cp=1):
        found = real(arch, itype, accel, w, setup, work, usable, tp, pp, dp, seqs, ckpts, zeros, mbs, memory, eps, memo,
                     cp)
        if found is not None:
            seen.append((found[2].tokens_per_s, degrees_ceiling(arch, itype, accel, w.precision, setup.seq, work,
                                                                tp, pp, dp, seqs, mbs, ckpts, memo, cp)))
        return found

    monkeypatch.setattr(st, "_fastest_fit", checked)
    monkeypatch.setattr(st._TrainingSearch, "late_at_ceiling", lambda *a: False)
    _search_all(_workload(AT_4096))
    assert len(seen) > 1000
    assert all(fastest <= ceiling for fastest, ceiling in seen)


def test_late_degrees_are_left_untimed(monkeypatch):
    """The 405B search at max_nodes 4,096 times 1,340 (TP, PP, DP)s instead of 2,202 (when written)."""
    skipping, _ = fits_timed(monkeypatch, lambda: _search_all(_workload(AT_4096)))
    timing_all, _ = fits_timed(monkeypatch, lambda: _search_all(_workload(AT_4096)), ("late_at_ceiling", False))
    assert skipping < 0.7 * timing_all
