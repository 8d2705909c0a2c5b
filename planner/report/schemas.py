"""The files gpuplan reads and writes, described from the pydantic models: JSON Schemas (editors
complete and check a spec with them) and docs/spec.md (every field with unit, default, range and an
example). Generated, never hand-written, so a field added to a model appears in both on the next
`python scripts/generate_docs.py`; tests/test_frontdoor.py fails while the committed copies lag."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from planner.workload.suggest import nested_model

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_NAMES = ("workloads", "stack", "overlay", "plan")
SCHEMA_FILES = {name: f"schemas/{name}.schema.json" for name in SCHEMA_NAMES}
SPEC_DOC = "docs/spec.md"

# Units by field name: exact names first, then suffixes (the spec names carry their unit, design.md).
UNIT_NAMES = {"tokens": "tokens", "sequence_length": "tokens", "params": "parameters", "active_params": "parameters",
              "peak_to_mean": "ratio", "concurrent_requests": "requests", "max_nodes": "nodes", "nodes": "nodes",
              "memory_headroom": "fraction", "max_checkpoint_share": "fraction", "lora_rank": "rank", "lora_dropout": "probability",
              "spot_interruptions_per_month": "fraction of instances per month", "requests_per_day": "requests/day",
              "hours_per_month": "h/month", "sliding_window": "tokens", "head_dim": "dimensions",
              "kv_lora_rank": "dimensions", "qk_rope_head_dim": "dimensions",
              "expert_parallel": "devices"}
UNIT_SUFFIXES = (("_tokens_per_s", "tokens/s"), ("_tokens", "tokens"), ("_ms", "ms"), ("_hours", "h"),
                 ("_minutes", "min"), ("_usd_per_month", "USD/month"), ("_bytes", "bytes"), ("_share", "fraction"))
# Examples where the default is none or there is no default (the rest show their default).
EXAMPLES = {"workloads": "[{name: chat-8b, kind: inference, model: llama-3.1-8b}]", "catalog": "my-catalog.yaml", "name": "chat-8b", "kind": "inference", "model": "meta-llama/Llama-3.1-8B-Instruct",
            "model.preset": "llama-3.1-8b", "model.architecture.params": "8.03e9", "model.architecture.layers": "32",
            "model.architecture.hidden_size": "4096", "model.architecture.attention_heads": "32",
            "model.architecture.kv_heads": "8", "model.architecture.head_dim": "128",
            "model.architecture.ffn_hidden_size": "14336", "model.architecture.vocab_size": "128256",
            "model.architecture.active_params": "12.9e9", "model.architecture.sliding_window": "4096",
            "model.architecture.sliding_window_layers": "16", "model.architecture.kv_lora_rank": "512",
            "model.architecture.qk_rope_head_dim": "64", "serving.speculative_draft": "llama-3.1-8b",
            "layout.expert_parallel": "16", "model.architecture.max_context_tokens": "131072",
            "serving.target_output_tokens_per_s": "400", "serving.max_time_to_first_token_ms": "1000",
            "serving.max_inter_token_latency_ms": "60", "serving.requests_per_day": "20000",
            "training.tokens": "2e10", "training.global_batch_tokens": "4e6", "training.deadline_hours": "168",
            "constraints.families": "[p5, g6e]", "constraints.instance_types": "[p5.48xlarge]",
            "constraints.spot_interruptions_per_month": "0.05", "constraints.max_usd_per_month": "50000",
            "layout.nodes": "2", "layout.tensor_parallel": "8", "layout.pipeline_parallel": "2", "layout.context_parallel": "2",
            "layout.data_parallel": "4", "layout.zero_stage": "1", "layout.micro_batch": "1", "layout.replicas": "2"}


def _stack_schema() -> dict:
    from planner.workload.spec import AWS_REGION_PATTERN, STACK_CONFIG_KEYS, WorkloadFile

    workloads = WorkloadFile.model_json_schema()
    config = {"aws:region": {"type": "string", "pattern": AWS_REGION_PATTERN},
              "gpuplan:workloads": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/Workload"}},
              "gpuplan:catalog": {"type": "string"}, "gpuplan:deployments": {"type": "object"},
              "gpuplan:vpcId": {"type": "string"}, "gpuplan:subnetIds": {"type": "array", "items": {"type": "string"}},
              "gpuplan:environment": {"type": "string"}, "gpuplan:kmsKeyArn": {"type": "string"},
              "gpuplan:calibration": {"type": "string"}}
    assert set(config) - {"aws:region"} == set(STACK_CONFIG_KEYS), "stack schema lags STACK_CONFIG_KEYS"
    gpuplan_keys = {"anyOf": [{"not": {"pattern": "^gpuplan:"}}, {"enum": list(STACK_CONFIG_KEYS)}]}
    return {"title": "gpuplan Pulumi stack file (Pulumi.<stack>.yaml)", "type": "object",
            "properties": {"config": {"type": "object", "properties": config, "propertyNames": gpuplan_keys,
                                      "required": ["gpuplan:workloads"]}},
            "$defs": workloads["$defs"]}


def schema_for(name: str) -> dict:
    """The JSON Schema of one file: workloads (a workload YAML), stack, overlay (a catalog file), plan."""
    from planner.hardware.catalog import Overlay
    from planner.workload.plan import PlanSet
    from planner.workload.spec import WorkloadFile

    if name == "workloads":
        body = WorkloadFile.model_json_schema()
    elif name == "stack":
        body = _stack_schema()
    elif name == "overlay":
        body = Overlay.model_json_schema(by_alias=True)
    elif name == "plan":
        body = PlanSet.model_json_schema(mode="serialization")
    else:
        raise ValueError(f"unknown schema {name!r}; one of {', '.join(SCHEMA_NAMES)}")
    return {"$schema": JSON_SCHEMA_DIALECT, **body}


@dataclass(frozen=True)
class SpecRow:
    path: str
    type: str
    unit: str
    default: str
    range: str
    example: str


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() and abs(value) < 1e7 else f"{value:g}"


def _range(field: Any) -> str:
    literal = _literal(field.annotation)
    if literal:
        return "one of " + ", ".join(str(v) for v in literal)
    parts = []
    for rule in field.metadata:
        for kind, sign, bound in ((Gt, ">", "gt"), (Ge, "≥", "ge"), (Lt, "<", "lt"), (Le, "≤", "le")):
            if isinstance(rule, kind):
                parts.append(f"{sign} {_number(getattr(rule, bound))}")
        if getattr(rule, "pattern", None):
            parts.append(f"pattern `{rule.pattern}`")
    return ", ".join(parts) or "-"


def _literal(annotation: Any) -> tuple:
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    for arg in get_args(annotation):
        found = _literal(arg)
        if found:
            return found
    return ()


def _type(annotation: Any) -> str:
    if _literal(annotation):
        return "text"
    if get_origin(annotation) is list:
        return "list of " + _type(get_args(annotation)[0])
    names = {int: "integer", float: "number", str: "text", bool: "true/false", dict: "mapping", list: "list"}
    args = [a for a in (get_args(annotation) or (annotation,)) if a is not type(None)]
    if len(args) > 1 or get_origin(args[0]) is list:
        return " or ".join(_type(a) for a in args)
    return " or ".join(names.get(get_origin(a) or a, getattr(a, "__name__", str(a))) for a in args)


def _unit(name: str) -> str:
    return UNIT_NAMES.get(name) or next((unit for suffix, unit in UNIT_SUFFIXES if name.endswith(suffix)), "-")


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default is PydanticUndefined else field.default
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return _number(value)
    if value == "":
        return '""'
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _example(path: str, field: Any, default: str) -> str:
    literal = _literal(field.annotation)
    if path in EXAMPLES:
        return EXAMPLES[path]
    if default not in ("required", "none"):
        return default
    return str(literal[0]) if literal else ""


def _rows(model: type[BaseModel], prefix: str) -> list[SpecRow]:
    from planner.workload.presets import Architecture

    rows = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        inner = Architecture if path == "model.architecture" else nested_model(field.annotation)
        if inner is not None and path != "workloads":
            rows += _rows(inner, f"{path}.")
            continue
        default = _default(field)
        rows.append(SpecRow(path, _type(field.annotation), _unit(name), default, _range(field),
                            _example(path, field, default)))
    return rows


def spec_rows() -> list[SpecRow]:
    """Every field of a workload file: the file's own keys, then each workload's (paths inside workloads[])."""
    from planner.workload.spec import Workload, WorkloadFile

    return _rows(WorkloadFile, "") + _rows(Workload, "")


def spec_markdown() -> str:
    from planner.workload.spec import WorkloadFile

    top = set(WorkloadFile.model_fields)
    lines = ["# The workload spec", "",
             "Generated from the pydantic models by `python scripts/generate_docs.py`; do not edit by hand.",
             "Every field of a workload YAML (`gpuplan plan FILE`) or of each item of a stack's",
             "`gpuplan:workloads`. Paths inside `workloads[]` are relative to one workload. Unknown keys are errors.",
             "JSON Schemas for editors: `gpuplan schema workloads|stack|overlay|plan` or `schemas/*.json`.",
             "`model:` may also be a preset name or a Hugging Face id (`model: meta-llama/Llama-3.1-8B-Instruct`).",
             "", "| field | type | unit | default | range | example |", "|---|---|---|---|---|---|"]
    for row in spec_rows():
        path = row.path if row.path in top else f"{row.path}"
        cells = (f"`{path}`", row.type, row.unit, row.default, row.range, f"`{row.example}`")
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def generated_files() -> dict[str, str]:
    """Repository path → text of every generated file (scripts/generate_docs.py writes them)."""
    files = {SCHEMA_FILES[name]: json.dumps(schema_for(name), indent=2, ensure_ascii=False) + "\n"
             for name in SCHEMA_NAMES}
    files[SPEC_DOC] = spec_markdown()
    return files
