"""LoRA's dropout and adapted matrices in the training memory, and LoRA / QLoRA peaks as a band class of their own
(issue 25): LitGPT's config hub adapts q and v with dropout 0.05 for Llama and Mistral, every linear layer and the
head for Gemma, Phi-3 and TinyLlama; an adapter keeps its dropped input and the dropout's mask through the backward."""

from __future__ import annotations

import statistics

import pytest

from bench import reference_sources as rs
from bench.accuracy import band_classes, summary
from bench.reference_cases import Row
from planner.physics import bands
from planner.physics.lora_traffic import adapted_dims
from planner.physics.adapter_memory import adapter_dropout_bytes_per_layer
from planner.physics.memory import TrainingSetup, lora_params, training_memory
from planner.pipeline import plan_workload
from planner.report.tags import plan_tags, read_tags, required_memory
from planner.workload.errors import SpecError
from planner.workload.presets import presets
from tests.conftest import workload

NEW_ROWS = ("litgpt-a10g-gemma-2b-lora", "litgpt-a10g-gemma-2b-qlora", "litgpt-a10g-gemma-7b-qlora",
            "litgpt-a10g-gemma-2-2b-lora", "litgpt-a10g-gemma-2-2b-qlora", "litgpt-a10g-phi-3-lora",
            "litgpt-a10g-phi-3-qlora", "litgpt-a10g-tiny-llama-full", "litgpt-a10g-tiny-llama-lora",
            "litgpt-a10g-tiny-llama-qlora")


def test_query_and_value_adapters_by_hand():
    """Llama 2 7B: q and v read h = 4,096 each and write q + kv = 4,096 + 4,096."""
    llama = presets()["llama-2-7b"]
    assert adapted_dims(llama, "qv") == (8192, 8192)
    assert lora_params(llama, 32, "qv") == 32 * 16384 * 32


def test_dropout_keeps_a_dropped_copy_and_a_mask_per_dropout_by_hand():
    """2 bytes of dropped input + 1 byte of mask per input element, 1,024 tokens (micro-batch 2 × 512)."""
    llama = presets()["llama-2-7b"]  # h 4,096, q 4,096, f 11,008
    assert adapter_dropout_bytes_per_layer(512, 2, llama, 1, "qv", fused_qkv=True) == 3 * 1024 * 4096
    assert adapter_dropout_bytes_per_layer(512, 2, llama, 1, "qv", fused_qkv=False) == 3 * 1024 * 8192
    # PEFT: one dropout per matrix, q k v o gate up down; LitGPT: one for the fused q, k, v
    assert adapter_dropout_bytes_per_layer(512, 2, llama, 1, "all", fused_qkv=False) == 3 * 1024 * (5 * 4096 + 4096 + 11008)
    assert adapter_dropout_bytes_per_layer(512, 2, llama, 1, "all", fused_qkv=True) == 3 * 1024 * (3 * 4096 + 4096 + 11008)
    assert adapter_dropout_bytes_per_layer(512, 2, llama, 2, "qv", fused_qkv=True) == 3 * 1024 * 4096 / 2  # TP shards


def test_dropout_enters_every_layer_kept_and_the_recomputed_one_under_full_recompute():
    llama = presets()["llama-2-7b"]
    plain = TrainingSetup("lora", "bf16", "adamw", "auto", 32, 512, lora_targets="qv", lora_fused_qkv=True)
    dropped = TrainingSetup("lora", "bf16", "adamw", "auto", 32, 512, lora_targets="qv", lora_fused_qkv=True,
                            lora_dropout=0.05)
    per_layer = adapter_dropout_bytes_per_layer(512, 2, llama, 1, "qv", True)

    def activations(setup, checkpointing):
        return training_memory(llama, setup, 1, 1, 1, 0, 2, 4, checkpointing, True).activations

    assert activations(dropped, "none") - activations(plain, "none") == pytest.approx(32 * per_layer)
    assert activations(dropped, "full") - activations(plain, "full") == pytest.approx(per_layer)
    full = TrainingSetup("full", "bf16", "adamw", "auto", 32, 512, lora_dropout=0.05)  # no adapters, no dropout
    assert activations(full, "none") == activations(TrainingSetup("full", "bf16", "adamw", "auto", 32, 512), "none")


def _row(row_id: str, source: str = "litgpt-config-hub-a10g") -> dict:
    return next(r for r in rs.sources()[source]["rows"] if r["id"] == row_id)


@pytest.mark.parametrize("row_id, targets, dropout", [
    ("litgpt-a10g-llama-2-7b-lora", "qv", 0.05), ("litgpt-a10g-mistral-7b-qlora", "qv", 0.05),
    ("litgpt-a10g-gemma-2-9b-qlora", "all", 0.1), ("litgpt-a10g-gemma-2b-lora", "all", 0.1),
    ("litgpt-a10g-phi-3-qlora", "all", 0.05), ("litgpt-a10g-tiny-llama-lora", "all", 0.05)])
def test_litgpt_rows_adapt_what_their_configs_say(catalog, row_id, targets, dropout):
    """config_hub/finetune/<model>/{lora,qlora}.yaml @00af8b0: lora_query/key/value/projection/mlp/head, lora_dropout."""
    setup = rs.training_inputs(catalog, _row(row_id))["setup"]
    assert (setup.lora_targets, setup.lora_dropout, setup.lora_fused_qkv) == (targets, dropout, True)


def test_the_added_litgpt_rows_are_compared_in_their_classes(catalog):
    rows = {r.id: r for r in rs.memory_rows(catalog, Row)}
    assert set(NEW_ROWS) <= set(rows)
    assert not rows["litgpt-a10g-tiny-llama-full"].adapters and rows["litgpt-a10g-tiny-llama-lora"].adapters
    # published as torch.cuda.max_memory_allocated() / 1e9: Phi-3 mini's QLoRA peak 19.13 GB = 17.82 GiB
    assert rows["litgpt-a10g-phi-3-qlora"].measured == pytest.approx(19.13e9 / 2**30, abs=0.005)
    # the Gemma 7B LoRA that ran out of memory on one A10G does not fit the estimate either
    oom = _row("litgpt-a10g-gemma-7b-lora-oom")
    assert oom["oom"] and rs.peak_memory_bytes(catalog, {**oom, "peak_memory_gib": 0}) > 24 * 2**30 * 0.9


def test_litgpts_2023_resource_table_a_source_the_stack_was_not_read_on(catalog):
    """lit-gpt @8641822 on one A100-40GB (tutorials/resource-tables.md, Oct 2023; bitsandbytes 0.41.1, which keeps
    MatMul4Bit's input as 0.42.0 does): its LoRA peaks are 5-8% over the estimate, its QLoRA ones 6-7% under it, as
    they should be: the peak batch holds Alpaca's longest example (1,304 Llama 2 tokens) but the step before it, whose
    kept inputs the forward runs beside, is shorter. It measured both NF4 formats on each run: 0.30 GB (7B) and 0.59 GB
    (13B) between `bnb.nf4` and `bnb.nf4-dq`, the fp32 absmax per 64 weights the formula charges (0.047 B a weight).
    Its out-of-memory rows do not fit the estimate on a 40 GiB part either."""
    rows = {r.id: r for r in rs.memory_rows(catalog, Row) if r.source == "litgpt-resource-tables-2023-10"}
    assert len(rows) == 7
    lora = [r.error for r in rows.values() if " lora " in r.setup]
    qlora = [r.error for r in rows.values() if " qlora " in r.setup]
    assert len(lora) == 3 and all(-0.09 < e < -0.04 for e in lora)
    assert len(qlora) == 4 and all(0.05 < e < 0.08 for e in qlora)
    for single, double, params in (("12", "13", 6.5e9), ("17", "18", 12.7e9)):
        published = (rows[f"litgpt-rt-1gpu-{single}"].measured - rows[f"litgpt-rt-1gpu-{double}"].measured) * 2**30
        predicted = (rows[f"litgpt-rt-1gpu-{single}"].predicted - rows[f"litgpt-rt-1gpu-{double}"].predicted) * 2**30
        assert predicted == pytest.approx(published, rel=0.05) == pytest.approx(0.047 * params, rel=0.05)
    for oom_id in ("litgpt-rt-1gpu-15", "litgpt-rt-1gpu-19", "litgpt-rt-1gpu-20"):
        oom = _row(oom_id, "litgpt-resource-tables-2023-10")
        assert oom["oom"] and rs.peak_memory_bytes(catalog, {**oom, "peak_memory_gib": 0}) > 40 * 2**30 * 0.9


def test_adapter_peaks_meet_the_memory_target_as_their_own_class(catalog):
    """LitGPT's config-hub QLoRA peaks are within 6% but for the Gemma ones (4-13% short), its LoRA peaks within 7% but
    for Gemma's (14-15% short); its 2023 resource table's within 8%; torchtune's two adapter rows are 23% and 44% over.
    The class (bench/accuracy.py ADAPTER_CLASS: 31 peaks, 3 sources) meets the target: median abs. error 4.8%, signed
    -2.8% (13.0% and -10.7% on the first 24 before the single quantization and the previous step's kept inputs of
    LitGPT's stack were counted). Full fine-tunes are a class of their own; an adapter run's band is the adapter
    percentiles joined with theirs."""
    rows = rs.memory_rows(catalog, Row)
    stats = summary(rows)
    adapters = stats[("lora", "training peak memory")]
    assert adapters["rows"] == 31 and adapters["sources"] == 3 and stats[("gpu", "training peak memory")]["rows"] == 10
    assert adapters["median_abs"] < 0.05 and abs(adapters["signed_median"]) < 0.05
    qlora = [r for r in rows if r.source == "litgpt-config-hub-a10g" and "qlora" in r.setup]
    assert len(qlora) == 12
    assert all(abs(r.error) < 0.06 for r in qlora if "gemma" not in r.id)
    assert all(-0.13 < r.error < -0.03 for r in qlora if "gemma" in r.id)
    assert statistics.median(abs(r.error) for r in rows if not r.adapters) < 0.10
    classes = band_classes(rows)
    assert "lora/training peak memory" in classes and classes["lora/training peak memory"]["joined_with"] == \
        "gpu/training peak memory"
    assert classes["lora/training peak memory"]["q90"] >= classes["gpu/training peak memory"]["q90"]


def test_a_lora_plan_checks_its_memory_at_the_adapter_band():
    gpu = bands.ratio_quantiles("gpu", bands.MEMORY_METRIC)
    lora = bands.bands()["classes"]["lora/training peak memory"]
    assert bands.memory_fit_factor("gpu", "likely", adapters=True) == max(1.0, lora["q90"])
    assert bands.memory_fit_factor("gpu", "likely") == max(1.0, gpu[1])
    assert bands.memory_fit_factor("gpu", "expected", adapters=True) == 1.0
    assert bands.memory_band("gpu", 100.0, adapters=True) == {"required_bytes": [100.0 * lora["q10"], 100.0 * lora["q90"]]}
    assert bands.memory_fit_factor("neuron", "likely", adapters=True) == bands.memory_fit_factor("neuron", "likely")


def _qlora_fields(dropout: float | None = None) -> dict:
    training = {"method": "qlora", "tokens": 2e7, "sequence_length": 2048, "global_batch_tokens": 16 * 2048}
    if dropout is not None:
        training["lora_dropout"] = dropout
    return {"kind": "fine-tuning", "model": {"preset": "llama-3.1-8b"}, "training": training,
            "layout": {"nodes": 1, "micro_batch": 1}, "constraints": {"instance_types": ["g6e.xlarge"]}}


def _qlora(dropout: float | None = None):
    return workload(**_qlora_fields(dropout))


def test_a_plan_counts_the_dropout_it_is_told_and_the_gate_recounts_it(catalog):
    plain, dropped = _qlora(), _qlora(0.1)
    a, b = plan_workload(plain, catalog), plan_workload(dropped, catalog)
    assert (a.layout.micro_batch, a.layout.activation_checkpointing) == (b.layout.micro_batch, b.layout.activation_checkpointing)
    arch = presets()["llama-3.1-8b"]
    ckpt = b.layout.activation_checkpointing
    extra = adapter_dropout_bytes_per_layer(2048, b.layout.micro_batch, arch, 1, "all", False) * (1 if ckpt == "full" else 32)
    assert b.memory.per_device_bytes["activations"] - a.memory.per_device_bytes["activations"] == pytest.approx(extra)
    assert b.memory.band["required_bytes"][1] == pytest.approx(
        b.memory.required_per_device_bytes * bands.bands()["classes"]["lora/training peak memory"]["q90"])
    tags = plan_tags(b, dropped)
    assert "drop=0.1" in tags["gpuplan:training"].split()
    assert "drop=" not in plan_tags(a, plain)["gpuplan:training"]
    assert required_memory(read_tags(tags), catalog, b.choice.instance_type).total == pytest.approx(
        b.memory.required_per_device_bytes)


@pytest.mark.parametrize("value", [1.0, -0.1, "a lot"])
def test_a_dropout_outside_zero_to_one_is_refused_by_name(value):
    with pytest.raises(SpecError, match="training.lora_dropout"):
        _qlora(value)


def test_a_tagged_dropout_outside_zero_to_one_is_refused_by_the_gate(catalog):
    from planner.report.tags import DIGEST, TagError, digest

    plan = plan_workload(_qlora(0.1), catalog)
    tags = plan_tags(plan, _qlora(0.1))
    tags["gpuplan:training"] = tags["gpuplan:training"].replace("drop=0.1", "drop=1.5")
    tags[DIGEST] = digest(tags)  # sealed again, as a hand edit could not be: the range check itself answers
    with pytest.raises(TagError, match="drop='1.5' must be at least 0 and below 1"):
        read_tags(tags)


def test_a_plan_adapts_the_matrices_it_is_told(catalog):
    """`training.lora_targets: qv` trains q and v only: 2·h in, q + kv out per layer (Llama 3.1 8B: 8,192 and 5,120),
    where `all` trains seven matrices; the adapters' states, their checkpoint and the gate's recount follow."""
    arch = presets()["llama-3.1-8b"]
    everything, qv = _qlora(), workload(**{**_qlora_fields(), "training": {**_qlora_fields()["training"], "lora_targets": "qv"}})
    a, b = plan_workload(everything, catalog), plan_workload(qv, catalog)
    ratio = lora_params(arch, 16, "qv") / lora_params(arch, 16, "all")
    assert ratio == pytest.approx((8192 + 5120) / sum(adapted_dims(arch, "all")))
    assert b.memory.per_device_bytes["optimizer"] == pytest.approx(a.memory.per_device_bytes["optimizer"] * ratio)
    assert b.storage.checkpoint_bytes == pytest.approx(a.storage.checkpoint_bytes * ratio)  # adapters and their states
    tags = plan_tags(b, qv)
    assert "tgt=qv" in tags["gpuplan:training"].split() and "tgt=" not in plan_tags(a, everything)["gpuplan:training"]
    assert required_memory(read_tags(tags), catalog, b.choice.instance_type).total == pytest.approx(
        b.memory.required_per_device_bytes)
    with pytest.raises(SpecError, match="training.lora_targets"):
        workload(**{**_qlora_fields(), "training": {**_qlora_fields()["training"], "lora_targets": "mlp"}})


def test_adapters_keep_their_states_in_bf16_where_every_state_is():
    """PEFT trains adapters in fp32 (4 + 4 + 8 bytes a parameter with AdamW); LitGPT's bf16-true and torchtune keep
    every state in bf16, the adapters' too (2 + 2 + 4)."""
    from dataclasses import replace

    from planner.physics.memory import training_model_states
    llama = presets()["llama-2-7b"]
    peft = TrainingSetup("lora", "bf16", "adamw", "auto", 32, 512, lora_targets="qv")
    adapters = lora_params(llama, 32, "qv")
    w, g, o = training_model_states(llama, peft, 1, 1, 1, 0)
    bw, bg, bo = training_model_states(llama, replace(peft, states="bf16"), 1, 1, 1, 0)
    assert (g, o) == (adapters * 4.0, adapters * 8.0) and (bg, bo) == (adapters * 2.0, adapters * 4.0)
    assert w - bw == pytest.approx(adapters * 2.0)


def test_the_spec_offers_exactly_the_targets_the_physics_knows():
    """planner/workload may not import planner/physics (the stages import one way), so the spec's Literal restates
    lora_traffic.LORA_TARGETS: they must stay one list."""
    from typing import get_args

    from planner.physics.lora_traffic import LORA_TARGETS
    from planner.workload.sections import Training
    assert get_args(Training.model_fields["lora_targets"].annotation) == LORA_TARGETS
