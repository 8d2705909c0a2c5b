"""Model architectures: the bundled presets (data/models.yaml) and explicit overrides."""

from __future__ import annotations

from functools import cache
from importlib import resources

from pydantic import Field, model_validator

from planner.strict import StrictModel
from planner.yamlsafe import load_text


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
        if self.is_moe and self.shared_experts >= self.experts:
            raise ValueError("shared_experts must be fewer than experts")
        if self.params_per_token <= 0:
            raise ValueError(f"params {self.params:g} is smaller than the idle experts alone "
                             f"({(self.experts - self.active_experts) * 3 * self.hidden_size * self.ffn_hidden_size * self.layers:g}"
                             " parameters for experts × 3 × hidden_size × ffn_hidden_size × layers); raise params or "
                             "give active_params")
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
    def embedding_params(self) -> float:
        return self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)

    @property
    def windowed_layers(self) -> int:
        if self.sliding_window is None:
            return 0
        return self.layers if self.sliding_window_layers is None else self.sliding_window_layers


@cache
def _models_document() -> dict:
    return load_text(resources.files("planner.data").joinpath("models.yaml").read_text(), bundled=True)


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


def preset_for_model_id(model_id: str) -> str | None:
    """The preset whose architecture a Hugging Face repository id (or an s3:// copy named after it) loads."""
    key = model_id.strip().lower().rstrip("/")
    return hugging_face_presets().get(key)
