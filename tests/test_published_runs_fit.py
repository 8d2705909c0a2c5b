"""No published run is refused (issue 25): every training and serving row of the reference data,
pinned to its published hardware and layout, fits the device memory the planner allows
(constraints.memory_headroom's default), as its code base keeps memory (bench/reference_sources.py)."""

from __future__ import annotations

import pytest

from bench import reference_serving, reference_sources as rs
from planner.hardware.catalog import bundled
from planner.physics.memory import inference_memory
from planner.workload.spec import Constraints

CATALOG = bundled()
HEADROOM = Constraints.model_fields["memory_headroom"].default


def _training_rows() -> list[dict]:
    """Every training row the planner can pin (ran, and its hardware and layout are stated), with what
    the source leaves unstated (recompute, a pipeline run's micro-batch) as the search would choose."""
    return [r for data in rs.sources().values() for r in data["rows"]
            if "seq" in r and not r.get("oom") and any(rs.why_not(v, CATALOG) is None for v in rs.as_planned(r))]


def _serving_rows() -> list[dict]:
    return [r for data in rs.sources().values() for r in data["rows"]
            if "prompt_tokens" in r and reference_serving.serving_why_not(r) is None]


def test_the_reference_data_has_rows_to_check():
    assert len(_training_rows()) >= 70 and len(_serving_rows()) >= 100


@pytest.mark.parametrize("row", _training_rows(), ids=lambda r: r["id"])
def test_published_training_run_fits(row):
    variants = [v for v in rs.as_planned(row) if rs.why_not(v, CATALOG) is None]
    usable = rs.memory_inputs(CATALOG, variants[0])["accel"].memory_bytes * (1 - HEADROOM)
    assert min(rs.peak_memory_bytes(CATALOG, v) for v in variants) <= usable


def test_the_16384_gpu_405b_run_fits_once_its_unstated_choices_are_the_planners():
    """Llama 3 405B on 16,384 H100, TP 8 × PP 16 × DP 128, 2,048 sequences of 8,192 (issue 25: refused).
    At micro-batch 1 under 1F1B the first stage holds 16 micro-batches × 8 layers in flight: with
    Korthikanti's selective set that is 77.5 GiB, past 72 GiB usable; with full recompute it fits."""
    row = next(r for r in rs.sources()["meta-llama3-herd-405b"]["rows"] if r["id"] == "llama3-405b-16384gpu")
    need = {(v["checkpointing"], v["micro_batch"]): rs.peak_memory_bytes(CATALOG, v) / 2**30 for v in rs.as_planned(row)}
    assert need[("selective", 1)] == pytest.approx(77.5, abs=0.1)
    assert need[("full", 1)] == pytest.approx(14.0, abs=0.1)
    assert min(need.values()) * 2**30 <= CATALOG.accelerator("H100-80GB").memory_bytes * (1 - HEADROOM)


@pytest.mark.parametrize("row", _serving_rows(), ids=lambda r: r["id"])
def test_published_serving_replica_holds_a_request(row):
    """A replica at the published TP holds its weights and one request's whole context (the planner
    then sizes how many run at once, fits_one_sequence in planner/search/inference.py)."""
    arch = rs.row_architecture(row)
    if row["accelerator"] in rs.NEURON_INSTANCE_FOR:  # TP counts logical NeuronCores, as the bench reads it
        itype, accel = CATALOG.sharded(CATALOG.instance(rs.NEURON_INSTANCE_FOR[row["accelerator"]]))
    else:
        itype = CATALOG.instance(rs.INSTANCE_FOR[row["accelerator"]])
        accel = CATALOG.accelerator(itype.accelerator)
    kv = "fp8" if str(row.get("kv_precision")).startswith("fp8") else "bf16"
    need = inference_memory(arch, reference_serving.serving_weights(row), kv, row["tp"], 1, 1,
                            row["prompt_tokens"] + row["output_tokens"], accel.is_neuron).total
    assert need <= accel.memory_bytes * (1 - HEADROOM)


def test_the_quoted_fsdp_and_megatron_runs_fit_as_their_code_bases_keep_memory():
    """Refused before: 34B FSDP on 128 A100 (fms-fsdp's block-level "selective" checkpointing) and
    GPT-3 175B at TP 4 × PP 8 on H100 (NeMo's distributed optimizer) needed 114.8 and 114.3 GiB."""
    rows = {r["id"]: r for r in _training_rows()}
    fms = rs.peak_memory_bytes(CATALOG, rows["fms-fsdp-34b-a100-128gpu"]) / 2**30
    nemo = rs.peak_memory_bytes(CATALOG, rows["dgxc-v2411-gpt3-175b-bf16-128gpu"]) / 2**30
    assert fms == pytest.approx(21.4, abs=0.1)
    assert nemo == pytest.approx(68.7, abs=0.1)
