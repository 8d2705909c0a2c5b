"""The published measurements of ../shared/docs/reference-public.md as data, and how the planner's
estimators predict each one. Used by bench/accuracy.py and by the tests."""

from __future__ import annotations

from dataclasses import dataclass

from planner.catalog import Catalog
from planner.memory import TrainingSetup, training_model_states
from planner.performance import TrainingLayout, decode_step, training_step
from planner.presets import presets


@dataclass(frozen=True)
class DecodeCase:
    """gpt-fast batch-1 decode on A100-80GB, prompt 5 tokens, 200 new (reference D5)."""
    id: str
    model: str
    tp: int
    precision: str
    measured: float  # tokens/s


@dataclass(frozen=True)
class TrainingCase:
    """A published training run; `measured` is MFU in percent."""
    id: str
    source: str
    model: str
    instance_type: str
    tp: int
    pp: int
    dp: int
    micro_batch: int
    global_batch: int  # sequences
    checkpointing: str
    zero: int
    measured: float


DECODE_CASES = [
    DecodeCase("P-34", "llama-2-7b", 1, "bf16", 104.9),
    DecodeCase("P-35", "llama-2-7b", 1, "int8", 155.58),
    DecodeCase("P-36", "llama-2-7b", 1, "int4", 196.80),
    DecodeCase("P-37", "llama-2-70b", 1, "int8", 19.13),
    DecodeCase("P-38", "llama-2-70b", 1, "int4", 25.25),
    DecodeCase("P-39/2", "llama-2-7b", 2, "bf16", 168.84),
    DecodeCase("P-39/4", "llama-2-7b", 4, "bf16", 254.02),
    DecodeCase("P-39/8", "llama-2-7b", 8, "bf16", 328.43),
    DecodeCase("P-40/2", "llama-2-70b", 2, "bf16", 21.32),
    DecodeCase("P-40/4", "llama-2-70b", 4, "bf16", 38.01),
    DecodeCase("P-40/8", "llama-2-70b", 8, "bf16", 62.50),
    DecodeCase("P-41/int8", "llama-2-70b", 8, "int8", 80.44),
    DecodeCase("P-41/int4", "llama-2-70b", 8, "int4", 90.77),
]

# Korthikanti et al. 2022 Tables 3-5 (selective recompute + sequence parallelism, A100-80GB, TP 8, no DP
# except T-27) and MosaicML llm-foundry benchmarks (FSDP FULL_SHARD ≈ ZeRO-3, seq 2048).
TRAINING_CASES = [
    TrainingCase("T-23", "Korthikanti", "gpt-22b", "p4de.24xlarge", 8, 1, 1, 4, 4, "selective", 1, 41.5),
    TrainingCase("T-24", "Korthikanti", "gpt-3-175b", "p4de.24xlarge", 8, 8, 1, 1, 64, "selective", 1, 51.4),
    TrainingCase("T-25", "Korthikanti", "mt-nlg-530b", "p4de.24xlarge", 8, 35, 1, 1, 280, "selective", 1, 56.0),
    TrainingCase("T-26", "Korthikanti", "gpt-1t", "p4de.24xlarge", 8, 64, 1, 1, 512, "selective", 1, 56.3),
    TrainingCase("T-27", "Korthikanti", "mt-nlg-530b", "p4de.24xlarge", 8, 35, 8, 1, 2240, "selective", 1, 54.2),
    TrainingCase("T-43", "MosaicML", "mpt-7b", "p5.48xlarge", 1, 1, 8, 6, 48, "none", 3, 46.44),
    TrainingCase("T-44", "MosaicML", "mpt-13b", "p5.48xlarge", 1, 1, 8, 2, 16, "none", 3, 39.79),
    TrainingCase("T-45", "MosaicML", "mpt-30b", "p5.48xlarge", 1, 1, 32, 14, 1344, "full", 3, 43.92),
    TrainingCase("T-46", "MosaicML", "mpt-70b", "p5.48xlarge", 1, 1, 64, 8, 2048, "full", 3, 42.57),
    TrainingCase("T-47", "MosaicML", "mpt-7b", "p4de.24xlarge", 1, 1, 8, 6, 96, "none", 3, 64.23),
    TrainingCase("T-48", "MosaicML", "mpt-13b", "p4de.24xlarge", 1, 1, 8, 2, 48, "none", 3, 59.57),
    TrainingCase("T-49", "MosaicML", "mpt-70b", "p4de.24xlarge", 1, 1, 64, 8, 2048, "full", 3, 53.33),
    TrainingCase("T-50", "MosaicML", "mpt-7b", "p4d.24xlarge", 1, 1, 8, 12, 384, "full", 3, 50.92),
]

DECODE_PROMPT_TOKENS, DECODE_NEW_TOKENS = 5, 200


def predict_decode(catalog: Catalog, case: DecodeCase) -> float:
    """Tokens/s at batch 1, at the mean context of the run."""
    step = decode_step(presets()[case.model], catalog.accelerator("A100-80GB"), case.precision, "bf16",
                       case.tp, 1, 1, DECODE_PROMPT_TOKENS + DECODE_NEW_TOKENS / 2)
    return 1 / step.seconds


def predict_training(catalog: Catalog, case: TrainingCase, seq: int = 2048) -> float:
    """MFU in percent for the published layout."""
    arch = presets()[case.model]
    itype = catalog.instance(case.instance_type)
    accel = catalog.accelerator(itype.accelerator)
    layout = TrainingLayout(case.tp, case.pp, case.dp, case.zero, case.micro_batch,
                            case.global_batch // (case.dp * case.micro_batch), case.checkpointing)
    setup = TrainingSetup("full", "bf16", "adamw", "auto", 16, seq)
    state = sum(training_model_states(arch, setup, case.tp, case.pp, case.dp, case.zero))
    estimate = training_step(arch, itype, accel, "bf16", "full", seq, layout, state, arch.params)
    return estimate.model_flops_utilization * 100
