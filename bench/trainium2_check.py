"""Could Trainium2 (NeuronCore-v3) carry constants of its own? The dense Trainium2 serving rows against a grid of
NeuronCore-v3-only shares, the Inferentia2/Trainium ones (NeuronCore-v2, fitted) left as they are.

    python bench/trainium2_check.py        # the best grid points (each source's median |error|, averaged), then the rows

Trainium2's rows are compared and never fitted (bench/calibrate.py EVALUATED_ONLY): read with the NeuronCore-v2
constants they are 27-55% off on optimum-neuron's one-chip runs and within 10% on NxD Inference's and vLLM's Neuron
plugin's. This asks whether four NeuronCore-v3 constants (the HBM stream's share, the prefill share, the NxD decode
attention share and one collective's latency) would place all three sources at once, in sample: if they cannot, a
leave-one-source-out fit of them cannot either. The grid replaces the constants inside planner.physics for parts whose
neuron_generation is NeuronCore-v3 only, for the length of the run.
"""

from __future__ import annotations

import itertools
import statistics
import sys
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.reference_cases import Row, all_rows  # noqa: E402
from planner.hardware.catalog import Accelerator, bundled  # noqa: E402
from planner.physics import collectives, efficiency, performance, prefill_compute  # noqa: E402

HBM_SHARES = (0.67, 0.8, 0.9, 0.95)
PREFILL_SHARES = (0.38, 0.5, 0.6)
NXD_ATTENTION_SHARES = (0.005, 0.0075, 0.01)
COLLECTIVE_LATENCIES_S = (85e-6, 60e-6, 40e-6, 20e-6)


def _v3(accel: Accelerator) -> bool:
    return accel.is_neuron and accel.neuron_generation == "NeuronCore-v3"


@contextmanager
def neuroncore_v3(hbm: float, prefill: float, nxd_attention: float, collective_s: float):
    """NeuronCore-v3 parts read these four constants; every other part reads the committed ones."""
    stream_share, attention, latency = efficiency.stream_share, efficiency.decode_attention_efficiency, \
        collectives.latency_s
    compute_s = prefill_compute.prefill_compute_s

    def prefill_s(arch, accel, precision, tp, tokens, linear_flops, attention_flops):
        if not _v3(accel):
            return compute_s(arch, accel, precision, tp, tokens, linear_flops, attention_flops)
        return (linear_flops + attention_flops) / tp / (accel.peak_flops("bf16") * prefill)

    with mock.patch.object(efficiency, "stream_share", lambda a: hbm if _v3(a) else stream_share(a)), \
            mock.patch.object(efficiency, "decode_attention_efficiency",
                              lambda a, optimum_nxd=False: (nxd_attention if optimum_nxd else
                                                            efficiency.NEURON_DECODE_ATTENTION_EFFICIENCY)
                              if _v3(a) else attention(a, optimum_nxd)), \
            mock.patch.object(collectives, "latency_s",
                              lambda ranks, accel=None: (collective_s if ranks > 1 else 0.0)
                              if accel is not None and _v3(accel) else latency(ranks, accel)), \
            mock.patch.object(performance, "prefill_compute_s", prefill_s):
        yield


def trainium2_rows() -> list[Row]:
    return [r for r in all_rows(bundled(), "neuron") if r.accelerator == "Trainium2" and not r.moe]


def source_balanced(rows: list[Row]) -> float:
    by_source: dict[str, list[float]] = {}
    for r in rows:
        by_source.setdefault(r.source, []).append(abs(r.error))
    return statistics.fmean(statistics.median(errors) for errors in by_source.values())


def main() -> None:
    scored = []
    for point in itertools.product(HBM_SHARES, PREFILL_SHARES, NXD_ATTENTION_SHARES, COLLECTIVE_LATENCIES_S):
        with neuroncore_v3(*point):
            rows = trainium2_rows()
        scored.append((source_balanced(rows), statistics.median(abs(r.error) for r in rows), point))
    scored.sort()
    print("source-balanced |error|, rows' median |error|: HBM share, prefill share, NxD attention share, collective s")
    for balanced, median, point in scored[:5]:
        print(f"  {balanced:6.1%} {median:6.1%}  {point}")
    with neuroncore_v3(*scored[0][2]):
        for r in trainium2_rows():
            print(f"  {r.id[:46]:46s} {r.metric:16s} {r.predicted:9.1f} {r.measured:9.1f} {r.error:+7.1%}")


if __name__ == "__main__":
    main()
