"""The workload spec (design.md): pydantic models, and loading from a workload YAML or a Pulumi
stack file (`config: gpuplan:workloads`). Every bad input becomes one SpecError naming the file,
the field path and what is allowed."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, PrivateAttr, ValidationError, model_validator

from planner.workload.errors import SHOWN_CHARS, SpecError, field_path, shown
from planner.workload.paths import overlay_path
from planner.workload.presets import Architecture, presets
from planner.workload.yamlsafe import load_text
from planner.workload.suggest import allowed_keys, model_at, unknown_key
from planner.workload.sections import (  # noqa: F401 (Precision, AWS_REGION_PATTERN: read from here too)
    AWS_REGION_PATTERN, DEFAULT_BATCH_TOKENS, Constraints, Layout, ModelRef, Precision, Serving, Training, _Section,
    model_as_name)

STACK_KEY = "gpuplan:workloads"
STACK_CATALOG_KEY = "gpuplan:catalog"


class Workload(_Section):
    name: str = Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
    kind: Literal["inference", "training", "fine-tuning"]
    model: ModelRef = Field(json_schema_extra=lambda schema: model_as_name(schema))
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
        stray = sorted(pinned & ({"data_parallel", "zero_stage", "micro_batch", "context_parallel"} if self.kind == "inference"
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
            cp, seq = self.layout.context_parallel or 1, self.training.sequence_length
            if seq % (2 * cp) and cp > 1:  # planner/physics/context_parallel.py splits
                raise ValueError(f"layout.context_parallel {cp} must cut training.sequence_length ({seq}) into "
                                 f"2 × {cp} equal chunks; use a CP degree with {seq} divisible by 2 × CP")
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
