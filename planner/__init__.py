"""gpuplan's pure domain: workload spec → catalog search → plan. No Pulumi, no boto3."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from planner.errors import InfeasibleError, SpecError

if TYPE_CHECKING:
    from planner.plan import Plan, PlanSet
    from planner.spec import Workload, WorkloadFile

__all__ = ["InfeasibleError", "Plan", "PlanSet", "SpecError", "Workload", "WorkloadFile", "load_workloads",
           "plan_file", "plan_workloads"]

# Loaded on first use, not at `import planner`: `gpuplan --help` needs none of them, and pydantic models
# plus the search modules are most of a plan's start-up (issue 29).
_LAZY = {"Plan": "planner.plan", "PlanSet": "planner.plan", "Workload": "planner.spec",
         "WorkloadFile": "planner.spec", "load_workloads": "planner.spec"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")


def _selected(spec: WorkloadFile, catalog_path, region, only):
    from planner import catalog as catalog_mod

    path = catalog_path or spec.catalog
    catalog = catalog_mod.load(path)
    workloads = spec.workloads
    if only is not None:
        workloads = [w for w in workloads if w.name == only]
        if not workloads:
            raise SpecError(f"no workload named {only!r}; workloads: {', '.join(w.name for w in spec.workloads)}",
                            path="--workload")
    if region is not None:
        workloads = [w.model_copy(update={"constraints": w.constraints.model_copy(update={"region": region})})
                     for w in workloads]
    return path, catalog, workloads


_shared_searches: dict | None = None


@contextmanager
def shared_searches() -> Iterator[None]:
    """Within the block, plan_workloads reuses a search already made for the same workload shape against
    the same catalog object. `gpuplan check` plans the stack, then runs the Pulumi program, which plans
    it again from its config; a plan is a function of (shape, catalog) alone (name aside), so the second
    pass need not search. Scoped, not global: a test that changes a constant between plans sees it."""
    global _shared_searches
    outer, _shared_searches = _shared_searches, ({} if _shared_searches is None else _shared_searches)
    try:
        yield
    finally:
        _shared_searches = outer


def plan_workloads(spec: WorkloadFile, catalog_path: str | Path | None = None, region: str | None = None,
                   only: str | None = None, progress: Callable[[int, int], None] | None = None) -> PlanSet:
    """Plan every workload (or the one named `only`); the spec's `catalog:` applies unless overridden.
    Workloads that differ only in name share one search (a fleet of identical endpoints is common);
    `progress(done, total)` is told after each."""
    from planner.plan import PlanSet
    from planner.search import plan_workload

    path, catalog, workloads = _selected(spec, catalog_path, region, only)
    plans: list[Plan] = []
    searched: dict = _shared_searches if _shared_searches is not None else {}
    for w in workloads:
        key = (id(catalog), w.model_dump_json(exclude={"name"}))
        if key in searched:
            plans.append(searched[key][1].model_copy(update={"workload": w.name}))
        else:
            plan = plan_workload(w, catalog)
            searched[key] = (catalog, plan)  # the catalog held, so its id is not reused while the entry lives
            plans.append(plan)
        if progress is not None:
            progress(len(plans), len(workloads))
    return PlanSet(plans=plans, catalog=str(path) if path else "bundled")


def frontier_file(path: str | Path, catalog_path: str | Path | None = None, region: str | None = None,
                  only: str | None = None) -> list:
    """The cost–latency frontier of every workload in the file (or the one named `only`)."""
    from planner.frontier import frontier
    from planner.spec import load_workloads

    _, catalog, workloads = _selected(load_workloads(path), catalog_path, region, only)
    return [frontier(w, catalog) for w in workloads]


def plan_file(path: str | Path, catalog_path: str | Path | None = None, region: str | None = None,
              only: str | None = None) -> PlanSet:
    from planner.spec import load_workloads

    return plan_workloads(load_workloads(path), catalog_path, region, only)
