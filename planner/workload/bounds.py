"""Physically plausible ranges for catalog figures. An overlay is read from the pull request, so a
figure outside what any shipping hardware could have (1e-300 GB/s, a price of 0, 10^9 GPUs per node)
is refused with the range named, instead of yielding 0 tokens/s, "$inf/year" or a search that never
ends. Each range is wide (an order of magnitude or more past today's largest part) so new hardware
fits; the sources are the largest parts shipping in 2025."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator


def _format(number: float) -> str:
    return f"{number:g}" if abs(number) < 1e6 or number != int(number) else str(int(number))


def bounded(low: float, high: float, unit: str = "", kind: type = float):
    """A float (or int) from `low` to `high` inclusive; the message names the range and the unit."""
    suffix = f" {unit}" if unit else ""

    def check(value):
        if not low <= value <= high:
            raise ValueError(f"must be from {_format(low)} to {_format(high)}{suffix} (got {_format(value)})")
        return value
    return Annotated[kind, AfterValidator(check)]


# Per-device memory: B300 and MI355X carry 288 GB of HBM3e; 2 TiB leaves room for several generations.
DEVICE_MEMORY_MIB = bounded(256, 2_097_152, "MiB")
# HBM bandwidth: B200 8 TB/s, MI355X 8 TB/s (datasheets); 100 TB/s is an order of magnitude past.
MEMORY_BANDWIDTH_GB_S = bounded(1, 100_000, "GB/s")
# Dense tensor peak: B300 fp4 15 PFLOP/s (NVIDIA Blackwell Ultra datasheet); 100 PFLOP/s ceiling.
TFLOPS = bounded(0.01, 100_000, "TFLOP/s")
# NVLink 5 is 1.8 TB/s per GPU; 20 TB/s ceiling.
INTRA_NODE_GB_S = bounded(1, 20_000, "GB/s")
# Trainium2 has 8 NeuronCores per chip (AWS Neuron docs, trainium2.rst).
NEURON_CORES = bounded(1, 64, kind=int)
# trn2.48xlarge has 16 chips, GB200 NVL72 72 GPUs in one NVLink domain.
ACCELERATORS_PER_NODE = bounded(1, 128, kind=int)
# u7in-32tb.224xlarge: 896 vCPUs and 32 TiB of memory (EC2 instance types, high memory).
VCPUS = bounded(1, 4096, kind=int)
NODE_MEMORY_GIB = bounded(0.5, 65_536, "GiB")
# p6e-gb200 has 28.8 Tbit/s of EFA; p5 has 32 network cards, and a GB200 NVL72 UltraServer planned as one
# node (18 instances of 4 cards each) has 72: 512 leaves room for larger scale-up domains.
INTER_NODE_GBPS = bounded(0, 100_000, "Gbit/s")
NETWORK_CARDS = bounded(1, 512, kind=int)
# The dearest EC2 type is under $500/h on demand (u7in-32tb); the cheapest spot prices are ~$0.001/h (1e-6 leaves test doubles room).
USD_PER_HOUR = bounded(0.000001, 10_000, "USD/h")
# A GB200 NVL72 rack sells for about $3M; $100M per node is far past any node.
CAPEX_USD = bounded(1, 100_000_000, "USD")
OPEX_USD_PER_YEAR = bounded(0, 100_000_000, "USD/year")
# Sustained tensor clock over the boost clock the datasheet peak is quoted at: a part that holds less
# (power-capped, air-cooled, the H100 NVL / 96 GB PCIe variants) runs proportionally fewer FLOP/s; a
# tenth of boost is far below any shipping part's base clock (H100 SXM: 1,590 of 1,980 MHz).
CLOCK_RATIO = bounded(0.1, 1.0)
# Share of a part's dense BF16 peak that a large square BF16 GEMM sustains (torch matmul, 4,096-10,240
# square): A100 0.85, H100 0.80, a half-rate GA102 tensor part (A10G) 0.99 (planner/physics/efficiency.py
# FITTED_PART_GEMM_SHARE). A twentieth is far below any part a GEMM library targets.
GEMM_SHARE = bounded(0.05, 1.0)
# Board power: B300 1,400 W (NVIDIA HGX B300 datasheet); 3,000 W leaves room for the next generation.
BOARD_POWER_W = bounded(10, 3_000, "W")
