"""Inferentia2 and Trainium as Neuron runs them (issue 10): TP in NeuronCores, 16 GiB per core,
static compiled shapes, LMI Neuron options, Neuron-only constants, NeuronX Distributed training."""

from __future__ import annotations

import pytest
import yaml

from components import settings
from planner.workload.errors import InfeasibleError
from planner.physics.memory import attention_padding_params, inference_memory, sharded_weight_bytes, weight_bytes
from planner.pipeline import plan_workload
from planner.search.inference import Spread, aggregate_tokens_per_s
from planner.hardware.units import BYTES_PER_PARAM, GIB
from tests.conftest import ROOT, workload


# Issue 10's case is judged at the estimate itself: at the `likely` edge (issue 25's default) inf2 needs three
# nodes for ITL ≤ 50 ms and a GPU type wins, and these tests are about Neuron, not the accuracy band.
AT_ESTIMATE = {"constraints": {"confidence": "expected"}}


def serve(model: str, **serving):
    return {"kind": "inference", "model": {"preset": model},
            "serving": {"max_context_tokens": 4096, "prompt_tokens": 1024, "output_tokens": 256, **serving}}


def test_neuron_cores_are_the_sharding_unit(catalog):
    itype, core = catalog.sharded(catalog.instance("inf2.48xlarge"))
    assert itype.accelerators_per_node == 24 and core.memory_bytes == 16 * GIB
    assert catalog.sharded(catalog.instance("trn1.32xlarge"))[0].accelerators_per_node == 32
    assert catalog.sharded(catalog.instance("inf2.xlarge"))[0].accelerators_per_node == 2
    chip = catalog.accelerator("Inferentia2")
    assert core.memory_bandwidth_gb_s == pytest.approx(chip.memory_bandwidth_gb_s / 2)
    assert core.peak_flops("bf16") == pytest.approx(95e12)
    h100_type = catalog.instance("p5.48xlarge")
    assert catalog.sharded(h100_type) == (h100_type, catalog.accelerator(h100_type.accelerator))


def test_inferentia2_bandwidth_is_awss_figure_in_gb_per_s(catalog):
    """inferentia2.rst: '820 GiB/sec' per chip; the catalog is in GB/s (10^9 B/s)."""
    assert catalog.accelerator("Inferentia2").memory_bandwidth_gb_s == pytest.approx(820 * 2**30 / 1e9, abs=0.1)
    assert catalog.accelerator("Trainium").memory_bandwidth_gb_s == pytest.approx(820 * 2**30 / 1e9, abs=0.1)


def test_70b_on_inf2_48xlarge_plans_at_tp_24_neuroncores(catalog):
    plan = plan_workload(workload(**serve("llama-2-70b", concurrent_requests=1),
                                  constraints={"instance_types": ["inf2.48xlarge"], "confidence": "expected"}), catalog)
    assert (plan.layout.tensor_parallel, plan.layout.tensor_parallel_unit) == (24, "NeuronCore")
    assert (plan.choice.accelerators_per_node, plan.choice.devices_per_node) == (12, 24)
    assert plan.memory.device_memory_bytes == 16 * GIB
    assert plan.memory.required_per_device_bytes <= 0.9 * 16 * GIB
    assert plan.layout.n_positions == 4096 and plan.layout.compiled_batch_size == 1
    assert plan.model_dump(mode="json")["layout"]["tensor_parallel_unit"] == "NeuronCore"


def test_issue_case_picks_inf2_over_trn1_for_70b_at_8_requests(catalog):
    """Issue 10: llama-2-70b, 8 requests, ITL ≤ 50 ms chose trn1.32xlarge at $28.50/h; inf2.48xlarge
    meets it at $15.58/h (AWS's tables: 33-35 ms TPOT at batch 1) when the image compiles for the longest request,
    1,024 + 256 tokens: optimum-neuron's NxD backend encodes every prompt at n_positions, and at 4,096 each step also
    waits for the other seven's 4,096-token encodings, so ITL ≤ 50 ms takes three inf2.48xlarge
    (planner/physics/replica_serving.py)."""
    plan = plan_workload(workload(**serve("llama-2-70b", concurrent_requests=8, max_inter_token_latency_ms=50, max_context_tokens=1280),
                                  **AT_ESTIMATE),
                         catalog)
    assert plan.choice.instance_type == "inf2.48xlarge" and plan.choice.nodes == 1
    assert plan.layout.tensor_parallel == 24 and plan.layout.compiled_batch_size == 8
    assert plan.performance.inter_token_latency_s * 1e3 <= 50
    assert plan.cost.instances_usd_per_hour == pytest.approx(15.58)
    # plus its SageMaker ML storage volume (inf2 has no local NVMe; issue 27, everything provisioned is priced)
    [volume] = plan.cost.provisioned
    assert plan.cost.usd_per_hour == pytest.approx(15.58 + volume.usd_per_hour) and volume.usd_per_gib_month == 0.14


def test_8b_on_one_inferentia2_chip_plans_at_tp_2(catalog):
    # inf2.8xlarge: the one chip (2 NeuronCores) of inf2.xlarge with the 128 GiB of host memory that loading
    # and compiling the 15 GiB model needs (inf2.xlarge's 16 GiB cannot: tests/test_host_memory.py)
    plan = plan_workload(workload(**serve("llama-3.1-8b", concurrent_requests=1),
                                  constraints={"instance_types": ["inf2.8xlarge"], "confidence": "expected"}), catalog)
    assert plan.layout.tensor_parallel == 2 and plan.choice.devices_per_node == 2


def test_gpu_plans_say_gpus(catalog):
    plan = plan_workload(workload(**serve("llama-3.1-8b", concurrent_requests=4, engine="vllm")), catalog)
    assert plan.layout.tensor_parallel_unit == "GPU" and plan.layout.n_positions is None


def test_padded_heads_and_replicated_kv_heads_cost_memory(arch):
    """64 query heads at TP 24 pad to 72 (3 per core); 8 KV heads replicate to one per core."""
    a = arch["llama-2-70b"]
    per_head = a.layers * a.hidden_size * a.head_dim
    assert attention_padding_params(a, 24) == pytest.approx(per_head * 2 * ((3 - 64 / 24) + (1 - 8 / 24)))
    assert attention_padding_params(a, 8) == 0
    assert sharded_weight_bytes(a, "bf16", 24) == pytest.approx(
        weight_bytes(a, "bf16") / 24 + attention_padding_params(a, 24) * BYTES_PER_PARAM["bf16"])


def test_neuron_has_no_cuda_context(arch):
    a = arch["llama-3.1-8b"]
    gpu = inference_memory(a, "bf16", "fp16", 2, 1, 1, 4096)
    neuron = inference_memory(a, "bf16", "fp16", 2, 1, 1, 4096, neuron=True)
    assert gpu.overhead - neuron.overhead == pytest.approx(1343e6 + 0.5 * GIB)


def test_static_shapes_run_every_replica_at_the_compiled_batch():
    """A replica with 3 live sequences still runs batch-4 steps on Neuron; on a GPU it runs batch 3."""
    class Est:
        def __init__(self, batch):
            self.output_tokens_per_s_per_replica = 100.0 * batch / (1 + 0.1 * batch)

    spread = Spread.of(7, 2)  # replicas at 4 and 3
    dynamic = aggregate_tokens_per_s(spread, Est)
    static = aggregate_tokens_per_s(spread, Est, static_shapes=True)
    assert static == pytest.approx(Est(4).output_tokens_per_s_per_replica * 7 / 4)
    assert static < dynamic


def test_container_environment_sets_the_compiled_shapes(catalog):
    plan = plan_workload(workload(**serve("llama-2-70b", concurrent_requests=8, max_inter_token_latency_ms=50, max_context_tokens=1280),
                                  **AT_ESTIMATE),
                         catalog)
    env = settings.container_environment(plan, "meta-llama/Llama-2-70b-hf", 0.1)
    assert env == {"SM_ON_MODEL": "meta-llama/Llama-2-70b-hf", "SM_ON_TENSOR_PARALLEL_SIZE": "24",
                   "SM_ON_BATCH_SIZE": "8", "SM_ON_SEQUENCE_LENGTH": "1280"}  # inf2: LNC 1, nothing to set
    compiled = settings.container_environment(plan, None, 0.1, "s3://models/llama-2-70b-neff/")
    assert compiled["SM_ON_MODEL"] == "/opt/ml/model"  # the export, copied there by SageMaker
    assert any("compiledModelUrl" in w for w in plan.warnings)


def test_neuron_image_is_in_awss_dlc_list(catalog):
    images = yaml.safe_load((ROOT / "components" / "data" / "images.yaml").read_text())
    dlc = yaml.safe_load((ROOT / "components" / "data" / "dlc-images.yaml").read_text())
    entry = images["images"]["aws-neuron"]["neuron"]
    assert entry["tag"] in {row["tag"] for row in dlc["images"][entry["repository"]]}


def test_trainium_qlora_is_refused_with_the_reason(catalog):
    w = workload(kind="fine-tuning", model={"preset": "llama-3.1-8b"},
                 training={"method": "qlora", "tokens": 1e8, "sequence_length": 2048},
                 constraints={"families": ["trn1"]})
    with pytest.raises(InfeasibleError) as err:
        plan_workload(w, catalog)
    assert "QLoRA needs bitsandbytes NF4 kernels, which are CUDA-only" in str(err.value)


def test_trainium_training_runs_as_neuronx_distributed(catalog):
    w = workload(kind="training", model={"preset": "llama-3.1-8b"},
                 training={"tokens": 2e10, "sequence_length": 4096, "deadline_hours": 240},
                 constraints={"families": ["trn1"], "max_nodes": 16})
    plan = plan_workload(w, catalog)
    assert plan.layout.zero_stage in (0, 1) and plan.layout.tensor_parallel_unit == "NeuronCore"
    assert plan.layout.tensor_parallel <= 32
    pinned = workload(kind="training", model={"preset": "llama-3.1-8b"},
                      training={"tokens": 2e10, "sequence_length": 4096}, layout={"zero_stage": 3},
                      constraints={"families": ["trn1"]})
    with pytest.raises(InfeasibleError) as err:
        plan_workload(pinned, catalog)
    assert "shards optimizer states only (ZeRO-1)" in str(err.value)


def test_policy_pack_checks_neuron_endpoints_per_neuroncore(catalog):
    """tp=24 on ml.inf2.48xlarge is 24 NeuronCores of 16 GiB, inside one node; TP 24 on a 12-chip
    node used to read as 'spans nodes'."""
    from planner.report.tags import plan_tags
    from policies.resources import Resource
    from policies.rules import evaluate
    from tests.test_policies import sign

    w = workload(**serve("llama-2-70b", concurrent_requests=8, max_inter_token_latency_ms=50, max_context_tokens=1280), **AT_ESTIMATE)
    tags = plan_tags(plan_workload(w, catalog), w, "production")
    assert "tp=24" in tags["gpuplan:layout"]

    def blocked(instance_type: str, tags: dict) -> list[str]:
        config = Resource("aws:sagemaker/endpointConfiguration:EndpointConfiguration", "ec", {"productionVariants": [
            {"instanceType": instance_type, "initialInstanceCount": 1.0}], "tags": tags})
        return [v.message for v in evaluate([config], {"accelerator-memory-fits": {"strict": False}}, catalog)
                if v.policy in ("accelerator-memory-fits", "tensor-parallel-within-node")]

    assert blocked("ml.inf2.48xlarge", tags) == []
    [small] = blocked("ml.inf2.xlarge", tags)
    assert small.startswith("tensor parallel 24 spans nodes: inf2.xlarge has 2 NeuronCores")
    one_core = sign({**tags, "gpuplan:layout": tags["gpuplan:layout"].replace("tp=24", "tp=1")})
    [message] = blocked("ml.inf2.48xlarge", one_core)
    assert message.startswith("ml.inf2.48xlarge has 16.0 GiB per Inferentia2 NeuronCore (14.4 GiB usable")


def test_compiled_model_url_reaches_the_container_with_read_access_to_it_only(tmp_path):
    from tests.pulumi_harness import run_program

    config = {"aws:region": "us-east-1",
              "gpuplan:workloads": [{"name": "chat-70b", **serve("llama-2-70b", concurrent_requests=8,
                                                                  max_inter_token_latency_ms=50, max_context_tokens=1280), **AT_ESTIMATE}],
              "gpuplan:deployments": {"chat-70b": {"hfModelId": "meta-llama/Llama-2-70b-hf",
                                                   "compiledModelUrl": "s3://neff-cache/llama-2-70b/"}}}
    stack = run_program(config)
    [model] = stack.of_type("sagemaker/model:Model")
    container = model.inputs["primaryContainer"]
    assert container["environment"]["SM_ON_MODEL"] == "/opt/ml/model"
    assert container["modelDataSource"]["s3DataSources"][0]["s3Uri"] == "s3://neff-cache/llama-2-70b/"
    assert container["image"].endswith(
        "huggingface-vllm-inference-neuronx:0.11.0-optimum0.4.5-neuronx-py310-sdk2.26.1-ubuntu22.04")
    [policy] = stack.of_type("iam/rolePolicy:RolePolicy")
    statements = {s["Sid"]: s for s in __import__("json").loads(policy.inputs["policy"])["Statement"]}
    assert statements["ReadCompiledGraphs"]["Resource"] == "arn:aws:s3:::neff-cache/llama-2-70b/*"


def test_a_neuron_plan_says_its_engine_encodes_every_prompt_at_all_its_positions(catalog):
    """optimum-neuron, the Neuron image plans deploy, compiles one context-encoding graph at the sequence length
    (v0.4.5 modeling_decoder.py create_graph_builders: active_tokens = max_context_length; decoder_builders.py:
    bucket_rank 0 only): a 1,024-token prompt under 4,096 positions is encoded as 4,096 tokens, four times its
    power-of-two bucket, and the estimate counts it so. The plan says what a lower max_context_tokens would save; a
    prompt whose bucket is all the positions needs no warning."""
    plan = plan_workload(workload(**serve("llama-2-70b", concurrent_requests=1),
                                  constraints={"instance_types": ["inf2.48xlarge"], "confidence": "expected"}), catalog)
    [warning] = [w for w in plan.warnings if "context-encoding graph" in w]
    assert "for all 4096 positions" in warning and "1024-token prompt is encoded as 4096 tokens (4× its 1024-token" \
        " bucket)" in warning and "as the estimate counts" in warning
    full = plan_workload(workload(**serve("llama-2-70b", concurrent_requests=1, prompt_tokens=3000),
                                  constraints={"instance_types": ["inf2.48xlarge"], "confidence": "expected"}), catalog)
    assert not [w for w in full.warnings if "context-encoding graph" in w]
    gpu = plan_workload(workload(**serve("llama-2-70b", concurrent_requests=1),
                                 constraints={"instance_types": ["p5.48xlarge"]}), catalog)
    assert not [w for w in gpu.warnings if "context-encoding graph" in w]


def test_a_neuron_moe_plan_is_made_only_when_asked_for_and_says_it_is_not_estimated(catalog):
    """NeuronX Distributed's expert kernels are not modelled (README Known limits): optimum-neuron's published Trainium2
    runs of Llama 4 and Qwen3 MoE models (bench/data/reference/optimum-neuron-benchmarks.yaml, recorded and not compared)
    sit 1.4-5× below such estimates in tokens/s. So the search leaves Neuron out of a MoE serving plan unless the
    constraints name the type, and such a plan says so; a dense Neuron plan and a MoE plan on GPUs say nothing."""
    neuron = {"instance_types": ["inf2.48xlarge"]}
    moe = plan_workload(workload(**serve("qwen3-30b-a3b", concurrent_requests=16), constraints=neuron), catalog)
    dense = plan_workload(workload(**serve("llama-3.1-8b", concurrent_requests=16), constraints=neuron), catalog)
    gpu = plan_workload(workload(**serve("qwen3-30b-a3b", concurrent_requests=16),
                                 constraints={"instance_types": ["p5.48xlarge"]}), catalog)
    assert moe.choice.instance_type == "inf2.48xlarge"
    assert [x for x in moe.warnings if x.startswith("MoE on Neuron is not estimated") and "1.4-5×" in x]
    unpinned = plan_workload(workload(**serve("qwen3-30b-a3b", concurrent_requests=16)), catalog)
    assert not catalog.accelerator(catalog.instance(unpinned.choice.instance_type).accelerator).is_neuron
    [miss] = [r for r in unpinned.rejected if r.instance_type == "inf2.48xlarge"]
    assert "mixture-of-experts serving on Neuron is not estimated" in miss.reason
    assert not [x for x in dense.warnings + gpu.warnings if "not estimated" in x]
