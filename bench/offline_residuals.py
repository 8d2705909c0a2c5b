"""Per-row residuals of TensorRT-LLM's offline max-throughput rows (trtllm-bench, every request queued:
bench/offline_rows.py), with where the predicted time of a request goes, to find the regime the serving estimate
misses (issue 25).

    python bench/offline_residuals.py            # every trtllm-bench row, in-sample (the committed constants)

Each row: model, part, TP, precision, ISL/OSL, the steady batch and the limit that sets it
(planner/physics/offline_throughput.steady_batch), the decode step split into its kernels' rooflines, its TP
all-reduces and its fixed overhead, the share of a request's lifetime spent prefilling the batch's prompts,
published and predicted output tokens/s and the error. Then the signed and absolute median per (regime, TP), a
regime being decode-bound (prefill under 30% of the lifetime), prefill-bound (over 60%) or mixed.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.offline_rows import is_trtllm_bench, predict_offline, row_precisions  # noqa: E402
from bench.reference_serving import INSTANCE_FOR, in_model_tokens, row_accelerator, serving_why_not  # noqa: E402
from bench.reference_sources import row_architecture, sources  # noqa: E402
from planner.hardware.catalog import Accelerator, Catalog, InstanceType, bundled  # noqa: E402
from planner.workload.presets import Architecture  # noqa: E402

DECODE_BOUND_PREFILL_SHARE = 0.30  # below: the lifetime is mostly decode steps
PREFILL_BOUND_PREFILL_SHARE = 0.60  # above: mostly the batch's prompts


@dataclass(frozen=True)
class Residual:
    id: str
    setup: str
    tp: int
    batch: int
    binding: str
    kernels_ms: float  # the step's GEMM and attention rooflines
    allreduce_ms: float
    overhead_ms: float
    prefill_share: float  # of one request's lifetime
    published: float
    predicted: float  # the run of the row's num_requests (its rounds: planner/physics/offline_throughput.py)
    steady: float  # the same engine in steady state: batch · OSL ÷ lifetime

    @property
    def error(self) -> float:
        return self.predicted / self.published - 1

    @property
    def regime(self) -> str:
        if self.prefill_share < DECODE_BOUND_PREFILL_SHARE:
            return "decode-bound"
        return "prefill-bound" if self.prefill_share > PREFILL_BOUND_PREFILL_SHARE else "mixed"


def compared_rows(catalog: Catalog) -> Iterator[tuple[dict, Architecture, Accelerator, InstanceType]]:
    """Every comparable trtllm-bench row of the reference sources (in the model's tokens), with its architecture, its
    part as its node had it and that node's instance type."""
    for data in sources().values():
        for raw in data["rows"]:
            if "prompt_tokens" not in raw or serving_why_not(raw) is not None or not is_trtllm_bench(raw):
                continue
            r = in_model_tokens(raw)
            itype = catalog.instance(INSTANCE_FOR[r["accelerator"]])
            yield r, row_architecture(r), row_accelerator(catalog, itype, r), itype


def residuals(catalog: Catalog) -> list[Residual]:
    """Every comparable trtllm-bench row of the reference sources, predicted with the committed constants."""
    out = []
    for r, arch, accel, itype in compared_rows(catalog):
        offline = predict_offline(arch, accel, itype, r)
        step = offline.step
        setup = (f"{r.get('model') or 'custom'} {r['accelerator']} TP{r['tp']} {row_precisions(r)[0]} "
                 f"{r['prompt_tokens']}/{r['output_tokens']}")
        out.append(Residual(r["id"], setup, r["tp"], offline.batch, offline.binding,
                            (step.seconds - step.communication_s - step.overhead_s) * 1e3,
                            step.communication_s * 1e3, step.overhead_s * 1e3,
                            offline.prefill_s / offline.lifetime_s, float(r["tokens_per_s"]),
                            offline.output_tokens_per_s, offline.batch * r["output_tokens"] / offline.lifetime_s))
    return out


def report(rows: list[Residual]) -> list[str]:
    lines = [f"{'setup':<44} {'batch':>5} {'limit':<14} {'kernels':>8} {'allred':>7} {'ovh':>5} {'prefill':>7} "
             f"{'published':>10} {'error':>7}"]
    for r in sorted(rows, key=lambda r: (r.regime, r.tp, r.setup)):
        lines.append(f"{r.setup:<44} {r.batch:>5} {r.binding:<14} {r.kernels_ms:>6.1f}ms {r.allreduce_ms:>5.1f}ms "
                     f"{r.overhead_ms:>5.1f} {r.prefill_share:>7.0%} {r.published:>10.0f} {r.error:>+7.1%}")
    lines.append("")
    groups: dict[tuple[str, int], list[float]] = {}
    for r in rows:
        groups.setdefault((r.regime, r.tp), []).append(r.error)
    for (regime, tp), errors in sorted(groups.items()):
        lines.append(f"{regime:<14} TP{tp}: {len(errors):>3} rows, signed median {statistics.median(errors):+.1%}, "
                     f"abs. {statistics.median(abs(e) for e in errors):.1%}")
    return lines


if __name__ == "__main__":
    print("\n".join(report(residuals(bundled()))))
