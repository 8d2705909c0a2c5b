"""`plan`, `frontier`, `models` and `schema`: the commands that plan from a file or list what is bundled."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from gpuplan.commands.common import (PROGRESS_FROM, CalibrationOpt, CatalogOpt, FileArg, FORMAT_HELP, Format, PlanFormat,
                                     RegionOpt, SchemaName, calibrated, calibration_of, guarded, progress_bar)
from planner import SpecError


def plan(file: Path = FileArg, workload: Optional[str] = typer.Option(None, "--workload", help="Plan only this workload"),
         format: PlanFormat = typer.Option(PlanFormat.table, "--format", "-f",
                                           help=f"{FORMAT_HELP}, or summary (one line per workload)"),
         catalog: Optional[Path] = CatalogOpt, region: Optional[str] = RegionOpt,
         calibration: Optional[Path] = CalibrationOpt,
         all_options: bool = typer.Option(False, "--all-options", help="List every purchase option, also commitments "
                                          "that dwarf a training run (JSON always lists them)")) -> None:
    """Plan each workload: instance type, node count, layout, memory, performance and cost."""
    from planner import load_workloads, plan_workloads

    def build():
        spec = load_workloads(file)
        if spec.stack_config is not None:  # a stack file's settings and tags; a workload file has none
            from gpuplan.check import check_tags, validate_deployments

            validate_deployments(file, spec)
        if len(spec.workloads) < PROGRESS_FROM or workload is not None:
            planned = plan_workloads(spec, catalog, region, workload)
        else:
            with progress_bar("planning", len(spec.workloads)) as advance:
                planned = plan_workloads(spec, catalog, region, workload, advance)
        if spec.stack_config is not None:  # a stack's tags are what `pulumi up` writes
            check_tags(file, spec, planned)
        return calibrated(planned, spec, calibration, file)

    plans = guarded(build)
    if format != PlanFormat.json and not all_options:
        from planner.report.noise import readable
        plans = readable(plans)
    if format == PlanFormat.json:  # plan by plan, the bytes render_json gives (5,000 plans are ~76 MB)
        from planner.report.json_stream import write_json

        return write_json(plans, sys.stdout)
    from planner.report.markdown import render_markdown, render_table  # not for JSON: start-up (issue 29)
    from planner.report.summary import render_summary

    render = {PlanFormat.markdown: render_markdown, PlanFormat.table: render_table,
              PlanFormat.summary: render_summary}[format]
    sys.stdout.write(render(plans))


def frontier(file: Path = FileArg,
             workload: Optional[str] = typer.Option(None, "--workload", help="Only this workload"),
             format: Format = typer.Option(Format.table, "--format", "-f", help=FORMAT_HELP),
             catalog: Optional[Path] = CatalogOpt, region: Optional[str] = RegionOpt,
             chart: Optional[Path] = typer.Option(None, "--chart", help="Also draw the frontier: .svg, .png or .html "
                                                  "(needs the chart extra)"),
             calibration: Optional[Path] = CalibrationOpt) -> None:
    """Every plan no other plan beats on cost and latency (serving) or cost and time to train (training)."""
    from planner import frontier_file, load_workloads
    from planner.physics.calibration import apply
    from planner.report.frontier import render_json, render_markdown, render_table

    def build():
        cal = calibration_of(load_workloads(file), calibration, file)
        found = frontier_file(file, catalog, region, workload, None if cal is None else lambda p: apply(p, cal))
        if chart is not None:
            if len(found) != 1:
                raise SpecError(f"--chart draws one workload; name it with --workload "
                                f"({', '.join(f.workload for f in found)})", path="--chart")
            from gpuplan.chart import write_chart

            write_chart(found[0], chart)
        return found

    frontiers = guarded(build)
    render = {Format.json: render_json, Format.markdown: render_markdown, Format.table: render_table}[format]
    sys.stdout.write(render(frontiers))


def models() -> None:
    """List the bundled model architectures."""
    from rich.console import Console
    from rich.table import Table

    from planner.workload.presets import presets

    table = Table("preset", "params", "active", "layers", "hidden", "heads", "kv heads", "context", box=None)
    for name, arch in presets().items():
        table.add_row(name, f"{arch.params / 1e9:,.2f}B", f"{arch.params_per_token / 1e9:,.2f}B", str(arch.layers),
                      str(arch.hidden_size), str(arch.attention_heads), str(arch.kv_heads),
                      f"{arch.max_context_tokens or 0:,}")
    Console(width=120).print(table)

def schema(name: SchemaName = typer.Argument(..., help="workloads, stack, overlay or plan")) -> None:
    """Print the JSON Schema of a file gpuplan reads (workloads, stack, overlay) or writes (plan JSON)."""
    import json

    from planner.report.schemas import schema_for

    typer.echo(json.dumps(schema_for(name.value), indent=2, ensure_ascii=False))

