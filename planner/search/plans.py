"""Plan a workload: every catalog type is searched (search_inference / search_training); the
cheapest feasible candidate becomes the plan, the next best are alternatives, and every other type
is rejected with its reason. Nothing feasible raises InfeasibleError with the nearest misses."""

from __future__ import annotations

from planner.physics.bands import memory_band, memory_fit_factor, performance_band
from planner.economics.buying import purchase_reason, purchase_table, storage_section
from planner.search.candidates import Candidate, Miss
from planner.workload.defaults import interactive_defaults
from planner.search.host_memory import host_memory_miss
from planner.search.kv_sizing import kv_sizing_section
from planner.economics.managed import compare_managed
from planner.economics.ownership import rent_vs_buy
from planner.economics.provisioned import priced
from planner.economics.price_rule import one_rule_reason, rank_on_one_rule
from planner.hardware.catalog import Catalog, InstanceType
from planner.economics.cost import (HourlyPrice, deploy_target, ec2_serving_reason, price_book, price_vintage_notes,
                                    purchase_options, type_deploy_target, usd_per_million_tokens)
from planner.workload.errors import InfeasibleError, NearMiss, SpecError
from planner.workload.plan import (Alternative, Choice, ModelSummary, Plan, PlanCost, PlanLayout, PlanMemory,
                                   PlanPerformance, Rejection)
from planner.search.inference import best_inference
from planner.search.training import best_training, global_batch_sequences
from planner.workload.spec import Workload
from planner.hardware.units import FP4_FORMATS, HOURS_PER_MONTH, compute_precision

ALTERNATIVES = 5
NEAREST_MISSES = 5
LONG_RUN_DAYS = 90


# (KV precision, engine) pairs whose setting reaches the engine's environment (engine-options.yaml
# kv_cache_dtype): a plan sized for a quantised KV cache the engine never hears of would overflow.
KV_CACHE_ENGINES = {("fp8", "vllm"), ("fp8", "lmi"), ("fp8", "tgi")}


def engine_for(w: Workload, vendor: str) -> str:
    if w.serving.engine != "auto":
        return w.serving.engine
    return "neuron" if vendor == "aws-neuron" else "vllm"


def _type_gate(w: Workload, itype: InstanceType, catalog: Catalog, target: str) -> dict[str, HourlyPrice] | Miss:
    """Rules that rule a type out whatever the layout: filters, precision, engine, price."""
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
    book = price_book(catalog, itype, c.region, target, purchase_options(w.kind, c.purchase))
    return Miss(book) if isinstance(book, str) else book


def plan_workload(w: Workload, catalog: Catalog) -> Plan:
    w, defaulted = interactive_defaults(w)
    target = checked_target(w, catalog)
    feasible, misses = search_types(w, catalog, target)
    if not feasible:
        raise_infeasible(w, misses)
    rule = rank_on_one_rule(feasible, catalog, w.constraints.region, target)
    feasible.sort(key=lambda cand: cand.rank_key)
    chosen = feasible[0]
    plan = build_plan(w, chosen, catalog, target, feasible[1:1 + ALTERNATIVES], misses, feasible[1 + ALTERNATIVES:])
    plan.cost.ranking_rule = rule
    if w.kind == "inference":
        plan.kv_sizing, kv_warnings = kv_sizing_section(w, chosen, chosen.deploy_target or target)
        plan.warnings += kv_warnings
    if defaulted:
        plan.warnings.insert(0, defaulted)
    return plan


def checked_target(w: Workload, catalog: Catalog) -> str:
    """The deploy target, once the spec's names are known to the catalog."""
    target = deploy_target(w.kind, w.constraints.deploy_target)
    if w.kind != "inference" and target == "sagemaker":
        raise SpecError("deploy_target sagemaker is for inference; training runs on EC2 clusters (use auto or ec2)",
                        path=f"{w.path}.constraints.deploy_target", file=w.file)
    if w.constraints.instance_types:
        unknown = [n for n in w.constraints.instance_types if catalog.instance(n) is None]
        if unknown:
            raise SpecError(f"unknown instance type(s) {_names(unknown)}; see `gpuplan catalog list`",
                            path=f"{w.path}.constraints.instance_types", file=w.file)
    if w.constraints.families:
        unknown = sorted(set(w.constraints.families) - catalog.families())
        if unknown:
            raise SpecError(f"unknown famil{'y' if len(unknown) == 1 else 'ies'} {_names(unknown)}; "
                            f"catalog families: {', '.join(sorted(catalog.families()))}",
                            path=f"{w.path}.constraints.families", file=w.file)
    if w.kind != "inference":
        _check_checkpoint_storage(w)
    return target


def _check_checkpoint_storage(w: Workload) -> None:
    """Checkpoint writes alone (no reads, the most nodes allowed) that need a file system beyond the quota
    are a spec that cannot be provisioned on any hardware: refuse it, naming the field."""
    from planner.search.training import run_storage
    from planner.economics.storage import storage_refusal

    refused = storage_refusal(run_storage(w, 0.0, w.constraints.max_nodes))
    if refused:
        raise SpecError(refused.removeprefix("storage: "), path=f"{w.path}.training.checkpoint_interval_minutes",
                        file=w.file)


def _names(names: list[str], most: int = 5) -> str:
    """A user's list echoed back: each name cut, at most `most` of them."""
    cut = [n if len(n) <= 40 else n[:37] + "..." for n in names[:most]]
    return ", ".join(cut) + (f" and {len(names) - most} more" if len(names) > most else "")


def search_types(w: Workload, catalog: Catalog, target: str,
                 collect: list[Candidate] | None = None) -> tuple[list[Candidate], dict[str, Miss]]:
    """The best candidate of every type that can run the workload, and why each other type cannot;
    with `collect`, every feasible layout within the budget is gathered too (gpuplan frontier)."""
    feasible: list[Candidate] = []
    misses: dict[str, Miss] = {}
    budget = w.constraints.max_usd_per_month
    for itype in catalog.instance_types:
        target_of = type_deploy_target(w.kind, w.constraints.deploy_target, itype) if target == "sagemaker" else target
        gate = _type_gate(w, itype, catalog, target_of)
        if isinstance(gate, Miss):
            misses[itype.name] = gate
            continue
        sharded, device = catalog.sharded(itype)  # NeuronCores on Neuron types, GPUs elsewhere
        pool: list[Candidate] | None = [] if collect is not None else None
        found = best_inference(w, sharded, device, next(iter(gate.values())), target_of, pool) if w.kind == "inference" else \
            best_training(w, sharded, device, gate, pool)
        if pool:
            collect.extend(c for c in pool if budget is None or c.usd_per_hour * _hours(w) <= budget)
        if isinstance(found, Miss):
            misses[itype.name] = found
            continue
        found.deploy_target = target_of
        if host := host_memory_miss(w, found):
            misses[itype.name] = host
            continue
        monthly = found.usd_per_hour * _hours(w)
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


def ranking_unit(kind: str) -> tuple[str, str]:
    """The figure plans are ranked by: $/h for serving (a standing cost), $/run for training."""
    return ("usd_per_hour", "/h") if kind == "inference" else ("usd_per_training_run", "/run")


def _usd(value: float, unit: str) -> str:
    return f"${value:,.2f}{unit}" if unit == "/h" else f"${value:,.0f}{unit}"


def _tie_break(c: Candidate, other: Candidate) -> str:
    """The first criterion after cost on which `c` loses to `other` (design.md's order)."""
    if c.nodes != other.nodes:
        return f"more nodes ({c.nodes} vs {other.nodes})"
    if c.network_hops != other.network_hops:
        return "more network hops (its traffic crosses nodes)" if c.network_hops == 2 else "more network hops"
    if round(c.headroom, 4) != round(other.headroom, 4):
        return f"less memory headroom ({c.headroom:.0%} vs {other.headroom:.0%})"
    return "equal on every criterion; ordered by name"


def why_not(c: Candidate, chosen: Candidate, kind: str) -> str:
    """Why a feasible candidate lost, in the figure that ranked it (and, under the one price rule, the
    figure it would be charged beside it)."""
    _, unit = ranking_unit(kind)
    charged = "" if c.ranking_objective is None else \
        f"; charged {_usd(c.objective, unit)} ({'estimated' if c.price.estimated else 'published'})"
    if c.rank_key[0] != chosen.rank_key[0]:
        extra = c.ranked / chosen.ranked - 1 if chosen.ranked > 0 else float("inf")
        return f"costlier: {_usd(c.ranked, unit)} vs {_usd(chosen.ranked, unit)} (+{extra:.1%}){charged}"
    return f"same cost ({_usd(c.ranked, unit)}{charged}) but {_tie_break(c, chosen)}"


def why_chosen(chosen: Candidate, runner_up: Candidate | None, kind: str) -> str:
    _, unit = ranking_unit(kind)
    if runner_up is None:
        return f"the only feasible plan ({_usd(chosen.ranked, unit)})"
    name = f"{runner_up.itype.name} × {runner_up.nodes}"
    if runner_up.rank_key[0] != chosen.rank_key[0]:
        return (f"cheapest feasible plan at {_usd(chosen.ranked, unit)}; next best {name} at "
                f"{_usd(runner_up.ranked, unit)}")
    return f"ties {name} on cost ({_usd(chosen.ranked, unit)}); {name} has {_tie_break(runner_up, chosen)}"


def _hours(w: Workload) -> float:
    return w.serving.hours_per_month if w.kind == "inference" else HOURS_PER_MONTH


def build_plan(w: Workload, cand: Candidate, catalog: Catalog, target: str, alternatives: list[Candidate], misses: dict[str, Miss],
          also_feasible: list[Candidate]) -> Plan:
    arch, accel, perf = w.architecture, cand.accel, cand.perf
    target = cand.deploy_target or target
    hours = _hours(w)
    required = cand.memory.total
    chips = catalog.instance(cand.itype.name).accelerators_per_node
    choice = Choice(instance_type=cand.itype.name, family=cand.itype.family, accelerator=accel.name,
                    accelerator_vendor=accel.vendor, accelerators_per_node=chips,
                    devices_per_node=cand.itype.accelerators_per_node, device_unit=accel.device_unit, nodes=cand.nodes,
                    deploy_target=target, purchase=cand.purchase, region=w.constraints.region,
                    reason=why_chosen(cand, alternatives[0] if alternatives else None, w.kind))
    ranked = [c.price for c in alternatives + also_feasible]
    vintage_reasons, vintage_warnings = price_vintage_notes(cand.price, ranked, catalog.newest_price_date)
    if cand.ranking_objective is not None and target == "sagemaker":  # the rule replaced the mixed ranking the notes describe
        vintage_reasons = [one_rule_reason(catalog, cand)]
    if target == "ec2" and w.kind == "inference" and w.constraints.deploy_target == "auto":
        vintage_reasons.append(ec2_serving_reason(cand.itype))
    if vintage_reasons:
        choice.reason += "; " + "; ".join(vintage_reasons)
    platform = "neuron" if accel.is_neuron else "gpu"
    memory = PlanMemory(per_device_bytes=cand.memory.as_dict(), required_per_device_bytes=required,
                        usable_per_device_bytes=cand.usable_bytes, device_memory_bytes=accel.memory_bytes,
                        headroom_fraction=1 - required / accel.memory_bytes,
                        band=memory_band(platform, required) if w.kind != "inference" else {})
    if w.kind != "inference" and memory_fit_factor(platform, w.constraints.confidence) > 1:
        memory.decided_at = "high edge of the 80% band (confidence: likely)"
    warnings: list[str] = []
    if cand.price.estimated:
        # the source is on the plan's price line; said once
        warnings.append(f"price is an estimate: {cand.price.source.split('; EC2 price from')[0]}")
    warnings += vintage_warnings
    if w.kind == "inference":
        aggregate = cand.output_tokens_per_s
        layout = PlanLayout(tensor_parallel=cand.tp, pipeline_parallel=cand.pp, data_parallel=1,
                            replicas=cand.replicas, batch_per_replica=cand.batch_per_replica,
                            sequences_in_flight=cand.sequences_in_flight, tensor_parallel_unit=accel.device_unit,
                            compiled_batch_size=cand.batch_per_replica if accel.is_neuron else None,
                            n_positions=w.serving.max_context_tokens if accel.is_neuron else None,
                            expert_parallel=cand.tp * cand.ep if w.architecture.is_moe else None)
        if accel.is_neuron:
            warnings.append(f"Neuron compiles the model ahead of time for batch {cand.batch_per_replica} × "
                            f"{w.serving.max_context_tokens} positions at TP {cand.tp} NeuronCores; compiling "
                            "at endpoint start can outlast the health check: deploy pre-compiled artifacts "
                            "(deployment key compiledModelUrl)")
        performance = PlanPerformance(output_tokens_per_s=aggregate, output_tokens_per_s_per_replica=perf.output_tokens_per_s_per_replica,
                                      time_to_first_token_s=perf.time_to_first_token_s,
                                      inter_token_latency_s=perf.inter_token_latency_s, bound=perf.bound)
        targets = (w.serving.max_time_to_first_token_ms, w.serving.max_inter_token_latency_ms,
                   w.serving.target_output_tokens_per_s)
        _with_band(performance, platform, w, any(targets))
        cost = PlanCost(usd_per_hour=cand.usd_per_hour, usd_per_month=cand.usd_per_hour * hours, hours_per_month=hours,
                        usd_per_million_output_tokens=usd_per_million_tokens(cand.usd_per_hour, aggregate),
                        price_source=cand.price.source, price_date=cand.price.date, price_estimated=cand.price.estimated,
                        ranking_usd_per_hour=cand.ranked)
        if arch.max_context_tokens and w.serving.max_context_tokens > arch.max_context_tokens:
            warnings.append(f"max_context_tokens {w.serving.max_context_tokens} exceeds the model's trained context "
                            f"({arch.max_context_tokens})")
    else:
        t = w.training
        ttt = t.tokens / perf.tokens_per_s
        layout = PlanLayout(tensor_parallel=cand.tp, pipeline_parallel=cand.pp, data_parallel=cand.dp,
                            tensor_parallel_unit=accel.device_unit, zero_stage=cand.zero, micro_batch=cand.micro_batch, replicas=1,
                            activation_checkpointing=cand.checkpointing, microbatches=cand.microbatches,
                            expert_parallel=cand.tp * cand.train_ep if arch.is_moe else None,
                            pipeline_schedule=cand.pipeline_schedule, virtual_stages=cand.virtual_stages)
        performance = PlanPerformance(training_tokens_per_s=perf.tokens_per_s, step_time_s=perf.step_time_s,
                                      achieved_tflops_per_device=perf.achieved_tflops_per_device,
                                      model_flops_utilization=perf.model_flops_utilization, time_to_train_s=ttt,
                                      wall_clock_s=cand.wall_s, bound=perf.bound)
        _with_band(performance, platform, w, bool(t.deadline_hours))
        cost = PlanCost(usd_per_hour=cand.usd_per_hour, usd_per_month=cand.usd_per_hour * hours, hours_per_month=hours,
                        usd_per_training_run=cand.objective - cand.storage_usd_per_hour * (cand.wall_s or ttt) / 3600,
                        price_source=cand.price.source,
                        price_date=cand.price.date, price_estimated=cand.price.estimated)
        asked = global_batch_sequences(w)
        if perf.tokens_per_step != asked * t.sequence_length:
            warnings.append(f"global batch rounded up from {asked} to {perf.tokens_per_step / t.sequence_length:.0f} "
                            f"sequences to split evenly over DP × micro-batch")
        if not t.deadline_hours and ttt > LONG_RUN_DAYS * 86400:
            warnings.append(f"training takes {ttt / 86400:,.0f} days on the cheapest layout; set "
                            "training.deadline_hours to trade cost for time")
    if arch.is_moe and (layout.expert_parallel or 0) <= layout.tensor_parallel:
        warnings.append("MoE: every device holds a TP slice of every expert (no expert parallelism in this layout)")
    purchases = purchase_table(w, cand, catalog, target)
    bought = purchase_reason(w, cand, purchases)
    if bought:
        choice.reason += "; " + bought
    if cand.purchase == "spot" and w.kind != "inference" and cand.nodes > 1:
        warnings.append(f"spot: the estimate assumes a reclaimed node is replaced within restart_minutes "
                        f"({w.training.restart_minutes:g}); {cand.nodes} spot nodes in one placement group are not "
                        "guaranteed capacity (Capacity Blocks are)")
    rejected = [Rejection(instance_type=name, reason=m.reason) for name, m in misses.items()]
    rejected += [Rejection(instance_type=c.itype.name, reason=f"feasible but {why_not(c, cand, w.kind)}")
                 for c in also_feasible]
    plan = priced(Plan(workload=w.name, kind=w.kind,
                model=ModelSummary(name=w.model.preset or "custom", params=arch.params,
                                   active_params=arch.params_per_token, precision=w.precision,
                                   kv_cache_precision=w.serving.kv_cache_precision if w.kind == "inference" else None),
                choice=choice, layout=layout, memory=memory, performance=performance, cost=cost,
                engine=engine_for(w, accel.vendor) if w.kind == "inference" else None,
                max_context_tokens=w.serving.max_context_tokens if w.kind == "inference" else None,
                training_method=w.training.method if w.kind != "inference" else None,
                lora_rank=w.training.lora_rank if w.kind != "inference" and w.training.method != "full" else None,
                alternatives=[_alternative(c, cand, w, hours) for c in alternatives], rejected=rejected, warnings=warnings,
                purchase_options=purchases, storage=storage_section(w, cand) if w.kind != "inference" else None,
                rent_vs_buy=rent_vs_buy(catalog, catalog.instance(cand.itype.name), cand.nodes, purchases)))
    if w.kind == "inference":  # the self-hosted floor with its volumes (priced above)
        plan.managed = compare_managed(w, plan.cost.usd_per_hour, cand.output_tokens_per_s)
    return plan


def _alternative(c: Candidate, chosen: Candidate, w: Workload, hours: float) -> Alternative:
    extra = {}
    if w.kind == "inference":
        extra["output_tokens_per_s"] = c.output_tokens_per_s
    else:
        ttt = w.training.tokens / c.perf.tokens_per_s
        extra.update(time_to_train_s=ttt, usd_per_training_run=c.objective)
    return Alternative(instance_type=c.itype.name, nodes=c.nodes, tensor_parallel=c.tp, pipeline_parallel=c.pp,
                       data_parallel=c.dp, replicas=c.replicas, required_per_device_bytes=c.memory.total,
                       usd_per_hour=c.usd_per_hour + c.storage_usd_per_hour,
                       usd_per_month=(c.usd_per_hour + c.storage_usd_per_hour) * hours,
                       ranked_by=ranking_unit(w.kind)[0], ranking_usd=c.ranked, price_estimated=c.price.estimated,
                       reason=why_not(c, chosen, w.kind),
                       **extra)


def _with_band(performance: PlanPerformance, platform: str, w: Workload, has_targets: bool) -> None:
    """The 80% band of every predicted field, and which edge the targets were checked at."""
    performance.band = performance_band(platform, w.kind, performance.model_dump(exclude={"band", "decided_at", "bound"}))
    if has_targets and w.constraints.confidence == "likely":
        performance.decided_at = "slow edge of the 80% band (confidence: likely)"
