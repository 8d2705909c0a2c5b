"""Issue 24, "the gate can be talked around": a stack's overlay cannot redefine bundled hardware,
overlay figures are bounded, the policy config is validated, and a container's model id is resolved
from its own evidence, never silently from the tags."""

from __future__ import annotations

import copy
import json

import pytest
from typer.testing import CliRunner

from gpuplan.cli import app
from planner.hardware.catalog import bundled
from planner.workload.presets import preset_sizing_model_id
from policies.rules import evaluate
from tests.conftest import ROOT, write_yaml
from tests.test_policies import example_config, named, stack as BASE_STACK, validate_stack

A10G = bundled().accelerator("A10G").model_dump(exclude_none=False)
G6E = bundled().instance("g6e.xlarge").model_dump(exclude_none=True, exclude={"prices", "offered_regions"})


def _a10g(**changes) -> dict:
    data = {k: v for k, v in copy.deepcopy(A10G).items() if v is not None}
    data["tflops"] = {k: v for k, v in data["tflops"].items() if v is not None}
    return {**data, **changes}


def _stack_70b_on_g5(tmp_path, overlay: dict | None) -> str:
    config = {"aws:region": "us-east-1", "gpuplan:environment": "staging",
              "gpuplan:workloads": [{"name": "big", "kind": "inference", "model": {"preset": "llama-3.1-70b"},
                                     "serving": {"max_context_tokens": 4096, "concurrent_requests": 1,
                                                 "mode": "batch"},  # no latency defaults: the forged memory alone decides
                                     "constraints": {"instance_types": ["g5.xlarge"]}}],
              "gpuplan:deployments": {"big": {"hfModelId": "meta-llama/Llama-3.1-70B-Instruct"}}}
    if overlay is not None:
        write_yaml(tmp_path / "overlay.yaml", overlay)
        config["gpuplan:catalog"] = "overlay.yaml"
    return str(write_yaml(tmp_path / "Pulumi.dev.yaml", {"config": config}))


def test_an_overlay_cannot_redefine_bundled_memory_in_check(tmp_path):
    """The quoted case: A10G re-declared with memory_mib 10000000 made 70B pass on one g5.xlarge."""
    plain = CliRunner().invoke(app, ["check", _stack_70b_on_g5(tmp_path, None)])
    assert plain.exit_code == 1, plain.output
    forged = {"accelerators": [_a10g(memory_mib=10_000_000)]}
    result = CliRunner().invoke(app, ["check", _stack_70b_on_g5(tmp_path, forged)])
    assert result.exit_code in (1, 2), result.output
    assert "accelerators[0].memory_mib: must be from 256 to 2097152 MiB" in result.output, result.output


def test_an_overlay_cannot_redefine_bundled_facts_within_bounds(tmp_path):
    """Within the plausible range, a redefinition is still a mandatory violation naming the field."""
    forged = {"accelerators": [_a10g(memory_mib=200_000)]}
    result = CliRunner().invoke(app, ["check", _stack_70b_on_g5(tmp_path, forged)])
    assert result.exit_code == 1, result.output
    assert "[mandatory] bundled-hardware-unchanged" in result.output
    assert "A10G.memory_mib: bundled 22888, overlay 200000" in result.output


def test_an_overlay_may_add_types_and_prices_and_repeat_bundled_facts():
    same = _a10g(source="my copy")
    itype = {**G6E, "usd_per_hour": 1.0, "source": "my quote"}
    new = {**G6E, "name": "g6e.mine", "accelerators_per_node": 2}
    found = [v for v in evaluate(BASE_STACK(), {"bundled-hardware-unchanged": {"catalogOverlay": {
        "accelerators": [same], "instance_types": [itype, new]}}}) if v.policy == "bundled-hardware-unchanged"]
    assert found == []


@pytest.mark.parametrize("field, value", [("accelerators_per_node", 8), ("efa", True), ("network_cards", 4),
                                          ("vcpus", 64)])
def test_the_pack_blocks_a_redefined_instance_type(field, value):
    forged = {**G6E, field: value, **({"inter_node_gbps": 100} if field == "efa" else {})}
    found = validate_stack("accelerator-memory-fits", BASE_STACK(), {"catalogOverlay": {"instance_types": [forged]}})
    assert any(f"g6e.xlarge.{field}: bundled" in message for message, _ in found), found


@pytest.mark.parametrize("edit, expected", [
    ({"memory_bandwidth_gb_s": 1e-300}, "memory_bandwidth_gb_s: must be from 1 to 100000 GB/s"),
    ({"tflops": {"bf16": 1e-300, "fp16": 70}}, "tflops.bf16: must be from 0.01 to 100000 TFLOP/s"),
    ({"neuron_cores": -4}, "neuron_cores: must be from 1 to 64"),
    ({"memory_mib": 10_000_000}, "memory_mib: must be from 256 to 2097152 MiB"),
])
def test_absurd_accelerator_figures_are_refused(tmp_path, edit, expected):
    overlay = write_yaml(tmp_path / "o.yaml", {"accelerators": [{**_a10g(name="X1"), **edit}]})
    result = CliRunner().invoke(app, ["catalog", "list", "--catalog", str(overlay)])
    assert result.exit_code == 2 and expected in result.output, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("edit, expected", [
    ({"usd_per_hour": 0}, "usd_per_hour: must be from 1e-06 to 10000 USD/h"),
    ({"accelerators_per_node": 1_000_000_000}, "accelerators_per_node: must be from 1 to 128"),
    ({"network_cards": -1}, "network_cards: must be from 1 to 512"),
    ({"vcpus": -8}, "vcpus: must be from 1 to 4096"),
    ({"owned": {"capex_usd": 1e308, "lifetime_years": 5, "power_kw": 10, "usd_per_kwh": 0.1}},
     "owned.capex_usd: must be from 1 to 100000000 USD"),
    ({"prices": {"us-east-1": {"ec2": {"on_demand": 0}}}}, "on_demand: must be from 1e-06 to 10000 USD/h"),
])
def test_absurd_instance_figures_are_refused(tmp_path, edit, expected):
    overlay = write_yaml(tmp_path / "o.yaml", {"instance_types": [{**G6E, "name": "x1.big", **edit}]})
    result = CliRunner().invoke(app, ["catalog", "list", "--catalog", str(overlay)])
    assert result.exit_code == 2 and expected in result.output, result.output


@pytest.mark.parametrize("config, key", [
    ({"all": "Mandatory"}, "all"), ({"all": "remediate"}, "all"), ({"all": 5}, "all"),
    ({"accelerator-memory-fits": {"minHeadroom": "abc"}}, "accelerator-memory-fits.minHeadroom"),
    ({"accelerator-memory-fits": {"catalogOverlay": [1]}}, "accelerator-memory-fits.catalogOverlay"),
    ({"monthly-budget": {"maxUsdPerMonth": "abc"}}, "monthly-budget.maxUsdPerMonth"),
    ({"endpoint-availability": {"minInstances": "x"}}, "endpoint-availability.minInstances"),
    ({"endpoint-availability": {"enforcementLevel": "remediate"}}, "endpoint-availability.enforcementLevel"),
    ({"no-such-policy": "mandatory"}, "no-such-policy"),
])
def test_a_policy_config_that_is_not_valid_exits_2_naming_the_key(tmp_path, config, key):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(config))
    result = CliRunner().invoke(app, ["check", str(ROOT / "Pulumi.example.yaml"), "--policy-config", str(path)])
    assert result.exit_code == 2, result.output
    assert f"policy.json: {key}:" in result.output and "Traceback" not in result.output, result.output


def test_the_documented_policy_config_is_valid(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"all": "mandatory", "monthly-budget": {"maxUsdPerMonth": 1e6,
                                                                       "workloadBudgets": {"chat-8b": 3000}},
                                # p4d: chat-70b's pick once SageMaker prices rank on one rule (issue 27)
                                "instance-family-allowed": {"allowedFamilies": ["p5", "p5en", "g6e", "g5", "p4de", "p4d"]},
                                "endpoint-availability": {"enforcementLevel": "advisory", "minInstances": 1}}))
    # The example stack at the expected estimate (the `likely` edge moves its plans, issue 25), its training
    # run kept to the families this config allows: the refit made p4d × 32 the cheapest for pretrain-70b.
    config = example_config()
    pretrain = next(w for w in config["gpuplan:workloads"] if w["name"] == "pretrain-70b")
    pretrain["constraints"]["families"] = ["p4de", "p5", "p5en"]
    example = write_yaml(tmp_path / "Pulumi.example.yaml", {"config": config})
    result = CliRunner().invoke(app, ["check", str(example), "--policy-config", str(path)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("model_id, preset", [
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", "llama-3.1-405b"),
    ("https://huggingface.co/meta-llama/Llama-3.1-405B-Instruct", "llama-3.1-405b"),
    ("meta-llama/Llama-3.1-405B-Instruct ", "llama-3.1-405b"),
    ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "llama-3.1-70b"),
    ("TheBloke/Llama-2-70B-Chat-GPTQ", "llama-2-70b"),
    ("someone/Mixtral-8x7B-Instruct-v0.1-Int4", "mixtral-8x7b"),
    ("someone/My-Finetune-405B", "llama-3.1-405b"),
    ("someone/unnamed-model", None),
])
def test_a_model_id_resolves_from_its_own_evidence(model_id, preset):
    assert preset_sizing_model_id(model_id) == preset
    assert preset_sizing_model_id("meta-llama/Llama-3.1-70B-Instruct") == "llama-3.1-70b"


def _405b_on_one_g6e(model_id: str) -> list[str]:
    resources = BASE_STACK()
    config, model = named(resources, "chat-8b-config"), named(resources, "chat-8b-model")
    config.props["productionVariants"][0]["instanceType"] = "ml.g6e.xlarge"
    model.props["primaryContainer"]["environment"]["HF_MODEL_ID"] = model_id
    return [v.message for v in evaluate(resources) if v.level == "mandatory" and v.resource == "chat-8b-config"
            and v.policy == "accelerator-memory-fits"]


@pytest.mark.parametrize("model_id", ["meta-llama/Llama-3.1-405B-Instruct-FP8",
                                      "https://huggingface.co/meta-llama/Llama-3.1-405B-Instruct",
                                      "meta-llama/Llama-3.1-405B-Instruct "])
def test_the_memory_rule_does_not_trust_tags_for_an_unmapped_id(model_id):
    found = _405b_on_one_g6e(model_id)
    assert any("ml.g6e.xlarge has" in m and "llama-3.1-405b" in m for m in found), found


def test_an_unknown_model_id_is_a_mandatory_violation():
    found = _405b_on_one_g6e("someone/unnamed-model")
    assert any("unknown model id: add it to the models file or set the architecture" in m for m in found), found


def test_planning_maps_ids_exactly_while_the_gate_sizes_from_evidence():
    """A 3B model is not planned as a 30B one: the evidence fallback (never under-size) is the gate's alone."""
    from planner.workload.presets import preset_for_model_id

    assert preset_for_model_id("meta-llama/Llama-3.2-3B-Instruct") is None
    assert preset_for_model_id("someone/My-Finetune-405B") is None
    assert preset_sizing_model_id("someone/My-Finetune-405B") == "llama-3.1-405b"
