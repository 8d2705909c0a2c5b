"""The base of every model a user writes (specs, overlays, architectures): unknown keys, NaN and
infinity are errors, and YAML's `true` is not the number 1 (pydantic's lax mode would take it)."""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name is not None:
            annotation = cls.model_fields[info.field_name].annotation
            if annotation is not bool and bool not in get_args(annotation) and get_origin(annotation) is not Literal:
                raise ValueError("expected a number or text, not true/false")
        return value
