"""serving.kv_sizing (issue 27): worst-case reserves max_context_tokens of KV for every sequence (the
engines' own guarantee); typical reserves prompt + output tokens rounded up to the engine's KV block,
with the preemption risk said. The plan shows the other policy's count when it differs, and the policy
pack judges with the policy the plan used (gpuplan:serving kvs=/kvt=)."""

from __future__ import annotations

from typer.testing import CliRunner

from gpuplan.cli import app
from planner.hardware.catalog import bundled
from planner.search.kv_sizing import KV_BLOCK_TOKENS, kv_tokens_per_sequence, typical_tokens
from planner.pipeline import plan_workload
from planner.report.tags import plan_tags, read_tags, required_memory
from tests.conftest import workload, write_yaml
from tests.test_policies import sign

runner = CliRunner()
# The quoted rejection "g5.xlarge: feasible but costlier: $14.08/h" (10 × ml.g5.xlarge at $1.4084/h): an 8B
# endpoint whose 8,192-token context reserves 1 GiB of KV per sequence on a 24 GB A10G.
G5_8B = dict(kind="inference", model={"preset": "llama-3.1-8b"},
             serving={"max_context_tokens": 8192, "concurrent_requests": 20},
             constraints={"deploy_target": "sagemaker", "instance_types": ["g5.xlarge"]})


def _plan(kv_sizing: str | None = None):
    serving = {**G5_8B["serving"], **({"kv_sizing": kv_sizing} if kv_sizing else {})}
    return plan_workload(workload(**{**G5_8B, "serving": serving}), bundled())


def test_the_quoted_g5_case_worst_case_needs_10_nodes_and_says_typical_needs_2():
    plan = _plan()
    assert plan.choice.nodes == 10 and round(plan.cost.instances_usd_per_hour, 2) == 14.08
    kv = plan.kv_sizing
    assert kv.policy == "worst-case" and kv.tokens_per_sequence == 8192
    assert kv.other_policy == "typical" and kv.other_policy_nodes == 2
    assert "typical KV sizing would need 2 nodes" in " ".join(plan.warnings)


def test_typical_sizes_prompt_plus_output_in_16_token_blocks():
    plan = _plan("typical")
    kv = plan.kv_sizing
    assert plan.choice.nodes == 2
    assert kv.policy == "typical" and kv.tokens_per_sequence == 1280 and kv.block_tokens == 16
    assert kv.other_policy_nodes == 10
    assert "worst-case KV sizing would need 10 nodes" in " ".join(plan.warnings)
    assert any("preempts" in w for w in plan.warnings)


def test_block_rounding_and_the_one_long_request_floor():
    assert typical_tokens(1000, 300, "vllm") == 1312  # 1,300 rounded up to 82 blocks of 16
    assert typical_tokens(1000, 300, "tensorrt-llm") == 1344  # 21 blocks of 64
    assert typical_tokens(1000, 300, "neuron") is None  # static shapes: n_positions per batch slot
    assert KV_BLOCK_TOKENS["vllm"] == 16
    # one request may still run to max_context_tokens: the pool holds at least that many tokens
    assert kv_tokens_per_sequence("typical", 8192, 1280, 2) == 4096
    assert kv_tokens_per_sequence("typical", 8192, 1280, 16) == 1280
    assert kv_tokens_per_sequence("worst-case", 8192, 1280, 16) == 8192


def test_neuron_keeps_worst_case_and_says_why():
    plan = plan_workload(workload(kind="inference", model={"preset": "llama-3.1-8b"},
                                  serving={"kv_sizing": "typical"},
                                  constraints={"deploy_target": "ec2", "families": ["inf2"]}), bundled())
    assert plan.kv_sizing.policy == "worst-case" and plan.kv_sizing.tokens_per_sequence == 4096
    assert "compiles the KV cache" in plan.kv_sizing.note
    assert any(w.startswith("serving.kv_sizing typical: neuron compiles") for w in plan.warnings)


def test_bad_kv_sizing_exits_2_naming_the_field_and_the_values(tmp_path):
    path = write_yaml(tmp_path / "w.yaml", {"workloads": [{"name": "a", "kind": "inference",
                                                           "model": {"preset": "llama-3.1-8b"},
                                                           "serving": {"kv_sizing": "average"}}]})
    result = runner.invoke(app, ["plan", str(path)])
    assert result.exit_code == 2, result.output
    assert "serving.kv_sizing" in result.output and "'worst-case'" in result.output and "'typical'" in result.output
    assert "Traceback" not in result.output


def test_the_pack_sizes_with_the_plans_policy():
    w = workload(**{**G5_8B, "serving": {**G5_8B["serving"], "kv_sizing": "typical"}})
    plan = plan_workload(w, bundled())
    tags = plan_tags(plan, w)
    assert "kvs=typical" in tags["gpuplan:serving"] and "kvt=1280" in tags["gpuplan:serving"]
    tagged = read_tags(tags)
    need = required_memory(tagged, bundled(), "g5.xlarge")
    assert round(need.kv_cache) == round(plan.memory.per_device_bytes["kv_cache"])
    worst = read_tags(sign({**tags, "gpuplan:serving": "ctx=8192 kv=fp16 engine=vllm"}))
    assert required_memory(worst, bundled(), "g5.xlarge").kv_cache > need.kv_cache


def _long_context_endpoint(serving_tag: str):
    """The example's 70B endpoint with its engine at a 131,072-token context and batch 64, tags to match."""
    from tests.test_policies import mandatory, named, stack

    resources = stack(expected=True)
    env = named(resources, "chat-70b-model").props["primaryContainer"]["environment"]
    env["OPTION_MAX_MODEL_LEN"], env["OPTION_MAX_ROLLING_BATCH_SIZE"] = "131072", "64"
    config = named(resources, "chat-70b-config")
    tags = config.props["tags"]
    layout = " ".join("batch=64" if p.startswith("batch=") else p for p in tags["gpuplan:layout"].split())
    config.props["tags"] = sign({**tags, "gpuplan:serving": serving_tag, "gpuplan:layout": layout})
    return [m for p, r, m in mandatory(resources) if p == "accelerator-memory-fits" and r == "chat-70b-config"]


def test_the_pack_judges_with_the_kv_policy_the_plan_used():
    """Worst-case: 64 × 131,072 tokens of KV cannot fit; typical (kvt=1280, pool floored at one full context:
    2,048 tokens a sequence): 5 GiB of KV per A100, which fits."""
    worst = _long_context_endpoint("ctx=131072 kv=fp16 engine=vllm")
    assert any("KV cache 320.0 GiB" in m for m in worst), worst
    assert _long_context_endpoint("ctx=131072 kv=fp16 engine=vllm kvs=typical kvt=1280") == []


def test_a_kvs_tag_outside_the_policies_blocks():
    found = _long_context_endpoint("ctx=131072 kv=fp16 engine=vllm kvs=optimistic kvt=1280")
    assert any("kvs=" in m and "worst-case" in m for m in found), found
