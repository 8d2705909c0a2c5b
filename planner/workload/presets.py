"""Model architectures: the bundled presets (data/models.yaml) and explicit overrides."""

from __future__ import annotations

import re
from functools import cache

from pydantic import Field, model_validator

from planner.workload.strict import StrictModel


class Architecture(StrictModel):
    """What the estimators need to know of a transformer. Counts are exact, not rounded."""

    params: float = Field(gt=0, le=1e14)
    layers: int = Field(gt=0, le=1000)
    hidden_size: int = Field(gt=0, le=1_000_000)
    attention_heads: int = Field(gt=0, le=10_000)
    kv_heads: int = Field(gt=0, le=10_000)
    head_dim: int = Field(gt=0, le=4096)
    ffn_hidden_size: int = Field(gt=0, le=10_000_000)
    vocab_size: int = Field(gt=0, le=10_000_000)
    experts: int = Field(default=1, ge=1, le=1024)
    active_experts: int = Field(default=1, ge=1, le=1024)
    shared_experts: int = Field(default=0, ge=0, le=64)
    active_params: float | None = Field(default=None, gt=0)
    tied_embeddings: bool = False
    sliding_window: int | None = Field(default=None, gt=0)
    sliding_window_layers: int | None = Field(default=None, ge=0)
    max_context_tokens: int | None = Field(default=None, gt=0)
    # Multi-head latent attention (DeepSeek-V2/V3): each layer caches one compressed latent of
    # kv_lora_rank values plus the shared RoPE key of qk_rope_head_dim, not K and V per head.
    kv_lora_rank: int | None = Field(default=None, gt=0, le=65536)
    qk_rope_head_dim: int | None = Field(default=None, ge=0, le=4096)
    # Layers with a dense FFN instead of experts (DeepSeek's first_k_dense_replace, Llama 4
    # Maverick's interleaved dense layers); 0 for a dense model's count is meaningless and ignored.
    dense_layers: int = Field(default=0, ge=0, le=1000)
    source: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> "Architecture":
        if self.kv_heads > self.attention_heads:
            raise ValueError("kv_heads cannot exceed attention_heads")
        if self.active_experts > self.experts:
            raise ValueError("active_experts cannot exceed experts")
        if self.active_params is not None and self.active_params > self.params:
            raise ValueError("active_params cannot exceed params")
        if self.sliding_window_layers is not None and self.sliding_window_layers > self.layers:
            raise ValueError("sliding_window_layers cannot exceed layers")
        if self.dense_layers > self.layers:
            raise ValueError("dense_layers cannot exceed layers")
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise ValueError("multi-head latent attention needs both kv_lora_rank and qk_rope_head_dim")
        if self.is_moe and self.shared_experts >= self.experts:
            raise ValueError("shared_experts must be fewer than experts")
        if self.params_per_token <= 0:
            raise ValueError(f"params {self.params:g} is smaller than the idle experts alone "
                             f"({(self.experts - self.active_experts) * 3 * self.hidden_size * self.ffn_hidden_size * self.layers:g}"
                             " parameters for experts × 3 × hidden_size × ffn_hidden_size × layers); raise params or "
                             "give active_params")
        if self.matmul_params_per_token <= 0:
            raise ValueError(f"params {self.params:g} leave nothing beside the input embedding table (vocab_size × "
                             f"hidden_size = {self.lookup_params:g}); raise params or set tied_embeddings")
        return self

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def params_per_token(self) -> float:
        """Parameters that take part in one token's forward pass (all, for a dense model)."""
        if self.active_params is not None:
            return self.active_params
        if not self.is_moe:
            return self.params
        # Gated (SwiGLU) experts hold 3·h·ffn parameters each; the unused ones sit idle.
        idle = (self.experts - self.active_experts) * 3 * self.hidden_size * self.ffn_hidden_size
        return self.params - idle * self.layers

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def moe_layers(self) -> int:
        """Layers whose FFN is routed experts (the ones expert parallelism shards and all-to-alls)."""
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def embedding_params(self) -> float:
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    @property
    def head_params(self) -> float:
        """The LM head's matrix (hidden → vocabulary), tied or not: a training pass multiplies it for every token, a
        prompt only for the position whose next token is sampled (performance.prefill_s)."""
        return self.vocab_size * self.hidden_size

    def prompt_matmul_params(self, tokens: float) -> float:
        """Parameter-multiplies of one prompt of `tokens` tokens: every token the layers' weights, the LM head once."""
        return (self.matmul_params_per_token - self.head_params) * tokens + self.head_params

    @property
    def lookup_params(self) -> float:
        """The input embedding table where it is its own matrix (untied): a token gathers one row of it, so no
        pass multiplies it or reads it whole. A tied table is the LM head's matrix too, which every token multiplies."""
        return 0.0 if self.tied_embeddings else self.vocab_size * self.hidden_size

    @property
    def matmul_params_per_token(self) -> float:
        """The parameters a token multiplies: params_per_token less the input embedding lookup (lookup_params)."""
        return self.params_per_token - self.lookup_params

    @property
    def windowed_layers(self) -> int:
        if self.sliding_window is None:
            return 0
        return self.layers if self.sliding_window_layers is None else self.sliding_window_layers


@cache
def _models_document() -> dict:
    from planner.workload.bundled import load  # compiled JSON while current (planner/workload/bundled.py)

    return load("models")


@cache
def presets() -> dict[str, Architecture]:
    return {name: Architecture(**fields) for name, fields in _models_document()["models"].items()}


@cache
def hugging_face_presets() -> dict[str, str]:
    """Lower-cased Hugging Face repository id → preset name (models.yaml `hugging_face:`)."""
    table = _models_document().get("hugging_face") or {}
    unknown = set(table.values()) - set(presets())
    if unknown:
        raise ValueError(f"models.yaml hugging_face: maps to unknown presets {sorted(unknown)}")
    return {repo.lower(): preset for repo, preset in table.items()}


# Quantised checkpoints are published as the base repository plus a suffix (TheBloke/...-GPTQ,
# neuralmagic/...-FP8, hugging-quants/...-AWQ-INT4): the suffix changes the weights' precision, not
# the architecture. Longest alternatives first so "-awq-int4" is taken whole.
QUANT_SUFFIX = re.compile(r"(-(fp8(-dynamic)?|awq(-int4)?|gptq(-int[48])?|int[48]|w4a16|w8a8|bnb-4bit|4bit|8bit))+$")
# A parameter count in a repository name: 405B, 70b, 8x7B (experts × size), 1.5B.
SIZE_MARKER = re.compile(r"(?<![a-z0-9.])(?:(\d+)x)?(\d+(?:\.\d+)?)b(?![a-z0-9])")
HF_PREFIX = re.compile(r"^(https?://)?(www\.)?(huggingface\.co|hf\.co)/")


def _normalised(model_id: str) -> str:
    return HF_PREFIX.sub("", model_id.strip().lower()).rstrip("/")


def _by_size(key: str) -> str | None:
    """The preset a size marker names: same marker in the preset's name (mixtral-8x7b), else a preset
    of the same family word, else none. Several candidates: the largest, so the check never under-sizes."""
    markers = SIZE_MARKER.findall(key.rsplit("/", 1)[-1])
    if len(markers) != 1:
        return None
    experts, size = markers[0]
    token = f"{experts + 'x' if experts else ''}{size}b"
    named = [name for name in presets() if re.search(rf"(?<![0-9x.]){re.escape(token)}$", name)]
    version = [name for name in named if name.removesuffix(token) in key]  # "llama-2-" in ".../llama-2-70b-chat"
    family = [name for name in named if name.split("-")[0].rstrip("0123456789.") in key]
    candidates = version or family or named
    return max(candidates, key=lambda name: presets()[name].params) if candidates else None


def preset_for_model_id(model_id: str) -> str | None:
    """The preset whose architecture a Hugging Face repository id (or an s3:// copy named after it,
    or its https URL) loads, exactly: the models file's table, then the same id without a quantisation
    suffix, then the repository name alone; None when the id names no bundled architecture. Planning
    and calibration use this: a near miss would plan a different model."""
    key = _normalised(model_id)
    table = hugging_face_presets()
    base = QUANT_SUFFIX.sub("", key)
    by_repo = {}  # the repository name alone, where one preset owns it: forks and re-uploads keep it
    for repo, preset in table.items():
        by_repo.setdefault(repo.rsplit("/", 1)[-1], set()).add(preset)
    name = base.rsplit("/", 1)[-1]
    if name in presets():  # a preset's own name (gpuplan check's stand-in, an s3:// copy named after it)
        return name
    repo = by_repo.get(name, set())
    return table.get(key) or table.get(base) or (next(iter(repo)) if len(repo) == 1 else None)


def preset_sizing_model_id(model_id: str) -> str | None:
    """The policy gate's reading of a container's model id: the exact preset, else the largest preset
    the id's own size marker (405B, 8x7B) allows, so an unmapped id is never sized below what it says
    it is; None when nothing says (the gate then blocks it as unknown)."""
    return preset_for_model_id(model_id) or _by_size(QUANT_SUFFIX.sub("", _normalised(model_id)))
