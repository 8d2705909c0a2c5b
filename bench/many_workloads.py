"""`gpuplan plan` on one file of many workloads (issues 11 and 29), end to end through the CLI with JSON
output: 5,000 workloads of the four example shapes (names differ; identical shapes share one search),
then N distinct training workloads, each searched (issue 29's target: 5,000 in under 60 s).

    python bench/many_workloads.py                  # 5,000 of 4 shapes, then 5,000 distinct training shapes
    python bench/many_workloads.py --distinct 200   # fewer distinct ones (the per-workload rate extrapolates)

The distinct shapes are the example's 70B pre-training run with its token budget, sequence length,
batch, deadline and node cap varied together, so no two share a search. `plan` shows a progress bar on
stderr from 20 workloads on (visible when stderr is a terminal; this bench lets it through).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SEQUENCE_LENGTHS = (2048, 4096, 8192)
NODE_CAPS = (16, 32, 64, 128)
PRESETS = ("llama-3-70b", "llama-3-8b", "llama-3.1-70b")
sys.path.insert(0, str(ROOT))

from planner.yamlsafe import load_text  # noqa: E402


def timed_plan(workloads: list[dict]) -> tuple[float, int]:
    """Seconds for the whole process, and the bytes of JSON it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "many.yaml", Path(tmp) / "plans.json"
        path.write_text(yaml.safe_dump({"workloads": workloads}, sort_keys=False))
        started = time.perf_counter()
        with out.open("w") as sink:
            subprocess.run([sys.executable, "-m", "gpuplan.cli", "plan", str(path), "--format", "json"], cwd=ROOT,
                           check=True, stdout=sink)
        return time.perf_counter() - started, out.stat().st_size


def distinct_training(base: dict, count: int) -> list[dict]:
    """`count` training workloads no two of which have the same shape (the token budget alone differs
    between any two; the other fields cycle so the searches differ in more than one number)."""
    out = []
    for i in range(count):
        # 1.0e11 to 1.4e11 tokens over 5,000: every shape stays feasible at its deadline and node cap (at
        # 1e8 a step, workload 840's 1.84e11 tokens missed its 360 h on 16 nodes and the bench stopped there)
        training = {**base["training"], "tokens": 1.0e11 + i * 8.0e6,
                    "sequence_length": SEQUENCE_LENGTHS[i % len(SEQUENCE_LENGTHS)],
                    "global_batch_tokens": 2.0e6 * (1 + i % 4), "deadline_hours": 360 + 24 * (i % 30)}
        out.append({**base, "name": f"train-{i}", "model": {"preset": PRESETS[i % len(PRESETS)]},
                    "training": training,
                    "constraints": {**base.get("constraints", {}), "max_nodes": NODE_CAPS[i % len(NODE_CAPS)]}})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distinct", type=int, default=5000, help="how many distinct training workloads")
    parser.add_argument("--skip-fleet", action="store_true", help="skip the 5,000 workloads of 4 shapes")
    args = parser.parse_args()
    shapes = load_text((ROOT / "examples" / "workloads.yaml").read_text())["workloads"]
    if not args.skip_fleet:
        fleet = [{**shapes[i % len(shapes)], "name": f"{shapes[i % len(shapes)]['name']}-{i}"} for i in range(5000)]
        seconds, size = timed_plan(fleet)
        print(f"5,000 workloads, 4 shapes: {seconds:6.1f} s, {size / 1e6:.0f} MB of JSON")
    training = next(s for s in shapes if s["kind"] == "training")
    workloads = distinct_training(training, args.distinct)
    seconds, size = timed_plan(workloads)
    print(f"{args.distinct:,} distinct training workloads: {seconds:6.1f} s ({seconds / args.distinct * 1e3:.0f} ms each, "
          f"5,000 at this rate: {seconds / args.distinct * 5000:.0f} s; target 60 s), {size / 1e6:.1f} MB of JSON")


if __name__ == "__main__":
    main()
