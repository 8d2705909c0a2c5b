"""Re-lay planner/ out as the stages a workload passes through (issue 30): `python scripts/relayout.py`
on a clean checkout of main.

    workload → hardware → physics → search → economics → report

Each flat planner/<name>.py moves (git mv) to planner/<stage>/<new>.py by the explicit map below;
planner/aws/ (boto3) moves to gpuplan/aws/. Then every import and module path in the tracked text files
(product, tests, bench, scripts, components, policies, __main__.py, README/docs, pyproject) is rewritten
from the same map, the stage packages get their __init__.py, pyproject lists them, planner/README.md is
written, and the generated docs are regenerated. Deterministic; it refuses to run on a dirty tree, on a
tree already re-laid out, or when planner/ holds a module the map does not place (add it to MOVES)."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("workload", "hardware", "physics", "search", "economics", "report")

# What each stage owns, for its __init__.py docstring and planner/README.md.
STAGE_DOCS = {
    "workload": "The question and the answer's shape: the workload file (spec, presets, defaults), its strict "
                "parsing and error wording, and the plan model every later stage fills in.",
    "hardware": "What can be rented: the accelerator catalog, regions, units and hardware facts.",
    "physics": "What a layout does on that hardware, from first principles: memory, serving and training "
               "step time, collectives, efficiency constants, calibration and accuracy bands.",
    "search": "Which layouts fit and rank first: candidates, the inference and training searches, the "
              "frontier and the plan built from the winner.",
    "economics": "What it costs: hourly prices, purchase options, storage, managed APIs, provisioned and "
                 "ownership cost, buying advice and price review.",
    "report": "How a plan is told: markdown and summary renderers, schemas, noise grouping and the tag "
              "protocol that components/ write and policies/ read.",
}

# OLD planner module → (stage, new module name). Every flat planner/*.py except __init__.py must be here.
MOVES: dict[str, tuple[str, str]] = {
    # workload: the file and its models, nothing but each other
    "errors": ("workload", "errors"), "strict": ("workload", "strict"), "bounds": ("workload", "bounds"),
    "yamlsafe": ("workload", "yamlsafe"), "paths": ("workload", "paths"), "suggest": ("workload", "suggest"),
    "bundled": ("workload", "bundled"), "presets": ("workload", "presets"), "spec": ("workload", "spec"),
    "defaults": ("workload", "defaults"),
    # the plan model imports nothing and is filled by physics (calibration), search and economics: it must
    # stand before all of them, so it opens the chain beside the workload it answers
    "plan": ("workload", "plan"),
    # hardware
    "units": ("hardware", "units"), "catalog": ("hardware", "catalog"), "regions": ("hardware", "regions"),
    "hardware_facts": ("hardware", "hardware_facts"),
    "clocks": ("hardware", "clocks"),  # a part's sustained clock under a power cap: the catalog applies it
    # physics
    "efficiency": ("physics", "efficiency"), "collectives": ("physics", "collectives"),
    "memory": ("physics", "memory"), "expert_parallel": ("physics", "expert_parallel"),
    "prefix": ("physics", "prefix"), "speculative": ("physics", "speculative"),
    "performance": ("physics", "performance"), "training_time": ("physics", "training_time"),
    "bands": ("physics", "bands"), "calibration": ("physics", "calibration"), "engines": ("physics", "engines"),
    "pipeline_schedule": ("physics", "pipeline_schedule"), "gemm_shape": ("physics", "gemm_shape"),
    "expert_training": ("physics", "expert_training"), "kv_capacity": ("physics", "kv_capacity"),
    # search
    "candidates": ("search", "candidates"), "host_memory": ("search", "host_memory"),
    "search_inference": ("search", "inference"), "search_training": ("search", "training"),
    "search": ("search", "plans"), "frontier": ("search", "frontier"),
    "search_tables": ("search", "tables"), "parallel_plans": ("search", "parallel"),
    "kv_sizing": ("search", "kv_sizing"),  # sizes a serving plan under both KV policies (calls the search)
    # economics
    "cost": ("economics", "cost"), "purchase": ("economics", "purchase"), "storage": ("economics", "storage"),
    "managed": ("economics", "managed"), "ownership": ("economics", "ownership"),
    "provisioned": ("economics", "provisioned"), "buying": ("economics", "buying"),
    "price_review": ("economics", "price_review"), "price_rule": ("economics", "price_rule"),
    # report
    "report": ("report", "markdown"), "buying_report": ("report", "buying"),
    "frontier_report": ("report", "frontier"), "summary_report": ("report", "summary"),
    "mdsafe": ("report", "mdsafe"), "noise": ("report", "noise"), "schemas": ("report", "schemas"),
    "tags": ("report", "tags"), "json_stream": ("report", "json_stream"),
}
PACKAGE_MOVES = {"planner.aws": "gpuplan.aws"}  # boto3 leaves the pure domain
SKIP = ("scripts/relayout.py", "planner/data/", "tests/golden/")  # the map itself, data, pinned outputs


def module_map() -> dict[str, str]:
    """Dotted OLD → NEW for every moved module and package."""
    mapping = {f"planner.{old}": f"planner.{stage}.{new}" for old, (stage, new) in MOVES.items()}
    mapping.update(PACKAGE_MOVES)
    return mapping


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def refuse(message: str) -> None:
    print(f"relayout: {message}", file=sys.stderr)
    raise SystemExit(2)


def preflight() -> None:
    """Refuse a dirty tree, a tree already moved, or a module the map does not place."""
    if git("status", "--porcelain").strip():
        refuse("the working tree has uncommitted changes; commit or stash them first")
    def holds_code(folder: Path) -> bool:  # a folder left with only __pycache__ is not a move
        return any(folder.rglob("*.py"))

    moved = [s for s in STAGES if holds_code(ROOT / "planner" / s)] + \
        [p for p in PACKAGE_MOVES.values() if holds_code(ROOT / p.replace(".", "/"))]
    if moved:
        refuse(f"already re-laid out ({', '.join(moved)} exist); nothing to do")
    flat = {p.stem for p in (ROOT / "planner").glob("*.py") if p.stem != "__init__"}
    unplaced, missing = sorted(flat - set(MOVES)), sorted(set(MOVES) - flat)
    if unplaced:
        refuse(f"planner/{', planner/'.join(n + '.py' for n in unplaced)} not in MOVES: place each in a stage")
    if missing:
        refuse(f"MOVES names modules main no longer has: {', '.join(missing)}; drop or rename them in MOVES")
    for old in PACKAGE_MOVES:
        if not (ROOT / old.replace(".", "/")).is_dir():
            refuse(f"{old.replace('.', '/')}/ is missing")


def move_files() -> None:
    for stage in STAGES:
        (ROOT / "planner" / stage).mkdir(exist_ok=True)
        init = ROOT / "planner" / stage / "__init__.py"
        init.write_text(f'"""{stage}: {STAGE_DOCS[stage]}"""\n')
        git("add", str(init.relative_to(ROOT)))
    for old, (stage, new) in sorted(MOVES.items()):
        git("mv", f"planner/{old}.py", f"planner/{stage}/{new}.py")
        print(f"moved planner/{old}.py → planner/{stage}/{new}.py")
    for old, new in PACKAGE_MOVES.items():
        shutil.rmtree(ROOT / new.replace(".", "/"), ignore_errors=True)  # only a stale __pycache__ (preflight)
        git("mv", old.replace(".", "/"), new.replace(".", "/"))
        print(f"moved {old.replace('.', '/')}/ → {new.replace('.', '/')}/")


def _alternation(names: list[str]) -> str:
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))


def rewrite_paths(text: str, mapping: dict[str, str]) -> str:
    """planner.x / planner/x.py / planner/aws/ → their new names, in one pass each (no re-rewrite)."""
    dotted = re.compile(rf"(?<![\w.])({_alternation(list(mapping))})(?!\w)")
    text = dotted.sub(lambda m: mapping[m.group(1)], text)
    files = {f"planner/{old}.py": f"planner/{stage}/{new}.py" for old, (stage, new) in MOVES.items()}
    slashed = re.compile(rf"(?<![\w/.])({_alternation(list(files))})(?!\w)")
    text = slashed.sub(lambda m: files[m.group(1)], text)
    dirs = {old.replace(".", "/"): new.replace(".", "/") for old, new in PACKAGE_MOVES.items()}
    return re.compile(rf"(?<![\w/.])({_alternation(list(dirs))})(?=/|\b)").sub(lambda m: dirs[m.group(1)], text)


FROM_PLANNER = re.compile(r"^(?P<indent>[ \t]*)from planner import (?P<names>[^\n(#]+?)(?P<tail>[ \t]*(#[^\n]*)?)$",
                          re.MULTILINE)


def _split_from_planner(match: re.Match, mapping: dict[str, str]) -> str:
    """`from planner import catalog as c, plan_workloads` → one import per package the names now live in."""
    indent, tail = match.group("indent"), match.group("tail")
    groups: dict[str, list[str]] = {}
    for part in (p.strip() for p in match.group("names").split(",") if p.strip()):
        name, _, alias = part.partition(" as ")
        name, alias = name.strip(), alias.strip()
        new = mapping.get(f"planner.{name}")
        if new is None:
            groups.setdefault("planner", []).append(part)
            continue
        package, leaf = new.rsplit(".", 1)
        local = alias or name
        groups.setdefault(package, []).append(leaf if leaf == local else f"{leaf} as {local}")
    lines = [f"{indent}from {package} import {', '.join(names)}" for package, names in groups.items()]
    lines[0] += tail
    return "\n".join(lines)


def _realigned(old: str, new: str) -> str:
    """Continuation lines of a `from x import (` that moved keep lining up under its parenthesis."""
    out, shift = [], 0
    for before, after in zip(old.split("\n"), new.split("\n")):
        if shift and before.strip():
            after = " " * shift + after if shift > 0 else after[min(-shift, len(after) - len(after.lstrip())):]
        if ")" in before or not before.strip():
            shift = 0
        if before.lstrip().startswith("from ") and "import (" in before and ")" not in before:
            shift = after.index("(") - before.index("(")
        out.append(after)
    return "\n".join(out)


def rewrite_imports(text: str, mapping: dict[str, str]) -> str:
    """Paths first (line for line, so continuations realign), then `from planner import <module>`."""
    text = _realigned(text, rewrite_paths(text, mapping))
    return FROM_PLANNER.sub(lambda m: _split_from_planner(m, mapping), text)


def rewrite_module_table(text: str) -> str:
    """README's "How it estimates" table names planner modules bare (`spec.py`): give each its stage."""
    bare = re.compile(rf"`({_alternation(list(MOVES))})\.py`")
    rows = [bare.sub(lambda m: "`{}/{}.py`".format(*MOVES[m.group(1)]), line).replace("`search*.py`", "`search/*.py`")
            if line.startswith("| `") else line for line in text.split("\n")]
    return "\n".join(rows)


def rewrite_tree(mapping: dict[str, str]) -> list[str]:
    changed = []
    for rel in git("ls-files").splitlines():
        if rel.startswith(SKIP):
            continue
        path = ROOT / rel
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        new = rewrite_imports(text, mapping)
        if rel == "README.md":
            new = rewrite_module_table(new)
        if rel.startswith("planner/") and rel.count("/") == 2 and rel.endswith(".py"):
            # one folder deeper: planner/data/ is now the parent's sibling
            new = new.replace("Path(__file__).resolve().parent /", "Path(__file__).resolve().parents[1] /")
        if new != text:
            path.write_text(new)
            changed.append(rel)
    return changed


def list_packages() -> None:
    """pyproject's explicit package list gains the stage packages (planner.aws became gpuplan.aws above)."""
    path = ROOT / "pyproject.toml"
    text = path.read_text()
    match = re.search(r"^packages = (\[.*\])$", text, re.MULTILINE)
    if match is None:
        refuse("pyproject.toml has no one-line `packages = [...]`")
    packages = ast.literal_eval(match.group(1))
    at = packages.index("planner") + 1
    packages[at:at] = [f"planner.{s}" for s in STAGES if f"planner.{s}" not in packages]
    path.write_text(text.replace(match.group(0), "packages = [" + ", ".join(f'"{p}"' for p in packages) + "]"))


def write_readme() -> None:
    lines = ["# planner/: the pure domain, as the stages a workload passes through", "",
             "```", "workload → hardware → physics → search → economics → report", "```", "",
             "Imports run one way: a stage imports only itself and the stages before it "
             "(tests/test_layering.py). One exception stands, listed edge by edge in that test's "
             "KNOWN_FORWARD: the search still prices each layout it ranks (search → economics) until it "
             "ranks price-free and prices the survivors once. `planner/__init__.py` is the front door that "
             "runs the chain; "
             "planner/ never imports boto3, Pulumi, gpuplan/, components/ or policies/ "
             "(the AWS calls live in gpuplan/aws/). Bundled data stays in planner/data/.", ""]
    for stage in STAGES:
        members = sorted(new for stage_of, new in MOVES.values() if stage_of == stage)
        lines += [f"## {stage}/", "", STAGE_DOCS[stage], "", "Modules: " + ", ".join(f"`{m}`" for m in members), ""]
    (ROOT / "planner" / "README.md").write_text("\n".join(lines))
    git("add", "planner/README.md")


def main() -> None:
    preflight()
    mapping = module_map()
    move_files()
    changed = rewrite_tree(mapping)
    list_packages()
    write_readme()
    print(f"rewrote imports and module paths in {len(changed)} files:")
    for rel in changed:
        print(f"  {rel}")
    print("wrote planner/README.md; pyproject.toml lists " + ", ".join(f"planner.{s}" for s in STAGES))
    generated = subprocess.run([sys.executable, "scripts/generate_docs.py"], cwd=ROOT, capture_output=True, text=True)
    print(generated.stdout.strip() or generated.stderr.strip())
    if generated.returncode:
        raise SystemExit(generated.returncode)
    git("add", "-A")
    print("done: review `git status`, run the suite, commit")


if __name__ == "__main__":
    main()
