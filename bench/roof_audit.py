"""Published serving rows faster than physics allows at their stated layout: the serving counterpart of
bench/reference_sources.implausible (training rows above the dense peak).

    python bench/roof_audit.py

A GPU row's ceiling uses no fitted constant: every decode step streams the weights the batch touches and its
KV cache at 100% of the part's peak memory bandwidth, or runs its FLOPs at 100% of dense peak, whichever is
longer (a sharp roofline, Williams et al., CACM 2009), and the prompts' prefill runs at dense peak. Output
tokens/s ≤ batch × output tokens ÷ that time. A MoE batch touches E·(1 − (1 − k/E)^b) of its E experts per
layer (performance.moe_weight_bytes_read: uniform routing, the most experts b tokens touch on average; a skewed
router touches fewer, so a MoE row above this ceiling is impossible only if its router spreads tokens evenly). A row
whose harness decodes copies of one prompt greedily (`identical_prompts`: Argonne's TensorRT-LLM runs) routes every
copy alike and touches one sequence's k experts a layer.
Rows above their ceiling are listed, not dropped: the fit and leave-one-source-out still see them, and the
README names them where their class's error is stated.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.offline_rows import is_trtllm_bench  # noqa: E402
from bench.reference_serving import (in_model_tokens, routed_batch, serving_kv, serving_weights,  # noqa: E402
                                     serving_why_not)
from bench.reference_sources import INSTANCE_FOR, row_accelerator, row_architecture, sources  # noqa: E402
from planner.hardware.catalog import Catalog, bundled  # noqa: E402
from planner.hardware.units import compute_precision  # noqa: E402
from planner.physics.memory import kv_bytes_per_sequence, kv_shard_fraction  # noqa: E402
from planner.physics.performance import moe_weight_bytes_read  # noqa: E402


@dataclass(frozen=True)
class Ceiling:
    id: str
    source: str
    published_tokens_per_s: float
    ceiling_tokens_per_s: float

    @property
    def over(self) -> float:
        return self.published_tokens_per_s / self.ceiling_tokens_per_s


def ceiling_tokens_per_s(catalog: Catalog, row: dict) -> float:
    """The most output tokens/s a fixed batch of the row's requests can reach on its GPUs at its TP (above)."""
    row = in_model_tokens(row)
    arch, itype = row_architecture(row), catalog.instance(INSTANCE_FOR[row["accelerator"]])
    accel = row_accelerator(catalog, itype, row)
    weights, kv = serving_weights(row), serving_kv(row)
    batch, prompt, output, tp = row["concurrency"], row["prompt_tokens"], row["output_tokens"], row["tp"]
    bandwidth = accel.memory_bandwidth_gb_s * 1e9
    peak = accel.peak_flops(compute_precision(weights, accel.supports.fp4))
    flops_per_token = 2 * arch.matmul_params_per_token / tp
    weight_bytes = moe_weight_bytes_read(arch, weights, routed_batch(row, batch)) / tp
    seconds = batch * 2 * arch.prompt_matmul_params(prompt) / tp / peak  # the LM head on its last position only
    for step in range(output):
        kv_bytes = batch * kv_bytes_per_sequence(arch, prompt + step, kv) * kv_shard_fraction(arch, tp)
        seconds += max((weight_bytes + kv_bytes) / bandwidth, batch * flops_per_token / peak)
    return batch * output / seconds


def above_roof(catalog: Catalog) -> list[Ceiling]:
    """Every compared GPU serving row at a fixed batch whose published output tokens/s passes its ceiling."""
    out = []
    for source_id, data in sources().items():
        for r in data["rows"]:
            if ("prompt_tokens" not in r or serving_why_not(r) is not None or is_trtllm_bench(r)
                    or r["accelerator"] not in INSTANCE_FOR or not isinstance(r.get("tokens_per_s"), (int, float))):
                continue
            published = in_model_tokens(r)["tokens_per_s"]
            ceiling = ceiling_tokens_per_s(catalog, r)
            if published > ceiling:
                out.append(Ceiling(r["id"], source_id, published, ceiling))
    return out


def main() -> None:
    rows = above_roof(bundled())
    for c in rows:
        print(f"{c.id:<64} {c.source:<28} published {c.published_tokens_per_s:8.0f} tokens/s, ceiling "
              f"{c.ceiling_tokens_per_s:8.0f} (×{c.over:.2f})")
    print(f"{len(rows)} rows above their physical ceiling")


if __name__ == "__main__":
    main()
