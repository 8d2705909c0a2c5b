"""The B200's decode-attention roof (catalog `kv_share_measured`), read from published timings of the kernel alone.

    python bench/kv_kernel_check.py      # each benchmarked shape's share of peak, the best, and the catalog's figure

Decode attention reads each sequence's KV cache once a step. The planner charges it at a fitted share of peak
bandwidth (efficiency.KV_BANDWIDTH_EFFICIENCY, fitted on A100, H100 and GDDR rows) and, where a part states it, at no
more than the best share its decode-attention kernel was measured to reach (Accelerator.kv_share_measured;
efficiency.kv_bandwidth). The B200's is read here from FlashInfer PR #1415's timings of TensorRT-LLM's trtllm-gen
kernel (bench/data/kv_kernels/), none of them a reference row: the best shape's bandwidth over the 8,000 GB/s peak,
rounded to two places as the catalog states it. Small shapes read far less (a few microseconds of launch and
pipeline fill around little data), so the best shape, not a mean, is the roof.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.hardware.catalog import Catalog, bundled  # noqa: E402
from planner.workload.yamlsafe import load_text  # noqa: E402

RUNS = Path(__file__).resolve().parent / "data" / "kv_kernels" / "flashinfer-trtllm-gen-b200.yaml"


def _data() -> dict:
    return load_text(RUNS.read_text(), bundled=True)


def shares() -> list[tuple[str, int, int, float]]:
    """(run, batch, sequence tokens, share of peak) for every published point."""
    data = _data()
    return [(run["label"], p["batch"], p["seq_len"], p["gb_s"] / data["peak_gb_s"])
            for run in data["runs"] for p in run["points"]]


def measured_share() -> float:
    """The best share of peak any shape reached, to two places."""
    return round(max(share for *_, share in shares()), 2)


def report(catalog: Catalog) -> list[str]:
    lines = [f"{'run':<16} {'batch':>5} {'tokens':>7} {'share of peak':>14}"]
    lines += [f"{run:<16} {batch:>5} {tokens:>7} {share:>14.3f}" for run, batch, tokens, share in shares()]
    stated = catalog.accelerator("B200").kv_share_measured
    lines.append(f"best: {measured_share():.2f} of peak; the catalog's B200 kv_share_measured: {stated}")
    return lines


def main() -> None:
    print("\n".join(report(bundled())))


if __name__ == "__main__":
    main()
