"""How long planning takes over the whole catalog, and how it grows with max_nodes.

    python bench/plan_speed.py           # in-process timings (median of repeats)
    python bench/plan_speed.py --cli     # also whole-process figures: each command as a user runs it,
                                         # minimum / median of 5 runs (issue 29's targets beside them)

Targets: < 100 ms per serving plan (issue 2); the 405B training plan under 0.5 s at max_nodes 512
and under 2 s at max_nodes 2,048, i.e. 16,384 GPUs (issue 9); `gpuplan frontier` for 70B serving over
the whole catalog under 1 s and for 405B training at max_nodes 512 under 3 s (issue 14).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml  # noqa: E402

from planner.hardware.catalog import Catalog, bundled  # noqa: E402
from planner.workload.errors import InfeasibleError  # noqa: E402
from planner.pipeline import frontier  # noqa: E402
from planner.pipeline import plan_workload  # noqa: E402
from planner.search.tables import clear_search_tables  # noqa: E402
from planner.workload.spec import parse_workloads  # noqa: E402

SERVING_70B = {"name": "serve-70b", "kind": "inference", "model": {"preset": "llama-3.1-70b"},
               "serving": {"max_context_tokens": 8192, "concurrent_requests": 64, "target_output_tokens_per_s": 2000,
                           "max_time_to_first_token_ms": 2000, "max_inter_token_latency_ms": 80}}
TRAINING_405B = {"name": "train-405b", "kind": "training", "model": {"preset": "llama-3.1-405b"},
                 "training": {"tokens": 1.0e12, "sequence_length": 8192, "global_batch_tokens": 1.6e7,
                              "deadline_hours": 2160}}


def _workload(spec: dict, max_nodes: int):
    return parse_workloads({"workloads": [{**spec, "constraints": {"max_nodes": max_nodes}}]}, "bench").workloads[0]


def _time(fn, repeats: int) -> float:
    """Median seconds of a cold search: the training search's memory and layout tables are emptied before
    each run (a process plans once; without this every repeat would reuse the first one's physics)."""
    samples = []
    for _ in range(repeats):
        clear_search_tables()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def scaled_catalog(base: Catalog, copies: int) -> Catalog:
    """The bundled catalog with every instance type repeated `copies` times under new names."""
    types = [t.model_copy(update={"name": f"{t.name}-x{i}" if i else t.name})
             for i in range(copies) for t in base.instance_types]
    return base.model_copy(update={"instance_types": types})


def main() -> None:
    catalog = bundled()
    print(f"catalog: {len(catalog.instance_types)} instance types")
    print(f"{'workload':<12} {'max_nodes':>9} {'plan (ms)':>10}  chosen")
    for spec, repeats, sizes in ((SERVING_70B, 20, (8, 64, 512)), (TRAINING_405B, 3, (8, 64, 512, 2048))):
        for max_nodes in sizes:
            w = _workload(spec, max_nodes)
            try:
                chosen = plan_workload(w, catalog).choice
                label = f"{chosen.instance_type} × {chosen.nodes}"
            except InfeasibleError as exc:  # an infeasible size still costs a full search
                label = type(exc).__name__
            seconds = _time(lambda: _try(w, catalog), repeats)
            print(f"{spec['name']:<12} {max_nodes:>9} {seconds * 1e3:>10.1f}  {label}")
    print("\nfrontier (whole catalog):")
    for spec, max_nodes in ((SERVING_70B, 64), (TRAINING_405B, 512)):
        w = _workload(spec, max_nodes)
        points = len(frontier(w, catalog).points)
        seconds = _time(lambda: frontier(w, catalog), 3)
        print(f"  {spec['name']:<12} max_nodes {max_nodes:>4}: {seconds * 1e3:8.1f} ms, {points} points")
    print("\ngrowth with catalog size (serve-70b, max_nodes 64):")
    for copies in (1, 2, 4, 8):
        big = scaled_catalog(catalog, copies)
        w = _workload(SERVING_70B, 64)
        print(f"  {len(big.instance_types):>4} types: {_time(lambda: _try(w, big), 5) * 1e3:8.1f} ms")
    if "--cli" in sys.argv:
        whole_process()
        import_probe()


def import_probe() -> None:
    probe = subprocess.run([sys.executable, "-c", "import sys, gpuplan.cli, planner.pipeline, planner.report.markdown;"
                            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi','boto3','botocore','pulumi_aws')))"],
                           capture_output=True, text=True, check=True, cwd=ROOT, env=_ENV)
    print(f"pulumi/boto3 modules imported on the planning path: {probe.stdout.strip()}")


ROOT = Path(__file__).resolve().parent.parent
# (label, arguments after `gpuplan`, target in seconds): issue 29's whole-process targets on 2 cores.
PROCESS_CASES = (
    ("--help", ["--help"], 0.15),
    ("plan, 70B serving", ["plan", "{serve}", "--format", "json"], 0.2),
    ("plan, 405B training, max_nodes 64", ["plan", "{train64}", "--format", "json"], None),
    ("plan, 405B training, max_nodes 4,096", ["plan", "{train4096}", "--format", "json"], 0.3),
    ("frontier, 405B training, max_nodes 512", ["frontier", "{train512}", "--format", "json"], 0.4),
    ("check Pulumi.example.yaml", ["check", "Pulumi.example.yaml"], 1.0),
    ("cost Pulumi.example.yaml (policies, frontier)", ["cost", "--head", "Pulumi.example.yaml",
                                                       "--base", "Pulumi.example.yaml"], 1.0),
)


# The checkout's code, not whichever one the installed `gpuplan` script resolves to (an editable install of another tree).
_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def whole_process(runs: int = 5) -> None:
    """Each command as a process, the way a user or CI starts it: interpreter, imports, catalog, work, exit.
    It runs the environment's `gpuplan` console script with this checkout first on PYTHONPATH. The Makefile's
    `pip install -e` adds setuptools' editable finder to every interpreter start; a wheel install has none.
    That finder imports only what gpuplan imports anyway (pathlib, re): 2-6 M of ~1,200 M instructions of
    a plan under callgrind (< 1 ms), so these figures stand for a wheel install too."""
    gpuplan = str(Path(sys.executable).parent / "gpuplan")
    # Bytecode for this checkout, as `pip install` writes it for an installed gpuplan; without it (e.g. under
    # PYTHONDONTWRITEBYTECODE) every run recompiles ~60 modules, ~50 ms that no user pays.
    import compileall

    for package in ("planner", "gpuplan", "components", "policies"):
        compileall.compile_dir(str(ROOT / package), quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for key, spec, nodes in (("serve", SERVING_70B, 64), ("train64", TRAINING_405B, 64),
                                 ("train512", TRAINING_405B, 512), ("train4096", TRAINING_405B, 4096)):
            files[key] = str(Path(tmp) / f"{key}.yaml")
            Path(files[key]).write_text(yaml.safe_dump({"workloads": [{**spec, "constraints": {"max_nodes": nodes}}]}))
        # CPU (user + sys of the process) beside the wall clock: on a shared machine the wall clock also
        # counts the time other processes held the cores.
        print(f"\nwhole process, {runs} runs      {'min (s)':>8} {'median (s)':>10} {'CPU min':>8} {'target':>7}")
        for label, args, target in PROCESS_CASES:
            argv = [gpuplan] + [a.format(**files) for a in args]
            samples, cpu = [], []
            for _ in range(runs):
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(argv, cwd=ROOT, capture_output=True, env=_ENV)  # exit 1 (a violation) is still a timing
                samples.append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            goal = f"≤ {target:.2f}" if target else ""
            print(f"  {label:<46} {min(samples):>8.2f} {statistics.median(samples):>10.2f} {min(cpu):>8.2f} {goal:>7}")


def _try(w, catalog):
    try:
        plan_workload(w, catalog)
    except InfeasibleError:
        pass


if __name__ == "__main__":
    if "--cli-only" in sys.argv:  # the whole-process figures alone
        whole_process()
        import_probe()
    else:
        main()
