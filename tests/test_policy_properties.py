"""The pack cannot be talked around: random edits to the tags, the instance type and count, and the
container's engine settings never crash a rule, and never pass an endpoint whose requirement,
recomputed here from the facts alone (the model the container loads, the engine's limits), exceeds
the device. Plus custom architectures, which the tags carry whole."""

from __future__ import annotations

import copy
import math
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuplan.cli import app
from planner.hardware.catalog import bundled
from planner.physics.memory import inference_memory
from planner.workload.presets import preset_sizing_model_id, presets
from policies.resources import Resource
from policies.rules import evaluate
from tests.conftest import write_yaml
from tests.pulumi_harness import run_program
from tests.test_policies import CHAT_70B, mandatory, named, sign, stack

CATALOG = bundled()
TYPES = [f"ml.{t.name}" for t in CATALOG.instance_types] + ["ml.m5.xlarge", "ml.g7e.2xlarge", "ml.trn3.48xlarge"]
TAG_VALUES = ["nan", "inf", "-inf", "-1", "0", "0.5", "1e9", "", "int4", "fp8", "fp4", "bf16", "llama-3.1-8b",
              "llama-3.1-405b", "custom", "tp=1 pp=1 batch=1 nodes=1", "tp=8 pp=2 batch=16 nodes=2",
              "tp=3 pp=1 batch=16 nodes=2", "tp=8 pp=1 batch=1 nodes=2", "ctx=16 kv=fp16 engine=vllm",
              "ctx=8192 kv=fp8 engine=vllm", "ctx=abc", "a=b=c", "x", "training", "inference"]
ENV_VALUES = {"HF_MODEL_ID": ["meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct",
                             "meta-llama/Llama-3.1-405B-Instruct"],
              "OPTION_MAX_MODEL_LEN": ["16", "8192", "131072", "abc", "-5", "nan"],
              "OPTION_MAX_ROLLING_BATCH_SIZE": ["1", "16", "256", "0"],
              "OPTION_TENSOR_PARALLEL_DEGREE": ["1", "2", "8", "inf"],
              "OPTION_QUANTIZE": ["awq", "fp8", "bitsandbytes", "nonsense"],
              "OPTION_GPU_MEMORY_UTILIZATION": ["0.5", "0.99", "2", "nan"]}
BASE = stack()
GATES = ("accelerator-memory-fits", "accelerator-resource-planned", "instance-family-allowed")


def _number(text: str | None, default: float) -> float:
    try:
        return float(text) if text is not None else default
    except ValueError:
        return math.nan


def requirement_from_facts(env: dict, instance_type: str) -> tuple[float, float] | None:
    """(bytes needed per device, device bytes) from the container's environment alone; None when the
    environment is one no engine would start with (the rule must block those anyway)."""
    itype = CATALOG.instance(instance_type.removeprefix("ml."))
    if itype is None:
        return None
    _, device = CATALOG.sharded(itype)
    ctx, batch = _number(env.get("OPTION_MAX_MODEL_LEN"), 0), _number(env.get("OPTION_MAX_ROLLING_BATCH_SIZE"), 0)
    tp = _number(env.get("OPTION_TENSOR_PARALLEL_DEGREE"), 1)
    if not all(math.isfinite(v) and v >= 1 for v in (ctx, batch, tp)):
        return None
    quantize = {"awq": "int4", "fp8": "fp8", "bitsandbytes": "int8"}
    if env.get("OPTION_QUANTIZE", "awq") not in quantize:
        return None
    precision = quantize.get(env.get("OPTION_QUANTIZE"), "bf16")
    arch = presets()[preset_sizing_model_id(env["HF_MODEL_ID"])]
    need = inference_memory(arch, precision, "fp16", int(tp), 1, int(batch), int(ctx), device.is_neuron)
    return need.total, device.memory_bytes


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance_type=st.sampled_from(TYPES), count=st.sampled_from([1.0, 2.0, 4.0, 0.0, -1.0, math.nan]),
       tag_edits=st.dictionaries(st.sampled_from(sorted(CHAT_70B)), st.one_of(st.none(), st.sampled_from(TAG_VALUES),
                                                                             st.text(max_size=12)), max_size=4),
       reseal=st.booleans(),
       env_choice=st.fixed_dictionaries({k: st.one_of(st.none(), st.sampled_from(v)) for k, v in ENV_VALUES.items()}))
def test_random_edits_never_crash_and_never_pass_an_oversized_endpoint(instance_type, count, tag_edits, reseal,
                                                                       env_choice):
    resources = [Resource(r.type, r.name, copy.deepcopy(r.props), r.urn, r.parent, r.dependencies) for r in BASE]
    config, model = named(resources, "chat-70b-config"), named(resources, "chat-70b-model")
    variant = config.props["productionVariants"][0]
    variant["instanceType"], variant["initialInstanceCount"] = instance_type, count
    tags = {k: v for k, v in {**config.props["tags"], **tag_edits}.items() if v is not None}
    config.props["tags"] = sign(tags) if reseal else tags
    env = model.props["primaryContainer"]["environment"]
    env.update({k: v for k, v in env_choice.items() if v is not None})

    violations = evaluate(resources)  # never raises

    blocked = any(v.level == "mandatory" and v.resource == "chat-70b-config" and v.policy in GATES for v in violations)
    if not blocked:
        facts = requirement_from_facts(env, instance_type)
        assert facts is not None, (instance_type, env)
        need, device = facts
        assert need <= device, (instance_type, env, tags)


def test_a_custom_architecture_is_checked_from_its_own_tag(tmp_path):
    """A 70B-sized custom architecture: planned and deployed it passes; moved to one L40S it blocks."""
    arch = {k: v for k, v in presets()["llama-3.1-70b"].model_dump().items() if k != "source" and v is not None}
    config = {"aws:region": "us-east-1", "gpuplan:environment": "staging",
              "gpuplan:workloads": [{"name": "mine", "kind": "inference", "model": {"architecture": arch},
                                     "serving": {"max_context_tokens": 4096, "concurrent_requests": 8}}],
              "gpuplan:deployments": {"mine": {"modelDataUrl": "s3://models/mine/"}}}
    recorded = run_program(config)
    resources = [Resource(r.type, r.name, r.inputs, r.urn, r.parent, r.dependencies) for r in recorded.resources]
    endpoint = named(resources, "mine-config")
    assert endpoint.props["tags"]["gpuplan:model"] == "custom"
    assert endpoint.props["tags"]["gpuplan:architecture"].startswith("params=70553706496 layers=80 hidden=8192")
    assert mandatory(resources) == []
    # onto two NeuronCores, the engine told TP 2 and the tags re-sealed to agree: 70B of bf16 weights cannot fit
    endpoint.props["productionVariants"][0]["instanceType"] = "ml.inf2.xlarge"
    # (planned at TP 24 since issue 25's PCIe collectives refit, TP 12 before: the move keeps whatever TP it is)
    layout = re.sub(r"\btp=\d+", "tp=2", endpoint.props["tags"]["gpuplan:layout"])
    endpoint.props["tags"] = sign({**endpoint.props["tags"], "gpuplan:layout": layout})
    named(resources, "mine-model").props["primaryContainer"]["environment"]["OPTION_TENSOR_PARALLEL_DEGREE"] = "2"
    [(policy, _, message)] = [m for m in mandatory(resources) if m[0] == "accelerator-memory-fits"]
    assert message.startswith("ml.inf2.xlarge has 16.0 GiB per Inferentia2 NeuronCore")
    assert "but workload mine (custom architecture) needs 72.2 GiB per device at TP 2" in message
    stack_file = write_yaml(tmp_path / "Pulumi.dev.yaml", {"config": config})
    result = CliRunner().invoke(app, ["check", str(stack_file)])
    assert result.exit_code == 0, result.output  # `gpuplan check` no longer refuses custom architectures


def test_an_untagged_endpoint_is_sized_from_its_container():
    """Found by the property above: with its gpuplan tags stripped, a 70B container on ml.m5.xlarge (no
    accelerator, not in the catalog) passed. The container's own model and limits now size it."""
    for instance_type, blocked in (("ml.m5.xlarge", True), ("ml.p4de.24xlarge", False)):
        resources = [Resource(r.type, r.name, copy.deepcopy(r.props), r.urn, r.parent, r.dependencies) for r in BASE]
        config = named(resources, "chat-70b-config")
        config.props["productionVariants"][0]["instanceType"] = instance_type
        config.props["tags"] = {k: v for k, v in config.props["tags"].items() if not k.startswith("gpuplan:")}
        found = [v for v in evaluate(resources) if v.level == "mandatory" and v.resource == "chat-70b-config"
                 and v.policy == "accelerator-memory-fits"]
        assert bool(found) == blocked, (instance_type, found)
