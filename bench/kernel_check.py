"""The planner's kernel-level assumptions against kernel rates measured on a GPU (bench/data/device/).

    python bench/kernel_check.py            # the report below, on the bundled H100 run
    python bench/kernel_check.py --shapes   # the reference rows' layer GEMMs, input of bench/device/h100_kernels.py

The fitted constants of planner/physics/efficiency.py carry everything a source's runs lose; this holds
the pieces the estimators compose to what the hardware does kernel by kernel, on one H100 SXM:
- GEMM shapes: planner/physics/gemm_shape.py's factor (tile waves, roofline) against each measured
  reference-row GEMM's rate relative to the 8192³ GEMM of the same precision;
- the rows' layer GEMM factor, measured, and the rows' residuals with it in place of the planner's;
- FP8 against BF16 GEMMs (FP8_GEMM_EFFICIENCY_FACTOR), attention kernels against the GEMM share;
- decode's weight stream (MEMORY_BANDWIDTH_EFFICIENCY), its GEMMs once compute-bound, and between the two roofs
  (ROOFLINE_SHARPNESS);
- one Llama layer's forward+backward, eager and compiled, against the planner's compute time for it.
"""

from __future__ import annotations

import json
import statistics
import sys
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.hardware.catalog import Catalog, bundled  # noqa: E402
from planner.physics import efficiency  # noqa: E402
from planner.physics.gemm_shape import gemm_shape_factor, layer_gemm_factor, layer_gemms, passes  # noqa: E402
from planner.physics.memory import TrainingSetup  # noqa: E402
from planner.physics.training_time import StepParts, TrainingLayout, step_parts, training_work  # noqa: E402
from planner.workload.presets import Architecture  # noqa: E402

H100_RUN = Path(__file__).resolve().parent / "data" / "device" / "h100-2026-11-24.json"
# Eager PyTorch spends ~20 us of CPU per launch: a decode GEMM timed under this is the launch, not the kernel.
LAUNCH_BOUND_S = 30e-6
# The Llama layers bench/device/h100_kernels.py times: hidden, FFN, query heads, KV heads, head dim, micro-batch, seq,
# TP (the 70B layer was timed as one TP-4 rank's slice: a quarter of the heads and of the FFN).
LAYERS = {"llama3-8b-mb1-s8192": (4096, 14336, 32, 8, 128, 1, 8192, 1),
          "llama3-8b-mb2-s8192": (4096, 14336, 32, 8, 128, 2, 8192, 1),
          "llama3-8b-mb4-s2048": (4096, 14336, 32, 8, 128, 4, 2048, 1),
          "llama3-70b-tp4-mb1-s8192": (8192, 28672, 64, 8, 128, 1, 8192, 4),
          "nanotron-1p34b-mb4-s4096": (2048, 8192, 32, 32, 64, 4, 4096, 1),
          "nanotron-3p57b-mb2-s4096": (3072, 8192, 32, 32, 96, 2, 4096, 1)}


@cache
def run(path: Path = H100_RUN) -> dict:
    return json.loads(path.read_text())


def _h100(catalog: Catalog):
    return catalog.accelerator("H100-80GB")


def reference_layer_shapes(catalog: Catalog) -> list[dict]:
    """Per GPU training reference row: its layer's forward GEMMs (M, N, K) at its micro-batch, TP and CP."""
    from bench import reference_sources as rs
    from bench.reference_cases import reference
    from planner.workload.presets import presets

    out = []
    for source, data in rs.sources().items():
        for row in data["rows"]:
            if "seq" not in row or rs.why_not(row, catalog) is not None:
                continue
            row = rs.resolved(row)
            t = rs.training_inputs(catalog, row)
            if not t["accel"].is_neuron:
                out.append(_shape_row(row["id"], source, t["arch"], t["accel"], t["precision"],
                                      row["seq"] * t["mb"] // (row.get("cp") or 1), row["tp"]))
    for c in reference()["training"]:
        accel = catalog.accelerator(catalog.instance(c["instance_type"]).accelerator)
        out.append(_shape_row(c["id"], c["source"], presets()[c["model"]], accel, c["precision"],
                              c["seq"] * c["micro_batch"], c["tp"]))
    return out


def _shape_row(row_id: str, source: str, arch: Architecture, accel, precision: str, tokens: int, tp: int) -> dict:
    linear = "fp8" if precision == "fp8" else "bf16"
    return {"id": row_id, "source": source, "accel": accel.name, "prec": linear, "tokens": tokens, "tp": tp,
            "gemms": [list(g) for g in layer_gemms(arch, tokens, tp)],
            "planner_factor": layer_gemm_factor(arch, tokens, tp, accel, accel.peak_flops(linear),
                                                1 if linear == "fp8" else 2)}


def measured_gemms(data: dict) -> dict[tuple[int, int, int, str], float]:
    """(M, N, K, precision) -> rate relative to the 8192³ GEMM of that precision."""
    square = {p: data["square_tflops"][f"{p}-8192"] for p in ("bf16", "fp8")}
    return {(g["m"], g["n"], g["k"], g["prec"]): g["tflops"] / square[g["prec"]] for g in data["gemm"] if "tflops" in g}


def shape_model_errors(data: dict, catalog: Catalog) -> list[float]:
    """gemm_shape's factor ÷ measured relative rate − 1, per measured GEMM (the 8192³ GEMM is 1 in both)."""
    accel = _h100(catalog)
    out = []
    for (m, n, k, precision), measured in measured_gemms(data).items():
        peak = accel.peak_flops(precision)
        reference = gemm_shape_factor(8192, 8192, 8192, accel, peak, 1 if precision == "fp8" else 2)
        out.append(gemm_shape_factor(m, n, k, accel, peak, 1 if precision == "fp8" else 2) / reference / measured - 1)
    return out


def row_layer_factors(data: dict, shapes: list[dict]) -> dict[str, float]:
    """Per reference row: its layer's GEMMs' measured rate relative to the 8192³ GEMM (FLOP-weighted). A row added
    since the device run has shapes it never timed: it is left out (the report counts it), not guessed."""
    rates = measured_gemms(data)
    out = {}
    for row in shapes:
        if any((*shape, row["prec"]) not in rates for m, n, k in row["gemms"] for shape in passes(m, n, k)):
            continue
        work = time = 0.0
        for m, n, k in row["gemms"]:
            for shape in passes(m, n, k):
                flops = shape[0] * shape[1] * shape[2]
                work, time = work + flops, time + flops / rates[(*shape, row["prec"])]
        out[row["id"]] = work / time
    return out


def attention_shares(data: dict, peak_flops: float) -> dict[str, float]:
    """Median forward+backward rate of causal attention per SDPA backend, as a share of dense BF16 peak."""
    by: dict[str, list[float]] = {}
    for a in data["attention"]:
        if a.get("fwdbwd_tflops"):
            by.setdefault(a["backend"].split(".")[-1], []).append(a["fwdbwd_tflops"] * 1e12 / peak_flops)
    return {backend: statistics.median(v) for backend, v in by.items()}


def decode_stream_shares(data: dict, bandwidth_gb_s: float) -> list[float]:
    """Weight-stream share of peak HBM bandwidth of the decode GEMMs at M ≤ 64 that outlast a launch."""
    return [g["gb_s"] / bandwidth_gb_s for g in data["decode_gemm"] if g["m"] <= 64 and g["s"] >= LAUNCH_BOUND_S]


def decode_stream_fit(data: dict, bandwidth_gb_s: float) -> tuple[float, float]:
    """(share of peak HBM bandwidth, seconds per kernel) of a weight GEMV's time = bytes ÷ (share × bandwidth) + a
    fixed cost, least squares over the decode GEMMs at M ≤ 8 that outlast a launch (efficiency.MEMORY_BANDWIDTH_
    EFFICIENCY and GEMM_KERNEL_TAIL_S: each GEMM fills the memory pipeline and drains its last wave whatever its
    size, which a share alone charged in proportion to the bytes)."""
    points = [(2.0 * g["n"] * g["k"], g["s"]) for g in data["decode_gemm"] if g["m"] <= 8 and g["s"] >= LAUNCH_BOUND_S]
    mean_bytes = statistics.fmean(b for b, _ in points)
    mean_s = statistics.fmean(s for _, s in points)
    slope = (sum((b - mean_bytes) * (s - mean_s) for b, s in points)
             / sum((b - mean_bytes) ** 2 for b, _ in points))
    return 1 / (slope * bandwidth_gb_s * 1e9), mean_s - slope * mean_bytes


def decode_compute_shares(data: dict, peak_flops: float) -> list[float]:
    """Share of dense BF16 peak the decode GEMMs reach at M = 1,024 (compute-bound)."""
    return [g["tflops"] * 1e12 / peak_flops for g in data["decode_gemm"] if g["m"] == 1024]


def ridge_errors(data: dict, sharpness: float | None) -> list[float]:
    """Relative error of a rounded roofline on the decode GEMMs near their ridge (M = 64-512), each weight shape
    that outlasts a launch at M = 1 taken alone: its memory time is its own M = 1 time, its compute time M's FLOPs
    at its own M = 1,024 rate, combined as efficiency.roofline_s does at `sharpness` (None: the sharp max)."""
    by_shape: dict[tuple[int, int], dict[int, float]] = {}
    for g in data["decode_gemm"]:
        by_shape.setdefault((g["n"], g["k"]), {})[g["m"]] = g["s"]
    errors = []
    for (n, k), times in sorted(by_shape.items()):
        if times[1] < LAUNCH_BOUND_S:
            continue
        memory_s, rate = times[1], 2.0 * 1024 * n * k / times[1024]
        for m in (64, 128, 256, 512):
            compute_s = 2.0 * m * n * k / rate
            combined = (max(memory_s, compute_s) if sharpness is None
                        else efficiency.rounded_max(memory_s, compute_s, sharpness))
            errors.append(combined / times[m] - 1)
    return errors


def planner_layer_s(name: str, catalog: Catalog, kernels: str = "eager") -> float:
    """The planner's compute time (matmul and non-matmul, training_time.step_parts) for one device's share of the
    layer's forward+backward: one micro-batch, no recompute, at the layer's TP, on the `kernels` stack."""
    parts = planner_layer_parts(name, catalog, kernels)
    return parts.matmul_s + parts.nonmatmul_s


def compiled_nonmatmul_shares(data: dict, catalog: Catalog) -> dict[str, float]:
    """Per layer timed eager and under torch.compile: the share of the planner's eager non-GEMM time that the
    measured saving leaves, 1 − (eager − compiled) ÷ that time. torch.compile runs the same cuBLAS GEMMs and
    FlashAttention-2 (SDPA) as eager and fuses only the elementwise kernels around them, so the saving is
    non-GEMM traffic (efficiency.COMPILED_NONMATMUL_SHARE is the median)."""
    return {name: 1 - (t["eager"] - t["compile"]) / planner_layer_parts(name, catalog, "eager").nonmatmul_s
            for name, t in _timed(data).items()}


def nonmatmul_bytes_saved(data: dict, catalog: Catalog) -> dict[str, float]:
    """Per layer timed eager and under torch.compile: the measured saving in the unit of
    efficiency.NONMATMUL_BYTES_PER_TOKEN_HIDDEN (HBM bytes per token per hidden unit at peak bandwidth), converted by
    the planner's own accounting of that layer's eager non-GEMM time (its tokens, TP and passes): the committed value
    is the median. Inductor fuses the norms, rotary embeddings, SwiGLU and residual adds into a few kernels and keeps
    the GEMMs and attention, so what it saves is the eager stack's non-GEMM traffic."""
    bytes_per_hidden = efficiency.NONMATMUL_BYTES_PER_TOKEN_HIDDEN
    timed = _timed(data)
    per_byte = {name: planner_layer_parts(name, catalog, "eager").nonmatmul_s / bytes_per_hidden for name in timed}
    return {name: (t["eager"] - t["compile"]) / per_byte[name] for name, t in timed.items()}


def _timed(data: dict) -> dict[str, dict[str, float]]:
    """Layer name -> {mode: seconds} for the layers timed both eager and compiled."""
    timed: dict[str, dict[str, float]] = {}
    for layer in data["layers"]:
        if "s" in layer:
            timed.setdefault(layer["name"], {})[layer["mode"]] = layer["s"]
    return {name: t for name, t in timed.items() if {"eager", "compile"} <= t.keys()}


def planner_layer_parts(name: str, catalog: Catalog, kernels: str) -> StepParts:
    """training_time.step_parts of one device's share of the layer's forward+backward. The architecture is the
    layer alone (its parameters the layer's linear weights, so 6·N is the layer's linear work)."""
    h, f, heads, kv_heads, head_dim, micro_batch, seq, tp = LAYERS[name]
    itype = catalog.instance("p5.48xlarge")
    accel = catalog.accelerator(itype.accelerator)
    linear_params = h * (heads + 2 * kv_heads) * head_dim + heads * head_dim * h + 3 * h * f
    # tied: no input-embedding lookup table is taken out of the layer's weights (Architecture.lookup_params)
    arch = Architecture(params=linear_params, layers=1, hidden_size=h, attention_heads=heads, kv_heads=kv_heads,
                        head_dim=head_dim, ffn_hidden_size=f, vocab_size=32000, tied_embeddings=True)
    work = training_work(arch, TrainingSetup("full", "bf16", "adamw", "auto", 16, seq, kernels=kernels))
    return step_parts(arch, itype, accel, "bf16", seq, TrainingLayout(tp, 1, 1, 0, micro_batch, 1, "none"), work)


def residuals_with_measured_factors(catalog: Catalog, shapes: list[dict],
                                    factors: dict[str, float]) -> tuple[float, float]:
    """Median |error| of the in-sample training rows as predicted, and with each row's planner shape factor swapped
    for its measured layer factor (both relative to their medians, so the fitted share keeps its level)."""
    from bench.reference_cases import all_rows

    planned = {row["id"]: row["planner_factor"] for row in shapes}
    rows = [r for r in all_rows(catalog, "gpu") if r.metric == "training TFLOP/s" and r.id in factors]
    measured_median, planned_median = statistics.median(factors.values()), statistics.median(planned.values())
    swapped = [r.predicted * factors[r.id] / measured_median / (planned[r.id] / planned_median) / r.measured - 1
               for r in rows]
    return statistics.median(abs(r.error) for r in rows), statistics.median(abs(e) for e in swapped)


def report(catalog: Catalog) -> list[str]:
    data, accel = run(), _h100(catalog)
    peak = accel.peak_flops("bf16")
    square = data["square_tflops"]
    lines = [f"# {data['device']}, {data['source']['date']}, {data['source']['software']}",
             f"square GEMMs: BF16 {square['bf16-8192'] / (peak / 1e12):.2f} of dense peak, FP8 "
             f"{square['fp8-8192'] / (accel.peak_flops('fp8') / 1e12):.2f}; FP8/BF16 share "
             f"{square['fp8-8192'] / 2 / square['bf16-8192']:.2f} "
             f"(FP8_GEMM_EFFICIENCY_FACTOR {efficiency.FP8_GEMM_EFFICIENCY_FACTOR})"]
    errors = shape_model_errors(data, catalog)
    lines.append(f"gemm_shape factor vs {len(errors)} measured reference GEMMs: median |error| "
                 f"{statistics.median(abs(e) for e in errors):.1%}, signed {statistics.median(errors):+.1%}")
    shapes = reference_layer_shapes(catalog)
    factors = row_layer_factors(data, shapes)
    before, after = residuals_with_measured_factors(catalog, shapes, factors)
    lines.append(f"reference rows' layer GEMMs, measured: {min(factors.values()):.2f}-{max(factors.values()):.2f} "
                 f"of the "
                 f"8192³ rate (median {statistics.median(factors.values()):.2f}, {len(factors)} rows; "
                 f"{len(shapes) - len(factors)} rows' shapes not in this run); training rows' "
                 f"in-sample median |error| {before:.1%} as planned, {after:.1%} with the measured factors")
    shares = attention_shares(data, peak)
    lines.append("attention fwd+bwd, share of BF16 peak: "
                 + ", ".join(f"{k} {v:.2f}" for k, v in sorted(shares.items()))
                 + " (training runs it at "
                 + ", ".join(f"{k} {v}" for k, v in efficiency.HOPPER_ATTENTION_EFFICIENCY.items()) + ")")
    stream = decode_stream_shares(data, accel.memory_bandwidth_gb_s)
    lines.append(f"decode weight stream (M <= 64, {len(stream)} GEMMs): {min(stream):.2f}-{max(stream):.2f} "
                 f"of peak HBM "
                 f"(MEMORY_BANDWIDTH_EFFICIENCY {efficiency.MEMORY_BANDWIDTH_EFFICIENCY})")
    share, tail_s = decode_stream_fit(data, accel.memory_bandwidth_gb_s)
    lines.append(f"decode weight GEMVs (M <= 8) as bytes / (share x bandwidth) + a per-kernel cost: share {share:.3f}, "
                 f"{tail_s * 1e6:.1f} us a kernel (MEMORY_BANDWIDTH_EFFICIENCY "
                 f"{efficiency.MEMORY_BANDWIDTH_EFFICIENCY}, GEMM_KERNEL_TAIL_S "
                 f"{efficiency.GEMM_KERNEL_TAIL_S * 1e6:.1f} us)")
    compute = decode_compute_shares(data, peak)
    lines.append(f"decode GEMMs at M = 1,024: {min(compute):.2f}-{max(compute):.2f} of dense peak "
                 f"(decode_gemm_efficiency {efficiency.decode_gemm_efficiency(accel, 'bf16'):.2f})")
    sharp, rounded = ridge_errors(data, None), ridge_errors(data, efficiency.ROOFLINE_SHARPNESS)
    lines.append(f"decode GEMMs near the ridge (M = 64-512, {len(sharp)} GEMMs): sharp roofline median |error| "
                 f"{statistics.median(map(abs, sharp)):.1%} (worst {min(sharp):+.0%}), rounded at ROOFLINE_SHARPNESS "
                 f"{efficiency.ROOFLINE_SHARPNESS} {statistics.median(map(abs, rounded)):.1%}")
    for layer in data["layers"]:
        if "s" in layer:
            mfu = layer["model_tflops"] / (peak / 1e12)
            stack = "compiled" if layer["mode"] == "compile" else "eager"  # the planner's stack for what was timed
            lines.append(f"layer {layer['name']} {layer['mode']}: {layer['s'] * 1e3:.2f} ms measured ({mfu:.2f} MFU), "
                         f"planner {planner_layer_s(layer['name'], catalog, stack) * 1e3:.2f} ms {stack}, "
                         f"{planner_layer_s(layer['name'], catalog, 'fused') * 1e3:.2f} ms fused")
    saved = nonmatmul_bytes_saved(data, catalog)
    lines.append(f"torch.compile saves {min(saved.values()):.0f}-{max(saved.values()):.0f} bytes per token per hidden "
                 f"unit (median {statistics.median(saved.values()):.1f}; NONMATMUL_BYTES_PER_TOKEN_HIDDEN "
                 f"{efficiency.NONMATMUL_BYTES_PER_TOKEN_HIDDEN})")
    left = compiled_nonmatmul_shares(data, catalog)
    lines.append(f"torch.compile's saving leaves {min(left.values()):+.2f} to {max(left.values()):+.2f} (median "
                 f"{statistics.median(left.values()):+.2f}) of the planner's eager non-GEMM time, {len(left)} layers")
    return lines


def main() -> None:
    catalog = bundled()
    if "--shapes" in sys.argv:
        print(json.dumps(reference_layer_shapes(catalog)))
        return
    print("\n".join(report(catalog)))


if __name__ == "__main__":
    main()
