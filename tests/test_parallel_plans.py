"""planner.search.parallel (issue 29): a file of many distinct workloads is planned on every core, and the
result is the serial one: the same plans in the same order, the same first error, progress per workload."""

from __future__ import annotations

import pytest

from planner import InfeasibleError, SpecError, plan_workloads
from planner.search.parallel import PARALLEL_FROM, WORKERS_ENV, workers
from planner.workload.spec import parse_workloads


def _serving(i: int) -> dict:
    return {"name": f"s{i}", "kind": "inference", "model": {"preset": "llama-3-8b"},
            "serving": {"max_context_tokens": 4096, "concurrent_requests": 1 + i}}


def _spec(workloads: list[dict]):
    return parse_workloads({"workloads": workloads}, "many.yaml")


def test_many_distinct_workloads_plan_in_workers_exactly_as_in_one_process(monkeypatch):
    spec = _spec([_serving(i) for i in range(PARALLEL_FROM + 4)] + [{**_serving(3), "name": "again"}])
    monkeypatch.setenv(WORKERS_ENV, "2")
    told: list[tuple[int, int]] = []
    parallel = plan_workloads(spec, progress=lambda done, total: told.append((done, total)))
    monkeypatch.setenv(WORKERS_ENV, "1")
    serial = plan_workloads(spec)
    assert parallel.model_dump() == serial.model_dump()
    assert [p.workload for p in parallel.plans][-2:] == [f"s{PARALLEL_FROM + 3}", "again"]
    assert told == [(i, PARALLEL_FROM + 5) for i in range(1, PARALLEL_FROM + 6)]


def test_the_first_failure_in_file_order_is_the_one_raised(monkeypatch):
    impossible = {**_serving(5), "name": "impossible", "constraints": {"max_usd_per_month": 1}}
    spec = _spec([_serving(i) for i in range(PARALLEL_FROM)] + [impossible, {**impossible, "name": "later",
                                                                            "serving": {**impossible["serving"], "concurrent_requests": 99}}])
    errors = []
    for cap in ("2", "1"):
        monkeypatch.setenv(WORKERS_ENV, cap)
        with pytest.raises(InfeasibleError) as caught:
            plan_workloads(spec)
        errors.append(str(caught.value))
    # the nearest misses of a $1/month budget are the small g6f slices that cannot hold the model (EC2-served)
    assert errors[0] == errors[1] and "'impossible'" in errors[0] and "'later'" not in errors[0]


def test_worker_count(monkeypatch):
    monkeypatch.delenv(WORKERS_ENV, raising=False)
    assert workers(PARALLEL_FROM - 1) == 1
    monkeypatch.setenv(WORKERS_ENV, "1")
    assert workers(1000) == 1
    monkeypatch.setenv(WORKERS_ENV, "two")
    with pytest.raises(SpecError, match="GPUPLAN_WORKERS must be a whole number"):
        workers(1000)
    monkeypatch.delenv(WORKERS_ENV)
    monkeypatch.setattr("planner.search.parallel.sys.platform", "darwin")
    assert workers(1000) == 1  # a fork without exec is not safe on macOS
