"""`gpuplan calibrate`: match each measurement to its hardware, model and layout, plan that exact
setup, and fit measured ÷ predicted per (accelerator, engine, metric) (planner/physics/calibration.py)."""

from __future__ import annotations

from collections import defaultdict

from planner.hardware import catalog as catalog_mod
from planner.physics.calibration import Calibration, Evidence, fit_all
from planner.workload.errors import InfeasibleError, SpecError
from planner.workload.presets import preset_for_model_id, presets
from planner.pipeline import plan_workload
from planner.workload.spec import Workload

from gpuplan.measurements import Measurement


def _missing(m: Measurement, what: str) -> SpecError:
    return SpecError(f"cannot match: {what}", path="RESULTS", file=m.source)


def matched_workload(m: Measurement, cat, model: str | None, instance_type: str | None, engine: str | None,
                     tensor_parallel: int | None) -> Workload:
    """The workload the measurement ran, its layout pinned, on exactly its instance type."""
    preset = model or preset_for_model_id(m.model_id) or (m.model_id if m.model_id in presets() else None)
    if preset is None:
        raise _missing(m, f"model {m.model_id!r} maps to no preset; pass --model PRESET (see `gpuplan models`)")
    itype = m.instance_type or instance_type
    if itype is None:
        raise _missing(m, "the file names no instance type; pass --instance-type")
    if cat.instance(itype) is None:
        raise _missing(m, f"instance type {itype!r} is not in the catalog (see `gpuplan catalog list`)")
    name = "calibration"
    if m.kind == "training":
        t = m.training
        seq = int(t["sequence_length"])
        layout = {"nodes": t["nodes"], "tensor_parallel": t["tensor_parallel"],
                  "pipeline_parallel": t["pipeline_parallel"], "data_parallel": t["data_parallel"]}
        return Workload.model_validate({
            "name": name, "kind": "training", "model": {"preset": preset}, "precision": t["precision"],
            "training": {"tokens": 1e9, "sequence_length": seq, "global_batch_tokens": t["global_batch_sequences"] * seq},
            "constraints": {"instance_types": [itype], "deploy_target": "ec2"}, "layout": layout})
    engine = m.engine or engine
    if engine is None:
        raise _missing(m, "the file names no serving engine; pass --engine (vllm, tgi, lmi, tensorrt-llm, neuron)")
    tp = m.tensor_parallel or tensor_parallel or cat.instance(itype).accelerators_per_node
    context = m.prompt_tokens + m.output_tokens
    return Workload.model_validate({
        "name": name, "kind": "inference", "model": {"preset": preset}, "precision": "bf16",
        "serving": {"engine": engine, "prompt_tokens": m.prompt_tokens, "output_tokens": m.output_tokens,
                    "max_context_tokens": context, "concurrent_requests": m.concurrency},
        "constraints": {"instance_types": [itype], "deploy_target": "ec2"},
        "layout": {"tensor_parallel": tp, "pipeline_parallel": 1, "replicas": 1, "nodes": 1}})


def calibrate(measurements: list[Measurement], catalog_path=None, model: str | None = None,
              instance_type: str | None = None, engine: str | None = None,
              tensor_parallel: int | None = None) -> Calibration:
    cat = catalog_mod.load(catalog_path)
    evidence: dict[tuple[str, str, str], list[Evidence]] = defaultdict(list)
    for m in measurements:
        w = matched_workload(m, cat, model, instance_type, engine, tensor_parallel)
        try:
            plan = plan_workload(w, cat)
        except InfeasibleError as exc:
            raise _missing(m, f"the planner cannot run this setup ({str(exc).splitlines()[0]})") from None
        lay = plan.layout
        layout = f"TP {lay.tensor_parallel} × PP {lay.pipeline_parallel} × DP {lay.data_parallel}"
        key_engine = plan.engine or "training"
        for metric, measured in m.metrics.items():
            predicted = getattr(plan.performance, metric)
            if predicted:
                evidence[(plan.choice.accelerator, key_engine, metric)].append(Evidence(
                    source=m.source, date=m.date or "unknown", instance_type=plan.choice.instance_type,
                    model=w.model.preset, layout=layout, measured=measured, predicted=predicted))
    return fit_all(evidence)
