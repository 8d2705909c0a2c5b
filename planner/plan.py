"""The plan: one report model (design.md's JSON shape) that every renderer, the Pulumi program,
the policy pack and the cost preview read. Bytes, seconds and USD; numbers stay numbers."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Choice(BaseModel):
    instance_type: str
    family: str
    accelerator: str
    accelerator_vendor: str
    accelerators_per_node: int  # chips (GPUs, Inferentia2/Trainium chips)
    devices_per_node: int | None = None  # what TP/PP/DP count: GPUs, or NeuronCores (2 per Neuron chip)
    device_unit: str = "GPU"
    nodes: int
    deploy_target: str
    purchase: str
    region: str
    reason: str = ""  # why this plan won: the ranking figure against the next best, or the tie-break


class PlanLayout(BaseModel):
    tensor_parallel: int  # in tensor_parallel_unit: GPUs, or NeuronCores on Neuron types
    tensor_parallel_unit: str = "GPU"
    pipeline_parallel: int
    data_parallel: int
    zero_stage: int | None = None
    micro_batch: int | None = None
    replicas: int
    batch_per_replica: int | None = None
    activation_checkpointing: str | None = None
    microbatches: int | None = None
    sequences_in_flight: int | None = None  # serving: never above concurrent_requests
    compiled_batch_size: int | None = None  # Neuron: the static batch the model is compiled for
    n_positions: int | None = None  # Neuron: the static sequence length (max context) compiled for


class PlanMemory(BaseModel):
    per_device_bytes: dict[str, float]
    required_per_device_bytes: float
    usable_per_device_bytes: float
    device_memory_bytes: float
    headroom_fraction: float


class PlanPerformance(BaseModel):
    output_tokens_per_s: float | None = None
    output_tokens_per_s_per_replica: float | None = None
    time_to_first_token_s: float | None = None
    inter_token_latency_s: float | None = None
    training_tokens_per_s: float | None = None
    step_time_s: float | None = None
    achieved_tflops_per_device: float | None = None
    model_flops_utilization: float | None = None
    time_to_train_s: float | None = None
    bound: str


class PlanCost(BaseModel):
    usd_per_hour: float
    usd_per_month: float
    hours_per_month: float
    usd_per_million_output_tokens: float | None = None
    usd_per_training_run: float | None = None
    price_source: str
    price_date: str
    price_estimated: bool = False


class Alternative(BaseModel):
    instance_type: str
    nodes: int
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    replicas: int
    required_per_device_bytes: float
    usd_per_hour: float
    usd_per_month: float
    output_tokens_per_s: float | None = None
    time_to_train_s: float | None = None
    usd_per_training_run: float | None = None
    ranked_by: str = "usd_per_hour"  # the figure the alternatives are ordered by
    ranking_usd: float = 0.0
    reason: str = ""  # why it lost to the chosen plan


class Rejection(BaseModel):
    instance_type: str
    reason: str


class ModelSummary(BaseModel):
    name: str
    params: float
    active_params: float
    precision: str


class Plan(BaseModel):
    workload: str
    kind: str
    model: ModelSummary
    choice: Choice
    layout: PlanLayout
    memory: PlanMemory
    performance: PlanPerformance
    cost: PlanCost
    engine: str | None = None
    max_context_tokens: int | None = None
    alternatives: list[Alternative] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class PlanSet(BaseModel):
    plans: list[Plan]
    catalog: str = "bundled"
