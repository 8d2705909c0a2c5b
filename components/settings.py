"""Deployment settings derived from a plan: container image and environment, timeouts, volumes.
Pure functions (no Pulumi), so tests and `gpuplan check` build the same values the components do."""

from __future__ import annotations

import math
from functools import cache
from importlib import resources


from planner.economics import provisioned
from planner.physics.engines import engine_table
from planner.workload.plan import Plan
from planner.workload.yamlsafe import load_text

# Model download: SageMaker pulls artifacts from S3 at a few hundred MB/s per instance; budget
# 100 MB/s so a 141 GB model gets ~24 min, within SageMaker's 3,600 s ceiling for both timeouts.
DOWNLOAD_BYTES_PER_S = 100e6
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 600, 3600
# Families (as the instance type's name spells them) whose instances carry local NVMe: SageMaker
# rejects VolumeSizeInGB for them.
NVME_FAMILIES = provisioned.NVME_FAMILIES


@cache
def _data(name: str) -> dict:
    return load_text(resources.files("components.data").joinpath(name).read_text(), bundled=True)


def _images() -> dict:
    return _data("images.yaml")


def engine_options() -> dict:
    """Documented environment names and quantisation values per engine style (planner/data/engine-options.yaml,
    shared with the policy pack, which reads the same names back from a container's environment)."""
    return engine_table()


def vendor(plan: Plan) -> str:
    return plan.choice.accelerator_vendor


def image_entry(plan: Plan) -> dict:
    return _images()["images"][vendor(plan)][plan.engine]


def image_uri(plan: Plan, region: str) -> str:
    entry = image_entry(plan)
    return f"{_images()['registry_account']}.dkr.ecr.{region}.amazonaws.com/{entry['repository']}:{entry['tag']}"


def image_repository_arn(image: str) -> str | None:
    """arn:aws:ecr:REGION:ACCOUNT:repository/NAME for an ECR image URI; None for other registries."""
    host, _, rest = image.partition("/")
    parts = host.split(".")
    if len(parts) < 6 or parts[1:3] != ["dkr", "ecr"]:
        return None
    repository = rest.rsplit("@", 1)[0].rsplit(":", 1)[0]
    return f"arn:aws:ecr:{parts[3]}:{parts[0]}:repository/{repository}"


def ami_parameter(plan: Plan) -> str:
    return _images()["amis"][vendor(plan)]


# Neuron compiler optimisation level for LMI's transformers-neuronx (option.neuron_optimize_level):
# 2 is the compiler default, 1 compiles fastest (used when nothing is pre-compiled, so a first
# start fits the health-check window as best it can), 3 for pre-compiled artifacts.
NEURON_OPTIMIZE_LEVEL = {True: "3", False: "1"}
# TGI queues requests up to --max-concurrent-requests and refuses the rest (launcher docs; default
# 128). The plan's batch is what runs at once, not what may wait: keep the default as the floor.
TGI_QUEUE_FLOOR = 128
TGI_QUEUE_PER_BATCH = 4


def _dtype(plan: Plan) -> str:
    return {"fp32": "fp32", "fp16": "fp16"}.get(plan.model.precision, "bf16")


# Logical NeuronCore configuration: a Trainium2 chip has 8 physical NeuronCore-v3 and, at the default
# LNC=2, shows 4 logical cores (the catalog's neuron_cores and the plan's TP unit). The runtime's
# NEURON_LOGICAL_NC_CONFIG must match what the graphs were compiled for (neuronx-cc defaults to 2 on
# Trn2), so the container is told rather than left to a default. Inferentia2 and Trainium1 have LNC=1
# only. Source: AWS Neuron docs, "Logical NeuronCore configuration" (about-neuron/arch/neuron-features/
# logical-neuroncore-config, v2.28.1) and compiler error NCC_EARG001/EVRF066, read 2026-11-23.
LOGICAL_NC_CONFIG = {"Trainium2": "2"}
# Where SageMaker puts modelDataUrl's (or a compiled export's) files inside the container.
SAGEMAKER_MODEL_DIR = "/opt/ml/model"


def _optimum_neuron(plan: Plan, hf_model_id: str | None, compiled_model_url: str | None) -> dict[str, str]:
    """optimum-neuron's vLLM server on NxD Inference (SM_ON_<ARG> is `optimum-cli neuron serve --<arg>`):
    the static shapes the plan sized the KV cache for and TP in (logical) NeuronCores. A pre-compiled
    export (compiledModelUrl) holds its weights and graphs; SageMaker copies it to /opt/ml/model and
    the server loads it without compiling (serve.py reads its neuron_config and checks the shapes)."""
    lay = plan.layout
    env = {"SM_ON_MODEL": hf_model_id if hf_model_id and not compiled_model_url else SAGEMAKER_MODEL_DIR,
           "SM_ON_TENSOR_PARALLEL_SIZE": str(lay.tensor_parallel),
           "SM_ON_BATCH_SIZE": str(lay.compiled_batch_size),
           "SM_ON_SEQUENCE_LENGTH": str(lay.n_positions)}
    lnc = LOGICAL_NC_CONFIG.get(plan.choice.accelerator)
    if lnc:
        env["NEURON_LOGICAL_NC_CONFIG"] = lnc
    return env


def _neuron(plan: Plan, compiled_model_url: str | None) -> dict[str, str]:
    """LMI transformers-neuronx options (tnx_user_guide), for a deployment whose imageUri pins the older
    LMI Neuron image: the static shapes, TP in NeuronCores, and pre-compiled graphs (NEFFs) when given."""
    lay = plan.layout
    env = {"OPTION_ENTRYPOINT": "djl_python.transformers_neuronx",
           "OPTION_ROLLING_BATCH": "auto",
           "OPTION_TENSOR_PARALLEL_DEGREE": str(lay.tensor_parallel),
           "OPTION_N_POSITIONS": str(lay.n_positions),
           "OPTION_MAX_ROLLING_BATCH_SIZE": str(lay.compiled_batch_size),
           "OPTION_DTYPE": _dtype(plan),
           "OPTION_NEURON_OPTIMIZE_LEVEL": NEURON_OPTIMIZE_LEVEL[compiled_model_url is not None],
           "OPTION_MODEL_LOADING_TIMEOUT": str(MAX_TIMEOUT_S)}
    if plan.model.precision == "int8":
        env["OPTION_LOAD_IN_8BIT"] = "true"
    if compiled_model_url:
        env["OPTION_COMPILED_GRAPH_PATH"] = compiled_model_url
    return env


def _tgi(plan: Plan, headroom: float) -> dict[str, str]:
    lay = plan.layout
    return {"SM_NUM_GPUS": str(lay.tensor_parallel),
            "MAX_TOTAL_TOKENS": str(plan.max_context_tokens),
            "MAX_INPUT_TOKENS": str(plan.max_context_tokens - 1),
            # the KV budget the plan sized: batch sequences of the full context
            "MAX_BATCH_TOTAL_TOKENS": str(lay.batch_per_replica * plan.max_context_tokens),
            "MAX_CONCURRENT_REQUESTS": str(max(TGI_QUEUE_FLOOR, TGI_QUEUE_PER_BATCH * lay.batch_per_replica)),
            "CUDA_MEMORY_FRACTION": f"{1 - headroom:.2f}"}


def _lmi_vllm(plan: Plan, headroom: float) -> dict[str, str]:
    lay = plan.layout
    env = {"OPTION_ROLLING_BATCH": "vllm",
           "OPTION_TENSOR_PARALLEL_DEGREE": str(lay.tensor_parallel),
           "OPTION_MAX_ROLLING_BATCH_SIZE": str(lay.batch_per_replica),
           "OPTION_MAX_MODEL_LEN": str(plan.max_context_tokens),
           "OPTION_DTYPE": _dtype(plan),
           "OPTION_GPU_MEMORY_UTILIZATION": f"{1 - headroom:.2f}"}
    if lay.pipeline_parallel > 1:
        env["OPTION_PIPELINE_PARALLEL_DEGREE"] = str(lay.pipeline_parallel)
    ranks = lay.attention_data_parallel or 1
    if ranks > 1:  # planner/physics/attention_dp.py: vLLM's --data-parallel-size with --enable-expert-parallel
        env["OPTION_DATA_PARALLEL_SIZE"] = str(ranks)
        env["OPTION_ENABLE_EXPERT_PARALLEL"] = "true"
        env["OPTION_MAX_ROLLING_BATCH_SIZE"] = str(-(-lay.batch_per_replica // ranks))  # max_num_seqs is per DP rank
    return env


def _lmi_trtllm(plan: Plan, headroom: float, output_tokens: int) -> dict[str, str]:
    """TRT-LLM compiles for its input/output lengths; it has no max_model_len or gpu_memory_utilization,
    and sizes the KV cache as a fraction of the memory left after the weights."""
    lay = plan.layout
    output = min(output_tokens, plan.max_context_tokens - 1)
    return {"OPTION_ROLLING_BATCH": "trtllm",
            "OPTION_TENSOR_PARALLEL_DEGREE": str(lay.tensor_parallel),
            "OPTION_MAX_ROLLING_BATCH_SIZE": str(lay.batch_per_replica),
            "OPTION_MAX_INPUT_LEN": str(plan.max_context_tokens - output),
            "OPTION_MAX_OUTPUT_LEN": str(output),
            "OPTION_KV_CACHE_FREE_GPU_MEM_FRACTION": f"{1 - headroom:.2f}",
            "OPTION_DTYPE": _dtype(plan)}


def container_environment(plan: Plan, hf_model_id: str | None, headroom: float,
                          compiled_model_url: str | None = None, output_tokens: int = 512) -> dict[str, str]:
    """The engine's own knobs, by the names its documentation gives (engine-options.yaml), set from the
    plan so it allocates the memory the plan assumed."""
    style = image_entry(plan)["style"]
    if (plan.layout.attention_data_parallel or 1) > 1 and style != "lmi-vllm":
        raise ValueError(f"the plan runs attention data-parallel over {plan.layout.attention_data_parallel} ranks, "
                         f"which engine {plan.engine} ({style}) does not start: serve it with engine vllm")
    if style == "optimum-neuron-vllm":
        return _optimum_neuron(plan, hf_model_id, compiled_model_url)
    env: dict[str, str] = {"HF_MODEL_ID": hf_model_id} if hf_model_id else {}
    if style == "lmi-neuronx":
        return {**env, **_neuron(plan, compiled_model_url)}
    if style == "tgi":
        env.update(_tgi(plan, headroom))
        key = "HF_MODEL_QUANTIZE"
    elif style == "lmi-trtllm":
        env.update(_lmi_trtllm(plan, headroom, output_tokens))
        key = "OPTION_QUANTIZE"
    else:
        env.update(_lmi_vllm(plan, headroom))
        key = "OPTION_QUANTIZE"
    quantize = engine_options()[style]["quantize"].get(plan.model.precision)
    if quantize:
        env[key] = quantize
    kv_dtype = engine_options()[style].get("kv_cache_dtype", {}).get(plan.model.kv_cache_precision or "")
    if kv_dtype:  # the plan sized the KV cache at this precision: the engine must allocate it so
        env["KV_CACHE_DTYPE" if style == "tgi" else "OPTION_KV_CACHE_DTYPE"] = kv_dtype
    return env


def startup_timeout_s(plan: Plan) -> int:
    weights = plan.memory.per_device_bytes["weights"] * plan.layout.devices_per_copy
    return int(min(MAX_TIMEOUT_S, max(MIN_TIMEOUT_S, math.ceil(weights / DOWNLOAD_BYTES_PER_S))))


def volume_size_gb(plan: Plan) -> int | None:
    """Room for the model twice over (planner/economics/provisioned.py, which prices it); None where SageMaker forbids it."""
    weights = plan.memory.per_device_bytes["weights"] * plan.layout.devices_per_copy
    return provisioned.ml_volume_gb(plan.choice.instance_type, weights)


def root_volume_gb(plan: Plan) -> int:
    """Root volume for the DLAMI plus one full checkpoint's model states per node (planner/economics/provisioned.py)."""
    return provisioned.root_volume_gb(provisioned.states_per_device(plan),
                                      plan.choice.devices_per_node or plan.choice.accelerators_per_node)
