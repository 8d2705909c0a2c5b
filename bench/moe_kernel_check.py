"""The routed-expert GEMM share of MoE decode (efficiency.MOE_GROUPED_GEMM_EFFICIENCY), measured on published vLLM
benchmark_latency runs of Mixtral at growing batch, and the grouped kernel's rate in prefill
(gemm_shape.GROUPED_GEMM_FACTOR), measured on published benchmark_moe.py timings of one MoE layer's experts
(bench/data/moe_kernels/), none of them a reference row.

    python bench/moe_kernel_check.py          # the measured share and factor, the committed ones, and the check runs

Why growth: benchmark_latency times one static batch, prefill and `output_len` decode steps. From the smallest batch
of a run (8 sequences: Mixtral's top-2 of 8 experts already touches 7.2 experts per layer, so nearly every weight is
read) to 16 and 32, the weight stream barely grows and the dense GEMMs stay memory-bound; what grows is the
routed-expert grouped GEMMs' work, b·k/E rows per expert. The latency's growth cancels every fixed cost of the run
(launches, sampling, the engine's loop), so it measures the share without the constants fitted on reference rows.
The share is the one that puts the predicted growth nearest the measured (least squares in log) over the `fit` runs;
the `check` runs took no part.
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass
from types import SimpleNamespace
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.hardware.catalog import Catalog, bundled  # noqa: E402
from planner.physics import efficiency  # noqa: E402
from planner.hardware.units import BYTES_PER_PARAM  # noqa: E402
from planner.physics.performance import decode_step, prefill_s, touched_expert_share  # noqa: E402
from planner.physics.gemm_shape import (GROUPED_GEMM_FACTOR, SMS, grouped_expert_shapes,  # noqa: E402
                                        grouped_gemm_time_s, routed_groups)
from planner.workload.presets import presets  # noqa: E402
from planner.workload.yamlsafe import load_text  # noqa: E402

RUNS = Path(__file__).resolve().parent / "data" / "moe_kernels" / "vllm-mixtral-batch-latency.yaml"
KERNEL_RUNS = RUNS.parent / "vllm-fused-moe-kernel-times.yaml"
# Candidate shares, 0.05 to 1.00 by 0.01; "no extra cost" is the share going to infinity (NO_EXPERT_COST).
GRID = [round(0.05 + 0.01 * i, 2) for i in range(96)]
NO_EXPERT_COST = math.inf
# A run's growth is counted from its smallest batch that touches this share of the routed experts per layer
# (1 - (1 - k/E)^b: Mixtral's top-2 of 8 at batch 8 touches 90%), so the weight stream hardly grows beyond it.
TOUCHED_SHARE = 0.9


@dataclass(frozen=True)
class Growth:
    run: str
    use: str
    batch: int
    measured_s: float
    predicted_s: float

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1


def runs(path: Path = RUNS) -> list[dict]:
    return load_text(path.read_text(), bundled=True)["runs"]


def share(value: float):
    """MOE_GROUPED_GEMM_EFFICIENCY set to `value` inside the block."""
    return mock.patch.object(efficiency, "MOE_GROUPED_GEMM_EFFICIENCY", value)


def latency_s(catalog: Catalog, run: dict, batch: int) -> float:
    """benchmark_latency's wall time as the planner sees it: the batch's prefill, then output_len decode steps, each at
    the mean context of the run (a step is linear in context through the KV read and attention, so the mean step is
    the step at the mean context)."""
    arch = presets()[run["model"]]
    itype = catalog.instance(run["instance"])
    accel = catalog.accelerator(itype.accelerator)
    prompt, output = run["prompt_tokens"], run["output_tokens"]
    first = prefill_s(arch, accel, run["precision"], run["tp"], 1, prompt, itype=itype, prompts=batch)
    step = decode_step(arch, accel, run["precision"], "bf16", run["tp"], 1, batch, prompt + output / 2, itype=itype)
    return first + output * step.seconds


def base_batch(run: dict) -> int:
    """The run's smallest batch that touches TOUCHED_SHARE of the routed experts: the growth is counted from it."""
    arch = presets()[run["model"]]
    return min(b for b in run["latency_s"] if round(touched_expert_share(arch, b), 2) >= TOUCHED_SHARE)


def growths(catalog: Catalog, value: float, use: str | None = None) -> list[Growth]:
    """Each run's latency growth from its base batch to every larger one, measured and predicted at `value`."""
    out = []
    with share(value):
        for run in runs():
            if use is not None and run["use"] != use:
                continue
            smallest = base_batch(run)
            batches = [b for b in sorted(run["latency_s"]) if b >= smallest]
            base = latency_s(catalog, run, smallest)
            name = f"{run['model']} TP {run['tp']} ({smallest}->b)"
            out.extend(Growth(name, run["use"], b, run["latency_s"][b] - run["latency_s"][smallest],
                              latency_s(catalog, run, b) - base) for b in batches[1:])
    return out


def _log_loss(rows: list[Growth]) -> float:
    return sum(math.log(r.predicted_s / r.measured_s) ** 2 for r in rows)


def measured_share(catalog: Catalog) -> float:
    """The grid's share whose predicted growth is nearest the `fit` runs' measured growth."""
    return min(GRID, key=lambda v: _log_loss(growths(catalog, v, "fit")))


def kernel_runs(path: Path = KERNEL_RUNS) -> list[dict]:
    return load_text(path.read_text(), bundled=True)["runs"]


def expert_kernel_s(catalog: Catalog, run: dict, tokens: int) -> tuple[float, bool]:
    """A fused_moe call over `tokens` tokens as prefill runs it (gemm_shape.grouped_gemm_time_s of the touched experts'
    gate-up [E, 2N, K] and down [E, K, N] GEMMs at the prefill share), and whether its tiles, not its weight stream,
    bound it (its time is its math's alone)."""
    layer = SimpleNamespace(is_moe=True, experts=run["experts"], active_experts=run["top_k"],
                            hidden_size=run["hidden"], ffn_hidden_size=run["intermediate"])
    accel = catalog.accelerator(run["accelerator"])
    peak, element_bytes = accel.peak_flops(run["precision"]), BYTES_PER_PARAM[run["precision"]]
    groups, rows = routed_groups(layer, tokens)
    shapes = grouped_expert_shapes(layer, rows, run["tp"])

    def seconds(bandwidth_gb_s: float) -> float:
        return sum(grouped_gemm_time_s(groups, *shape, SMS.get(accel.name), bandwidth_gb_s, peak, element_bytes)
                   for shape in shapes)

    total = seconds(accel.memory_bandwidth_gb_s)
    return total / efficiency.prefill_efficiency(accel), math.isclose(seconds(math.inf), total)


def kernel_errors(catalog: Catalog, use: str) -> list[tuple[int, float]]:
    """(tokens, predicted ÷ measured - 1) of the `use` runs' compute-bound points."""
    out = []
    for run in kernel_runs():
        if run["use"] != use:
            continue
        for tokens, measured_us in run["kernel_us"].items():
            predicted_s, compute_bound = expert_kernel_s(catalog, run, tokens)
            if compute_bound:
                out.append((tokens, predicted_s / (measured_us * 1e-6) - 1))
    return out


def prefill_factor(catalog: Catalog) -> float:
    """GROUPED_GEMM_FACTOR as the `fit` kernel run measures it: over its compute-bound points, the committed factor
    times the geometric mean of predicted ÷ measured, to 0.01."""
    errors = kernel_errors(catalog, "fit")
    return round(GROUPED_GEMM_FACTOR * math.exp(statistics.fmean(math.log(1 + e) for _, e in errors)), 2)


def median_abs_error(rows: list[Growth]) -> float:
    return statistics.median(abs(r.error) for r in rows)


def report(catalog: Catalog) -> list[str]:
    measured = measured_share(catalog)
    lines = [f"grouped kernel's prefill factor: measured {prefill_factor(catalog):.2f} on the fit kernel run, "
             f"committed {GROUPED_GEMM_FACTOR:.2f}"]
    lines.extend(f"  {use:<5} {tokens:>5} tokens: predicted {error:+.1%}" for use in ("fit", "check")
                 for tokens, error in kernel_errors(catalog, use))
    lines.append(f"routed-expert GEMM share: measured {measured:.2f} on the fit runs, committed "
                 f"{efficiency.MOE_GROUPED_GEMM_EFFICIENCY:.2f}")
    for label, value in (("without the expert GEMMs", NO_EXPERT_COST), ("at the committed share",
                                                                         efficiency.MOE_GROUPED_GEMM_EFFICIENCY)):
        lines.append(f"{label}:")
        for use in ("fit", "check"):
            rows = growths(catalog, value, use)
            lines.append(f"  {use:<5} median |error| of the growth {median_abs_error(rows):6.1%}")
            lines.extend(f"    {r.run:<28} batch {r.batch:>3}: measured +{r.measured_s:.3f} s, predicted "
                         f"+{r.predicted_s:.3f} s ({r.error:+.0%})" for r in rows)
    return lines


def main() -> None:
    print("\n".join(report(bundled())))


if __name__ == "__main__":
    main()
