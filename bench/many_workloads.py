"""`gpuplan plan` on one file of many workloads (issue 11): 5,000 workloads of the four example shapes
(names differ; identical shapes share one search), and 200 distinct shapes (each searched), end to end
through the CLI with JSON output.

    python bench/many_workloads.py

Target: 5,000 workloads in under 60 s; where distinct shapes make that impossible (a training search
takes ~0.5 s), `plan` shows a progress bar on stderr from 20 workloads on.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner.yamlsafe import load_text  # noqa: E402



def timed_plan(workloads: list[dict]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "many.yaml"
        path.write_text(yaml.safe_dump({"workloads": workloads}, sort_keys=False))
        started = time.perf_counter()
        subprocess.run([str(Path(sys.executable).with_name("gpuplan")), "plan", str(path), "--format", "json"], cwd=ROOT,
                       check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - started


def main() -> None:
    shapes = load_text((ROOT / "examples" / "workloads.yaml").read_text())["workloads"]
    fleet = [{**shapes[i % len(shapes)], "name": f"{shapes[i % len(shapes)]['name']}-{i}"} for i in range(5000)]
    print(f"5,000 workloads, 4 shapes:   {timed_plan(fleet):6.1f} s")
    serving = next(s for s in shapes if s["kind"] == "inference")
    distinct = [{**serving, "name": f"serve-{i}", "serving": {**serving["serving"], "concurrent_requests": 1 + i}}
                for i in range(200)]
    print(f"200 workloads, all distinct: {timed_plan(distinct):6.1f} s")


if __name__ == "__main__":
    main()
