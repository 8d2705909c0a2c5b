"""Storage for a training run: the read throughput the input pipeline needs, the write throughput a
checkpoint needs, and whether S3 streaming carries both or FSx for Lustre must be sized for them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources

from planner.physics.memory import lora_params, optimizer_state_bytes
from planner.workload.presets import Architecture
from planner.hardware.units import GIB
from planner.workload.yamlsafe import load_text

# Bytes per token of a dataset on disk. Pre-tokenized (Megatron .bin / numpy memmap) stores uint16
# ids when the vocabulary fits in 16 bits and int32 otherwise (Megatron-LM indexed_dataset
# __best_fitting_dtype). Raw text: ~4 characters per token for English with BPE tokenizers (OpenAI
# tokenizer guide: "one token ≈ 4 characters"), 1 byte per character in UTF-8.
TEXT_BYTES_PER_TOKEN = 4.0

# S3 streaming: about 85-90 MB/s per GET or PUT connection (Amazon S3 performance guidelines,
# "Horizontal scaling and request parallelization": one request per 85-90 MB/s of desired throughput).
# A data loader or checkpoint writer keeping this many requests in flight per node (the guidelines'
# example of ~15 for 10 Gb/s; torch DataLoader workers or s3torchconnector's default concurrency).
S3_MB_S_PER_REQUEST = 85.0
S3_REQUESTS_PER_NODE = 16
S3_MB_S_PER_NODE = S3_MB_S_PER_REQUEST * S3_REQUESTS_PER_NODE

# FSx for Lustre PERSISTENT_2 capacity: 1,200 GiB, then steps of 2,400 GiB (FSx API CreateFileSystem,
# StorageCapacity); per-unit storage throughput tiers 125, 250, 500, 1000 MB/s per TiB.
FSX_FIRST_GIB, FSX_STEP_GIB = 1200, 2400
FSX_DEPLOYMENT_TYPE = "PERSISTENT_2"
# The largest file system the plan will size: FSx for Lustre's default per-account SSD storage quota,
# 100,800 GiB (the same bound as SageMaker's FSxLustreConfig SizeInGiB, 1,200-100,800; AWS API
# reference, checked 2026-02). A run that needs more is refused, not priced as a mistake.
FSX_MAX_GIB = 100_800
CHECKPOINTS_KEPT = 2  # the last good checkpoint and the one being written


@dataclass(frozen=True)
class FsxSizing:
    deployment_type: str
    per_unit_storage_throughput: int  # MB/s per TiB
    storage_capacity_gib: int
    throughput_mb_s: float
    usd_per_month: float
    price_estimated: bool


@dataclass(frozen=True)
class StoragePlan:
    dataset_bytes: float
    checkpoint_bytes: float
    checkpoint_interval_s: float
    read_mb_s: float  # the whole cluster, steady state
    write_mb_s: float  # to write one checkpoint in max_checkpoint_share of an interval
    recommendation: str  # "s3" or "fsx"
    reason: str
    fsx: FsxSizing | None
    checkpoint_write_s: float  # at the storage the plan provisions; reading it back takes as long


@cache
def _prices() -> dict:
    return load_text(resources.files("planner.data").joinpath("storage.yaml").read_text(), bundled=True)


def dataset_bytes_per_token(fmt: str, vocab_size: int) -> float:
    if fmt == "text":
        return TEXT_BYTES_PER_TOKEN
    return 2.0 if vocab_size < 2**16 else 4.0


def checkpoint_bytes(arch: Architecture, method: str, precision: str, optimizer: str, lora_rank: int,
                     lora_targets: str = "all") -> float:
    """What a resumable checkpoint holds: the trained weights (16-bit, fp32 for fp32 training) and the
    optimizer states (fp32 master copy and moments, memory.optimizer_state_bytes). Frozen LoRA/QLoRA
    base weights are not saved; gradients are not part of a checkpoint."""
    trained = arch.params if method == "full" else lora_params(arch, lora_rank, lora_targets)
    weight_b = 4.0 if precision == "fp32" else 2.0
    return trained * (weight_b + optimizer_state_bytes(optimizer, precision != "fp32"))


def _fsx_capacity_gib(needed_gib: float) -> int:
    if needed_gib <= FSX_FIRST_GIB:
        return FSX_FIRST_GIB
    return int(math.ceil(needed_gib / FSX_STEP_GIB) * FSX_STEP_GIB)


def size_fsx(region: str, needed_mb_s: float, needed_bytes: float) -> FsxSizing:
    """The cheapest PERSISTENT_2 file system that holds `needed_bytes` and delivers `needed_mb_s`."""
    table = _prices()["fsx_lustre_persistent_2"]
    rates = table.get(region) or table["us-east-1"]
    best: FsxSizing | None = None
    for tier, usd_per_gb_month in sorted(rates.items()):
        gib = _fsx_capacity_gib(max(needed_bytes / GIB, needed_mb_s / tier * 1024))
        sizing = FsxSizing(FSX_DEPLOYMENT_TYPE, int(tier), gib, gib / 1024 * tier, gib * usd_per_gb_month,
                           region not in table)
        if best is None or sizing.usd_per_month < best.usd_per_month:
            best = sizing
    return best


def storage_rates(arch: Architecture, *, method: str, precision: str, optimizer: str, lora_rank: int,
                  tokens: float, tokens_per_s: float, nodes: int, dataset_format: str, checkpoint_interval_s: float,
                  max_checkpoint_share: float, lora_targets: str = "all") -> tuple[float, float, float, float, float]:
    """(dataset bytes, checkpoint bytes, read MB/s, write MB/s, MB/s per node): a run whose per-node share
    is within S3_MB_S_PER_NODE streams from S3, and then no file system needs sizing (the search asks this
    of every layout it cannot pick, plan_storage of those it prices)."""
    per_token = dataset_bytes_per_token(dataset_format, arch.vocab_size)
    dataset = tokens * per_token
    ckpt = checkpoint_bytes(arch, method, precision, optimizer, lora_rank, lora_targets)
    read_mb_s, write_mb_s = tokens_per_s * per_token / 1e6, checkpoint_write_mb_s(ckpt, checkpoint_interval_s,
                                                                                  max_checkpoint_share)
    return dataset, ckpt, read_mb_s, write_mb_s, per_node_mb_s(per_token, write_mb_s, tokens_per_s, nodes)


def checkpoint_write_mb_s(checkpoint_b: float, checkpoint_interval_s: float, max_checkpoint_share: float) -> float:
    """The write rate that keeps checkpointing within its share of the run."""
    return checkpoint_b / (max_checkpoint_share * checkpoint_interval_s) / 1e6


def per_node_mb_s(dataset_bytes_per_token_: float, write_mb_s: float, tokens_per_s: float, nodes: int) -> float:
    """Each node's share of the larger of the input read and the checkpoint write (storage_rates); the search
    asks it of thousands of layouts of one run, whose other figures it computes once."""
    return max(tokens_per_s * dataset_bytes_per_token_ / 1e6, write_mb_s) / nodes


def plan_storage(arch: Architecture, *, method: str, precision: str, optimizer: str, lora_rank: int,
                 tokens: float, tokens_per_s: float, nodes: int, dataset_format: str,
                 checkpoint_interval_s: float, max_checkpoint_share: float, region: str,
                 lora_targets: str = "all") -> StoragePlan:
    """Throughputs from the run, then S3 if every node's share fits S3 streaming, else FSx for Lustre."""
    dataset, ckpt, read_mb_s, write_mb_s, per_node = storage_rates(
        arch, method=method, precision=precision, optimizer=optimizer, lora_rank=lora_rank, tokens=tokens,
        tokens_per_s=tokens_per_s, nodes=nodes, dataset_format=dataset_format,
        checkpoint_interval_s=checkpoint_interval_s, max_checkpoint_share=max_checkpoint_share, lora_targets=lora_targets)
    fsx = size_fsx(region, max(read_mb_s, write_mb_s), dataset + CHECKPOINTS_KEPT * ckpt)
    if per_node <= S3_MB_S_PER_NODE:
        bandwidth = S3_MB_S_PER_NODE * nodes
        reason = (f"S3 streaming is enough: {per_node:,.0f} MB/s per node is within {S3_MB_S_PER_NODE:,.0f} MB/s "
                  f"({S3_REQUESTS_PER_NODE} requests × {S3_MB_S_PER_REQUEST:g} MB/s); no FSx for Lustre")
        return StoragePlan(dataset, ckpt, checkpoint_interval_s, read_mb_s, write_mb_s, "s3", reason, fsx,
                           ckpt / (bandwidth * 1e6))
    what = "checkpoint writes" if write_mb_s >= read_mb_s else "the input pipeline"
    reason = (f"{what} need {per_node:,.0f} MB/s per node, over S3 streaming's {S3_MB_S_PER_NODE:,.0f} MB/s: "
              f"FSx for Lustre {fsx.deployment_type} {fsx.storage_capacity_gib:,} GiB at "
              f"{fsx.per_unit_storage_throughput} MB/s/TiB ({fsx.throughput_mb_s:,.0f} MB/s)")
    return StoragePlan(dataset, ckpt, checkpoint_interval_s, read_mb_s, write_mb_s, "fsx", reason, fsx,
                       ckpt / (fsx.throughput_mb_s * 1e6))


def storage_refusal(plan: StoragePlan) -> str | None:
    """Why the run's storage cannot be provisioned (an FSx for Lustre beyond FSX_MAX_GIB), if it cannot."""
    if plan.recommendation != "fsx" or plan.fsx is None or plan.fsx.storage_capacity_gib <= FSX_MAX_GIB:
        return None
    return (f"storage: reading {plan.read_mb_s:,.0f} MB/s and writing a {plan.checkpoint_bytes / GIB:,.0f} GiB "
            f"checkpoint every {plan.checkpoint_interval_s / 60:g} min ({plan.write_mb_s:,.0f} MB/s) needs FSx for "
            f"Lustre of {plan.fsx.storage_capacity_gib:,} GiB, above the {FSX_MAX_GIB:,} GiB default quota; raise "
            "training.checkpoint_interval_minutes or training.max_checkpoint_share")


def storage_source() -> tuple[str, str]:
    data = _prices()
    return data["source"], str(data["date"])


