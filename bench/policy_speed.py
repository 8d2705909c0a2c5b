"""Time to evaluate every policy rule over a stack of 1,000 resources (target: under 1 s).

    python bench/policy_speed.py

The stack is the example program's resources (offline synthesis) repeated under new names until it
holds 1,000, so every rule sees realistic camelCase props and tags.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuplan.offline import synthesize  # noqa: E402
from policies.resources import Resource  # noqa: E402
from planner.workload.yamlsafe import load_text  # noqa: E402
from policies.rules import evaluate  # noqa: E402

TARGET = 1000


def main() -> None:
    config = load_text((Path(__file__).resolve().parent.parent / "Pulumi.example.yaml").read_text())["config"]
    base = synthesize(config).resources
    resources = []
    while len(resources) < TARGET:
        copy = len(resources) // len(base)
        resources += [Resource(r.type, f"{r.name}-{copy}", r.inputs, f"{r.urn}-{copy}",
                               f"{r.parent}-{copy}" if r.parent else None,
                               {k: [f"{u}-{copy}" for u in v] for k, v in r.dependencies.items()}) for r in base]
    resources = resources[:TARGET]
    evaluate(resources)  # warm the catalog and presets caches
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        violations = evaluate(resources)
        samples.append(time.perf_counter() - start)
    mandatory = sum(v.level == "mandatory" for v in violations)
    print(f"{len(resources)} resources, {len(violations)} violations ({mandatory} mandatory): median {statistics.median(samples) * 1e3:.0f} ms "
          f"(min {min(samples) * 1e3:.0f}, max {max(samples) * 1e3:.0f}) over 5 runs")


if __name__ == "__main__":
    main()
