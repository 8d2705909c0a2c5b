"""A fixed generated corpus of workload specs and the plan each one chooses (type, nodes, target,
purchase, layout, $/h). Recorded before the search or the estimators change, asserted after: a move
is either a bug or a change the commit explains (GPUPLAN_UPDATE_GOLDEN=1 re-records it).

    python -m tests.chosen_plans          # prints the moves against the recorded file
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "chosen_plans.json"
SEED = 2026
SERVING_MODELS = ["llama-3.1-8b", "llama-2-7b", "mistral-7b", "llama-2-13b", "qwen2.5-14b", "gemma-2-27b",
                  "qwen2.5-32b", "llama-3.1-70b", "mixtral-8x7b", "llama-3.1-405b"]
TRAINING_MODELS = ["llama-3.1-8b", "mistral-7b", "llama-2-13b", "qwen2.5-32b", "llama-3-70b", "llama-3.1-405b"]
PURCHASES = ["on-demand", "on-demand", "spot", "auto", "reserved-1y"]


def _serving(rng: random.Random, i: int) -> dict:
    s = {"max_context_tokens": rng.choice([2048, 4096, 8192, 32768]),
         "prompt_tokens": rng.choice([128, 512, 1024, 2048]),
         "output_tokens": rng.choice([64, 256, 512]),
         "concurrent_requests": rng.choice([1, 4, 16, 32, 64, 128])}
    if rng.random() < 0.6:
        s["max_inter_token_latency_ms"] = rng.choice([20, 40, 60, 100])
    if rng.random() < 0.5:
        s["max_time_to_first_token_ms"] = rng.choice([300, 1000, 3000])
    if rng.random() < 0.4:
        s["target_output_tokens_per_s"] = rng.choice([200, 1000, 5000])
    s["max_context_tokens"] = max(s["max_context_tokens"], s["prompt_tokens"] + s["output_tokens"])
    return {"name": f"serve-{i:03d}", "kind": "inference", "model": {"preset": rng.choice(SERVING_MODELS)},
            "precision": rng.choice(["bf16", "bf16", "fp8", "int8", "int4"]), "serving": s,
            "constraints": {"deploy_target": rng.choice(["auto", "ec2", "sagemaker"]),
                            "max_nodes": rng.choice([1, 4, 16])}}


def _training(rng: random.Random, i: int) -> dict:
    method = rng.choice(["full", "full", "lora", "qlora"])
    model = rng.choice(TRAINING_MODELS if method == "full" else TRAINING_MODELS[:5])
    t = {"method": method, "tokens": rng.choice([1e8, 1e9, 2e10, 2e11]),
         "sequence_length": rng.choice([2048, 4096, 8192])}
    if rng.random() < 0.6:
        t["deadline_hours"] = rng.choice([24, 168, 720])
    return {"name": f"train-{i:03d}", "kind": "training" if method == "full" else "fine-tuning",
            "model": {"preset": model}, "precision": rng.choice(["bf16", "bf16", "fp8"]), "training": t,
            "constraints": {"max_nodes": rng.choice([1, 8, 32, 64]), "purchase": rng.choice(PURCHASES)}}


def _extended(w: dict) -> dict:
    """Past the model's trained context is refused unless asked for (issue 31); the corpus asks, so its
    generated lengths keep planning as they did when they were recorded."""
    from planner.workload.presets import presets

    trained = presets()[w["model"]["preset"]].max_context_tokens
    length = w["serving"]["max_context_tokens"] if "serving" in w else w["training"]["sequence_length"]
    return {**w, "allow_context_extension": True} if trained and length > trained else w


def corpus() -> list[dict]:
    """240 generated workloads (half serving, half training), then the bundled examples."""
    rng = random.Random(SEED)
    generated = [_extended(_serving(rng, i) if i % 2 == 0 else _training(rng, i)) for i in range(240)]
    examples = yaml.safe_load((ROOT / "examples" / "workloads.yaml").read_text())["workloads"]
    return generated + [{**w, "name": f"example-{w['name']}"} for w in examples]


def chosen(w: dict) -> dict:
    """What the search chose for one workload, in the fields a move would show in."""
    from planner.hardware.catalog import bundled
    from planner.workload.errors import InfeasibleError, SpecError
    from planner.pipeline import plan_workload
    from planner.workload.spec import parse_workloads

    try:
        spec = parse_workloads({"workloads": [w]}, "corpus").workloads[0]
        plan = plan_workload(spec, bundled())
    except InfeasibleError:
        return {"outcome": "infeasible"}
    except SpecError as e:
        return {"outcome": "refused", "why": str(e).splitlines()[0][:120]}
    lay = plan.layout
    layout = {k: v for k, v in lay.model_dump().items() if v is not None and k not in ("tensor_parallel_unit",)}
    return {"outcome": "planned", "instance_type": plan.choice.instance_type, "nodes": plan.choice.nodes,
            "deploy_target": plan.choice.deploy_target, "purchase": plan.choice.purchase, "layout": layout,
            "usd_per_hour": round(plan.cost.usd_per_hour, 2)}


def record() -> dict[str, dict]:
    return {w["name"]: chosen(w) for w in corpus()}


def moves(recorded: dict[str, dict], now: dict[str, dict]) -> list[str]:
    """One line per workload whose choice moved (the price alone moving is reported too)."""
    out = []
    for name in sorted(set(recorded) | set(now)):
        before, after = recorded.get(name), now.get(name)
        if before != after:
            out.append(f"{name}: {json.dumps(before, sort_keys=True)}\n    -> {json.dumps(after, sort_keys=True)}")
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    lines = moves(json.loads(GOLDEN.read_text()), record())
    print("\n".join(lines) or "no chosen plan moved")
    print(f"{len(lines)} moved")
