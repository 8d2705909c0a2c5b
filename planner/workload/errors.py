"""The two ways planning fails, each mapped to an exit code at the CLI edge (design.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SHOWN_CHARS = 60  # a value echoed in a message: enough to recognise, never a 10 MB paste


def field_path(loc: tuple) -> str:
    """A pydantic error location as the user wrote it: `workloads[0].serving.prompt_tokens`, with
    pydantic's own markers (validator names, literal tags, dict-key slots) dropped."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part != "[key]" and not str(part).startswith(("function-", "literal[")):
            path += f".{part}" if path else str(part)
    return path


def shown(value: Any) -> str:
    """repr(value), cut to SHOWN_CHARS with an ellipsis."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


@dataclass
class SpecError(Exception):
    """Bad input (exit 2): names the file, the field path and what is allowed."""

    message: str
    path: str = ""
    file: str = ""

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.file, self.path) if part)
        return f"{where}: {self.message}" if where else self.message


@dataclass
class NearMiss:
    instance_type: str
    reason: str


@dataclass
class InfeasibleError(Exception):
    """No catalog type meets the workload (exit 1); carries the nearest misses to explain why."""

    workload: str
    summary: str
    nearest: list[NearMiss] = field(default_factory=list)
    file: str = ""
    path: str = ""  # workloads[i] as written, when known

    def __str__(self) -> str:
        return "".join(f"{part}: " for part in (self.file, self.path) if part) + self.explanation()

    def explanation(self) -> str:
        lines = [f"workload {self.workload!r}: {self.summary}"]
        if self.nearest:
            lines.append("nearest misses:")
            lines += [f"  {m.instance_type}: {m.reason}" for m in self.nearest]
        return "\n".join(lines)
