"""`calibrate`, `observe` and `preflight`: measurements in, CloudWatch and the account's quotas (boto3)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from gpuplan.commands.common import (CalibrationOpt, CatalogOpt, FileArg, FORMAT_HELP, Format, RegionOpt, calibrated,
                                     fail, guarded)


def calibrate_command(results: list[Path] = typer.Argument(..., help="Benchmark results: vLLM bench serve JSON, GuideLLM report, "
                                                           "AIPerf/genai-perf profile export, training CSV"),
                      instance_type: Optional[str] = typer.Option(None, "--instance-type",
                                                                  help="Where the results ran, when a file does not say"),
                      engine: Optional[str] = typer.Option(None, "--engine", help="Serving engine, when a file does not say"),
                      model: Optional[str] = typer.Option(None, "--model", help="Model preset, when the file's model id "
                                                          "maps to none (a local path)"),
                      tensor_parallel: Optional[int] = typer.Option(None, "--tensor-parallel", min=1,
                                                                    help="Serving TP (default: the whole node)"),
                      out: Path = typer.Option(Path("calibration.yaml"), "--out", help="Where to write the calibration file"),
                      catalog: Optional[Path] = CatalogOpt) -> None:
    """Compare measured results with what the planner predicts for the same setup; write correction
    factors per (accelerator, engine, metric) for --calibration."""
    from gpuplan import measurements
    from gpuplan.calibrate import calibrate as fit
    from planner.physics.calibration import LABELS, dump

    def build():
        found = [m for path in results for m in measurements.read(path)]
        return fit(found, catalog, model, instance_type, engine, tensor_parallel)

    cal = guarded(build)
    try:
        out.write_text(dump(cal))
    except OSError as exc:
        fail(f"--out: cannot write {out} ({exc.strerror})", 2)
    for f in cal.factors:
        typer.echo(f"{f.accelerator} / {f.engine}: {LABELS[f.metric]} ×{f.factor:.3f} (spread ×{f.spread:.2f}, "
                   f"{len(f.results)} result(s), {', '.join(f.instance_types)})")
    typer.echo(f"wrote {out}")


def observe(file: Path = FileArg, since: str = typer.Option("7d", "--since", help="How far back: 7d, 12h, 30m"),
            format: Format = typer.Option(Format.table, "--format", "-f", help=FORMAT_HELP),
            region: Optional[str] = RegionOpt, catalog: Optional[Path] = CatalogOpt,
            calibration: Optional[Path] = CalibrationOpt,
            out: Optional[Path] = typer.Option(None, "--out", help="Also write what was seen as input for "
                                               "`gpuplan calibrate` (JSON)")) -> None:
    """Plan against actual for each deployed workload, from its CloudWatch metrics (boto3)."""
    from gpuplan import observe as obs
    from gpuplan import aws
    from planner import plan_workloads
    from planner.workload.spec import load_workloads

    try:
        since_s = obs.since_seconds(since)
    except ValueError as exc:
        fail(str(exc), 2)
    spec = guarded(lambda: load_workloads(file))
    plans = guarded(lambda: calibrated(plan_workloads(spec, catalog, region), spec, calibration, file))
    output_tokens = {w.name: w.serving.output_tokens for w in spec.workloads if w.serving is not None}
    where = region or (spec.workloads[0].constraints.region if spec.workloads else "us-east-1")
    try:
        rows = obs.observe(plans.plans, output_tokens, where, since_s)
    except aws.AwsError as exc:
        fail(str(exc), 2)
    if out is not None:
        from gpuplan.observe_out import calibration_input

        # uncalibrated plans: calibrate compares with the planner's own prediction (TTFT here)
        raw = guarded(lambda: plan_workloads(spec, catalog, region))
        text = calibration_input(raw.plans, {w.name: w for w in spec.workloads}, rows, where, since)
        try:
            out.write_text(text)
        except OSError as exc:
            fail(f"--out {out}: cannot write ({exc.strerror})", 2)
    render = {Format.json: obs.render_json, Format.markdown: obs.render_markdown, Format.table: obs.render_table}[format]
    sys.stdout.write(render(rows))


def preflight(file: Path = FileArg, region: Optional[str] = RegionOpt, catalog: Optional[Path] = CatalogOpt,
              subnet: Optional[str] = typer.Option(None, "--subnet", help="Training subnet (a stack file's gpuplan:subnetIds otherwise)")) -> None:
    """Check the account's quotas, zone offerings and capacity reservations for each plan (boto3).
    Exit 1 when a check fails or could not be made."""
    from rich.console import Console
    from rich.table import Table

    from gpuplan import aws
    from planner import plan_workloads
    from planner.hardware import catalog as catalog_mod
    from gpuplan.check import validate_deployments
    from planner.workload.spec import load_workloads

    spec = guarded(lambda: load_workloads(file))
    deployments = guarded(lambda: validate_deployments(file, spec))
    plans = guarded(lambda: plan_workloads(spec, catalog, region))
    subnet_ids = (spec.stack_config or {}).get("gpuplan:subnetIds")
    default_subnet = subnet or (subnet_ids[0] if isinstance(subnet_ids, list) and subnet_ids else None)
    subnets = {w.name: (deployments[w.name].subnet_id if w.name in deployments else None) or default_subnet
               for w in spec.workloads}
    cat = guarded(lambda: catalog_mod.load(catalog or spec.catalog))
    try:
        checks = aws.preflight(plans.plans, cat, {k: v for k, v in subnets.items() if v})
    except aws.AwsError as exc:
        fail(str(exc), 2)
    table = Table("workload", "check", "required", "available", "ok", box=None)
    for c in checks:
        table.add_row(c.workload, c.check, c.required, c.available, {True: "✔", False: "✘", None: "?"}[c.ok])
    Console(width=160).print(table)
    failed = [c for c in checks if c.ok is False]
    unknown = [c for c in checks if c.ok is None and c.gating]
    for c in failed:
        typer.echo(f"{c.workload}: {c.check}: {c.action}")
    if failed or unknown:
        fail(f"{len(failed)} check(s) failed, {len(unknown)} could not be made", 1)


