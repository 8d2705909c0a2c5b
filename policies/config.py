"""The policy config (`--policy-config`, the same JSON `pulumi preview --policy-pack-config` reads),
validated at the boundary: a level that is not one ("Mandatory", "remediate") used to be read as no
level and pass, and a wrongly typed value ("abc" for a number) gave a traceback. Each error names
the key as written and what is allowed (SpecError, exit 2)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, TypeAdapter, ValidationError

from planner.workload.errors import SpecError, field_path, shown

Level = Literal["advisory", "mandatory", "disabled"]  # the pack has no remediations, so not "remediate"
LEVELS = ", ".join(Level.__args__)
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class RuleSettings(BaseModel):
    """Every setting any rule reads; which ones a given rule takes comes from its schema."""
    model_config = ConfigDict(extra="forbid")

    enforcementLevel: Level | None = None
    strict: StrictBool | None = None
    minHeadroom: Annotated[Number, Field(ge=0, le=0.9)] | None = None
    catalogOverlay: dict[str, Any] | None = None
    allowedFamilies: list[StrictStr] | None = None
    maxUsdPerMonth: Annotated[Number, Field(ge=0)] | None = None
    workloadBudgets: dict[str, Annotated[Number, Field(ge=0)]] | None = None
    minInstances: Annotated[int, Field(strict=True, ge=1)] | None = None


def _level(value: object, path: str, file: str) -> None:
    try:
        TypeAdapter(Level).validate_python(value, strict=True)
    except ValidationError:
        raise SpecError(f"enforcement level {shown(value)} is not one of {LEVELS} (lower case)", path=path,
                        file=file) from None


def _settings(value: dict, allowed: set[str], path: str, file: str) -> None:
    try:
        RuleSettings.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = field_path((path, *error["loc"]))
        if error["type"] == "literal_error":
            _level(error["input"], where, file)
        message = error["msg"].removeprefix("Value error, ")
        raise SpecError(f"{message} (got {shown(error.get('input'))})", path=where, file=file) from None
    extra = sorted(set(value) - allowed)
    if extra:
        raise SpecError(f"not a setting of this policy; its settings: {', '.join(sorted(allowed))}",
                        path=f"{path}.{extra[0]}", file=file)


def validate_policy_config(config: dict, rule_settings: dict[str, set[str]], file: str) -> dict:
    """`config` unchanged when valid. `rule_settings`: policy name → the settings it takes."""
    common = {"enforcementLevel", "strict"}
    for key, value in config.items():
        if key != "all" and key not in rule_settings:
            raise SpecError(f"unknown policy; known: all, {', '.join(rule_settings)}", path=str(key)[:60], file=file)
        allowed = common | (set().union(*rule_settings.values()) if key == "all" else rule_settings[key])
        if isinstance(value, dict):
            _settings(value, allowed, key, file)
        else:
            _level(value, key, file)
    return config
