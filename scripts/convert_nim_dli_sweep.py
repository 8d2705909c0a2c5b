"""Turn the one-client runs of NVIDIA's NIM benchmark sweep (the dataset of NVIDIA DLI's "inference GPU cluster sizing"
course) into a bench reference source: bench/data/reference/nim-dli-sweep.yaml.

    git -C <mirror of wbing520/ai-performance-engineering> show \
        0e25b2e2:code/ch10_inference/inference_gpu_cluster_sizing/dataset/nim.csv > nim.csv
    python scripts/convert_nim_dli_sweep.py nim.csv

genai-perf against NIM's OpenAI endpoint (Llama 3 8B and 70B Instruct on NIM's TensorRT-LLM engines, A100-SXM4-80GB
and H100 SXM, TP 1-8). One row per CSV line with one client: a request alone on the engine, its first token and
inter-token latency measured at the HTTP client. The lines with more clients are left out: genai-perf's requests of
equal length arrive in step (at 2,000-token prompts the mean first token at 5 and 10 clients is 4.0 and 8.6 times
one client's while the inter-token latency stays within 25%), a convoy whose prefill budget NIM does not state
(docs/calibration-log.md, 2026-12-07).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.reference_yaml import convert_csv  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "bench" / "data" / "reference" / "nim-dli-sweep.yaml"
CSV_PATH = "code/ch10_inference/inference_gpu_cluster_sizing/dataset/nim.csv"
COMMIT = "0e25b2e2"  # wbing520/ai-performance-engineering, 2025-04-27
GPUS = {"A100-SXM4-80GB": "A100-80GB", "H100_80GB_HBM3": "H100-SXM-80GB"}
MODELS = {"meta-llama3-8b-instruct": "llama-3-8b", "meta-llama3-70b-instruct": "llama-3-70b"}
# The KV cache precision is not stated: 16-bit (NIM's FP8 profiles quantise the linear layers, ModelOpt's default).
KV = {"fp16": "fp16", "bf16": "bf16", "fp8": "fp16"}
NS_PER_MS = 1e6

SOURCE = {
    "id": "nim-dli-sweep",
    "citation": (f"wbing520/ai-performance-engineering {CSV_PATH} @{COMMIT} (the dataset of NVIDIA DLI's 'inference "
                 "GPU cluster sizing' course: genai-perf runs of NIM for LLMs)"),
    "date": "2024 (NIM for Llama 3 8B/70B Instruct, NIM_TRT-LLM; repository commit 2025-04-27)",
    "hardware": "1-8x A100-SXM4-80GB and 1-8x H100 80GB HBM3 (SXM), one node",
    "client": "http",  # bench/reference_serving.in_process
    "code_base": ("NVIDIA NIM for LLMs on its TensorRT-LLM engines, OpenAI-compatible HTTP endpoint; client genai-perf "
                  "(backend tensorrtllm, synthetic prompts of fixed length, max_tokens = output length)"),
    "notes": (
        "One client (input_config-concurrency 1): ttft_ms is time_to_first_token-avg, itl_ms inter_token_latency-avg "
        "(both ns in the CSV), tokens_per_s output_token_throughput-avg; prompt_tokens and output_tokens the configured "
        "synthetic_input_tokens_mean and output_tokens_mean (stddev 0; the measured means are within 0.3%). TP = "
        "n_gpus (the course's notebook: tensor parallelism only). KV cache 16-bit (not stated). decode_attention "
        "unsplit: the one-client steps grow with the context at the rate one thread block per KV head streams "
        "(planner/physics/unsplit_attention.py), as TensorRT-LLM runs without multi-block mode. Converted by "
        "scripts/convert_nim_dli_sweep.py; the runs with more clients are left out (its docstring)."),
}


def convert(lines: list[dict]) -> list[dict]:
    rows = []
    for line in lines:
        if line["input_config-concurrency"] != "1":
            continue
        gpu, model = GPUS[line["task_inputs-GPU"]], MODELS[line["task_inputs-model"]]
        precision, tp = line["task_inputs-precision"], int(line["task_inputs-n_gpus"])
        prompt, output = int(line["input_config-synthetic_input_tokens_mean"]), int(line["input_config-output_tokens_mean"])
        rows.append({"id": f"nimdli-{gpu.lower()}-{model}-{precision}-tp{tp}-{prompt}-{output}", "model": model,
                     "accelerator": gpu, "gpus": tp, "tp": tp, "pp": 1, "ep": 1, "interconnect": "nvlink",
                     "precision": precision, "kv_precision": KV[precision], "engine": "tensorrt-llm",
                     "engine_version": "NIM for LLMs 1.0 (NIM_TRT-LLM)", "decode_attention": "unsplit",
                     "load": "closed-loop", "concurrency": 1, "request_rate": None, "prompt_tokens": prompt,
                     "output_tokens": output,
                     "tokens_per_s": round(float(line["output_token_throughput-avg"]), 2),
                     "ttft_ms": round(float(line["time_to_first_token-avg"]) / NS_PER_MS, 2),
                     "itl_ms": round(float(line["inter_token_latency-avg"]) / NS_PER_MS, 3)})
    return rows


def main() -> None:
    convert_csv(sys.argv[1], convert, SOURCE, OUT, "scripts/convert_nim_dli_sweep.py")


if __name__ == "__main__":
    main()
