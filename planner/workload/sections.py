"""The sections of a workload (model, serving, training, constraints, layout): each field's type, bound and
default, and the checks that need only its own section. planner/workload/spec.py composes them into a
workload and reads files; split out so each module reads in one sitting (issue 30)."""

from __future__ import annotations

import difflib
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from planner.workload.errors import shown
from planner.workload.presets import Architecture, hugging_face_presets, preset_for_model_id, presets
from planner.workload.strict import StrictModel
from planner.workload.suggest import allowed_keys, unknown_key

Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "mxfp4", "nvfp4"]
AWS_REGION_PATTERN = r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}$"  # us-east-1, us-gov-west-1, ap-southeast-5
# Tokens per optimizer step when training.global_batch_tokens is unset: the spec checks a run holds one
# batch, the search splits it into micro-batches. Llama 2 pre-training used 4M tokens.
DEFAULT_BATCH_TOKENS = {"training": 4.0e6, "fine-tuning": 2.5e5}


def model_as_name(schema: dict[str, Any]) -> None:
    """`model:` is a mapping or a name (preset or Hugging Face id): say so in the schema."""
    ref = dict(schema)
    schema.clear()
    schema["anyOf"] = [ref, {"type": "string", "description": "a preset (`gpuplan models`) or a Hugging Face id"}]


class _Section(StrictModel):
    pass


class ModelRef(_Section):
    preset: str | None = None
    architecture: dict[str, Any] | None = None
    _resolved: Architecture = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        """`model: meta-llama/Llama-3.1-8B-Instruct` or `model: llama-3.1-8b` names a preset."""
        return {"preset": model_name_to_preset(data)} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _preset_or_architecture(self) -> "ModelRef":
        if self.preset is None and not self.architecture:
            raise ValueError("give a preset (see `gpuplan models`) or an architecture")
        if self.preset is not None and self.preset not in presets():
            close = difflib.get_close_matches(self.preset, list(presets()), n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else "; run `gpuplan models` for the list"
            raise ValueError(f"unknown preset {shown(self.preset)}{hint}")
        base = presets()[self.preset].model_dump() if self.preset else {}
        try:
            self._resolved = Architecture(**{**base, **(self.architecture or {})})
        except ValidationError as exc:
            raise ValueError(_architecture_error(exc.errors())) from None
        return self

    def resolve(self) -> Architecture:
        """The preset with any explicit architecture fields laid over it (validated once)."""
        return self._resolved


def model_name_to_preset(name: str) -> str:
    """A preset name, or the preset a Hugging Face id maps to (models.yaml `hugging_face:`)."""
    if name in presets():
        return name
    preset = preset_for_model_id(name)
    if preset is not None:
        return preset
    known = [*presets(), *hugging_face_presets()]
    close = difflib.get_close_matches(name.strip().lower(), known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise ValueError(f"unknown model {shown(name)}: not a preset (`gpuplan models`) nor a Hugging Face id the "
                     f"presets know{hint}; otherwise give model: {{architecture: {{...}}}}")


def _architecture_error(errors: list[dict]) -> str:
    """Every missing field at once (a custom architecture needs them all); otherwise the first error."""
    missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing" and e["loc"]]
    if missing:
        return f"architecture is missing {', '.join(missing)} (a custom architecture needs each of them)"
    first = errors[0]
    field = ".".join(str(p) for p in first["loc"])
    if first["type"] == "extra_forbidden":
        return f"architecture.{field}: {unknown_key(field, allowed_keys(Architecture))}"
    return f"architecture{'.' + field if field else ''}: {first['msg'].removeprefix('Value error, ')}"


class Serving(_Section):
    engine: Literal["auto", "vllm", "tgi", "lmi", "tensorrt-llm", "neuron"] = "auto"
    max_context_tokens: int = Field(default=4096, gt=0, le=10_000_000)
    prompt_tokens: int = Field(default=1024, gt=0, le=10_000_000)
    output_tokens: int = Field(default=256, gt=0, le=10_000_000)
    concurrent_requests: int = Field(default=16, gt=0, le=1_000_000)
    target_output_tokens_per_s: float | None = Field(default=None, gt=0, le=1e9)
    max_time_to_first_token_ms: float | None = Field(default=None, gt=0, le=3.6e6)
    max_inter_token_latency_ms: float | None = Field(default=None, gt=0, le=3.6e6)
    # interactive: with no latency target, planner/workload/defaults.py holds the plan to interactive ones; batch: none
    mode: Literal["interactive", "batch"] = "interactive"
    kv_cache_precision: Literal["fp32", "bf16", "fp16", "fp8", "int8"] = "fp16"
    # KV reserved per sequence: max_context_tokens (worst-case), or prompt + output tokens in the engine's
    # KV blocks (typical: admits more sequences, at a preemption risk; planner/search/kv_sizing.py)
    kv_sizing: Literal["worst-case", "typical"] = "worst-case"
    # Expected share of each prompt already in the engine's prefix cache (shared system prompt, chat
    # history, few-shot examples): that part is not prefilled again (planner/physics/prefix.py).
    prefix_hit_share: float = Field(default=0.0, ge=0, lt=1)
    # Speculative decoding (planner/physics/speculative.py): a draft preset sharing the target's vocabulary,
    # tokens it proposes per step, and the share of them the target accepts (measure it on your traffic).
    speculative_draft: str | None = Field(default=None, max_length=64)
    speculative_tokens: int = Field(default=4, ge=1, le=16)
    speculative_acceptance_rate: float = Field(default=0.7, gt=0, lt=1)
    hours_per_month: float = Field(default=730.0, gt=0, le=744)
    # Traffic, for the managed-API comparison: requests a day, and the busiest hour's rate over the
    # day's mean (2: an assumed day/night swing; set your own from the endpoint's metrics).
    requests_per_day: float | None = Field(default=None, gt=0, le=1e12)
    peak_to_mean: float = Field(default=2.0, ge=1, le=1000)

    @model_validator(mode="after")
    def _typical_request_fits(self) -> "Serving":
        if self.speculative_draft is not None and self.speculative_draft not in presets():
            raise ValueError(f"speculative_draft: unknown preset {shown(self.speculative_draft)} (see `gpuplan models`)")
        if self.prompt_tokens + self.output_tokens > self.max_context_tokens:
            raise ValueError(
                f"prompt_tokens + output_tokens ({self.prompt_tokens + self.output_tokens}) exceeds "
                f"max_context_tokens ({self.max_context_tokens})")
        return self


class Training(_Section):
    method: Literal["full", "lora", "qlora"] = "full"
    tokens: float = Field(gt=0, le=1e15)
    sequence_length: int = Field(default=4096, gt=0, le=10_000_000)
    global_batch_tokens: float | None = Field(default=None, gt=0, le=1e9)
    optimizer: Literal["adamw", "adam", "sgd", "adafactor"] = "adamw"
    activation_checkpointing: Literal["none", "selective", "full", "auto"] = "auto"
    deadline_hours: float | None = Field(default=None, gt=0, le=1e6)
    lora_rank: int = Field(default=16, gt=0, le=4096)
    # Dropout on the adapters' input (PEFT's default 0): above 0 each adapter keeps a dropped copy of its input and
    # a mask through the backward (planner/physics/adapter_memory.py adapter_dropout_bytes_per_layer).
    lora_dropout: float = Field(default=0.0, ge=0, lt=1)
    # The matrices the adapters train (planner/physics/lora_traffic.py): every linear layer (PEFT's "all-linear"), or
    # the attention's query, key and value, or query and value only (the LoRA paper's and LitGPT's default).
    lora_targets: Literal["all", "qkv", "qv"] = "all"
    # Gradient accounting: fp32 grads give the 18 B/param Megatron figure, 16-bit the ZeRO paper's
    # 16 B/param. auto: fp32 for bf16 training (Megatron), fp16 for fp16 training (DeepSpeed).
    grad_precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    # The kernels the training code runs (planner/physics/efficiency.py FUSED_KERNELS_FACTOR,
    # COMPILED_NONMATMUL_SHARE): eager, PyTorch modules with FlashAttention-2 (FSDP and DeepSpeed scripts, HF Trainer,
    # nanotron); compiled, the same model under torch.compile (torchtitan's and torchtune's `compile` flag, IBM
    # fms-fsdp, OLMo-core), whose norms, rotary embeddings, SwiGLU and residual adds run as fused Triton kernels;
    # fused, Transformer Engine (Megatron-Core, NeMo): fused attention, norms and FP8 casts.
    kernels: Literal["eager", "compiled", "fused"] = "eager"
    # Storage (planner/economics/storage.py): the dataset on disk, how often a checkpoint is taken, the share of
    # that interval its write may take, and how long a replaced node takes to rejoin (spot restarts).
    dataset_format: Literal["tokenized", "text"] = "tokenized"
    # At least a minute: a checkpoint more often than its own write (tens of seconds) is not a schedule.
    checkpoint_interval_minutes: float = Field(default=60.0, ge=1, le=7 * 24 * 60)
    max_checkpoint_share: float = Field(default=0.05, gt=0, le=0.5)
    restart_minutes: float = Field(default=10.0, ge=0, le=24 * 60)  # assumed: relaunch, image pull, NCCL init

    @model_validator(mode="after")
    def _batch_holds_a_sequence(self) -> "Training":
        if self.global_batch_tokens is not None and self.global_batch_tokens < self.sequence_length:
            raise ValueError(f"global_batch_tokens ({self.global_batch_tokens:g}) is smaller than one "
                             f"sequence ({self.sequence_length} tokens)")
        return self


class Constraints(_Section):
    region: str = Field(default="us-east-1", pattern=AWS_REGION_PATTERN)
    families: list[str] = Field(default_factory=list)
    instance_types: list[str] = Field(default_factory=list)
    max_nodes: int = Field(default=64, gt=0, le=4096)
    purchase: Literal["on-demand", "spot", "reserved-1y", "reserved-3y", "savings-plan-1y", "savings-plan-3y",
                      "capacity-block", "auto"] = "on-demand"
    # Share of spot instances reclaimed per month; default: the type's Spot Instance Advisor band.
    spot_interruptions_per_month: float | None = Field(default=None, gt=0, le=1)
    max_usd_per_month: float | None = Field(default=None, gt=0)
    memory_headroom: float = Field(default=0.10, ge=0, lt=0.9)
    deploy_target: Literal["auto", "sagemaker", "ec2"] = "auto"
    # likely: deadlines and latency targets must hold at the slow edge of the 80% band (planner/physics/bands.py)
    confidence: Literal["expected", "likely"] = "likely"

    @field_validator("families")
    @classmethod
    def _lower(cls, families: list[str]) -> list[str]:
        return [f.lower() for f in families]


class Layout(_Section):
    nodes: int | None = Field(default=None, gt=0, le=4096)
    tensor_parallel: int | None = Field(default=None, gt=0, le=64)
    pipeline_parallel: int | None = Field(default=None, gt=0, le=512)
    data_parallel: int | None = Field(default=None, gt=0, le=65536)
    zero_stage: int | None = Field(default=None, ge=0, le=3)
    micro_batch: int | None = Field(default=None, gt=0, le=4096)
    replicas: int | None = Field(default=None, gt=0, le=10_000)
    expert_parallel: int | None = Field(default=None, gt=0, le=4096)  # MoE: devices the routed experts spread over (TP × EP)
    context_parallel: int | None = Field(default=None, gt=0, le=64)  # training: ranks each sequence is split over
