"""A request the components would send, checked against botocore's service model: every property name
a member of the API's shape, every enum value one the API lists, types and ranges as botocore validates
them. Pulumi spells the members in camelCase (`volumeSizeInGb` for `VolumeSizeInGB`); the few it
renames are listed."""

from __future__ import annotations

from functools import cache
from typing import Any

import botocore.session
from botocore.validate import ParamValidator

# Pulumi property → API member where they differ by more than case (pulumi-aws's SageMaker schema).
RENAMED = {"kmsKeyArn": "KmsKeyId"}


@cache
def _service(name: str):
    return botocore.session.get_session().get_service_model(name)


def _to_api(value: Any, shape, path: str) -> Any:
    kind = shape.type_name
    if kind == "structure":
        assert isinstance(value, dict), f"{path}: expected a structure, got {value!r}"
        lower = {member.lower(): member for member in shape.members}
        out = {}
        for key, item in value.items():
            if key == "tags" and isinstance(item, dict) and "Tags" in shape.members:
                out["Tags"] = [{"Key": k, "Value": v} for k, v in item.items()]
                continue
            name = RENAMED.get(key) or lower.get(key.lower())
            if name is None and isinstance(item, list) and len(item) == 1 and key[:-1].lower() in lower:
                name, item = lower[key[:-1].lower()], item[0]  # pulumi lists a structure the API takes once
            assert name is not None, f"{path}.{key}: not a member of {shape.name} ({', '.join(shape.members)})"
            out[name] = _to_api(item, shape.members[name], f"{path}.{name}")
        return out
    if kind == "list":
        return [_to_api(item, shape.member, f"{path}[{i}]") for i, item in enumerate(value)]
    if kind == "map":
        return {k: _to_api(v, shape.value, f"{path}.{k}") for k, v in value.items()}
    if kind in ("integer", "long") and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "string" and shape.enum:
        assert value in shape.enum, f"{path}: {value!r} is not one of {shape.name}'s values"
    return value


def assert_request_fits(service: str, operation: str, inputs: dict) -> None:
    """Raises AssertionError naming the first property or value the API would refuse."""
    shape = _service(service).operation_model(operation).input_shape
    request = _to_api({k: v for k, v in inputs.items() if k != "name"}, shape, operation)
    report = ParamValidator().validate(request, shape)
    assert not report.has_errors(), report.generate_report()
