"""The plan: one report model (design.md's JSON shape) that every renderer, the Pulumi program,
the policy pack and the cost preview read. Bytes, seconds and USD; numbers stay numbers."""

from __future__ import annotations

from pydantic import BaseModel, Field




class KvSizing(BaseModel):
    """The KV policy the plan was sized with, and what the other policy would need on the chosen type."""
    policy: str  # what sized the plan: worst-case or typical
    requested: str  # serving.kv_sizing
    tokens_per_sequence: int
    block_tokens: int | None = None
    note: str = ""
    other_policy: str
    other_policy_nodes: int | None = None
    other_policy_replicas: int | None = None

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
    expert_parallel: int | None = None  # MoE: devices the routed experts are spread over (serving replica or training job)
    # training: ranks each sequence is split over (planner/physics/context_parallel.py); GPUs = TP × PP × DP × CP
    context_parallel: int = 1
    # serving, MLA MoE: ranks attention runs data-parallel over within a replica, each at tensor_parallel (1) with
    # its own sequences' latent KV cache (planner/physics/attention_dp.py); None: attention is tensor parallel
    attention_data_parallel: int | None = None

    @property
    def devices_per_copy(self) -> int:
        """Devices one model copy spans on its node(s): TP × PP, times the attention DP ranks."""
        return self.tensor_parallel * self.pipeline_parallel * (self.attention_data_parallel or 1)
    pipeline_schedule: str | None = None  # training with PP > 1: 1f1b | interleaved | zb-h1 (planner/physics/pipeline_schedule.py)
    virtual_stages: int | None = None  # interleaved schedule: model chunks per device


class PlanMemory(BaseModel):
    per_device_bytes: dict[str, float]
    required_per_device_bytes: float
    usable_per_device_bytes: float
    device_memory_bytes: float
    headroom_fraction: float
    band: dict[str, list[float]] = {}  # 80% interval of required_bytes from unseen sources' peaks (planner/physics/bands.py)
    # which edge the memory fit was checked at (constraints.confidence; training, planner/physics/bands.py)
    decided_at: str = "estimate"


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
    wall_clock_s: float | None = None  # time to finish under the chosen purchase (spot: interruptions included)
    bound: str
    # 80% interval of each predicted field, from leave-one-source-out residuals (planner/physics/bands.py)
    band: dict[str, list[float]] = {}
    # which edge the deadline / latency targets were checked at (constraints.confidence)
    decided_at: str = "estimate"


class ProvisionedCost(BaseModel):
    """One thing the program provisions beside the instances, and what AWS bills for it."""
    item: str
    quantity: int
    size_gib: float
    usd_per_gib_month: float
    usd_per_hour: float  # all `quantity` of them
    price_source: str
    price_date: str
    price_estimated: bool = False
    note: str = ""


class PlanCost(BaseModel):
    usd_per_hour: float  # instances and everything provisioned with them (provisioned)
    usd_per_month: float
    hours_per_month: float
    usd_per_million_output_tokens: float | None = None
    usd_per_training_run: float | None = None
    price_source: str
    price_date: str
    price_estimated: bool = False
    instances_usd_per_hour: float | None = None  # the instances alone
    instances_usd_per_training_run: float | None = None
    provisioned: list[ProvisionedCost] = Field(default_factory=list)
    ranking_rule: str = ""  # the one price rule every candidate was ranked on (planner/economics/price_rule.py)
    ranking_usd_per_hour: float | None = None  # serving: the chosen instances under that rule


class PurchaseOption(BaseModel):
    """The chosen layout bought one way: what it costs, how long a run takes, where the price is from."""
    purchase: str
    usd_per_hour: float  # all nodes
    usd_per_month: float | None = None  # serving: the hours it runs; a commitment bills all 730
    usd_per_training_run: float | None = None
    wall_clock_s: float | None = None  # training: spot's interruptions included
    meets_deadline: bool | None = None
    commitment_years: int | None = None
    price_source: str
    price_date: str
    price_estimated: bool = False
    note: str = ""
    chosen: bool = False


class PlanFsx(BaseModel):
    deployment_type: str
    per_unit_storage_throughput: int  # MB/s per TiB
    storage_capacity_gib: int
    throughput_mb_s: float
    usd_per_month: float
    price_source: str
    price_date: str
    price_estimated: bool = False


class PlanStorage(BaseModel):
    """What training reads and writes, and where: S3 streaming, or FSx for Lustre sized for it."""
    dataset_bytes: float
    checkpoint_bytes: float
    checkpoint_interval_s: float
    read_mb_s: float
    write_mb_s: float
    checkpoint_write_s: float
    recommendation: str  # "s3" or "fsx"
    reason: str
    fsx: PlanFsx  # sized either way: what `fsx: true` provisions when S3 would do


class ManagedApi(BaseModel):
    """Self-hosting against a managed per-token API serving the same model (Amazon Bedrock on-demand)."""
    service: str
    model_id: str
    usd_per_million_input_tokens: float
    usd_per_million_output_tokens: float
    price_source: str
    price_date: str
    usd_per_request: float  # at the spec's prompt and output lengths
    self_hosted_usd_per_month_floor: float  # the autoscaling floor running every hour
    self_hosted_max_requests_per_day: float  # what the floor serves at the spec's peak-to-mean
    break_even_requests_per_day: float | None  # None: self-hosting never gets cheaper
    requests_per_day: float | None = None
    managed_usd_per_month: float | None = None
    self_hosted_usd_per_month: float | None = None
    self_hosted_usd_per_million_tokens: float | None = None  # input + output tokens at that traffic
    managed_usd_per_million_tokens: float | None = None
    cheaper: str | None = None  # "self-hosted" or "managed", at the stated traffic
    note: str = ""


class OwnedBreakEven(BaseModel):
    """Buying the node instead of renting it: the utilisation above which owning is cheaper."""
    owned_type: str
    purchase: str  # the cloud option compared against
    owned_usd_per_year: float  # capital over its lifetime, power all year, operations
    cloud_usd_per_year_at_full_use: float
    break_even_utilization: float | None  # None: the cloud option is cheaper even at 100%
    note: str = ""


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
    ranking_usd: float = 0.0  # under the plan's cost.ranking_rule; usd_per_hour is what it would be charged
    price_estimated: bool = False
    reason: str = ""  # why it lost to the chosen plan


class Rejection(BaseModel):
    instance_type: str
    reason: str


class ModelSummary(BaseModel):
    name: str
    params: float
    active_params: float
    precision: str
    kv_cache_precision: str | None = None  # serving: what the plan sized the KV cache at; the engine is told


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
    training_method: str | None = None  # full, lora or qlora
    lora_rank: int | None = None
    training_kernels: str | None = None  # eager, compiled or fused (training.kernels)
    alternatives: list[Alternative] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    purchase_options: list[PurchaseOption] = Field(default_factory=list)
    storage: PlanStorage | None = None
    managed: ManagedApi | None = None
    rent_vs_buy: list[OwnedBreakEven] = Field(default_factory=list)
    kv_sizing: KvSizing | None = None  # serving: the KV policy sized with, the other's count (planner/search/kv_sizing.py)


class PlanSet(BaseModel):
    plans: list[Plan]
    catalog: str = "bundled"
