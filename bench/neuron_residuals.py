"""Per-row residuals of the Neuron serving rows, with the configuration each was run at, to find the
regime an estimator misses (issue 25).

    python bench/neuron_residuals.py                 # TTFT rows, in-sample (the committed constants)
    python bench/neuron_residuals.py --metric ITL    # one of TTFT, ITL, "serving tokens/s"
    python bench/neuron_residuals.py --loso          # ... each source predicted without its own rows

Each row: source, engine, part, TP, compiled batch, concurrency, prompt length and the context-encoding
bucket it runs at (planner/physics/neuron_serving.context_bucket_tokens), published, error. Then the
signed and absolute median per (source, regime), a regime being short (bucket ≤ 512), mid (≤ 2,048)
or long prompts, one request or several in flight.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.reference_cases import Row, all_rows, reference  # noqa: E402
from bench.reference_sources import sources  # noqa: E402
from planner.hardware.catalog import bundled  # noqa: E402
from planner.physics.neuron_serving import context_bucket_tokens  # noqa: E402

METRICS = ("TTFT", "ITL", "serving tokens/s")


def configurations() -> dict[str, dict]:
    """Row id -> the published configuration: engine, compiled batch, in flight, prompt, TP."""
    out = {}
    for c in reference()["neuron_serving"]:  # transformers-neuronx static batches: batch = in flight
        out[c["id"]] = {"engine": "transformers-neuronx", "batch": c["batch"], "concurrency": c["batch"],
                        "prompt": c["prompt_tokens"], "tp": c["tp"], "max_context": c.get("n_positions")}
    for data in sources().values():
        for r in data["rows"]:
            out[r["id"]] = {"engine": r.get("engine"), "batch": r.get("compiled_batch"), "concurrency": r.get("concurrency"),
                            "prompt": r.get("prompt_tokens"), "tp": r.get("tp"), "max_context": r.get("max_context_tokens")}
    return out


def regime(config: dict) -> str:
    bucket = context_bucket_tokens(config["prompt"], config["max_context"])
    length = "short" if bucket <= 512 else "mid" if bucket <= 2048 else "long"
    return f"{length} prompt, {'one in flight' if config['concurrency'] == 1 else 'several in flight'}"


def neuron_rows(metric: str, loso: bool) -> list[Row]:
    if loso:
        from bench.accuracy import loso_rows
        rows = loso_rows(("Inferentia2", "Trainium", "Trainium2"), (metric,))
    else:
        rows = all_rows(bundled(), "neuron")
    return [r for r in rows if r.platform == "neuron" and r.metric == metric]


def report(rows: list[Row], configs: dict[str, dict]) -> list[str]:
    lines = [f"{'source':<28} {'engine':<20} {'part':<11} {'TP':>3} {'batch':>5} {'in fl.':>6} {'prompt':>6} "
             f"{'bucket':>6} {'published':>10} {'error':>7}"]
    groups: dict[tuple[str, str], list[float]] = {}
    for r in sorted(rows, key=lambda r: (r.source, r.error)):
        c = configs[r.id]
        bucket = context_bucket_tokens(c["prompt"], c["max_context"])
        lines.append(f"{r.source[:28]:<28} {str(c['engine'])[:20]:<20} {r.accelerator[:11]:<11} {c['tp']:>3} "
                     f"{str(c['batch']):>5} {str(c['concurrency']):>6} {c['prompt']:>6} {bucket:>6} "
                     f"{r.measured:>10.2f} {r.error:>+7.1%}")
        groups.setdefault((r.source, regime(c)), []).append(r.error)
    lines.append("")
    for (source, name), errors in sorted(groups.items()):
        lines.append(f"{source[:28]:<28} {name:<32} rows {len(errors):>3}  signed median {statistics.median(errors):+7.1%}  "
                     f"median |error| {statistics.median(abs(e) for e in errors):6.1%}")
    return lines


def main() -> None:
    metric = sys.argv[sys.argv.index("--metric") + 1] if "--metric" in sys.argv else "TTFT"
    if metric not in METRICS:
        sys.exit(f"--metric: one of {', '.join(METRICS)} (got {metric!r})")
    print("\n".join(report(neuron_rows(metric, "--loso" in sys.argv), configurations())))


if __name__ == "__main__":
    main()
