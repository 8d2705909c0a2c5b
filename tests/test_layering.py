"""planner/ is the stages a workload passes through, workload → hardware → physics → search → economics →
report, and its imports run one way along that chain (issue 30; planner/README.md draws it). Every import
counts, the ones inside functions and under TYPE_CHECKING too: a late import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLANNER = ROOT / "planner"
STAGES = ("workload", "hardware", "physics", "search", "economics", "report")
OUTSIDE = ("boto3", "botocore", "pulumi", "pulumi_aws", "pulumi_policy", "gpuplan", "components", "policies")

# The search ranks on money without importing economics: it owns the shape of what it asks
# (planner/search/pricing.py) and the orchestrator, planner/pipeline.py, hands it prices built by
# planner/economics/run_pricing.py. No import runs forwards; none may start to.
FRONT_DOOR = ("__init__.py", "pipeline.py")  # they run the whole chain, so they sit above every stage


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imported(source: str, importer: str = "planner.x") -> set[str]:
    """Every module `source` imports: `from planner.search import training` names planner.search.training."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{importer}: relative import; planner/ spells every import in full"
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names if _is_module(f"{node.module}.{a.name}"))
    return found


def stage_of(module: str) -> int | None:
    """The stage's place in the chain; None for the front door (planner/__init__.py, planner/pipeline.py)
    and planner.data."""
    parts = module.split(".")
    if parts[0] != "planner" or len(parts) < 2 or parts[1] not in STAGES:
        return None
    return STAGES.index(parts[1])


def planner_modules() -> dict[str, set[str]]:
    return {module_name(p): imported(p.read_text(), module_name(p)) for p in sorted(PLANNER.rglob("*.py"))}


def backward_violations(modules: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(importer, imported) pairs where a stage reaches a later stage or the front door."""
    bad = set()
    for importer, targets in modules.items():
        own = stage_of(importer)
        if own is None:
            continue  # the front door runs the whole chain
        for target in targets:
            if target == "planner" or (target.startswith("planner.") and stage_of(target) is None
                                       and not target.startswith("planner.data")):
                bad.add((importer, target))
            elif (later := stage_of(target)) is not None and later > own:
                bad.add((importer, target))
    return bad


def test_every_planner_module_sits_in_a_stage():
    assert sorted(p.name for p in PLANNER.glob("*.py")) == sorted(FRONT_DOOR)
    packages = sorted(p.name for p in PLANNER.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert packages == sorted((*STAGES, "data"))


def test_imports_run_backwards_along_the_chain():
    assert backward_violations(planner_modules()) == set(), "a stage imports a later stage"


@pytest.mark.parametrize("source, verdict", [
    ("from planner.report.noise import readable", {("planner.physics.memory", "planner.report.noise")}),
    ("def f():\n    from planner.economics import cost", {("planner.physics.memory", "planner.economics"),
                                                      ("planner.physics.memory", "planner.economics.cost")}),
    ("from planner import plan_workloads", {("planner.physics.memory", "planner")}),
    ("from planner.pipeline import plan_workload", {("planner.physics.memory", "planner.pipeline")}),
    ("from planner.hardware.catalog import Catalog\nfrom planner.physics import efficiency", set()),
])
def test_the_check_sees_a_forward_import_even_inside_a_function(source, verdict):
    assert backward_violations({"planner.physics.memory": imported(source)}) == verdict


def test_planner_never_imports_aws_pulumi_or_the_apps():
    reached = {(m, t) for m, targets in planner_modules().items() for t in targets if t.split(".")[0] in OUTSIDE}
    assert reached == set()


def test_components_and_policies_read_one_tag_protocol():
    for package in ("components", "policies"):
        users = {module_name(p) for p in (ROOT / package).rglob("*.py")
                 if "planner.report.tags" in imported(p.read_text(), module_name(p))}
        assert users, f"{package}/ no longer imports planner.report.tags"


# Sizes a reader can hold (issue 30): modules under ~400 lines, planner/ functions under ~60. No allowlist:
# every function over the bound was split where a name explains the part, and gpuplan/cli.py only registers
# the commands of gpuplan/commands/.
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def _sources(*packages: str) -> list[Path]:
    return [p for package in packages for p in sorted((ROOT / package).rglob("*.py"))]


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in `source` longer than `limit` lines, decorators aside."""
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit]


def test_every_module_stays_under_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in _sources("planner", "components", "policies", "gpuplan")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_every_planner_function_stays_under_60_lines():
    long = {str(p.relative_to(ROOT)): found for p in _sources("planner") if (found := long_functions(p.read_text()))}
    assert long == {}


def test_the_size_check_sees_a_long_method():
    body = "\n".join(f"        x{i} = {i}" for i in range(60))
    assert long_functions(f"class A:\n    def f(self):\n{body}\n") == [("f", 61)]
    assert long_functions("def g():\n    return 1\n") == []
