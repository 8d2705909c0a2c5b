"""Messages that say how to fix themselves: an unknown key gets the closest known one (difflib) and
the keys allowed where it was written; a pydantic error location is walked back to its model."""

from __future__ import annotations

import difflib
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from planner.workload.errors import SHOWN_CHARS

ALLOWED_SHOWN = 12  # keys listed when nothing is close: enough for any section of the spec


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model inside `Section | None`, `list[Section]` or `Section` (None for plain values)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType, list):
        for arg in get_args(annotation):
            found = nested_model(arg)
            if found is not None:
                return found
    return None


def model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model whose field the last part of `loc` names (pydantic's tags and indexes skipped)."""
    model: type[BaseModel] | None = root
    for part in loc[:-1]:
        if model is None:
            return None
        if isinstance(part, str) and part in model.model_fields:
            model = nested_model(model.model_fields[part].annotation)
    return model


def unknown_key(key: str, allowed: list[str]) -> str:
    """`unknown field 'concurent_requests'; did you mean concurrent_requests?` or the allowed keys."""
    shown_key = repr(key[:SHOWN_CHARS])
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown field {shown_key}; did you mean {close[0]}?"
    listed = ", ".join(allowed[:ALLOWED_SHOWN]) + (", ..." if len(allowed) > ALLOWED_SHOWN else "")
    return f"unknown field {shown_key}; allowed: {listed}"


def allowed_keys(model: type[BaseModel]) -> list[str]:
    """The keys a user may write in this model, by alias where it has one."""
    return [field.alias or name for name, field in model.model_fields.items()]
