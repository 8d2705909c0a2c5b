"""The workload spec (design.md): pydantic models, and loading from a workload YAML or a Pulumi
stack file (`config: gpuplan:workloads`). Every bad input becomes one SpecError naming the file,
the field path and what is allowed."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, field_validator, model_validator

from planner.workload.errors import SHOWN_CHARS, SpecError, field_path, shown
from planner.workload.paths import overlay_path
from planner.workload.presets import Architecture, hugging_face_presets, preset_for_model_id, presets
from planner.workload.yamlsafe import load_text
from planner.workload.strict import StrictModel
from planner.workload.suggest import allowed_keys, model_at, unknown_key

Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "mxfp4", "nvfp4"]
STACK_KEY = "gpuplan:workloads"
AWS_REGION_PATTERN = r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}$"  # us-east-1, us-gov-west-1, ap-southeast-5
STACK_CATALOG_KEY = "gpuplan:catalog"


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
    # Gradient accounting: fp32 grads give the 18 B/param Megatron figure, 16-bit the ZeRO paper's
    # 16 B/param. auto: fp32 for bf16 training (Megatron), fp16 for fp16 training (DeepSpeed).
    grad_precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
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


def _model_as_name(schema: dict) -> None:
    from planner.report.schemas import _model_as_name as as_name  # the schema module owns the wording

    as_name(schema)


class Workload(_Section):
    name: str = Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
    kind: Literal["inference", "training", "fine-tuning"]
    model: ModelRef = Field(json_schema_extra=lambda schema: _model_as_name(schema))
    precision: Precision = "bf16"
    serving: Serving | None = None
    training: Training | None = None
    constraints: Constraints = Field(default_factory=Constraints)
    layout: Layout = Field(default_factory=Layout)
    # Plan a context past the model's trained length (RoPE scaling such as YaRN; the model must be tuned for it).
    allow_context_extension: bool = False
    # Where the workload was written (file, field path), so errors raised while planning point at it.
    _file: str = PrivateAttr(default="")
    _path: str = PrivateAttr(default="")

    @property
    def file(self) -> str:
        return self._file

    @property
    def path(self) -> str:
        return self._path or f"workloads[{self.name}]"

    @model_validator(mode="after")
    def _sections_match_kind(self) -> "Workload":
        pinned = self.layout.model_fields_set
        stray = sorted(pinned & ({"data_parallel", "zero_stage", "micro_batch"} if self.kind == "inference"
                                 else {"replicas"}))
        if stray:
            what = "training" if self.kind == "inference" else "serving"
            raise ValueError(f"layout.{stray[0]} is a {what} setting and does not apply to kind {self.kind}")
        draft = self.serving.speculative_draft if self.serving is not None else None
        if draft is not None and presets()[draft].vocab_size != self.model._resolved.vocab_size:
            raise ValueError(f"serving.speculative_draft: {draft} has vocabulary {presets()[draft].vocab_size:,}, the model "
                             f"{self.model._resolved.vocab_size:,}; a draft must share the target's tokenizer")
        if self.layout.expert_parallel and not self.model._resolved.is_moe:
            raise ValueError("layout.expert_parallel applies to MoE models (experts > 1); this model is dense")
        if self.kind == "inference":
            if self.training is not None:
                raise ValueError("training: is only for kind training or fine-tuning (this workload is inference)")
            if self.serving is None:
                self.serving = Serving()
        else:
            if self.serving is not None:
                raise ValueError(f"serving: is only for kind inference (this workload is {self.kind})")
            if self.training is None:
                raise ValueError(f"kind {self.kind} needs a training: section with at least tokens")
            if self.precision in ("int8", "int4", "mxfp4", "nvfp4") and self.training.method != "qlora":
                raise ValueError(f"precision {self.precision} cannot be trained; use bf16, fp16, fp8 or fp32 "
                                 "(or training.method: qlora for a 4-bit base)")
        return self

    @model_validator(mode="after")
    def _within_trained_context(self) -> "Workload":
        trained = self.architecture.max_context_tokens
        length, field = ((self.serving.max_context_tokens, "serving.max_context_tokens") if self.serving
                         else (self.training.sequence_length, "training.sequence_length"))
        if trained and length > trained and not self.allow_context_extension:
            raise ValueError(f"{field} {length} exceeds the model's trained context ({trained} tokens); going past "
                             "it needs context extension (RoPE scaling such as YaRN, on a model tuned for it): set "
                             "allow_context_extension: true to plan it anyway")
        return self

    @model_validator(mode="after")
    def _tokens_fill_a_batch(self) -> "Workload":
        from planner.search.training import DEFAULT_BATCH_TOKENS  # the search's default; imported late (cycle)

        if self.training is None:
            return self
        batch = self.training.global_batch_tokens or DEFAULT_BATCH_TOKENS[self.kind]
        if self.training.tokens < batch:
            source = "training.global_batch_tokens" if self.training.global_batch_tokens else f"the {self.kind} default"
            raise ValueError(f"training.tokens ({self.training.tokens:g}) is less than one global batch ({batch:g} "
                             f"tokens, {source}); train on at least one batch or lower training.global_batch_tokens")
        return self

    @property
    def architecture(self) -> Architecture:
        return self.model.resolve()


class WorkloadFile(_Section):
    workloads: list[Workload] = Field(min_length=1)
    catalog: str | None = None
    # A stack file's whole `config:` (deployments, network, ...), kept so no caller reads the file twice.
    _stack_config: dict | None = PrivateAttr(default=None)

    @property
    def stack_config(self) -> dict | None:
        """The Pulumi stack config this file is, or None for a workload file."""
        return self._stack_config

    @model_validator(mode="after")
    def _unique_names(self) -> "WorkloadFile":
        names = [w.name for w in self.workloads]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"workload names must be unique; repeated: {', '.join(dupes)}")
        return self


_SECTION_FIELDS = {name: set(model.model_fields) for name, model in
                   {"serving": Serving, "training": Training, "constraints": Constraints,
                    "layout": Layout, "model": ModelRef}.items()}


def _explain(error: dict) -> str:
    kind, loc, ctx = error["type"], error["loc"], error.get("ctx") or {}
    if kind == "extra_forbidden":
        field = str(loc[-1])[:SHOWN_CHARS]
        home = [section for section, fields in _SECTION_FIELDS.items() if field in fields]
        if home:  # an exact key of another section beats a near one of this section
            return f"unknown field {field!r} here; it belongs in the {home[0]}: section"
        model = model_at(WorkloadFile, loc)
        return unknown_key(field, allowed_keys(model)) if model else f"unknown field {field!r}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')} (got {shown(error.get('input'))})"
    if kind == "missing":
        return "required field is missing"
    message = error["msg"].removeprefix("Value error, ")
    return f"{message} (got {shown(error['input'])})" if "input" in error and not isinstance(
        error["input"], (dict, list)) and kind != "value_error" else message


def parse_workloads(data: Any, file: str, keys: dict[str, str] | None = None) -> WorkloadFile:
    """Validate a `workloads:` document; the first error becomes one SpecError. `keys` renames the
    document's keys to the ones the user wrote (a stack file's `gpuplan:workloads`)."""
    keys = keys or {}
    if not isinstance(data, dict):
        raise SpecError("expected a mapping with a workloads: list", file=file)
    try:
        parsed = WorkloadFile(**data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = (keys.get(first["loc"][0], first["loc"][0]), *first["loc"][1:]) if first["loc"] else ()
        raise SpecError(_explain(first), path=field_path(loc), file=file) from None
    for index, workload in enumerate(parsed.workloads):
        workload._file, workload._path = file, f"{keys.get('workloads', 'workloads')}[{index}]"
    return parsed


STACK_DOCUMENT_KEYS = {"workloads": "gpuplan:workloads", "catalog": "gpuplan:catalog"}


# A workload or stack file is a few kilobytes; anything past this is not one (and /dev/zero never ends).
MAX_FILE_BYTES = 10 * 1024 * 1024


def read_yaml(path: str | Path) -> Any:
    """A user's YAML file, read strictly: only a regular file of sane size, no repeated or non-text keys."""
    p = Path(path)
    try:
        if not p.exists():
            raise SpecError("file not found", file=str(path))
        if not p.is_file():
            raise SpecError("not a regular file (a directory, device or pipe cannot hold workloads)", file=str(path))
        if p.stat().st_size > MAX_FILE_BYTES:
            raise SpecError(f"file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB", file=str(path))
        text = p.read_text()
    except (PermissionError, UnicodeDecodeError, OSError) as exc:
        raise SpecError(f"cannot read file ({exc.__class__.__name__})", file=str(path)) from None
    try:
        return load_text(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"malformed YAML: {problem}", path=where, file=str(path)) from None
    except RecursionError:
        raise SpecError("malformed YAML: nested too deeply to read", file=str(path)) from None


STACK_REGION_KEY = "aws:region"
# Every gpuplan:* key the program reads (README: stack config); another one is a typo, not a setting.
STACK_CONFIG_KEYS = ("gpuplan:workloads", "gpuplan:deployments", "gpuplan:catalog", "gpuplan:vpcId",
                     "gpuplan:subnetIds", "gpuplan:environment", "gpuplan:kmsKeyArn",
                     "gpuplan:calibration")  # read by the CLI: plan, frontier, check, cost, observe


def stack_document(config: dict) -> dict:
    """The workloads document inside a Pulumi stack's config. The stack's `aws:region` is where
    `pulumi up` deploys, so it is the planning region of every workload; a workload that names
    another region in constraints.region is an error, not silently overridden."""
    for key in config:
        if key.startswith("gpuplan:") and key not in STACK_CONFIG_KEYS:
            close = difflib.get_close_matches(key, STACK_CONFIG_KEYS, n=1, cutoff=0.6)
            raise SpecError("unknown gpuplan setting" + (f"; did you mean {close[0]}?" if close else
                            f"; known: {', '.join(STACK_CONFIG_KEYS)}"), path=f"config.{key[:60]}")
    if STACK_KEY not in config:
        raise SpecError(f"stack file has no {STACK_KEY} in config: (set it with "
                        f"`pulumi config set --path '{STACK_KEY.split(':')[1]}[0].name' ...`)", path="config")
    workloads = config[STACK_KEY]
    region = config.get(STACK_REGION_KEY)
    if region is not None and not (isinstance(region, str) and re.match(AWS_REGION_PATTERN, region)):
        raise SpecError(f"must be an AWS region name such as us-east-1 (got {shown(region)})",
                        path=f"config.{STACK_REGION_KEY}")
    if region is not None and isinstance(workloads, list):
        workloads = [_in_region(w, i, region) for i, w in enumerate(workloads)]
    document = {"workloads": workloads}
    if STACK_CATALOG_KEY in config:
        document["catalog"] = config[STACK_CATALOG_KEY]
    return document


def _in_region(workload: Any, index: int, region: Any) -> Any:
    if not isinstance(workload, dict):
        return workload  # the model reports the wrong type with its path
    constraints = workload.get("constraints")
    if constraints is None:
        constraints = {}
    if not isinstance(constraints, dict):
        return workload
    named = constraints.get("region")
    if named is not None and named != region:
        raise SpecError(f"{shown(named)} disagrees with the stack's {STACK_REGION_KEY} {shown(region)}: a stack deploys in "
                        f"one region; drop constraints.region or set {STACK_REGION_KEY} to it",
                        path=f"{STACK_KEY}[{index}].constraints.region")
    return {**workload, "constraints": {**constraints, "region": region}}


def load_workloads(path: str | Path, root: str | Path | None = None) -> WorkloadFile:
    """Read a workload YAML or a Pulumi stack file (`Pulumi.<stack>.yaml`). Its catalog overlay must
    lie inside `root` (default: the project holding the file; planner/workload/paths.py)."""
    data = read_yaml(path)
    keys, config = None, None
    try:
        if isinstance(data, dict) and "config" in data and "workloads" not in data:
            config = data["config"] or {}
            if not isinstance(config, dict):
                raise SpecError("must be a mapping of config keys", path="config")
            data, keys = stack_document(config), STACK_DOCUMENT_KEYS
    except SpecError as exc:
        exc.file = str(path)
        raise
    parsed = parse_workloads(data, str(path), keys)
    parsed._stack_config = config
    if parsed.catalog is not None:
        key = STACK_CATALOG_KEY if config is not None else "catalog"
        parsed.catalog = overlay_path(parsed.catalog, path, key, root)
    return parsed
