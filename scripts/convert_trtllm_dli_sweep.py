"""Turn NVIDIA's TensorRT-LLM 0.9.0 benchmark sweep (the dataset of NVIDIA DLI's "inference GPU cluster sizing"
course) into a bench reference source: bench/data/reference/trtllm-v09-dli-sweep.yaml.

    git -C <mirror of wbing520/ai-performance-engineering> show \
        0e25b2e2:code/ch10_inference/inference_gpu_cluster_sizing/dataset/trt_llm_0_9_0_dli.csv > sweep.csv
    python scripts/convert_trtllm_dli_sweep.py sweep.csv

One row per CSV line the planner can compare: a part EC2 rents (H100 SXM, H200, A100-SXM4-80GB, L40S; not H100 NVL,
GH200 or L40) and a bundled preset (Llama 2 7B/13B/70B, Mistral 7B, Mixtral 8x7B; not GPT-J 6B or Falcon 180B),
with figures (blank lines are configurations that did not run). The CSV's Throughput column for the configurations
TensorRT-LLM's docs/source/performance.md at v0.9.0 publishes equals that table (H200 GPT-J 6B at batch 1,024,
128/128: 27,304 tokens/s; Mistral 7B at 120, 128/2048: 8,950), so the sweep is the data behind NVIDIA's table.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.reference_yaml import convert_csv  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "bench" / "data" / "reference" / "trtllm-v09-dli-sweep.yaml"
CSV_PATH = "code/ch10_inference/inference_gpu_cluster_sizing/dataset/trt_llm_0_9_0_dli.csv"
COMMIT = "0e25b2e2"  # wbing520/ai-performance-engineering, 2025-04-27
GPUS = {"H100 80GB HBM3": "H100-SXM-80GB", "H200 141GB HBM3": "H200", "A100-SXM4-80GB": "A100-80GB", "L40S": "L40S"}
MODELS = {"LLaMA v2 7B": "llama-2-7b", "LLaMA v2 13B": "llama-2-13b", "LLaMA v2 70B": "llama-2-70b",
          "Mistral 7B": "mistral-7b", "Mixtral 8x7B": "mixtral-8x7b"}
# FP8 engines were built with --enable_fp8 --fp8_kv_cache; "Mixed" is the FP16 build (performance.md, "Running on A100":
# remove those two options). Both read as the planner names them.
PRECISIONS = {"FP8": ("fp8", "fp8"), "Mixed": ("fp16", "fp16")}

SOURCE = {
    "id": "trtllm-v09-dli-sweep",
    "citation": (f"wbing520/ai-performance-engineering {CSV_PATH} @{COMMIT} (the dataset of NVIDIA DLI's 'inference "
                 "GPU cluster sizing' course); the configurations NVIDIA/TensorRT-LLM docs/source/performance.md at "
                 "v0.9.0 publishes match its Throughput column"),
    "date": "2024-04 (TensorRT-LLM 0.9.0 release; repository commit 2025-04-27)",
    "hardware": ("1-8x H100 80GB HBM3 (SXM), H200 141GB, A100-SXM4-80GB (NVLink; custom all-reduce on) and L40S "
                 "(PCIe, NVIDIA's own servers: gpu_peer_to_peer; custom all-reduce off); single node"),
    "client": "in-process",  # bench/reference_serving.in_process
    "code_base": ("TensorRT-LLM 0.9.0 C++ gptSessionBenchmark (static batch, XQA on, paged KV cache sized by "
                  "max_tokens_in_paged_kv_cache, fake weights, one run per configuration)"),
    "notes": (
        "A static batch of `concurrency` identical requests (input/output lengths fixed, no early stop). "
        "ttft_ms is the CSV's '1st Token Latency (ms)' (the batch's context phase), itl_ms its 'Token-to-token "
        "Latency (ms)' (= (Latency - 1st token) / (output - 1), checked on every row), tokens_per_s its "
        "'Throughput (tokens / sec)' (= batch x output / Latency: Llama 2 7B FP8 at 1 x 128/128 on H100, 128 / "
        "526.76 ms = 243.0). FP8 rows: FP8 weights, activations and KV cache; 'Mixed' rows: FP16. "
        "identical_prompts: gptSessionBenchmark fills every prompt with one token id (padId) and decodes with top-k 1 "
        "(benchmarks/cpp/gptSessionBenchmark.cpp, read at 027cd518; the 0.9.0 file itself not read), so a "
        "Mixtral batch routes like one sequence. gpu_peak_memory_gb is the CSV's 'GPU Peak Memory Usage (GB)' (the "
        "run's device peak, with the engine's workspace for its build's largest shapes). Converted by scripts/convert_trtllm_dli_sweep.py; left out: H100 "
        "NVL, GH200 and L40 (not rented on EC2), GPT-J 6B and Falcon 180B (no bundled preset), configurations "
        "without figures (did not run); lines with a first-token latency alone keep it (tokens/s and ITL null)."),
}


def _number(text: str, digits: int | None = None) -> float | None:
    """A figure, or None where the sweep measured only the first token (88 lines)."""
    return None if not text.strip() else (round(float(text), digits) if digits else float(text))


def convert(lines: list[dict]) -> list[dict]:
    rows = []
    for line in lines:
        gpu, model = GPUS.get(line["GPU"]), MODELS.get(line["Model"])
        if gpu is None or model is None or not line["1st Token Latency (ms)"].strip():
            continue
        precision, kv = PRECISIONS[line["Precision"]]
        prompt, output = (int(x) for x in line["Input/Output Lengths"].split(","))
        batch, tp = int(line["Batch Size"]), int(line["Tensor Model Parallel Size"])
        row = {"id": f"trtllm09dli-{gpu.lower()}-{model}-{precision}-tp{tp}-bs{batch}-{prompt}-{output}",
               "identical_prompts": True, "model": model, "accelerator": gpu, "gpus": int(line["Number of GPUs"]),
               "tp": tp, "pp": int(line["Pipeline Model Parallel Size"]), "ep": 1,
               "interconnect": "pcie" if gpu == "L40S" else "nvlink", "precision": precision, "kv_precision": kv,
               "engine": "tensorrt-llm", "engine_version": "0.9.0 (gptSessionBenchmark)", "decode_attention": "unsplit",
               "load": "static-batch",
               "concurrency": batch, "request_rate": None, "prompt_tokens": prompt, "output_tokens": output,
               "tokens_per_s": _number(line["Throughput (tokens / sec)"]),
               "ttft_ms": float(line["1st Token Latency (ms)"]),
               "itl_ms": _number(line["Token-to-token Latency (ms)"], 4),
               "gpu_peak_memory_gb": _number(line.get("GPU Peak Memory Usage (GB)", ""))}
        if gpu == "L40S":
            row["gpu_peer_to_peer"] = True
        rows.append(row)
    return rows


def main() -> None:
    convert_csv(sys.argv[1], convert, SOURCE, OUT, "scripts/convert_trtllm_dli_sweep.py")


if __name__ == "__main__":
    main()
