"""The time per engine step the estimate leaves out, by source, engine and batch: the evidence for vLLM V0's host loop
(bench/engine_loop.py, issue 25).

    python bench/engine_loop_residuals.py            # with V0's loop as fitted (the committed constants)
    python bench/engine_loop_residuals.py --without  # as the estimate stood before it: no row pays a host loop

For every GPU row with a fixed concurrency b, the missing time per step is b ÷ measured tokens/s − b ÷ predicted
tokens/s (a step emits one token per sequence), or measured − predicted inter-token latency; the median per batch
is printed per (source, engine, metric). At today's constants with no loop paid, Argonne's vLLM steps run 0.7, 1.7,
2.9 and 4.9 ms past the estimate at batch 1, 16, 32 and 64 (0.7, 1.9, 3.0 and 5.4 at the constants fitted before the
loop was read) while its TensorRT-LLM steps on the same GPUs run -0.2 to +1.0 ms past it; with the loop paid, its
vLLM steps run -0.2 to +0.8 ms past it.
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import engine_loop  # noqa: E402
from bench.reference_cases import all_rows  # noqa: E402
from bench.reference_sources import sources  # noqa: E402
from planner.hardware.catalog import bundled  # noqa: E402


def engines() -> dict[str, str]:
    """Each serving row's engine, V0 vLLM apart (`engine_loop: synchronous`)."""
    out = {}
    for data in sources().values():
        for row in data["rows"]:
            engine = str(row.get("engine", "?")).split(" ")[0]
            out[row["id"]] = "vllm-v0" if row.get("engine_loop") == "synchronous" else engine
    return out


def missing_ms_per_step() -> dict[tuple[str, str, str], dict[int, float]]:
    """(source, engine, metric) -> {batch: median missing ms per step}."""
    engine_of, found = engines(), defaultdict(lambda: defaultdict(list))
    for r in all_rows(bundled()):
        batch = re.search(r" c=(\d+) ", r.setup)
        if r.platform != "gpu" or batch is None or r.metric not in ("serving tokens/s", "ITL"):
            continue
        b = int(batch.group(1))
        missing = (b / r.measured - b / r.predicted) * 1e3 if r.metric == "serving tokens/s" else r.measured - r.predicted
        found[(r.source, engine_of.get(r.id, "?"), r.metric)][b].append(missing)
    return {key: {b: statistics.median(v) for b, v in sorted(by_batch.items())} for key, by_batch in found.items()}


def main() -> None:
    if "--without" in sys.argv:
        engine_loop.SYNCHRONOUS_STEP_HOST_S = engine_loop.SYNCHRONOUS_SEQUENCE_HOST_S = 0.0
    print(f"V0 host loop: {engine_loop.SYNCHRONOUS_STEP_HOST_S * 1e3:.2f} ms + "
          f"{engine_loop.SYNCHRONOUS_SEQUENCE_HOST_S * 1e6:.0f} us per sequence per step")
    print(f"  {'source':<44} {'engine':<14} {'metric':<17} missing ms per step at batch")
    for (source, engine, metric), by_batch in sorted(missing_ms_per_step().items()):
        steps = " ".join(f"b{b}:{ms:+.1f}" for b, ms in by_batch.items())
        print(f"  {source:<44} {engine:<14} {metric:<17} {steps}")


if __name__ == "__main__":
    main()
