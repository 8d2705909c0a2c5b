"""What the commands share: output formats, the error-to-exit-code guard, the progress bar and the
options several commands take. Imports nothing of the planner at load time: `gpuplan --help` stays light
(issue 29)."""

from __future__ import annotations

from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from planner import InfeasibleError, SpecError


class Format(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


class PlanFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    summary = "summary"  # one line per workload


class SchemaName(str, Enum):
    workloads = "workloads"
    stack = "stack"
    overlay = "overlay"
    plan = "plan"


def fail(message: str, code: int) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def guarded(fn):
    """Run a command body, turning the domain's errors into exit codes."""
    try:
        return fn()
    except SpecError as exc:
        fail(str(exc), 2)
    except InfeasibleError as exc:
        fail(str(exc), 1)


PROGRESS_FROM = 20  # workloads: from here on, `plan` shows how far it got (a training search takes ~0.5 s)


@contextmanager
def progress_bar(what: str, total: int):
    """A bar on stderr that a long run advances; gone when it ends, so stdout stays the report."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda done, _total: bar.update(task, completed=done)


FileArg = typer.Argument(..., help="Workload YAML or Pulumi stack file (Pulumi.<stack>.yaml)")
CatalogOpt = typer.Option(None, "--catalog", help="Catalog overlay YAML laid over the bundled catalog")
RegionOpt = typer.Option(None, "--region", help="Override constraints.region for every workload")
FORMAT_HELP = "Output: table, json or markdown"
PolicyConfigOpt = typer.Option(None, "--policy-config", help="Policy config JSON, as for --policy-pack-config")
CalibrationOpt = typer.Option(None, "--calibration", help="Calibration file from `gpuplan calibrate` (else the stack "
                              "config's gpuplan:calibration)")


def calibration_of(spec, path: Optional[Path], file: Path):
    """--calibration, else gpuplan:calibration (relative to the stack file), loaded; None when neither."""
    if path is None and (spec.stack_config or {}).get("gpuplan:calibration"):
        path = file.parent / str(spec.stack_config["gpuplan:calibration"])
    if not path:
        return None
    from planner.physics.calibration import load  # only when one applies: start-up (issue 29)

    return load(path)


def calibrated(plans, spec, path: Optional[Path], file: Path):
    """The plans with the calibration's factors applied (planner/physics/calibration.py apply)."""
    cal = calibration_of(spec, path, file)
    if cal is None:
        return plans
    from planner.physics.calibration import apply  # only when one applies: start-up (issue 29)

    return plans.model_copy(update={"plans": [apply(p, cal) for p in plans.plans]})
