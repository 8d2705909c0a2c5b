"""Issue 28: the new types deploy with images that exist in the vendored DLC lists: Trainium2 on
SageMaker through the NxD Inference container at the default logical NeuronCore config (LNC=2), and
g6f (no SageMaker hosting) trains on EC2. The priced types (p6-b200, p6-b300, g7e) are covered in
tests/test_fleet_finish.py; trn2 carries no public price, so a rate card overlay prices it here."""

from __future__ import annotations

import copy
import json

import yaml

from planner.hardware.catalog import bundled
from tests.pulumi_harness import ROOT, run_program, stack_config

IMAGES = yaml.safe_load((ROOT / "components" / "data" / "images.yaml").read_text())
DLC = yaml.safe_load((ROOT / "components" / "data" / "dlc-images.yaml").read_text())


def _rate_card(tmp_path, name: str, usd_per_hour: float, target: str) -> str:
    t = bundled().instance(name)
    row = {**t.model_dump(mode="json", exclude={"prices", "no_price_reason"}, exclude_none=True),
           "prices": {"us-east-1": {target: {"on_demand": usd_per_hour, "source": "my rate card", "date": "2026-11-01"}}}}
    path = tmp_path / "rates.yaml"
    path.write_text(yaml.safe_dump({"instance_types": [row]}))
    return str(path)


def _stack(workload: dict, deployments: dict, catalog: str | None = None) -> dict:
    cfg = copy.deepcopy(stack_config())
    cfg["aws:region"] = "us-east-1"
    cfg["gpuplan:workloads"] = [workload]
    cfg["gpuplan:deployments"] = deployments
    if catalog:
        cfg["gpuplan:catalog"] = catalog
    return cfg


def test_trn2_serves_on_sagemaker_in_the_nxd_inference_container_at_lnc_2(tmp_path):
    catalog = _rate_card(tmp_path, "trn2.48xlarge", 45.0, "sagemaker")
    w = {"name": "svc", "kind": "inference", "model": {"preset": "llama-3.1-70b"},
         "serving": {"concurrent_requests": 8, "max_context_tokens": 4096},
         "constraints": {"instance_types": ["trn2.48xlarge"]}}
    stack = run_program(_stack(w, {"svc": {"hfModelId": "meta-llama/Llama-3.1-70B-Instruct"}}, catalog))
    [model] = stack.of_type("sagemaker/model:Model")
    container = model.inputs["primaryContainer"]
    repository, tag = container["image"].rsplit("/", 1)[1].split(":")
    assert repository == "huggingface-vllm-inference-neuronx"
    assert tag in {row["tag"] for row in DLC["images"][repository]}
    env = container["environment"]
    assert env["NEURON_LOGICAL_NC_CONFIG"] == "2"
    assert 1 <= int(env["SM_ON_TENSOR_PARALLEL_SIZE"]) <= 64  # logical NeuronCores: 16 chips × 4
    [config] = stack.of_type("sagemaker/endpointConfiguration:EndpointConfiguration")
    assert config.inputs["productionVariants"][0]["instanceType"] == "ml.trn2.48xlarge"


def test_trn2_trains_on_ec2_with_the_neuron_dlami(tmp_path):
    catalog = _rate_card(tmp_path, "trn2.48xlarge", 45.0, "ec2")
    w = {"name": "trn", "kind": "training", "model": {"preset": "llama-3.1-8b"}, "training": {"tokens": 1e9},
         "constraints": {"instance_types": ["trn2.48xlarge"]}}
    stack = run_program(_stack(w, {}, catalog))
    types = {str(r.inputs["instanceType"]) for r in stack.resources if "instanceType" in r.inputs}
    assert types == {"trn2.48xlarge"}
    assert any(IMAGES["amis"]["aws-neuron"] in json.dumps(r.inputs) for r in stack.resources) or \
        any(IMAGES["amis"]["aws-neuron"] in json.dumps(c) for c in stack.calls)


def test_g6f_has_no_sagemaker_hosting_and_trains_on_ec2():
    assert not bundled().instance("g6f.large").sagemaker_hosting
    # the largest g6f slice holds 11.2 GiB: QLoRA of a 7B model (mistral-7b) at a 1,024-token sequence fits it
    w = {"name": "trn", "kind": "fine-tuning", "model": {"preset": "mistral-7b"},
         "training": {"tokens": 1e7, "method": "qlora", "sequence_length": 1024}, "constraints": {"families": ["g6f"]}}
    stack = run_program(_stack(w, {}))
    types = {str(r.inputs["instanceType"]) for r in stack.resources if "instanceType" in r.inputs}
    assert len(types) == 1 and types.pop().startswith("g6f.")


def _user_data(plan) -> str:
    from components.training import user_data

    return user_data(plan, bundled().instance(plan.choice.instance_type), "c")


def test_trn2_training_nodes_run_nxd_training_at_lnc_2(tmp_path):
    from planner.hardware.catalog import load
    from planner.pipeline import plan_workload
    from tests.conftest import workload

    catalog = load(_rate_card(tmp_path, "trn2.48xlarge", 45.0, "ec2"))
    plan = plan_workload(workload(kind="training", model={"preset": "llama-3.1-8b"}, training={"tokens": 1e9},
                                  constraints={"instance_types": ["trn2.48xlarge"]}), catalog)
    assert plan.layout.tensor_parallel_unit == "NeuronCore" and plan.choice.devices_per_node == 64
    assert "NEURON_LOGICAL_NC_CONFIG=2" in _user_data(plan).splitlines()


def test_moe_training_nodes_get_the_ep_degree(catalog):
    from planner.pipeline import plan_workload
    from tests.conftest import workload

    plan = plan_workload(workload(kind="training", model={"preset": "deepseek-v3"}, training={"tokens": 1e11},
                                  constraints={"instance_types": ["p5.48xlarge"], "max_nodes": 64,
                                               "confidence": "expected"}), catalog)
    # at the estimate the plan spreads experts over EP 8 > TP 2 (tests/test_expert_training.py); at the
    # band's high memory edge it keeps experts TP-only, which would leave no EP degree to deploy
    ep = plan.layout.expert_parallel // plan.layout.tensor_parallel
    assert ep > 1
    text = _user_data(plan)
    assert f"GPUPLAN_EP={ep}" in text.splitlines() and f'"expert_parallel": {ep}' in text
    assert "NEURON_LOGICAL_NC_CONFIG" not in text
