"""The tags every accelerator resource carries: enough of the workload and the plan for a policy to
recompute the per-device memory requirement whatever instance type the resource names.

Tags are read strictly: a missing, malformed or non-finite value is a TagError naming the tag, never
a default and never a crash. The tag set is one unit, sealed by `gpuplan:digest`, so a hand edit of
one tag shows; the policy rules still check the tags against the facts on the resources (the model
the container loads, the engine's limits, the node count), which a consistent lie cannot escape.

Values use space-separated `key=value` pairs: SageMaker tag values allow letters, digits, spaces and
`_ . : / = + - @` only (API Tag, pattern `[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*`, at most 256 characters),
so no commas."""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import get_args

from pydantic import ValidationError

from planner.physics import attention_dp
from planner.hardware.catalog import Catalog
from planner.search.kv_sizing import kv_tokens_per_sequence
from planner.physics.memory import MemoryBreakdown, TrainingSetup, inference_memory, training_memory
from planner.workload.plan import Plan
from planner.workload.presets import Architecture, presets
from planner.workload.spec import Precision, Serving, Training, Workload

PREFIX = "gpuplan:"
WORKLOAD = PREFIX + "workload"
DIGEST = PREFIX + "digest"
ARCHITECTURE = PREFIX + "architecture"
RUN_HOURS = PREFIX + "run-hours"
# AWS's tag value pattern, [\p{L}\p{Z}\p{N}_.:/=+\-@]* (botocore's sagemaker TagValue shape), at most 256
# characters. Python's re has no \p{..}, so tag_value_problem tests Unicode categories directly; this
# ASCII-and-word approximation (\w without \s: a newline or tab is not \p{Z}) stays for quick checks.
TAG_VALUE_PATTERN = re.compile(r"^[\w .:/=+\-@]*$")
MAX_TAG_VALUE_CHARS = 256
TAG_VALUE_PUNCTUATION = "_.:/=+-@"


def tag_value_problem(value: object) -> str | None:
    """Why AWS would refuse `value` as a tag value, or None when it accepts it."""
    if not isinstance(value, str):
        return f"must be text (got {type(value).__name__})"
    if len(value) > MAX_TAG_VALUE_CHARS:
        return f"at most {MAX_TAG_VALUE_CHARS} characters (got {len(value)})"
    bad = sorted({c for c in value if c not in TAG_VALUE_PUNCTUATION and unicodedata.category(c)[0] not in "LZN"})
    if bad:
        return (f"AWS tag values allow only letters, digits, spaces and {TAG_VALUE_PUNCTUATION} "
                f"(found {''.join(bad)[:20]!r})")
    return None
KINDS = ("inference", "training", "fine-tuning")
PRECISIONS = get_args(Precision)
# The architecture tag's short keys, in Architecture's field order (AWS caps a value at 256 characters).
ARCH_KEYS = {"params": "params", "layers": "layers", "hidden_size": "hidden", "attention_heads": "heads",
             "kv_heads": "kvh", "head_dim": "hd", "ffn_hidden_size": "ffn", "vocab_size": "vocab",
             "experts": "experts", "active_experts": "active", "shared_experts": "shared",
             "active_params": "aparams", "tied_embeddings": "tied", "sliding_window": "window",
             "sliding_window_layers": "wlayers", "max_context_tokens": "maxctx"}
# (smallest, largest) of each integer the layout tag may hold (the spec's own bounds).
LAYOUT_INTS = {"tp": (1, 64), "pp": (1, 512), "dp": (1, 65536), "cp": (1, 64), "zero": (0, 3), "mb": (1, 4096), "m": (1, 1 << 20), "vs": (1, 64),
               "adp": (1, 4096), "replicas": (1, 10_000), "batch": (1, 1 << 20), "nodes": (1, 4096)}
CHECKPOINTING = ("none", "selective", "full")


class TagError(ValueError):
    """A gpuplan tag the rules cannot use: `tag` is its key as written on the resource."""

    def __init__(self, tag: str, message: str) -> None:
        super().__init__(f"tag {tag}: {message}")
        self.tag = tag


def _pairs(values: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items() if v is not None)


def _unpairs(tag: str, text: str, allowed: set[str] | dict) -> dict[str, str]:
    """`k=v k=v` with keys from `allowed`; commas are read too (tags written before SageMaker's
    character rule was honoured)."""
    items = [item for item in re.split(r"[\s,]+", text.strip()) if item]
    bad = [item for item in items if "=" not in item]
    if bad:
        raise TagError(tag, f"{_short(bad[0])!r} is not key=value")
    pairs = dict(item.split("=", 1) for item in items)
    if len(pairs) != len(items):
        raise TagError(tag, "a key appears twice")
    unknown = set(pairs) - set(allowed)
    if unknown:
        raise TagError(tag, f"unknown key {sorted(unknown)[0]!r}")
    return pairs


def _short(value: object, limit: int = 40) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def digest(tags: dict[str, str]) -> str:
    """A seal over every other gpuplan tag: sha256 of the sorted `key=value` lines, 16 hex digits."""
    lines = sorted(f"{k}={v}" for k, v in tags.items() if isinstance(k, str) and k.startswith(PREFIX) and k != DIGEST)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def architecture_tag(arch: Architecture) -> str:
    fields = arch.model_dump(exclude={"source"})
    defaults = Architecture.model_fields
    values = {short: (int(v) if isinstance(v, bool) or (isinstance(v, float) and v.is_integer()) else v)
              for name, short in ARCH_KEYS.items()
              if (v := fields[name]) is not None and (name in ("params", "layers") or v != defaults[name].default)}
    return _pairs(values)


def plan_tags(plan: Plan, w: Workload, environment: str = "production") -> dict[str, str]:
    lay = plan.layout
    custom = w.model.preset is None or bool(w.model.architecture)
    tags = {
        WORKLOAD: plan.workload,
        PREFIX + "kind": plan.kind,
        PREFIX + "model": "custom" if custom else w.model.preset,
        PREFIX + "precision": w.precision,
        PREFIX + "layout": _pairs({"tp": lay.tensor_parallel, "pp": lay.pipeline_parallel, "dp": lay.data_parallel,
                                   "cp": lay.context_parallel if lay.context_parallel > 1 else None,
                                   "zero": lay.zero_stage, "mb": lay.micro_batch, "m": lay.microbatches, "vs": lay.virtual_stages if lay.pipeline_schedule == "interleaved" else None,
                                   "ckpt": lay.activation_checkpointing, "replicas": lay.replicas,
                                   "batch": lay.batch_per_replica, "nodes": plan.choice.nodes,
                                   "adp": lay.attention_data_parallel}),
        PREFIX + "required-bytes": str(int(plan.memory.required_per_device_bytes)),
        PREFIX + "headroom": f"{w.constraints.memory_headroom:g}",
        PREFIX + "monthly-usd": f"{plan.cost.usd_per_month:.2f}",
        PREFIX + "environment": environment,
        PREFIX + "region": plan.choice.region,
    }
    if custom:
        tags[ARCHITECTURE] = architecture_tag(w.architecture)
    if w.kind == "inference":
        typical = plan.kv_sizing is not None and plan.kv_sizing.policy == "typical"  # the pack sizes as the plan did
        tags[PREFIX + "serving"] = _pairs({"ctx": w.serving.max_context_tokens, "kv": w.serving.kv_cache_precision,
                                           "engine": plan.engine, "kvs": "typical" if typical else None,
                                           "kvt": plan.kv_sizing.tokens_per_sequence if typical else None})
    else:
        t = w.training
        lora = t.method != "full"  # adapter settings only where there are adapters, and only off their defaults
        tags[PREFIX + "training"] = _pairs({"method": t.method, "seq": t.sequence_length, "opt": t.optimizer,
                                            "grad": t.grad_precision, "rank": t.lora_rank,
                                            "drop": t.lora_dropout if lora and t.lora_dropout else None,
                                            "tgt": t.lora_targets if lora and t.lora_targets != "all" else None})
        seconds = plan.performance.wall_clock_s or plan.performance.time_to_train_s
        if seconds:  # what one run occupies the cluster: the budget rule prices a run, not a month
            tags[RUN_HOURS] = f"{seconds / 3600:.2f}"
    tags[DIGEST] = digest(tags)
    return tags


@dataclass(frozen=True)
class TaggedWorkload:
    """What the tags say, parsed and range-checked."""
    workload: str
    kind: str
    model: str
    architecture: Architecture
    precision: str
    layout: dict[str, int | str]
    details: dict[str, str | int]
    headroom: float
    environment: str
    region: str
    run_hours: float | None = None  # training: one run's wall-clock hours

    def int_of(self, key: str, default: int = 1) -> int:
        return int(self.layout.get(key, default))


def _int(tag: str, key: str, text: str, low: int, high: int) -> int:
    try:
        number = float(text)
    except ValueError:
        raise TagError(tag, f"{key}={_short(text)!r} is not a number") from None
    if not math.isfinite(number) or number != int(number) or not low <= number <= high:
        raise TagError(tag, f"{key}={_short(text)!r} must be a whole number from {low} to {high:,}")
    return int(number)


def _probability(tag: str, key: str, text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise TagError(tag, f"{key}={_short(text)!r} is not a number") from None
    if not 0 <= number < 1:  # NaN fails both
        raise TagError(tag, f"{key}={_short(text)!r} must be at least 0 and below 1")
    return number


def _choice(tag: str, key: str, text: str, allowed: tuple) -> str:
    if text not in allowed:
        raise TagError(tag, f"{key}={_short(text)!r} is not one of {', '.join(allowed)}")
    return text


def _layout(text: str) -> dict[str, int | str]:
    tag = PREFIX + "layout"
    raw = _unpairs(tag, text, {*LAYOUT_INTS, "ckpt"})
    layout: dict[str, int | str] = {k: _int(tag, k, v, *LAYOUT_INTS[k]) for k, v in raw.items() if k != "ckpt"}
    if "ckpt" in raw:
        layout["ckpt"] = _choice(tag, "ckpt", raw["ckpt"], CHECKPOINTING)
    for key in ("tp", "pp", "nodes"):
        if key not in layout:
            raise TagError(tag, f"{key}= is missing")
    return layout


def _serving(text: str) -> dict[str, str | int]:
    tag = PREFIX + "serving"
    raw = _unpairs(tag, text, {"ctx", "kv", "engine", "kvs", "kvt"})
    if "ctx" not in raw:
        raise TagError(tag, "ctx= is missing")
    fields = Serving.model_fields
    ctx = _int(tag, "ctx", raw["ctx"], 1, 10_000_000)
    return {"ctx": ctx,
            "kv": _choice(tag, "kv", raw.get("kv", "fp16"), get_args(fields["kv_cache_precision"].annotation)),
            "engine": _choice(tag, "engine", raw.get("engine", "vllm"), get_args(fields["engine"].annotation)),
            # serving.kv_sizing: typical sizes kvt= tokens per sequence (planner/search/kv_sizing.py), at most ctx=
            "kvs": _choice(tag, "kvs", raw.get("kvs", "worst-case"), get_args(fields["kv_sizing"].annotation)),
            "kvt": _int(tag, "kvt", raw.get("kvt", str(ctx)), 1, ctx)}


def _training(text: str) -> dict[str, str | int]:
    tag = PREFIX + "training"
    raw = _unpairs(tag, text, {"method", "seq", "opt", "grad", "rank", "drop", "tgt"})
    fields = Training.model_fields
    return {"method": _choice(tag, "method", raw.get("method", "full"), get_args(fields["method"].annotation)),
            "seq": _int(tag, "seq", raw.get("seq", "4096"), 1, 10_000_000),
            "opt": _choice(tag, "opt", raw.get("opt", "adamw"), get_args(fields["optimizer"].annotation)),
            "grad": _choice(tag, "grad", raw.get("grad", "auto"), get_args(fields["grad_precision"].annotation)),
            "rank": _int(tag, "rank", raw.get("rank", "16"), 1, 4096),
            "drop": _probability(tag, "drop", raw.get("drop", "0")),
            "tgt": _choice(tag, "tgt", raw.get("tgt", "all"), get_args(fields["lora_targets"].annotation))}


def _architecture(model: str, tags: dict[str, str]) -> Architecture:
    text = tags.get(ARCHITECTURE)
    if text is None:
        if model not in presets():
            raise TagError(PREFIX + "model", f"{_short(model)!r} is not a bundled preset and no {ARCHITECTURE} tag "
                                             "describes it")
        return presets()[model]
    names = {short: name for name, short in ARCH_KEYS.items()}
    raw = _unpairs(ARCHITECTURE, text, names)
    try:
        values = {names[k]: float(v) for k, v in raw.items()}
    except ValueError:
        raise TagError(ARCHITECTURE, "every value must be a number") from None
    if not all(math.isfinite(v) for v in values.values()):
        raise TagError(ARCHITECTURE, "every value must be finite")
    whole = {k: int(v) if k not in ("params", "active_params") and v == int(v) else v for k, v in values.items()}
    try:
        return Architecture(**whole)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise TagError(ARCHITECTURE, f"{ARCH_KEYS.get(where, where) or 'value'}: "
                                     f"{first['msg'].removeprefix('Value error, ')}") from None


def _required(tags: dict[str, str], key: str) -> str:
    value = tags.get(PREFIX + key)
    if not isinstance(value, str) or not value:
        raise TagError(PREFIX + key, "is missing")
    return value


def read_tags(tags: dict) -> TaggedWorkload | None:
    """The planned workload behind a resource's tags; None when it carries no gpuplan:workload tag."""
    if not tags or WORKLOAD not in tags:
        return None
    sealed = tags.get(DIGEST)
    if sealed is None:
        raise TagError(DIGEST, "is missing: tags not written by gpuplan cannot be trusted; re-plan the workload")
    if sealed != digest(tags):
        raise TagError(DIGEST, "does not match the other gpuplan tags, so one was edited by hand; re-plan instead")
    kind = _choice(PREFIX + "kind", "kind", _required(tags, "kind"), KINDS)
    model = _required(tags, "model")
    headroom_text = _required(tags, "headroom")
    try:
        headroom = float(headroom_text)
    except ValueError:
        raise TagError(PREFIX + "headroom", f"{_short(tags[PREFIX + 'headroom'])!r} is not a number") from None
    if not (math.isfinite(headroom) and 0 <= headroom < 0.9):
        raise TagError(PREFIX + "headroom", f"{_short(tags[PREFIX + 'headroom'])!r} must be from 0 to below 0.9")
    section = "serving" if kind == "inference" else "training"
    return TaggedWorkload(
        workload=tags[WORKLOAD], kind=kind, model=model, architecture=_architecture(model, tags),
        precision=_choice(PREFIX + "precision", "precision", _required(tags, "precision"), PRECISIONS),
        layout=_layout(_required(tags, "layout")),
        details=(_serving if kind == "inference" else _training)(_required(tags, section)),
        headroom=headroom,
        environment=tags.get(PREFIX + "environment", "production"), region=_required(tags, "region"),
        run_hours=_run_hours(tags.get(RUN_HOURS)))


def _run_hours(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        hours = float(text)
    except ValueError:
        raise TagError(RUN_HOURS, f"{_short(text)!r} is not a number") from None
    if not (math.isfinite(hours) and 0 < hours <= 1e6):
        raise TagError(RUN_HOURS, f"{_short(text)!r} must be above 0 and at most 1,000,000 hours")
    return hours


def required_memory(tagged: TaggedWorkload, catalog: Catalog, instance_type: str) -> MemoryBreakdown | str:
    """Per-device memory the tagged workload needs on `instance_type`; a string says why it cannot be known."""
    arch = tagged.architecture
    itype = catalog.instance(instance_type)
    if itype is None:
        return f"instance type {instance_type} is not in the catalog"
    tp, pp = tagged.int_of("tp"), tagged.int_of("pp")  # in the type's sharding unit: GPUs or NeuronCores
    accel = catalog.accelerator(itype.accelerator)
    if tagged.kind == "inference":
        d, batch = tagged.details, tagged.int_of("batch")
        tokens = kv_tokens_per_sequence(str(d.get("kvs", "worst-case")), int(d["ctx"]), int(d.get("kvt", d["ctx"])), batch)
        ranks = tagged.int_of("adp")
        if ranks > 1:  # attention data-parallel over `ranks` devices at TP 1 (planner/physics/attention_dp.py)
            return attention_dp.inference_memory(arch, tagged.precision, str(d["kv"]), ranks, batch, tokens)
        return inference_memory(arch, tagged.precision, str(d["kv"]), tp, pp, batch, tokens, accel.is_neuron)
    d = tagged.details
    setup = TrainingSetup(str(d["method"]), tagged.precision, str(d["opt"]), str(d["grad"]), int(d["rank"]),
                          int(d["seq"]), lora_dropout=float(d.get("drop", 0)), lora_targets=str(d.get("tgt", "all")))
    return training_memory(arch, setup, tp, pp, tagged.int_of("dp"), tagged.int_of("zero", 0), tagged.int_of("mb"),
                           tagged.int_of("m"), str(tagged.layout.get("ckpt", "full")), accel.supports.flash_attention,
                           tagged.int_of("vs"), accel.is_neuron, cp=tagged.int_of("cp"))
