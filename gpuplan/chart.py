"""The frontier chart file (`gpuplan frontier --chart`): matplotlib, an optional extra
(`pip install gpuplan[chart]`). SVG or PNG, or HTML wrapping the SVG."""

from __future__ import annotations

import io
from pathlib import Path

from planner.workload.errors import SpecError
from planner.search.frontier import Frontier
from planner.report.frontier import values

FORMATS = (".svg", ".png", ".html")


def write_chart(f: Frontier, path: Path) -> None:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise SpecError(f"chart file must end in {', '.join(FORMATS)} (got {path.name!r})", path="--chart")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SpecError("charts need matplotlib: pip install 'gpuplan[chart]'", path="--chart") from None
    points = [values(f, p) for p in f.points]
    xs, ys = [v[0] for v in points], [v[1] for v in points]
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.step(xs, ys, where="post", color="#888", linewidth=1)
    ax.scatter(xs, ys, color="#1f77b4", zorder=3, label="frontier plans")
    ax.scatter([xs[f.chosen]], [ys[f.chosen]], color="#d62728", s=90, zorder=4, label="chosen plan")
    for i, p in enumerate(f.points):
        ax.annotate(f"{p.choice.instance_type}×{p.choice.nodes}", (xs[i], ys[i]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    if f.axes[1] in f.targets:
        ax.axhline(f.targets[f.axes[1]], color="#2ca02c", linestyle="--", label="spec target")
    ax.set_xscale("log")
    ax.set_xlabel("USD per month" if f.kind == "inference" else "USD per training run")
    ax.set_ylabel("inter-token latency (ms)" if f.kind == "inference" else "time to train (h)")
    ax.set_title(f"{f.workload}: cost–latency frontier")
    ax.legend()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png" if suffix == ".png" else "svg", bbox_inches="tight")
    plt.close(fig)
    data = buffer.getvalue()
    if suffix == ".html":
        data = (f"<!doctype html><html><head><meta charset='utf-8'><title>{f.workload} frontier</title></head>"
                f"<body>{data.decode()}</body></html>\n").encode()
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise SpecError(f"cannot write {path}: {exc.strerror}", path="--chart") from None
