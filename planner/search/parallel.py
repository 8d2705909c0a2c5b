"""Many distinct searches on every core (issue 29: 5,000 distinct training workloads in a file). Each
search is independent and pure, so worker processes forked from the planner share its loaded catalog
and model tables; the plans come back in the file's order, and the first failure in that order is
the one raised, exactly as a serial run would raise it."""

from __future__ import annotations

import os
import sys
from dataclasses import fields
from typing import Callable, Iterator

from planner.search.split import mark_helper
from planner.workload.errors import InfeasibleError, SpecError

# A pool pays for itself only over many searches: forking and returning plans cost ~50 ms, a
# training search 0.1-0.5 s (bench/many_workloads.py).
PARALLEL_FROM = 20
WORKERS_ENV = "GPUPLAN_WORKERS"  # 1 plans in this process only

_catalog = None  # the catalog the forked workers search (inherited, never pickled)
_plan: Callable | None = None  # the search they run: plan_each's `plan`, as the serial path runs it


def workers(searches: int) -> int:
    """How many processes to plan `searches` distinct workloads with: the usable cores, at most
    GPUPLAN_WORKERS; one (no pool) below PARALLEL_FROM or where processes cannot be forked."""
    if searches < PARALLEL_FROM:
        return 1
    import multiprocessing

    # forked workers only on Linux: a fork without exec is not safe on macOS (planner/search/split.py)
    if "fork" not in multiprocessing.get_all_start_methods() or not sys.platform.startswith("linux"):
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cap = os.environ.get(WORKERS_ENV, "")
    if cap:
        if not cap.isdigit() or int(cap) < 1:
            raise SpecError(f"{WORKERS_ENV} must be a whole number of processes ≥ 1, not {cap[:20]!r}",
                            path=WORKERS_ENV)
        cores = min(cores, int(cap))
    return max(1, min(cores, searches))


def _plan_one(w):
    """In a worker: the plan, or the planning error as (class, fields) (dataclass exceptions built from
    keywords do not survive pickling)."""
    try:
        return _plan(w, _catalog)
    except (SpecError, InfeasibleError) as exc:
        return type(exc), {f.name: getattr(exc, f.name) for f in fields(exc)}


def plan_each(workloads: list, catalog, plan: Callable, done: Callable[[], None] | None = None) -> Iterator:
    """The plan of each workload in order, `plan(w, catalog)` in this process or the same search in
    forked workers; `done()` after each."""
    count = workers(len(workloads))
    if count == 1:
        for w in workloads:
            yield plan(w, catalog)
            if done:
                done()
        return
    import multiprocessing

    global _catalog, _plan
    _catalog, _plan = catalog, plan
    try:
        with multiprocessing.get_context("fork").Pool(count, initializer=mark_helper) as pool:
            for result in pool.imap(_plan_one, workloads, chunksize=1):
                if isinstance(result, tuple):
                    cls, kwargs = result
                    raise cls(**kwargs)
                yield result
                if done:
                    done()
    finally:
        _catalog, _plan = None, None
