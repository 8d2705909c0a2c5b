"""Hopper's prefill share against the first tokens of the sources that never entered the serving fit.

    python bench/hopper_prefill_check.py    # per source and precision, Hopper first tokens at each candidate

No source in the serving fit but NIM's five 70B runs has a Hopper first token (LMDeploy's are A100's, philschmid's
A10G's). Until the eighth session PREFILL_EFFICIENCY_BY_GENERATION's Hopper share was the training fit's of b3eef24
(0.47) with FP8 prefill at 1.14 times it, and the sources kept out of the serving fit (bench/calibrate.py
EVALUATED_ONLY_SOURCES) read its 16-bit first tokens 20-27% slow and its FP8 ones about right. The share is now fitted
on Hopper first tokens (bench/calibrate.py, group "prefill"), FP8 at the measured 0.90 of it (one H100's GEMMs:
bench/kernel_check.py). This reads each candidate pair (the 16-bit share; Hopper's FP8 factor) on every GPU row, and
prints the Hopper first tokens by source, precision and prompt (long: 1,000 tokens or more), the first-token and
tokens/s classes as bench/accuracy.py groups them (the sweep and NIM's one-client runs apart), and B200's tokens/s.
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.accuracy import SOURCES_APART  # noqa: E402
from bench.calibrate import PREFILL_PARTS  # noqa: E402
from bench.reference_cases import all_rows  # noqa: E402
from planner.hardware.catalog import bundled  # noqa: E402
from planner.physics import efficiency  # noqa: E402

CANDIDATES = ((0.47, 1.14), (0.55, 0.90), (0.60, 0.90), (0.65, 0.90), (0.70, 0.90))


def prompt_tokens(setup: str) -> int:
    """A row's prompt length, read from its setup string ("... 2048/128 ...")."""
    lengths = [part for part in setup.split() if "/" in part and part.split("/")[0].isdigit()]
    return int(lengths[0].split("/")[0]) if lengths else 0


def read(hopper_share: float, hopper_fp8_factor: float) -> dict[tuple[str, ...], list[float]]:
    """Every GPU row's error with Hopper's prefill at this share and FP8 factor, grouped."""
    groups: dict[tuple[str, ...], list[float]] = defaultdict(list)
    with mock.patch.dict(efficiency.PREFILL_EFFICIENCY_BY_GENERATION, {"9": hopper_share}), \
            mock.patch.dict(efficiency.PREFILL_FP8_GEMM_EFFICIENCY_FACTOR, {"9": hopper_fp8_factor}):
        for r in all_rows(bundled(), "gpu"):
            apart = SOURCES_APART.get(r.source)
            if r.metric == "TTFT" and r.accelerator in PREFILL_PARTS:
                length = "long" if prompt_tokens(r.setup) >= 1000 else "short"
                groups[(r.source, "fp8" if " fp8 " in r.setup else "16-bit", length)].append(r.error)
            if r.metric in ("TTFT", "serving tokens/s"):
                groups[("class", apart or "gpu", r.metric)].append(abs(r.error))
            if r.metric == "serving tokens/s" and r.accelerator == "B200":
                groups[("class", "b200", r.metric)].append(abs(r.error))
    return groups


def main() -> None:
    for share, factor in CANDIDATES:
        print(f"Hopper prefill share {share}, Hopper FP8 factor {factor}:")
        for key, errors in sorted(read(share, factor).items()):
            median = statistics.median(errors)
            figure = f"median |error| {median:6.1%}" if key[0] == "class" else f"signed median {median:+7.1%}"
            print(f"  {' / '.join(key):70s} {len(errors):5d} rows  {figure}")


if __name__ == "__main__":
    main()
