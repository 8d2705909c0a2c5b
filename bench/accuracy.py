"""Predicted vs published for every reference row: leave-one-source-out (LOSO) is the headline.

    python bench/accuracy.py                 # per row, then the table per platform and metric
    python bench/accuracy.py --write-bands   # ... and the plan's 80% bands (planner/physics/bands.py)
    python bench/accuracy.py --metric "training peak memory"   # one metric's rows only (no refit
                                             # when no fitted constant enters it: peak memory)
    python bench/accuracy.py --only B200,Trainium2   # LOSO on the sources with rows on these parts only
    python bench/accuracy.py --only serving  # only the sources and rows of serving metrics (faster)
    GPUPLAN_BENCH_WORKERS=1 python bench/accuracy.py   # one fold at a time (default: one process per core)

Each source (one paper, code base or vendor table) is predicted with the constants of
planner/physics/efficiency.py refitted by bench/calibrate.py on every OTHER source: a constant is never
checked on a neighbour row from the same code base and cluster it was fitted on. The in-sample
error (the committed constants, fitted on all sources) stands beside it: it measures fit, not
generalisation. Targets (issue 25, LOSO): training ≤ 10%, serving throughput ≤ 10%, TTFT and ITL
≤ 12%; signed median within ±5%.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import calibrate, reference_sources  # noqa: E402
import yaml  # noqa: E402

from bench.planner_choice import PLANNER_CHOSEN, planner_chosen_ids  # noqa: E402
from bench.reference_cases import Row, all_rows, reference  # noqa: E402
from planner.hardware.catalog import bundled  # noqa: E402

METRICS = ("training TFLOP/s", "training sequences/s", "training peak memory", "serving tokens/s", "TTFT", "ITL")
PLATFORMS = ("gpu", "b200", "neuron", "trainium2")
# Parts reported as their own rows too (inside their platform's): the 2026 fleet's (issue 28).
HARDWARE_CLASSES = {"B200": "b200", "Trainium2": "trainium2"}
# LoRA and QLoRA peaks: a frozen (QLoRA: 4-bit) base, adapters and what their kernels keep, an estimate of its own
# whose misses (7-15% short of LitGPT's Gemma adapter peaks, 23-44% over torchtune's adapter runs) are not full
# training's: their own class, out of the platform's, so a full-training plan's memory band is drawn from
# full-training runs.
ADAPTER_CLASS = "lora"
TARGETS = {"training TFLOP/s": 0.10, "training sequences/s": 0.10, "training peak memory": 0.10, "serving tokens/s": 0.10,
           "TTFT": 0.12, "ITL": 0.12}
SIGNED_TARGET = 0.05
SERVING_METRICS = ("serving tokens/s", "TTFT", "ITL")


@cache
def loso_rows(only: tuple[str, ...] = (), metrics: tuple[str, ...] = METRICS) -> tuple[Row, ...]:
    """Every row of `metrics` predicted with constants fitted without its source (the committed ones
    restored); `only` (accelerator names) keeps the sources with a row on one of them, and those rows."""
    catalog = bundled()
    platforms: dict[str, set[str]] = {}
    for r in all_rows(catalog):
        if (not only or r.accelerator in only) and r.metric in metrics:
            platforms.setdefault(r.source, set()).add(r.platform)
    folds = [(source, tuple(sorted(platforms[source])), only, metrics) for source in sorted(platforms)]
    # One fit per held-out source, independent of each other: spread over the cores (each worker process
    # has its own copy of the constants, so the folds cannot see each other's fits).
    workers = int(os.environ.get("GPUPLAN_BENCH_WORKERS", os.cpu_count() or 1))
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork")) as pool:
            out = [r for rows in pool.map(_fold, folds) for r in rows]
    else:
        out = [r for fold in folds for r in _fold(fold)]
    if only:
        return tuple(out)
    return tuple(out) + tuple(r for r in compared_without_constants(catalog) if r.metric in metrics)


def _fold(fold: tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]) -> list[Row]:
    """The rows of one source, predicted with the constants fitted on every other source. A GPU source's
    rows depend on GPU constants only; a Neuron source's GPU constants are the committed ones (fitted on GPU
    rows, none of which it has), so only its platform refits."""
    source, platforms, only, metrics = fold
    catalog = bundled()
    with calibrate.restored():
        calibrate.fit(without=source, platforms=platforms)
        return [r for r in all_rows(catalog) if r.source == source and (not only or r.accelerator in only)
                and r.metric in metrics]


def compared_without_constants(catalog) -> list[Row]:
    """Peak-memory rows: no fitted constant enters planner.physics.memory, so held out or not is the same."""
    return reference_sources.memory_rows(catalog, Row)


def summary(rows: list[Row] | tuple[Row, ...]) -> dict[tuple[str, str], dict]:
    """Per (platform, metric): rows, sources, median |error| and signed median error."""
    classes: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        classes.setdefault((ADAPTER_CLASS if r.adapters else r.platform, r.metric), []).append(r)
        if r.accelerator in HARDWARE_CLASSES:
            classes.setdefault((HARDWARE_CLASSES[r.accelerator], r.metric), []).append(r)
    return {key: {"rows": len(group), "sources": len({r.source for r in group}),
                  "median_abs": statistics.median(abs(r.error) for r in group),
                  "signed_median": statistics.median(r.error for r in group)}
            for key, group in classes.items()}


def moe_rows(rows: list[Row] | tuple[Row, ...], platform: str | None = None) -> list[Row]:
    """The MoE class (issue 28): the rows of mixture-of-experts models, whose expert routing, all-to-all and MLA
    dense rows never exercise; of every platform, or of `platform` only (the band a GPU MoE plan takes)."""
    return [replace(r, platform="moe", accelerator="") for r in rows
            if r.moe and (platform is None or r.platform == platform)]


def model_class_summary(rows: list[Row] | tuple[Row, ...]) -> dict[tuple[str, str], dict]:
    """Per metric, the MoE rows of every platform together: printed beside the platform table and stored with it;
    band_classes stores a band for the GPU ones that two or more sources measured."""
    return summary(moe_rows(rows))


# Sources reported as a class of their own, not pooled into their platform's class or band. NVIDIA's TensorRT-LLM 0.9.0
# sweep (bench/data/reference/trtllm-v09-dli-sweep.yaml) is 1,315 static batches of one engine on NVIDIA's own
# machines, nine in ten of the GPU first-token rows: pooled, the class median and the first-token band would be that
# one harness's (held out 12.1% against the other five sources' 21.2%; its band 0.74-1.13 of predicted + 5 ms against
# 0.56-1.51 of predicted + 30 ms), and a plan's first token is served through an HTTP endpoint, not measured inside
# the engine. Its Mixtral rows leave the MoE class too (that class is the published runs of other sources).
# NIM's one-client runs (nim-dli-sweep.yaml, 72 per metric) are served over HTTP like a plan's, but the bands widen by
# rows: pooled, a third of the inter-token rows, predicted within 6.6%, set its widening (x1.85 -> x1.10) and its band
# (0.77-1.39 -> 0.89-1.24), which then held 71.6% of the TensorRT-LLM sweep's inter-token latencies it never saw (92.7%
# today), and the first-token band's narrowest offset went 30 -> 5 ms with a slow edge of x2.39 (calibration log,
# 2026-12-07). Until a band weighs sources rather than rows, they are reported apart.
SOURCES_APART = {"trtllm-v09-dli-sweep": "sweep", "nim-dli-sweep": "nim-one-client"}


def reporting_classes(rows: list[Row] | tuple[Row, ...]) -> list[Row]:
    """The rows as the table and the bands group them: a source of SOURCES_APART under its own platform name."""
    return [replace(r, platform=SOURCES_APART[r.source], moe=False) if r.source in SOURCES_APART else r for r in rows]


def class_summary(rows: list[Row] | tuple[Row, ...]) -> dict[tuple[str, str], dict]:
    """Every class the README's table and the stored summary state: the platforms' and parts', MoE's, and each
    source kept apart (SOURCES_APART)."""
    rows = reporting_classes(rows)
    return summary(rows) | model_class_summary(rows)


def table(loso: dict, in_sample: dict) -> list[str]:
    lines = ["| platform | metric | rows (sources) | LOSO median abs. error | LOSO signed median | "
             "in-sample median abs. error | target (LOSO) |", "|---|---|---|---|---|---|---|"]
    for platform in PLATFORMS + ("moe", ADAPTER_CLASS) + tuple(SOURCES_APART.values()):
        for metric in METRICS:
            if (platform, metric) not in loso:
                continue
            h, f = loso[(platform, metric)], in_sample[(platform, metric)]
            lines.append(f"| {platform} | {metric} | {h['rows']} ({h['sources']}) | {h['median_abs']:.1%} | "
                         f"{h['signed_median']:+.1%} | {f['median_abs']:.1%} | ≤ {TARGETS[metric]:.0%} |")
    return lines


def source_table(held: list[Row] | tuple[Row, ...]) -> list[str]:
    """Per source, each class's held-out rows' median |error| and signed median (summary): which sources a class's
    error comes from (each source predicted with the constants fitted without it)."""
    lines = ["| platform | metric | source | rows | LOSO median abs. error | LOSO signed median |",
             "|---|---|---|---:|---:|---:|"]
    for source in sorted({r.source for r in held}):
        for (platform, metric), s in sorted(summary([r for r in held if r.source == source]).items()):
            lines.append(f"| {platform} | {metric} | {source} | {s['rows']} | {s['median_abs']:.1%} | "
                         f"{s['signed_median']:+.1%} |")
    return lines


# The band a plan carries must hold TARGET_COVERAGE of the runs of a source it never saw, not only of the rows it
# was drawn from (those it holds by construction). Drawn from the other sources' rows, the plain 10th-90th
# percentile band held 50-77% of a held-out source's rows on the GPU classes (issue 25's target is 75%): sources
# differ by more than rows within one source do. So each class's band is widened about its centre (in log space)
# by the least factor on WIDENING_GRID at which the bands drawn without each source hold TARGET_COVERAGE of
# that source's rows; one class's factor is fitted leave-one-source-out like every other constant.
TARGET_COVERAGE = 0.80
WIDENING_GRID = [round(1 + 0.05 * i, 2) for i in range(81)]  # ×1 to ×5 the half-width


# A first token carries a fixed cost the estimate leaves out: the request path (HTTP, tokenisation, the
# scheduler's tick), 10-20 ms between two vLLM versions on one A100 (AccelMark) and ~33 ms between two engines on
# one H100 (GPUStack). Measured / predicted then spreads most where the estimate is smallest: a 10 ms first token
# published at 50 ms is a ratio of 5, and the class's slow edge was x3.7 for every first token, long prompts'
# too. A TTFT band is drawn on measured / (predicted + a) instead: the edges (p + a) x [q10, q90] still rise with
# p, so a faster candidate never has a slower edge. a is the offset on this grid whose band, widened to hold 80%
# of a left-out source, is the narrowest (log q90/q10); 0 where none narrows it. Rows state TTFT in ms.
OFFSET_METRICS = ("TTFT",)
OFFSET_GRID_MS = tuple(range(0, 55, 5))


def _ratio(r: Row, offset: float = 0.0) -> float:
    return r.measured / (r.predicted + offset)


def stored_band_share(band: dict, rows: list[Row] | tuple[Row, ...]) -> float:
    """Share of `rows` a stored band (planner/data/accuracy_bands.yaml classes entry) holds: q10 <= measured /
    (predicted + its offset) <= q90. A blind check on sources the band was never drawn from."""
    offset_ms = band.get("offset_s", 0.0) * 1e3
    return sum(band["q10"] <= _ratio(r, offset_ms) <= band["q90"] for r in rows) / len(rows)


def _percentiles(group: list[Row], offset: float = 0.0) -> tuple[float, float]:
    """10th and 90th percentile of measured / (predicted + offset)."""
    values = sorted(_ratio(r, offset) for r in group)
    deciles = statistics.quantiles(values, n=10, method="inclusive") if len(values) > 1 else values * 9
    return deciles[0], deciles[8]


def widened(q10: float, q90: float, factor: float) -> tuple[float, float]:
    """[q10, q90] widened about its geometric centre by `factor` (its log half-width times factor)."""
    centre, half = (math.log(q10) + math.log(q90)) / 2, (math.log(q90) - math.log(q10)) / 2
    return math.exp(centre - factor * half), math.exp(centre + factor * half)


def _factors_needed(group: list[Row], offset: float = 0.0) -> list[float]:
    """Per row, the least widening at which the band drawn from the other sources' rows holds it: its distance
    from that band's centre in log space, in the band's half-widths (each source's band computed once)."""
    needed = []
    for source in {r.source for r in group}:
        low, high = (math.log(q) for q in _percentiles([r for r in group if r.source != source], offset))
        centre, half = (low + high) / 2, (high - low) / 2
        for r in group:
            if r.source == source:
                off = abs(math.log(_ratio(r, offset)) - centre)
                needed.append(off / half if half else (0.0 if off == 0 else math.inf))
    return needed


def _share(needed: list[float], factor: float) -> float:
    return sum(f <= factor for f in needed) / len(needed)


def held_out_share(group: list[Row], factor: float) -> float:
    """Share of the group's rows inside the band drawn from the other sources' rows, widened by `factor`."""
    return _share(_factors_needed(group), factor)


# A GPU MoE serving figure takes the band of the MoE rows (planner/physics/bands.py), not the GPU class's alone: that
# band held 26 of the 44 MoE throughput rows (59%). A model class is stored only where at least MODEL_CLASS_MIN_SOURCES
# sources measured it (one source's band is that source's offset). It is not widened like a platform class: its few
# sources disagree in sign (TensorRT-LLM's offline Mixtral rows run at 0.70-0.89 of the estimate, Argonne's static
# batches at 0.76-1.98), so the band drawn without one holds about half of its rows, and the factor that would make it
# hold 80% (×5 for MoE throughput: 0.16-7.1) is one source's offset, not a statement of uncertainty. It keeps its own
# percentiles, joined with its platform's band (never narrower than that), and states the share a left-out source
# keeps inside them. LoRA / QLoRA peak memory is stored the same way (ADAPTER_CLASS): LitGPT's and torchtune's
# adapter runs miss in opposite directions.
MODEL_CLASS_MIN_SOURCES = 2


def _model_classes(rows: list[Row] | tuple[Row, ...], platform_bands: dict[str, dict]) -> dict[str, dict]:
    """GPU MoE rows as classes of their own ("moe/<metric>"), and LoRA / QLoRA peaks ("lora/training peak memory"),
    where MODEL_CLASS_MIN_SOURCES sources measured them."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in moe_rows(rows, "gpu"):
        groups.setdefault(("moe", r.metric), []).append(r)
    for r in rows:
        if r.adapters and r.platform == "gpu":
            groups.setdefault((ADAPTER_CLASS, r.metric), []).append(r)
    out = {}
    for (name, metric), group in sorted(groups.items()):
        sources = sorted({r.source for r in group})
        if len(sources) < MODEL_CLASS_MIN_SOURCES:
            continue
        q10, q90 = _percentiles(group)
        platform = platform_bands[f"gpu/{metric}"]
        out[f"{name}/{metric}"] = {"q10": round(min(q10, platform["q10"]), 4), "q90": round(max(q90, platform["q90"]), 4),
                                "rows": len(group), "sources": sources, "percentiles": [round(q10, 4), round(q90, 4)],
                                "joined_with": f"gpu/{metric}",
                                "held_out_share": {"percentiles": round(held_out_share(group, 1.0), 4)}}
    return out


def band_classes(rows: list[Row] | tuple[Row, ...]) -> dict[str, dict]:
    """Per class: the band (q10, q90 of measured / predicted over held-out rows, widened until it holds
    TARGET_COVERAGE of a source left out of it), with the percentiles, the factor and the held-out share.
    A platform class of one source has no source to check it on: its percentiles stand, unwidened. GPU MoE
    rows form model classes too (_model_classes)."""
    rows = [r for r in rows if r.source not in SOURCES_APART]  # a source kept apart is never a plan's band
    by_class: dict[str, list[Row]] = {}
    for r in rows:
        if not r.adapters:  # a LoRA / QLoRA peak is its own class (_model_classes)
            by_class.setdefault(f"{r.platform}/{r.metric}", []).append(r)
    out = {}
    for key, group in sorted(by_class.items()):
        offsets = OFFSET_GRID_MS if key.split("/", 1)[1] in OFFSET_METRICS else (0,)
        out[key] = min((_band(group, offset) for offset in offsets), key=lambda e: (e["q90"] / e["q10"], e["offset_s"]))
        if out[key]["offset_s"] == 0:
            del out[key]["offset_s"]
    return out | _model_classes(rows, out)


def _band(group: list[Row], offset_ms: float) -> dict:
    """One class's band on measured / (predicted + offset_ms) (band_classes)."""
    q10, q90 = _percentiles(group, offset_ms)
    entry = {"rows": len(group), "sources": sorted({r.source for r in group})}
    if len(entry["sources"]) > 1:
        needed = _factors_needed(group, offset_ms)
        factor = next((f for f in WIDENING_GRID if _share(needed, f) >= TARGET_COVERAGE), WIDENING_GRID[-1])
        entry |= {"percentiles": [round(q10, 4), round(q90, 4)], "widening": factor,
                  "held_out_share": {"percentiles": round(_share(needed, 1.0), 4),
                                     "widened": round(_share(needed, factor), 4)}}
        q10, q90 = widened(q10, q90, factor)
    return {"q10": round(q10, 4), "q90": round(q90, 4), "offset_s": offset_ms / 1e3} | entry


def write_bands(rows: tuple[Row, ...]) -> None:
    """planner/data/accuracy_bands.yaml, with which rows and which date it was computed from, and
    the LOSO and in-sample summaries the README and tests/test_accuracy.py state."""
    from planner.physics.bands import DATA

    from bench.reference_sources import sources

    dates = {**reference()["source_dates"], **{k: str(d["source"]["date"]) for k, d in sources().items()}}
    body = {"provenance": {"generated_by": "python bench/accuracy.py --write-bands",
                           "method": "leave-one-source-out residuals, measured / predicted, 10th and 90th percentile",
                           "data": "bench/data/reference.yaml",
                           "newest_source_date": max(dates.values()), "rows": len(rows)},
            "classes": band_classes(rows),
            "loso": {f"{p}/{m}": {k: round(v, 4) for k, v in entry.items()}
                     for (p, m), entry in sorted(class_summary(rows).items())},
            "in_sample": {f"{p}/{m}": {k: round(v, 4) for k, v in entry.items()}
                          for (p, m), entry in sorted(class_summary(all_rows(bundled())
                                                                    + compared_without_constants(bundled())).items())}}
    text = "# Written by bench/accuracy.py --write-bands; do not edit by hand.\n" + yaml.safe_dump(
        body, sort_keys=False, allow_unicode=True)
    DATA.write_text(text)
    from planner.workload.bundled import COMPILED_DIR, compile_text  # start-up reads this build (issue 29)

    (DATA.parent / COMPILED_DIR / "accuracy_bands.json").write_text(compile_text(text, "accuracy_bands"))


def planner_chosen_line(rows, catalog) -> str:
    """The rows compared at the micro-batch the planner picks (their source leaves it unstated,
    bench/planner_choice.py), counted apart: LOSO median abs. and signed error of those alone."""
    chosen = [r for r in rows if r.id in planner_chosen_ids(catalog)]
    if not chosen:
        return f"{PLANNER_CHOSEN}: no rows"
    return (f"{PLANNER_CHOSEN}: {len(chosen)} rows ({len({r.source for r in chosen})} sources), LOSO median abs. "
            f"error {statistics.median(abs(r.error) for r in chosen):.1%}, signed {statistics.median(r.error for r in chosen):+.1%}")


def _metric_filter() -> str | None:
    """`--metric NAME`: one of METRICS, or None for all."""
    if "--metric" not in sys.argv:
        return None
    index = sys.argv.index("--metric") + 1
    name = sys.argv[index] if index < len(sys.argv) else ""
    if name not in METRICS:
        sys.exit(f"--metric: one of {', '.join(METRICS)} (got {name!r})")
    return name


def main() -> None:
    catalog = bundled()
    only = _metric_filter()
    if only is not None and "--write-bands" in sys.argv:
        sys.exit("--write-bands needs every metric: drop --metric")
    serving = sys.argv[-2:] == ["--only", "serving"]
    metrics = SERVING_METRICS if serving else METRICS
    parts = tuple(sys.argv[sys.argv.index("--only") + 1].split(",")) if "--only" in sys.argv and not serving else ()
    memory = compared_without_constants(catalog)
    fitted = {(r.source, r.id, r.metric): r for r in (memory if only == "training peak memory" else
                                                      all_rows(catalog) + memory)
              if (not parts or r.accelerator in parts) and r.metric in metrics}
    # peak memory has no fitted constant: its held-out rows are its in-sample rows, no refit needed
    held = tuple(r for r in memory if not parts or r.accelerator in parts) \
        if only == "training peak memory" else loso_rows(parts, metrics)
    if only is not None:
        held = tuple(r for r in held if r.metric == only)
        fitted = {k: r for k, r in fitted.items() if r.metric == only}
    print(f"  {'case':<34} {'source':<16} {'setup':<58} {'published':>10} {'LOSO':>8} {'in-sample':>10}")
    for r in held:
        f = fitted[(r.source, r.id, r.metric)]
        print(f"  {r.id:<34} {r.source:<16} {r.setup:<58} {r.measured:>10.2f} {r.error:>+8.1%} {f.error:>+10.1%}")
    print()
    print(planner_chosen_line(held, catalog))
    print("\n".join(table(class_summary(held), class_summary(list(fitted.values())))))
    print("By source (where each class's held-out error comes from):")
    print("\n".join(source_table(held)))
    print(f"80% bands on a source they never saw (each source against the band of the others' rows; widened to "
          f"hold {TARGET_COVERAGE:.0%}):")
    for key, entry in band_classes(held).items():
        if "widening" in entry:
            share = entry["held_out_share"]
            print(f"  {key:<34} percentiles hold {share['percentiles']:.0%}, ×{entry['widening']:.2f} holds "
                  f"{share['widened']:.0%}: {entry['q10']:.2f}–{entry['q90']:.2f}"
                  + (f" of (predicted + {entry['offset_s'] * 1e3:.0f} ms)" if entry.get("offset_s") else ""))
        elif "joined_with" in entry:
            print(f"  {key:<34} percentiles hold {entry['held_out_share']['percentiles']:.0%}, not widened, joined "
                  f"with {entry['joined_with']}: {entry['q10']:.2f}–{entry['q90']:.2f}")
    if "--write-bands" in sys.argv and not only and not parts and metrics == METRICS:
        write_bands(held)


if __name__ == "__main__":
    main()
