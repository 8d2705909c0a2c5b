"""Every catalog type searched: the rules that rule a type out whatever the layout, then each type's best
layout (planner/search/inference.py, training.py) at the prices the orchestrator hands in, and why each
other type cannot serve. Nothing feasible raises InfeasibleError with the nearest misses."""

from __future__ import annotations

from typing import Callable

from planner.hardware.catalog import Catalog, InstanceType
from planner.hardware.units import FP4_FORMATS, HOURS_PER_MONTH, compute_precision
from planner.search.candidates import Candidate, Miss
from planner.search.host_memory import host_memory_miss
from planner.search.pricing import TypePrices
from planner.workload.errors import InfeasibleError, NearMiss
from planner.workload.spec import Workload

NEAREST_MISSES = 5


# (KV precision, engine) pairs whose setting reaches the engine's environment (engine-options.yaml
# kv_cache_dtype): a plan sized for a quantised KV cache the engine never hears of would overflow.
KV_CACHE_ENGINES = {("fp8", "vllm"), ("fp8", "lmi"), ("fp8", "tgi")}


def engine_for(w: Workload, vendor: str) -> str:
    if w.serving.engine != "auto":
        return w.serving.engine
    return "neuron" if vendor == "aws-neuron" else "vllm"


def type_gate(w: Workload, itype: InstanceType, catalog: Catalog) -> Miss | None:
    """Rules that rule a type out whatever the layout: filters, precision, engine, region (its price
    comes after, from the prices the orchestrator hands search_types)."""
    c = w.constraints
    accel = catalog.accelerator(itype.accelerator)
    if c.instance_types and itype.name not in [n.removeprefix("ml.") for n in c.instance_types]:
        return Miss("not in constraints.instance_types", by_request=True)
    if c.families and itype.family not in c.families:
        return Miss(f"family {itype.family} not in constraints.families", by_request=True)
    if w.kind != "inference" and not accel.supports.training:
        return Miss(f"{accel.name} is an inference-only accelerator")
    if w.kind != "inference" and w.training.method == "qlora" and accel.is_neuron:
        return Miss(f"QLoRA needs bitsandbytes NF4 kernels, which are CUDA-only; NeuronX Distributed on "
                    f"{accel.name} has no NF4 (use method lora or full)")
    tensor = {"fp8": "fp8", "bf16": "bf16"}.get(w.precision)
    if tensor and not getattr(accel.supports, tensor):
        return Miss(f"{accel.name} has no {w.precision} support")
    rates = {compute_precision(w.precision, accel.supports.fp4)} | ({"bf16"} if w.precision in ("fp8", *FP4_FORMATS) else set())  # fp8 attention runs in bf16
    missing = sorted(r for r in rates if accel.peak_flops(r) is None)
    if missing:
        return Miss(f"{accel.name} has no {'/'.join(missing)} peak TFLOP/s in the catalog (tflops.{missing[0]})")
    if w.precision == "nvfp4" and not accel.supports.fp4:
        return Miss(f"{accel.name} has no FP4 tensor cores for nvfp4 (Blackwell has them)")
    if w.precision == "mxfp4" and (accel.is_neuron or not (accel.supports.fp4 or accel.supports.int4_kernels)):
        return Miss(f"{accel.name} has no MXFP4 kernels (vLLM runs them on Hopper, Ampere and Blackwell GPUs)")
    if w.precision == "int4" and not accel.supports.int4_kernels and w.kind == "inference":
        cc = f" (compute capability {accel.compute_capability})" if accel.compute_capability else ""
        return Miss(f"{accel.name}{cc} has no int4 kernels")
    if w.kind == "inference":
        engine = engine_for(w, accel.vendor)
        if (engine == "neuron") != accel.is_neuron:
            return Miss(f"engine {engine} does not run on {accel.name}")
        if engine == "neuron" and w.architecture.is_moe and not (c.instance_types or c.families):
            # README Known limits: NxD's expert kernels are not modelled, and optimum-neuron's published Trainium2 MoE
            # runs sit 1.4-5x below the estimate's tokens/s (bench/data/reference/optimum-neuron-benchmarks.yaml)
            return Miss("mixture-of-experts serving on Neuron is not estimated (NeuronX Distributed's expert kernels): "
                        "optimum-neuron's published MoE runs sit 1.4-5x below such estimates in tokens/s; name the "
                        "type in constraints.instance_types or constraints.families to plan it anyway")
        if engine == "neuron" and w.precision == "int8":  # components/data/images.yaml: optimum-neuron's vLLM server
            return Miss("the Neuron serving container (vLLM on optimum-neuron / NxD Inference) has no int8 weight "
                        "setting; serve bf16 or fp16 on Neuron")
        if w.serving.kv_cache_precision == "fp8" and not accel.supports.fp8:
            return Miss(f"{accel.name} has no fp8 KV cache support")
        kv = w.serving.kv_cache_precision
        if kv not in ("fp32", "bf16", "fp16") and (kv, engine) not in KV_CACHE_ENGINES:
            return Miss(f"engine {engine} cannot be told to keep a {kv} KV cache (gpuplan sets fp8 for vllm, lmi "
                        "and tgi only), so the plan's KV sizing would not hold")
    if itype.offered_regions is not None and c.region not in itype.offered_regions:
        return Miss(f"not offered in {c.region}")
    return None


def type_target(w: Workload, itype: InstanceType, target: str) -> str:
    """Where one type deploys: under `deploy_target: auto`, serving on a type SageMaker hosting does not
    offer (the catalog's sagemaker_hosting, from botocore's ProductionVariantInstanceType enum) runs on EC2
    instead of being rejected; an explicit target is kept, and rejects the type where it cannot run."""
    if target == "sagemaker" and w.constraints.deploy_target == "auto" and not itype.sagemaker_hosting:
        return "ec2"
    return target


def ec2_serving_reason(itype: InstanceType) -> str:
    """The plan's line for a serving plan that type_target placed on EC2."""
    return (f"served on EC2: SageMaker hosting does not offer ml.{itype.name} (botocore 1.44.5 sagemaker "
            "ProductionVariantInstanceType), so deploy_target auto runs it as an EC2 instance")


Found = tuple  # one type's search: (its best Candidate or the Miss that rules it out, its pool or None, target)


def search_types(w: Workload, catalog: Catalog, target: str, prices: Callable[[InstanceType, str], TypePrices | str],
                 collect: list[Candidate] | None = None) -> tuple[list[Candidate], dict[str, Miss]]:
    """The best candidate of every type that can run the workload, and why each other type cannot;
    `prices(itype, target)` is the type's prices where it deploys (planner/economics/run_pricing.py type_prices) or why it has none.
    With `collect`, every feasible layout within the budget is gathered too (gpuplan frontier)."""
    one = _type_search(w, catalog, target, prices, collect is not None)
    return _gathered(w, catalog.instance_types, _each_type(w, catalog, one), collect)


def search_types_and_twin(w: Workload, twin: Workload, catalog: Catalog, target: str, prices, twin_prices,
                          collect: list[Candidate]) -> tuple[list[Candidate], dict[str, Miss]]:
    """search_types of `w`, and of `twin` into `collect`, type by type: each type's two searches run in one
    process, so the twin's reuses the fits the first found (pipeline.frontier: a spec and its deadline-free twin)."""
    first = _type_search(w, catalog, target, prices, False)
    second = _type_search(twin, catalog, target, twin_prices, True)
    both = _each_type(w, catalog, lambda itype: (first(itype), second(itype)))
    _gathered(twin, catalog.instance_types, [b for _, b in both], collect)
    return _gathered(w, catalog.instance_types, [a for a, _ in both], None)


def _type_search(w: Workload, catalog: Catalog, target: str, prices, collecting: bool) -> Callable[[InstanceType], Found]:
    def search(itype: InstanceType) -> Found:
        gate = type_gate(w, itype, catalog)
        target_of = type_target(w, itype, target)
        priced = prices(itype, target_of) if gate is None else gate
        if isinstance(priced, (Miss, str)):
            return (Miss(priced) if isinstance(priced, str) else priced), None, target_of
        sharded, device = catalog.sharded(itype)  # NeuronCores on Neuron types, GPUs elsewhere
        pool: list[Candidate] | None = [] if collecting else None
        found = _best_inference()(w, sharded, device, next(iter(priced.book.values())), target_of, pool) \
            if w.kind == "inference" else _best_training()(w, sharded, device, priced, pool)
        return found, pool, target_of
    return search


# A training search with a node cap this large or larger is shared with a forked helper process where one can
# run (planner/search/split.py): forking and returning the answers cost a few ms, which a search of a few
# dozen ms at smaller caps would not win back.
SPLIT_FROM_NODES = 64


def _each_type(w: Workload, catalog: Catalog, search: Callable[[InstanceType], object]) -> list:
    from planner.search.tables import forget_keys

    forget_keys()
    types = catalog.instance_types
    if w.kind != "inference" and w.constraints.max_nodes >= SPLIT_FROM_NODES:
        from planner.search.split import split_map

        return split_map(search, types)
    return [search(itype) for itype in types]


def _gathered(w: Workload, types: list[InstanceType], searched: list[Found], collect: list[Candidate] | None
              ) -> tuple[list[Candidate], dict[str, Miss]]:
    """Each type's search in catalog order: a feasible candidate, or why not (its own miss, the host's memory,
    the budget); `collect` gets each type's pool within the budget."""
    feasible: list[Candidate] = []
    misses: dict[str, Miss] = {}
    budget = w.constraints.max_usd_per_month
    for itype, (found, pool, target_of) in zip(types, searched):
        if pool:
            collect.extend(c for c in pool if budget is None or c.usd_per_hour * hours_of(w) <= budget)
        if isinstance(found, Miss):
            misses[itype.name] = found
            continue
        found.deploy_target = target_of
        if host := host_memory_miss(w, found):
            misses[itype.name] = host
            continue
        monthly = found.usd_per_hour * hours_of(w)
        if budget is not None and monthly > budget:
            misses[itype.name] = Miss(f"${monthly:,.0f}/month > max_usd_per_month ${budget:,.0f} "
                                      f"({found.nodes} node(s))", monthly / budget, stage=3)
            continue
        feasible.append(found)
    return feasible, misses


def raise_infeasible(w: Workload, misses: dict[str, Miss]) -> None:
    ranked = sorted(misses.items(), key=lambda kv: kv[1].shortfall)
    considered = [(name, m) for name, m in ranked if not m.by_request] or ranked
    raise InfeasibleError(w.name, f"no instance type in the catalog can run this {w.kind} workload",
                          [NearMiss(name, m.reason) for name, m in considered[:NEAREST_MISSES]],
                          file=w.file, path=w._path)


def hours_of(w: Workload) -> float:
    return w.serving.hours_per_month if w.kind == "inference" else HOURS_PER_MONTH


def _best_inference():
    """The serving search, imported when a serving workload is planned: a training plan never loads it or
    the serving physics beneath it (start-up, issue 29)."""
    from planner.search.inference import best_inference

    return best_inference


def _best_training():
    """The training search, imported when a training workload is planned: a serving plan never loads it or
    the step-time physics beneath it (start-up, issue 29)."""
    from planner.search.training import best_training

    return best_training
