"""The plan assembled from the search's winner (issue 30: the last step of the chain): the choice and why,
its memory, performance and cost with their bands, the purchase table, storage, rent-vs-buy and the
managed-API comparison, the alternatives and every rejected type with its reason."""

from __future__ import annotations

from planner.physics import attention_dp
from planner.economics.buying import purchase_reason, purchase_table, storage_section
from planner.economics.cost import price_vintage_notes, usd_per_million_tokens
from planner.economics.ownership import rent_vs_buy
from planner.economics.price_rule import one_rule_reason
from planner.economics.provisioned import priced
from planner.hardware.catalog import Catalog
from planner.physics.bands import memory_band, memory_fit_factor, performance_band
from planner.physics.neuron_serving import context_bucket_tokens
from planner.search.candidates import Candidate, Miss
from planner.search.sweep import ec2_serving_reason, engine_for, hours_of
from planner.workload.plan import (Alternative, Choice, ModelSummary, Plan, PlanCost, PlanLayout, PlanMemory,
                                   PlanPerformance, Rejection)
from planner.workload.spec import Workload

LONG_RUN_DAYS = 90


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


def build_plan(w: Workload, cand: Candidate, catalog: Catalog, target: str, alternatives: list[Candidate],
               misses: dict[str, Miss], also_feasible: list[Candidate]) -> Plan:
    """The plan of `cand`, ranked against `alternatives` and `also_feasible`, the other types rejected by `misses`."""
    arch, accel = w.architecture, cand.accel
    target = cand.deploy_target or target  # serving on a type SageMaker does not host runs on EC2
    hours = hours_of(w)
    platform = "neuron" if accel.is_neuron else "gpu"
    choice, warnings = _choice(w, cand, catalog, target, alternatives, also_feasible)
    shaped = _serving_figures if w.kind == "inference" else _training_figures
    layout, performance, cost = shaped(w, cand, platform, hours, warnings)
    if layout.attention_data_parallel:  # planner/physics/attention_dp.py: why this layout, in its figures
        choice.reason += "; " + attention_dp.why(arch, w.precision, w.serving.kv_cache_precision,
                                                 layout.attention_data_parallel, w.serving.max_context_tokens,
                                                 cand.usable_bytes)
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
    serving, training = w.kind == "inference", w.kind != "inference"
    plan = priced(Plan(workload=w.name, kind=w.kind,
                model=ModelSummary(name=w.model.preset or "custom", params=arch.params,
                                   active_params=arch.params_per_token, precision=w.precision,
                                   kv_cache_precision=w.serving.kv_cache_precision if serving else None),
                choice=choice, layout=layout, memory=_memory(w, cand, platform), performance=performance, cost=cost,
                engine=engine_for(w, accel.vendor) if serving else None,
                max_context_tokens=w.serving.max_context_tokens if serving else None,
                training_method=w.training.method if training else None,
                lora_rank=w.training.lora_rank if training and w.training.method != "full" else None,
                training_kernels=w.training.kernels if training else None,
                alternatives=[_alternative(c, cand, w, hours) for c in alternatives], rejected=rejected, warnings=warnings,
                purchase_options=purchases, storage=storage_section(w, cand) if training else None,
                rent_vs_buy=rent_vs_buy(catalog, catalog.instance(cand.itype.name), cand.nodes, purchases)))
    if serving:  # the self-hosted floor with its volumes (priced above)
        from planner.economics.managed import compare_managed  # serving only: a training plan never loads it

        plan.managed = compare_managed(w, plan.cost.usd_per_hour, cand.output_tokens_per_s)
    return plan


def _choice(w: Workload, cand: Candidate, catalog: Catalog, target: str, alternatives: list[Candidate],
            also_feasible: list[Candidate]) -> tuple[Choice, list[str]]:
    """The choice and why it won (in the figure that ranked it, with the prices' vintage notes), and the
    price warnings the plan opens with."""
    accel = cand.accel
    chips = catalog.instance(cand.itype.name).accelerators_per_node
    choice = Choice(instance_type=cand.itype.name, family=cand.itype.family, accelerator=accel.name,
                    accelerator_vendor=accel.vendor, accelerators_per_node=chips,
                    devices_per_node=cand.itype.accelerators_per_node, device_unit=accel.device_unit, nodes=cand.nodes,
                    deploy_target=target, purchase=cand.purchase, region=w.constraints.region,
                    reason=why_chosen(cand, alternatives[0] if alternatives else None, w.kind))
    ranked = [c.price for c in alternatives + also_feasible]
    vintage_reasons, vintage_warnings = price_vintage_notes(cand.price, ranked, catalog.newest_price_date)
    if cand.ranking_objective is not None and target == "sagemaker":  # the rule replaced the mixed ranking
        vintage_reasons = [one_rule_reason(catalog, cand)]
    if target == "ec2" and w.kind == "inference" and w.constraints.deploy_target == "auto":
        vintage_reasons.append(ec2_serving_reason(cand.itype))
    if vintage_reasons:
        choice.reason += "; " + "; ".join(vintage_reasons)
    warnings: list[str] = []
    if cand.price.estimated:
        # the source is on the plan's price line; said once
        warnings.append(f"price is an estimate: {cand.price.source.split('; EC2 price from')[0]}")
    return choice, warnings + vintage_warnings


def _memory(w: Workload, cand: Candidate, platform: str) -> PlanMemory:
    """Per-device memory, and for training the band it was fitted at."""
    required, accel = cand.memory.total, cand.accel
    adapters = w.training is not None and w.training.method != "full"  # LoRA / QLoRA: a band of their own
    memory = PlanMemory(per_device_bytes=cand.memory.as_dict(), required_per_device_bytes=required,
                        usable_per_device_bytes=cand.usable_bytes, device_memory_bytes=accel.memory_bytes,
                        headroom_fraction=1 - required / accel.memory_bytes,
                        band=memory_band(platform, required, adapters) if w.kind != "inference" else {})
    if w.kind != "inference" and memory_fit_factor(platform, w.constraints.confidence, adapters) > 1:
        memory.decided_at = "high edge of the 80% band (confidence: likely)"
    return memory


def _serving_figures(w: Workload, cand: Candidate, platform: str, hours: float,
                     warnings: list[str]) -> tuple[PlanLayout, PlanPerformance, PlanCost]:
    """A serving plan's layout, performance and cost; its warnings are appended to `warnings`."""
    accel, perf, s = cand.accel, cand.perf, w.serving
    aggregate = cand.output_tokens_per_s
    dp_attention = cand.attention_dp if cand.attention_dp > 1 else None  # its ranks run attention at TP 1
    layout = PlanLayout(tensor_parallel=1 if dp_attention else cand.tp, pipeline_parallel=cand.pp, data_parallel=1,
                        attention_data_parallel=dp_attention,
                        replicas=cand.replicas, batch_per_replica=cand.batch_per_replica,
                        sequences_in_flight=cand.sequences_in_flight, tensor_parallel_unit=accel.device_unit,
                        compiled_batch_size=cand.batch_per_replica if accel.is_neuron else None,
                        n_positions=s.max_context_tokens if accel.is_neuron else None,
                        expert_parallel=cand.tp * cand.ep if w.architecture.is_moe else None)
    if accel.is_neuron:
        warnings.append(f"Neuron compiles the model ahead of time for batch {cand.batch_per_replica} × "
                        f"{s.max_context_tokens} positions at TP {cand.tp} NeuronCores; compiling "
                        "at endpoint start can outlast the health check: deploy pre-compiled artifacts "
                        "(deployment key compiledModelUrl)")
        if w.architecture.is_moe:  # README Known limits: NxD's expert paths are not modelled yet
            warnings.append("MoE on Neuron is not estimated (planned only because constraints name the type): "
                            "optimum-neuron's published Trainium2 runs of Llama 4 and Qwen3 MoE models sit 1.4-5× below "
                            "such estimates in tokens/s and their first tokens 6-39× later")
        # optimum-neuron 0.4.5 (components/data/images.yaml) has no buckets (planner/physics/replica_serving.py): every
        # prompt is encoded at all the positions, and the estimate counts it so; say what a lower maximum would save
        bucket = context_bucket_tokens(s.prompt_tokens, s.max_context_tokens)
        if bucket < s.max_context_tokens:
            warnings.append(f"the Neuron image this plan deploys (optimum-neuron) compiles one context-encoding graph "
                            f"for all {s.max_context_tokens} positions, so each {s.prompt_tokens}-token prompt is "
                            f"encoded as {s.max_context_tokens} tokens ({s.max_context_tokens / bucket:.3g}× its "
                            f"{bucket}-token bucket) and every decode step attends over {s.max_context_tokens} "
                            "positions, as the estimate counts: keep max_context_tokens as low as requests allow")
    performance = PlanPerformance(output_tokens_per_s=aggregate,
                                  output_tokens_per_s_per_replica=perf.output_tokens_per_s_per_replica,
                                  time_to_first_token_s=perf.time_to_first_token_s,
                                  inter_token_latency_s=perf.inter_token_latency_s, bound=perf.bound)
    targets = (s.max_time_to_first_token_ms, s.max_inter_token_latency_ms, s.target_output_tokens_per_s)
    _with_band(performance, platform, w, any(targets))
    cost = PlanCost(usd_per_hour=cand.usd_per_hour, usd_per_month=cand.usd_per_hour * hours, hours_per_month=hours,
                    usd_per_million_output_tokens=usd_per_million_tokens(cand.usd_per_hour, aggregate),
                    price_source=cand.price.source, price_date=cand.price.date, price_estimated=cand.price.estimated,
                    ranking_usd_per_hour=cand.ranked)
    trained = w.architecture.max_context_tokens
    if trained and s.max_context_tokens > trained:
        warnings.append(f"max_context_tokens {s.max_context_tokens} exceeds the model's trained context ({trained})")
    return layout, performance, cost


def _training_figures(w: Workload, cand: Candidate, platform: str, hours: float,
                      warnings: list[str]) -> tuple[PlanLayout, PlanPerformance, PlanCost]:
    """A training plan's layout, performance and cost; its warnings are appended to `warnings`."""
    t, perf = w.training, cand.perf
    ttt = t.tokens / perf.tokens_per_s
    layout = PlanLayout(tensor_parallel=cand.tp, pipeline_parallel=cand.pp, data_parallel=cand.dp,
                        tensor_parallel_unit=cand.accel.device_unit, zero_stage=cand.zero, micro_batch=cand.micro_batch,
                        replicas=1, activation_checkpointing=cand.checkpointing, microbatches=cand.microbatches,
                        expert_parallel=cand.tp * cand.train_ep if w.architecture.is_moe else None,
                        context_parallel=cand.cp,
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
    from planner.search.training_options import global_batch_sequences  # a training plan's; serving never loads it

    asked = global_batch_sequences(w)
    if perf.tokens_per_step != asked * t.sequence_length:
        warnings.append(f"global batch rounded up from {asked} to {perf.tokens_per_step / t.sequence_length:.0f} "
                        f"sequences to split evenly over DP × micro-batch")
    if not t.deadline_hours and ttt > LONG_RUN_DAYS * 86400:
        warnings.append(f"training takes {ttt / 86400:,.0f} days on the cheapest layout; set "
                        "training.deadline_hours to trade cost for time")
    return layout, performance, cost


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
    figures = performance.model_dump(exclude={"band", "decided_at", "bound"})
    performance.band = performance_band(platform, w.kind, figures, moe=w.architecture.is_moe)
    if has_targets and w.constraints.confidence == "likely":
        performance.decided_at = "slow edge of the 80% band (confidence: likely)"
