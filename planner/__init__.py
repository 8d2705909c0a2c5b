"""gpuplan's pure domain: workload spec → catalog search → plan. No Pulumi, no boto3."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from planner.workload.errors import InfeasibleError, SpecError

if TYPE_CHECKING:
    from planner.workload.plan import Plan, PlanSet
    from planner.workload.spec import Workload, WorkloadFile

__all__ = ["InfeasibleError", "Plan", "PlanSet", "SpecError", "Workload", "WorkloadFile", "load_workloads",
           "plan_file", "plan_workloads"]

# Loaded on first use, not at `import planner`: `gpuplan --help` needs none of them, and pydantic models
# plus the search modules are most of a plan's start-up (issue 29).
_LAZY = {"Plan": "planner.workload.plan", "PlanSet": "planner.workload.plan", "Workload": "planner.workload.spec",
         "WorkloadFile": "planner.workload.spec", "load_workloads": "planner.workload.spec", "plan_workload": "planner.pipeline"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")


def _selected(spec: WorkloadFile, catalog_path, region, only):
    from planner.hardware import catalog as catalog_mod
    from planner.hardware.regions import check_region

    path = catalog_path or spec.catalog
    catalog = catalog_mod.load(path)
    workloads = spec.workloads
    if only is not None:
        workloads = [w for w in workloads if w.name == only]
        if not workloads:
            raise SpecError(f"no workload named {only!r}; workloads: {', '.join(w.name for w in spec.workloads)}",
                            path="--workload")
    if region is not None:
        check_region(region, catalog, "--region")
        workloads = [w.model_copy(update={"constraints": w.constraints.model_copy(update={"region": region})})
                     for w in workloads]
    else:
        first = {}  # each region checked once, named by the first workload that asks for it
        for w in workloads:
            first.setdefault(w.constraints.region, w)
        for named, w in first.items():
            check_region(named, catalog, f"{w.path}.constraints.region", w.file)
    return path, catalog, workloads


# Searches kept while `shared_searches()` is open: `gpuplan check` plans the file, then runs the program,
# which plans it again; with this, each (catalog, shape) is searched once across both.
_shared: dict[tuple[str, str], Plan] | None = None


@contextmanager
def shared_searches() -> Iterator[None]:
    """Within this block, plan_workloads reuses any search of the same shape on the same catalog."""
    global _shared
    outer = _shared
    _shared = {} if outer is None else outer
    try:
        yield
    finally:
        _shared = outer


def _shape(catalog_path: str | Path | None, w: Workload) -> tuple[str, str]:
    """What a search depends on: the catalog (overlay paths are resolved when the spec is read) and
    every field of the workload but its name."""
    return str(catalog_path), w.model_dump_json(exclude={"name"})


def plan_shared(w: Workload, catalog, catalog_path: str | Path | None) -> Plan:
    """plan_workload(w, catalog), `catalog` being the one loaded from `catalog_path`; inside
    shared_searches() a search plan_workloads (or this) already made is reused, and this one kept.
    A workload with no plan raises as plan_workload does, and is not kept."""
    from planner.pipeline import plan_workload

    if _shared is None:
        return plan_workload(w, catalog)
    shape = _shape(catalog_path, w)
    if shape not in _shared:
        _shared[shape] = plan_workload(w, catalog)
    return _shared[shape].model_copy(update={"workload": w.name})


def plan_workloads(spec: WorkloadFile, catalog_path: str | Path | None = None, region: str | None = None,
                   only: str | None = None, progress: Callable[[int, int], None] | None = None) -> PlanSet:
    """Plan every workload (or the one named `only`); the spec's `catalog:` applies unless overridden.
    Workloads that differ only in name share one search (a fleet of identical endpoints is common);
    `progress(done, total)` is told after each."""
    from planner.search.parallel import plan_each
    from planner.workload.plan import PlanSet
    from planner.pipeline import plan_workload

    path, catalog, workloads = _selected(spec, catalog_path, region, only)
    plans: list[Plan] = []
    searched: dict[tuple[str, str], Plan] = _shared if _shared is not None else {}
    shapes = [_shape(path, w) for w in workloads]
    todo: dict[tuple[str, str], Workload] = {}
    for w, shape in zip(workloads, shapes):
        if shape not in searched:
            todo.setdefault(shape, w)
    results = plan_each(list(todo.values()), catalog, plan_workload)  # in first-seen order, on every core
    try:
        for w, shape in zip(workloads, shapes):
            if shape not in searched:
                searched[shape] = next(results)
            plans.append(searched[shape].model_copy(update={"workload": w.name}))
            if progress is not None:
                progress(len(plans), len(workloads))
    finally:
        results.close()
    return PlanSet(plans=plans, catalog=str(path) if path else "bundled")


def frontier_file(path: str | Path, catalog_path: str | Path | None = None, region: str | None = None,
                  only: str | None = None, correct=None) -> list:
    """The cost–latency frontier of every workload in the file (or the one named `only`); `correct`
    (Plan → Plan, a calibration) is applied to every point."""
    from planner.pipeline import frontier
    from planner.workload.spec import load_workloads

    _, catalog, workloads = _selected(load_workloads(path), catalog_path, region, only)
    return [frontier(w, catalog, correct) for w in workloads]


def plan_file(path: str | Path, catalog_path: str | Path | None = None, region: str | None = None,
              only: str | None = None) -> PlanSet:
    from planner.workload.spec import load_workloads

    return plan_workloads(load_workloads(path), catalog_path, region, only)
