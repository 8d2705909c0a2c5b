"""Issue 29: one search shared with a forked helper process (planner/search/split.py) gives exactly the answers
the search alone gives, in order, and degrades to searching alone whenever the helper cannot help."""

from __future__ import annotations

import os
import threading

import pytest

from planner.hardware.catalog import bundled
from planner.pipeline import frontier, plan_workload
from planner.search import split
from planner.search.tables import clear_search_tables
from planner.workload.spec import parse_workloads

forks = pytest.mark.skipif(not split.may_fork(), reason="needs two usable cores and fork")


def _square_and_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


@forks
def test_answers_come_back_in_order_from_both_processes():
    items = list(range(40))
    out = split.split_map(lambda x: (_square_and_pid(x), sum(range(20000))), items)  # enough work to share
    assert [r[0][0] for r in out] == [x * x for x in items]
    assert len({r[0][1] for r in out}) == 2  # a helper took some


@forks
def test_an_error_is_raised_here_as_the_search_raised_it():
    def fail_on_7(x):
        if x == 7:
            raise ValueError("item 7")
        return x

    with pytest.raises(ValueError, match="item 7"):
        split.split_map(fail_on_7, list(range(12)))


@forks
def test_a_helper_that_dies_leaves_its_items_to_this_process():
    parent = os.getpid()

    def die_in_helper(x):
        if os.getpid() != parent:
            os._exit(3)  # the helper dies at its first item: nothing comes back
        return -x

    assert split.split_map(die_in_helper, list(range(10))) == [-x for x in range(10)]


def test_no_helper_when_told_or_when_a_thread_runs(monkeypatch):
    monkeypatch.setenv("GPUPLAN_WORKERS", "1")
    assert not split.may_fork()
    monkeypatch.delenv("GPUPLAN_WORKERS")
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        assert not split.may_fork()  # forking beside a thread (the Pulumi runtime's gRPC) could deadlock the child
    finally:
        stop.set()
        worker.join()
    monkeypatch.setattr(split, "_in_helper", True)
    assert not split.may_fork()
    assert split.split_map(lambda x: os.getpid(), [1, 2, 3]) == [os.getpid()] * 3


TRAINING_405B = {"name": "train-405b", "kind": "training", "model": {"preset": "llama-3.1-405b"},
                 "training": {"tokens": 1.0e12, "sequence_length": 8192, "global_batch_tokens": 1.6e7,
                              "deadline_hours": 2160}, "constraints": {"max_nodes": 512}}


@forks
def test_a_split_search_plans_and_frontiers_exactly_as_one_process(monkeypatch):
    w = parse_workloads({"workloads": [TRAINING_405B]}, "t").workloads[0]
    catalog = bundled()

    def outcome():
        clear_search_tables()
        return plan_workload(w, catalog).model_dump_json(), repr(frontier(w, catalog))

    forked = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forked.append(1) or real_fork())
    shared = outcome()
    assert len(forked) == 2  # the plan's search and the frontier's (its spec and twin in one split)
    monkeypatch.setenv("GPUPLAN_WORKERS", "1")
    assert outcome() == shared
    assert len(forked) == 2
