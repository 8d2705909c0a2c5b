"""Facts a resource carries about the workload it runs, independent of its gpuplan tags: the model a
SageMaker container loads and the limits its engine is told to allocate for (from the container's
environment, by the names planner/data/engine-options.yaml documents), and the layout a training
node's user data exports. The memory rule sizes from these and reports every tag that disagrees."""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from planner.physics.engines import quantize_precision
from planner.workload.presets import preset_sizing_model_id
from policies.resources import (ASG, ENDPOINT_CONFIGS, LAUNCH_TEMPLATE, NATIVE_SAGEMAKER_MODEL, SAGEMAKER_MODEL,
                                Resource)

MODELS = (SAGEMAKER_MODEL, NATIVE_SAGEMAKER_MODEL)
DTYPES = {"fp16": "fp16", "float16": "fp16", "bf16": "bf16", "bfloat16": "bf16", "fp32": "fp32", "float32": "fp32"}
# user-data export → layout tag key (components/training.py writes these)
TRAINING_EXPORTS = {"GPUPLAN_NNODES": "nodes", "GPUPLAN_TP": "tp", "GPUPLAN_PP": "pp", "GPUPLAN_DP": "dp", "GPUPLAN_CP": "cp",
                    "GPUPLAN_ZERO_STAGE": "zero", "GPUPLAN_MICRO_BATCH": "mb"}


@dataclass(frozen=True)
class ServingFacts:
    """What one container will do; None where its environment does not say."""
    model_id: str | None
    preset: str | None  # the bundled architecture that model id loads
    tp: int | None
    pp: int
    context_tokens: int | None
    batch: int | None
    precision: str | None
    memory_fraction: float | None
    problems: tuple[str, ...]  # environment values no engine would accept
    kv_cache_precision: str | None = None  # the engine's KV cache dtype; None: the model's own (16-bit)
    attention_dp: int = 1  # vLLM data_parallel_size: attention ranks of one copy (planner/physics/attention_dp.py)


def _positive_int(env: Mapping, key: str, problems: list[str]) -> int | None:
    value = env.get(key)
    if value is None:
        return None
    try:
        number = float(str(value))
    except ValueError:
        problems.append(f"{key}={str(value)[:40]!r} is not a number")
        return None
    if not math.isfinite(number) or number < 1 or number != int(number):
        problems.append(f"{key}={str(value)[:40]!r} is not a positive whole number")
        return None
    return int(number)


def _fraction(env: Mapping, problems: list[str]) -> float | None:
    for key in ("OPTION_GPU_MEMORY_UTILIZATION", "CUDA_MEMORY_FRACTION"):
        if key in env:
            try:
                value = float(str(env[key]))
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and 0 < value <= 1):
                problems.append(f"{key}={str(env[key])[:40]!r} must be a fraction from 0 to 1")
                return None
            return value
    return None


def _precision(env: Mapping, problems: list[str]) -> str | None:
    if str(env.get("OPTION_LOAD_IN_8BIT", "")).lower() == "true":
        return "int8"
    for key in ("OPTION_QUANTIZE", "HF_MODEL_QUANTIZE", "QUANTIZE"):
        if key in env:
            precision = quantize_precision(str(env[key]))
            if precision is None:
                problems.append(f"{key}={str(env[key])[:40]!r} is not a quantisation method the engines document")
            return precision
    dtype = env.get("OPTION_DTYPE") or env.get("DTYPE")
    return DTYPES.get(str(dtype).lower()) if dtype else None


# The KV cache dtype variables the engines read (engine-options.yaml: LMI/vLLM OPTION_KV_CACHE_DTYPE,
# TGI KV_CACHE_DTYPE) and the values they document: vLLM --kv-cache-dtype {auto, fp8, fp8_e4m3, fp8_e5m2},
# TGI --kv-cache-dtype {fp8_e4m3fn, fp8_e5m2}; auto keeps the model's dtype.
KV_CACHE_DTYPE_VARS = ("OPTION_KV_CACHE_DTYPE", "KV_CACHE_DTYPE")
KV_CACHE_DTYPES = {"auto": None, "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_e4m3fn": "fp8"}


def _kv_precision(env: Mapping, problems: list[str]) -> str | None:
    for key in KV_CACHE_DTYPE_VARS:
        if key in env:
            value = str(env[key]).lower()
            if value not in KV_CACHE_DTYPES:
                problems.append(f"{key}={str(env[key])[:40]!r} is not a KV cache dtype the engines document "
                                f"({', '.join(KV_CACHE_DTYPES)})")
            return KV_CACHE_DTYPES.get(value)
    return None


def serving_facts(environment: Mapping) -> ServingFacts:
    env = {str(k): v for k, v in environment.items()}
    problems: list[str] = []
    model_id = env.get("HF_MODEL_ID")
    if model_id is None and not str(env.get("SM_ON_MODEL", "/")).startswith("/"):  # optimum-neuron: a Hub id, not a path
        model_id = env.get("SM_ON_MODEL")
    model_id = model_id if isinstance(model_id, str) and model_id else None
    tp = (_positive_int(env, "OPTION_TENSOR_PARALLEL_DEGREE", problems) or _positive_int(env, "SM_NUM_GPUS", problems)
          or _positive_int(env, "SM_ON_TENSOR_PARALLEL_SIZE", problems))
    if "SM_ON_SEQUENCE_LENGTH" in env or "SM_ON_BATCH_SIZE" in env:  # optimum-neuron's vLLM server (Neuron)
        context = _positive_int(env, "SM_ON_SEQUENCE_LENGTH", problems)
        batch = _positive_int(env, "SM_ON_BATCH_SIZE", problems)
    elif "SM_NUM_GPUS" in env or "MAX_TOTAL_TOKENS" in env:  # TGI
        context = _positive_int(env, "MAX_TOTAL_TOKENS", problems)
        total = _positive_int(env, "MAX_BATCH_TOTAL_TOKENS", problems)
        batch = math.ceil(total / context) if total and context else None
    else:
        context = (_positive_int(env, "OPTION_MAX_MODEL_LEN", problems) or
                   _positive_int(env, "OPTION_N_POSITIONS", problems))
        if context is None and "OPTION_MAX_INPUT_LEN" in env:  # TRT-LLM compiles input + output lengths
            parts = [_positive_int(env, k, problems) for k in ("OPTION_MAX_INPUT_LEN", "OPTION_MAX_OUTPUT_LEN")]
            context = sum(parts) if all(parts) else None
        batch = _positive_int(env, "OPTION_MAX_ROLLING_BATCH_SIZE", problems)
    ranks = _positive_int(env, "OPTION_DATA_PARALLEL_SIZE", problems) or 1
    if batch is not None:
        batch *= ranks  # vLLM's max_num_seqs is per DP rank
    return ServingFacts(model_id=model_id, preset=preset_sizing_model_id(model_id) if model_id else None, tp=tp,
                        pp=_positive_int(env, "OPTION_PIPELINE_PARALLEL_DEGREE", problems) or 1,
                        context_tokens=context, batch=batch, precision=_precision(env, problems),
                        memory_fraction=_fraction(env, problems), kv_cache_precision=_kv_precision(env, problems),
                        problems=tuple(problems), attention_dp=ranks)


def container_environment(model: Resource) -> Mapping | None:
    p = model.props
    container = p.get("primaryContainer")
    if not isinstance(container, Mapping):
        containers = p.get("containers")
        container = containers[0] if isinstance(containers, list) and containers else None
    env = container.get("environment") if isinstance(container, Mapping) else None
    return env if isinstance(env, Mapping) else ({} if isinstance(container, Mapping) else None)


def _script(template: Resource) -> str | None:
    """A launch template's user data as text (base64 as the provider takes it, or plain), None when
    absent or unknown at preview."""
    data = template.props.get("userData")
    if not isinstance(data, str) or not data:
        return None
    try:
        return base64.b64decode(data, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return data


# components/ec2_inference.py writes the serving container's environment here, one KEY=VALUE a line
SERVING_ENV_BLOCK = re.compile(r"^cat > /etc/gpuplan/serving\.env <<'EOF'\n(.*?)^EOF$", re.MULTILINE | re.DOTALL)


def serving_exports(template: Resource) -> dict[str, str] | None:
    """The engine environment an EC2 serving node's user data hands its container, or None when the
    template is not a gpuplan serving node (or its user data is unknown at preview)."""
    script = _script(template) if template.type == LAUNCH_TEMPLATE else None
    match = SERVING_ENV_BLOCK.search(script) if script else None
    if match is None:
        return None
    return dict(line.split("=", 1) for line in match.group(1).splitlines() if "=" in line)


def training_exports(template: Resource) -> dict[str, int]:
    """The layout a launch template's user data exports to the nodes (GPUPLAN_TP=8 ...), or {} when
    the user data is absent, unknown at preview or not gpuplan's."""
    script = _script(template)
    if script is None:
        return {}
    found = {}
    for name, key in TRAINING_EXPORTS.items():
        match = re.search(rf"^{name}=(\d+)\s*$", script, re.MULTILINE)
        if match:
            found[key] = int(match.group(1))
    return found


@dataclass
class Candidates:
    """The resources of some types, indexed by URN, name and parent, so linking each of n resources to
    its sibling is a lookup, not a scan (a 10,000-endpoint stack made `check` quadratic)."""

    by_urn: dict[str, list[tuple[int, Resource]]]
    by_name: dict[object, list[tuple[int, Resource]]]
    by_parent: dict[str, list[tuple[int, Resource]]]
    all: list[Resource]


_CANDIDATES: dict = {"resources": None, "size": 0, "built": {}}  # the last resource list's indexes


def candidates_of(resources: list[Resource], types: tuple[str, ...]) -> Candidates:
    """Candidates of `types` in `resources`, built once per resource list (the list is kept, so its
    id is not reused while cached)."""
    if _CANDIDATES["resources"] is not resources or _CANDIDATES["size"] != len(resources):
        _CANDIDATES.update(resources=resources, size=len(resources), built={})
    built = _CANDIDATES["built"]
    if types not in built:
        index = Candidates({}, {}, {}, [r for r in resources if r.type in types])
        for position, r in enumerate(index.all):
            entry = (position, r)
            if r.urn:
                index.by_urn.setdefault(r.urn, []).append(entry)
            for name in {r.name, r.props.get("name")}:
                if isinstance(name, str):
                    index.by_name.setdefault(name, []).append(entry)
            if r.parent:
                index.by_parent.setdefault(r.parent, []).append(entry)
        built[types] = index
    return built[types]


def _in_order(entries) -> list[Resource]:
    return [r for _, r in sorted({id(r): (p, r) for p, r in entries}.values(), key=lambda e: e[0])]


def _linked(resource: Resource, prop: str, candidates: Candidates, by_name: str | None) -> list[Resource]:
    """Siblings `resource` points at: through the engine's property dependencies, by a known name,
    else the only candidate under the same component."""
    linked = _in_order(e for urn in set(resource.dependencies.get(prop, [])) for e in candidates.by_urn.get(urn, []))
    if linked:
        return linked
    if by_name:
        named = _in_order(candidates.by_name.get(by_name, [])) if isinstance(by_name, str) else \
            [r for r in candidates.all if r.props.get("name") == by_name or r.name == by_name]
        if named:
            return named
    same_parent = _in_order(candidates.by_parent.get(resource.parent, [])) if resource.parent else []
    return same_parent if len(same_parent) == 1 else []


def model_of(config: Resource, resources: list[Resource]) -> Resource | None:
    """The SageMaker Model an endpoint configuration's first variant serves."""
    if config.type not in ENDPOINT_CONFIGS:
        return None
    variants = config.props.get("productionVariants")
    first = variants[0] if isinstance(variants, list) and variants and isinstance(variants[0], Mapping) else {}
    linked = _linked(config, "productionVariants", candidates_of(resources, MODELS), first.get("modelName"))
    return linked[0] if len(linked) == 1 else None


def templates_of(group: Resource, resources: list[Resource]) -> list[Resource]:
    """The launch templates an Auto Scaling group starts."""
    if group.type != ASG:
        return []
    reference = group.props.get("launchTemplate")
    name = reference.get("name") or reference.get("id") if isinstance(reference, Mapping) else None
    templates = candidates_of(resources, (LAUNCH_TEMPLATE,))
    return _linked(group, "launchTemplate", templates, name) or \
        _linked(group, "mixedInstancesPolicy", templates, None)
