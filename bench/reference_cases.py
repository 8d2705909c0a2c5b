"""The published measurements of bench/data/reference.yaml and bench/data/reference/ (one file per
source, read by bench/reference_sources.py and bench/reference_serving.py), and how the planner's
estimators predict each one. Used by bench/accuracy.py, bench/calibrate.py and the tests."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path


from bench import reference_serving, reference_sources
from planner.physics import efficiency
from planner.hardware.catalog import Catalog
from planner.physics.memory import TrainingSetup, training_model_states
from planner.physics.neuron_serving import decode_context_tokens
from planner.physics.performance import decode_step, prefill_s, serving_estimate
from planner.workload.presets import presets
from planner.workload.yamlsafe import load_text
from planner.physics.training_time import TrainingLayout, model_flops_per_token, training_step, training_work

# The published part on each instance type the reference sources name (reference.yaml's serving rows name the instance
# only), so every row states its part as the sourced rows do.
PART_ON = {instance: part for part, instance in reference_sources.INSTANCE_FOR.items()}

DATA = Path(__file__).resolve().parent / "data" / "reference.yaml"
GPT_FAST_CONTEXT = 5 + 200 / 2  # prompt of 5 tokens, 200 generated: the mean context of a step


@dataclass(frozen=True)
class Row:
    """One compared figure: which case, which metric, from which source, predicted and measured."""
    id: str
    metric: str  # training TFLOP/s | serving tokens/s | TTFT | ITL
    source: str
    setup: str
    predicted: float
    measured: float
    platform: str = "gpu"  # gpu | neuron: fitted on separate constants, reported separately
    accelerator: str = ""  # the published part, where a source names it (accuracy reports B200 and Trainium2 apart)
    moe: bool = False  # a mixture-of-experts model (accuracy reports MoE rows as their own class too)
    adapters: bool = False  # a LoRA or QLoRA run's peak memory: a class of its own, not the platform's (accuracy)

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


@cache
def reference() -> dict:
    return load_text(DATA.read_text(), bundled=True)


def _decode_rows(catalog: Catalog) -> list[Row]:
    a100 = catalog.accelerator("A100-80GB")
    rows = []
    for c in reference()["decode"]:
        step = decode_step(presets()[c["model"]], a100, c["precision"], "bf16", c["tp"], 1, 1, GPT_FAST_CONTEXT)
        rows.append(Row(c["id"], "serving tokens/s", c["source"], f"{c['model']} TP{c['tp']} {c['precision']} A100",
                        1 / step.seconds, c["tokens_per_s"]))
    return rows


def _serving_rows(catalog: Catalog) -> list[Row]:
    rows = []
    for c in reference()["serving"]:
        itype = catalog.instance(c["instance_type"])
        est = serving_estimate(presets()[c["model"]], catalog.accelerator(itype.accelerator), c["precision"],
                               c["kv_precision"], c["tp"], 1, c["concurrency"], c["prompt_tokens"], c["output_tokens"],
                               itype)
        setup = f"{c['model']} TP{c['tp']} {c['precision']} c={c['concurrency']} {c['prompt_tokens']}/{c['output_tokens']}"
        part = PART_ON.get(c["instance_type"], "")
        figures = (("serving tokens/s", est.output_tokens_per_s_per_replica, "tokens_per_s"),
                   ("TTFT", est.time_to_first_token_s * 1e3, "ttft_ms"),
                   ("ITL", est.inter_token_latency_s * 1e3, "itl_ms"))
        rows += [Row(c["id"], metric, c["source"], setup, predicted, c[field], accelerator=part)
                 for metric, predicted, field in figures]
    return rows


def predict_training(catalog: Catalog, c: dict):
    arch = presets()[c["model"]]
    itype = catalog.instance(c["instance_type"])
    accel = catalog.accelerator(itype.accelerator)
    setup = TrainingSetup("full", c["precision"], "adamw", "auto", 16, c["seq"], kernels=reference_sources.kernels(c))
    microbatches = c["global_batch"] // (c["dp"] * c["micro_batch"])
    state = sum(training_model_states(arch, setup, c["tp"], c["pp"], c["dp"], c["zero"]))
    return max((training_step(arch, itype, accel, c["precision"], c["seq"],
                              TrainingLayout(c["tp"], c["pp"], c["dp"], c["zero"], c["micro_batch"], microbatches,
                                             c["checkpointing"], schedule, v), state, training_work(arch, setup))
                for schedule, v in reference_sources.stated_schedules(c, arch.layers)), key=lambda e: e.tokens_per_s)


def _training_rows(catalog: Catalog) -> list[Row]:
    rows = []
    for c in reference()["training"]:
        arch = presets()[c["model"]]
        accel = catalog.accelerator(catalog.instance(c["instance_type"]).accelerator)
        estimate = predict_training(catalog, c)
        if "mfu" in c:
            measured = c["mfu"] / 100 * accel.peak_flops(c["precision"]) / 1e12
        else:
            measured = c["tokens_per_s_per_gpu"] * model_flops_per_token(arch, c["seq"]) / 1e12
        setup = f"{c['model']} {c['instance_type']} {c['precision']} TP{c['tp']} PP{c['pp']} DP{c['dp']} ZeRO-{c['zero']}"
        rows.append(Row(c["id"], "training TFLOP/s", c["source"], setup, estimate.achieved_tflops_per_device, measured))
    return rows


def _neuron_serving_rows(catalog: Catalog) -> list[Row]:
    """transformers-neuronx static batches: all `batch` prompts are encoded together (TTFT), then the
    batch decodes in lock-step (TPOT), each step over its token-generation bucket of the compiled
    n_positions (planner/physics/neuron_serving.decode_context_tokens); the table's throughput is
    batch·output over the request."""
    rows = []
    for c in reference()["neuron_serving"]:
        arch = presets()[c["model"]]
        _, core = catalog.sharded(catalog.instance(c["instance_type"]))
        b, prompt, out = c["batch"], c["prompt_tokens"], c["output_tokens"]
        itl = decode_step(arch, core, c["precision"], "bf16", c["tp"], 1, b,
                          decode_context_tokens(prompt, out, c["n_positions"])).seconds
        ttft = efficiency.request_overhead_s(core) + prefill_s(arch, core, c["precision"], c["tp"], 1, prompt, prompts=b)
        setup = f"{c['model']} {c['instance_type']} TP{c['tp']} {c['precision']} b={b} {prompt}/{out}"
        part = catalog.instance(c["instance_type"]).accelerator
        figures = (("serving tokens/s", b * out / (ttft + (out - 1) * itl), "tokens_per_s"), ("TTFT", ttft * 1e3, "ttft_ms"),
                   ("ITL", itl * 1e3, "itl_ms"))
        rows += [Row(c["id"], metric, c["source"], setup, predicted, c[field], "neuron", part)
                 for metric, predicted, field in figures if field in c]  # a source may state tokens/s alone
    return rows


def predict_neuron_training(catalog: Catalog, c: dict):
    arch = presets()[c["model"]]
    itype, core = catalog.sharded(catalog.instance(c["instance_type"]))
    setup = TrainingSetup("full", "bf16", "adamw", "auto", 16, c["seq"])
    microbatches = c["global_batch"] // c["dp"]
    state = sum(training_model_states(arch, setup, c["tp"], c["pp"], c["dp"], 1))
    return max((training_step(arch, itype, core, "bf16", c["seq"],
                              TrainingLayout(c["tp"], c["pp"], c["dp"], 1, 1, microbatches, "selective", schedule, v),
                              state, training_work(arch, setup))
                for schedule, v in reference_sources.stated_schedules(c, arch.layers)
                if schedule != "zb-h1"), key=lambda e: e.tokens_per_s)  # NeuronX Distributed has no ZB-H1


def _neuron_training_rows(catalog: Catalog) -> list[Row]:
    rows = []
    for c in reference()["neuron_training"]:
        estimate = predict_neuron_training(catalog, c)
        setup = f"{c['model']} {c['instance_type']} ×{c['nodes']} TP{c['tp']} PP{c['pp']} DP{c['dp']} ZeRO-1"
        rows.append(Row(c["id"], "training sequences/s", c["source"], setup, estimate.tokens_per_s / c["seq"],
                        c["sequences_per_s"], "neuron", catalog.instance(c["instance_type"]).accelerator))
    return rows


def all_rows(catalog: Catalog, platform: str | None = None, kind: str | None = None,
             skip_sources: tuple[str, ...] = (), skip_accelerators: tuple[str, ...] = ()) -> list[Row]:
    """Every compared figure. `kind` ("serving" or "training"), `skip_sources` and `skip_accelerators` (parts no fit
    reads) leave the other rows out, the sourced ones unpredicted (the fit's objective: the same rows, faster)."""
    serving, training = kind in (None, "serving"), kind in (None, "training")
    sourced = (reference_serving.serving_rows(catalog, Row, platform, skip_sources, skip_accelerators)
               if serving else [])
    if training and platform != "neuron":
        sourced = reference_sources.training_rows(catalog, Row, skip_sources, skip_accelerators) + sourced
    gpu, neuron = [], []
    if platform != "neuron":
        gpu = ((_decode_rows(catalog) + _serving_rows(catalog) if serving else [])
               + (_training_rows(catalog) if training else []) + [r for r in sourced if r.platform == "gpu"])
    if platform != "gpu":
        neuron = ((_neuron_serving_rows(catalog) if serving else [])
                  + (_neuron_training_rows(catalog) if training else []) + [r for r in sourced if r.platform == "neuron"])
    return [r for r in gpu + neuron  # reference.yaml's sources too
            if r.source not in skip_sources and r.accelerator not in skip_accelerators]
