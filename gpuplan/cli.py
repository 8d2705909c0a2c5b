"""The `gpuplan` command. Errors end here: SpecError → exit 2, InfeasibleError → exit 1, each as
one message without a traceback. The planning path never imports pulumi or boto3."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from planner import InfeasibleError, SpecError

# rich_markup_mode=None: click's own help, which wraps to the terminal instead of cutting flag names
# (rich's option table truncated `--fail-above-percent` at 80 columns).
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Size GPU and accelerator workloads on AWS, provision them with Pulumi, gate them with policies.")
catalog_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="The instance-type catalog: list, show, refresh.")
app.add_typer(catalog_app, name="catalog")


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
    from planner.physics.calibration import apply

    cal = calibration_of(spec, path, file)
    if cal is None:
        return plans
    return plans.model_copy(update={"plans": [apply(p, cal) for p in plans.plans]})


@app.command()
def plan(file: Path = FileArg, workload: Optional[str] = typer.Option(None, "--workload", help="Plan only this workload"),
         format: PlanFormat = typer.Option(PlanFormat.table, "--format", "-f",
                                           help=f"{FORMAT_HELP}, or summary (one line per workload)"),
         catalog: Optional[Path] = CatalogOpt, region: Optional[str] = RegionOpt,
         calibration: Optional[Path] = CalibrationOpt,
         all_options: bool = typer.Option(False, "--all-options", help="List every purchase option, also commitments "
                                          "that dwarf a training run (JSON always lists them)")) -> None:
    """Plan each workload: instance type, node count, layout, memory, performance and cost."""
    from gpuplan.check import check_tags, validate_deployments
    from planner import load_workloads, plan_workloads
    from planner.report.markdown import render_markdown, render_table
    from planner.report.summary import render_summary

    def build():
        spec = load_workloads(file)
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
    render = {PlanFormat.markdown: render_markdown, PlanFormat.table: render_table,
              PlanFormat.summary: render_summary}[format]
    sys.stdout.write(render(plans))


@app.command()
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


@app.command()
def check(file: Path = FileArg, format: Format = typer.Option(Format.table, "--format", "-f", help=FORMAT_HELP),
          policy_config: Optional[Path] = PolicyConfigOpt,
          strict: bool = typer.Option(True, "--strict/--no-strict",
                                      help="Check the resources as a preview sees them and block when a value a "
                                           "gating rule reads is unknown (CrossGuard alone would only advise)"),
          calibration: Optional[Path] = CalibrationOpt) -> None:
    """Run the policy pack's rules on the plans offline; exit 1 on a mandatory violation."""
    from gpuplan.check import check_file, load_policy_config, render_markdown, render_text
    from planner import load_workloads, plan_workloads, shared_searches

    def build():
        with shared_searches():  # the program under mocks plans the same shapes again: search each once
            spec = load_workloads(file)
            plans = calibrated(plan_workloads(spec), spec, calibration, file)
            return check_file(file, load_policy_config(policy_config), spec, plans, strict=strict)

    report = guarded(build)
    render = {Format.json: lambda r: r.model_dump_json(indent=2) + "\n", Format.markdown: render_markdown,
              Format.table: render_text}[format]
    sys.stdout.write(render(report))
    if not report.passed:
        raise typer.Exit(1)


@app.command()
def cost(head: Path = typer.Option(..., "--head", help="The changed workload YAML or stack file"),
         base: Optional[Path] = typer.Option(None, "--base", help="The file before the change"),
         base_ref: Optional[str] = typer.Option(None, "--base-ref", help="Read the base from git at this ref, e.g. origin/main"),
         format: Format = typer.Option(Format.markdown, "--format", "-f", help=FORMAT_HELP),
         skip_no_diff: bool = typer.Option(False, "--skip-no-diff", help="Print nothing when no workload changed"),
         fail_above_percent: Optional[float] = typer.Option(None, "--fail-above-percent", min=0,
                                                            help="Exit 1 when the monthly total rises more than this %"),
         fail_above_usd: Optional[float] = typer.Option(None, "--fail-above-usd", min=0,
                                                        help="Exit 1 when the monthly total rises more than this many USD"),
         policy_config: Optional[Path] = PolicyConfigOpt,
         policies: bool = typer.Option(True, "--policies/--no-policies", help="Add gpuplan check's verdicts on the head"),
         frontiers: bool = typer.Option(True, "--frontier/--no-frontier",
                                        help="Fold the cost–latency frontier of each changed workload into the comment"),
         calibration: Optional[Path] = CalibrationOpt) -> None:
    """The pull-request cost comment: monthly cost before and after, per workload, with policy verdicts."""
    from gpuplan import costdiff
    from planner import plan_workloads
    from planner.physics.calibration import apply
    from planner.workload.spec import load_workloads

    if (base is None) == (base_ref is None):
        fail("give exactly one of --base FILE or --base-ref REF", 2)

    def build():
        if base is not None:
            if not base.exists():
                raise SpecError("file not found", path="--base", file=str(base))
            before, notes = costdiff.plan_base(base)
        else:
            with costdiff.base_from_git(head, base_ref) as (base_path, scratch):
                before, notes = costdiff.plan_base(base_path, scratch, f"{base_ref}:")
        from gpuplan.check import validate_deployments

        head_spec = load_workloads(head)
        validate_deployments(head, head_spec)
        cal = calibration_of(head_spec, calibration, head)  # both sides, so the diff compares like with like
        correct = (lambda p: p) if cal is None else (lambda p: apply(p, cal))
        before = before.model_copy(update={"plans": [correct(p) for p in before.plans]})
        after = plan_workloads(head_spec)
        after = after.model_copy(update={"plans": [correct(p) for p in after.plans]})
        verdicts = None
        if policies:
            from gpuplan.check import check_file, load_policy_config

            verdicts = check_file(head, load_policy_config(policy_config), head_spec, after, stand_ins=True)
        diff = costdiff.compare(before, after, str(base or f"{base_ref}:{head}"), str(head), verdicts, notes)
        if frontiers and format == Format.markdown:  # the comment folds them in; JSON and tables do not
            from planner.hardware import catalog as catalog_mod
            from planner.pipeline import frontier

            moved = {r.workload for r in diff.workloads if r.status in ("changed", "added")}
            head_catalog = catalog_mod.load(head_spec.catalog)
            diff.frontiers = [frontier(w, head_catalog, None if cal is None else correct)
                              for w in head_spec.workloads if w.name in moved]
        return diff

    from planner import shared_searches

    with shared_searches():  # base and head share their unchanged workloads' searches, and the check its plans
        diff = guarded(build)
    if skip_no_diff and not diff.changed:
        return
    from gpuplan import cost_comment

    render = {Format.markdown: cost_comment.render_markdown, Format.json: cost_comment.render_json,
              Format.table: cost_comment.render_table}[format]
    sys.stdout.write(render(diff))
    breach = costdiff.guardrail_breach(diff, fail_above_percent, fail_above_usd)
    if breach:
        fail(f"cost guardrail: {breach}", 1)
    if diff.policies is not None and not diff.policies.passed:
        fail(f"{diff.policies.mandatory} mandatory policy violation(s) on the head", 1)


@app.command("calibrate")
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


@app.command()
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


@app.command()
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


def _no_price_here(t) -> str:
    """Why the region shows no EC2 price: a recorded reason, or the regions that have one."""
    if t.no_price_reason:
        return "no price (below)"
    priced = sorted(r for r, services in t.prices.items() if services.get("ec2"))
    return f"only in {', '.join(priced)}" if priced else "-"


@catalog_app.command("list")
def catalog_list(catalog: Optional[Path] = CatalogOpt,
                 region: str = typer.Option("us-east-1", "--region", help="Region whose prices to show")) -> None:
    """Instance types with accelerators, memory and prices in a region."""
    from rich.console import Console
    from rich.table import Table

    from planner.hardware import catalog as catalog_mod

    from planner.hardware.regions import check_region

    cat = guarded(lambda: catalog_mod.load(catalog))
    guarded(lambda: check_region(region, cat, "--region"))
    table = Table("type", "family", "accelerator", "count", "GiB each", "EFA Gbps", "EC2 $/h", "SageMaker $/h",
                  "EC2 price date", box=None)
    for t in cat.instance_types:
        accel = cat.accelerator(t.accelerator)
        ec2, sm = t.price(region, "ec2"), t.price(region, "sagemaker")
        table.add_row(t.name, t.family, accel.name, str(t.accelerators_per_node), f"{accel.memory_mib / 1024:.1f}",
                      f"{t.inter_node_gbps:g}" if t.efa else "-", f"{ec2.on_demand:.4f}" if ec2 and ec2.on_demand else "-",
                      f"{sm.on_demand:.4f}" if sm and sm.on_demand else "-",
                      (ec2.date or "-") if ec2 else _no_price_here(t))
    console = Console(width=140)
    console.print(table)
    for t in cat.instance_types:
        if t.no_price_reason:
            console.print(f"{t.name}: {t.no_price_reason}", highlight=False)


@catalog_app.command("show")
def catalog_show(instance_type: str = typer.Argument(..., help="An instance type, e.g. p5.48xlarge"), catalog: Optional[Path] = CatalogOpt) -> None:
    """Every figure of one instance type and its accelerator, with sources and dates."""
    import yaml

    from planner.hardware import catalog as catalog_mod

    cat = guarded(lambda: catalog_mod.load(catalog))
    itype = cat.instance(instance_type)
    if itype is None:
        import difflib

        close = difflib.get_close_matches(instance_type, [t.name for t in cat.instance_types], n=3)
        fail(f"unknown instance type {instance_type!r}" + (f"; did you mean {', '.join(close)}?" if close else ""), 2)
    data = {"instance_type": itype.model_dump(exclude_none=True),
            "accelerator": cat.accelerator(itype.accelerator).model_dump(exclude_none=True)}
    for services in data["instance_type"].get("prices", {}).values():
        for price in services.values():
            price["source"] = cat.source_text(price["source"])
    typer.echo(yaml.safe_dump(data, sort_keys=False, width=120))


@catalog_app.command("refresh")
def catalog_refresh(region: list[str] = typer.Option(["us-east-1", "us-west-2", "eu-west-1"], "--region",
                                                     help="Region to price (repeat for several)"),
                    out: Path = typer.Option(Path("catalog.refreshed.yaml"), "--out", help="Catalog file to write"),
                    only: Optional[list[str]] = typer.Option(None, "--type", help="Refresh only these instance types"),
                    catalog: Optional[Path] = CatalogOpt,
                    accept_changes: bool = typer.Option(False, "--accept-changes",
                                                        help="Write prices that moved beyond ±50% or fell below the "
                                                             "floor (otherwise the previous figure is kept, exit 1)")) -> None:
    """Read live specs and prices from AWS (EC2, Price List API) into a catalog file with sources and dates.
    Exit 1 when a source could not answer (its figures kept from the base) or a price looks wrong."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from gpuplan import aws
    from planner.economics import price_review
    from planner.hardware import catalog as catalog_mod

    from planner.hardware.regions import check_region_name

    for name in region:
        guarded(lambda: check_region_name(name, "--region"))
    base = guarded(lambda: catalog_mod.load(catalog))
    unknown = [t for t in only or [] if base.instance(t) is None]
    if unknown:
        fail(f"--type: unknown instance type(s) {', '.join(unknown)}; see `gpuplan catalog list`", 2)
    if out.exists() and not out.is_file():
        fail(f"--out: {out} is not a regular file (a directory?); give a file path", 2)
    if not out.parent.is_dir():
        fail(f"--out: directory {out.parent} does not exist", 2)
    console = Console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=True) as progress:
        task = progress.add_task("connecting", total=None)
        try:
            result = aws.refresh_catalog(base, region, only, progress=lambda m: progress.update(task, description=m))
        except aws.AwsError as exc:
            fail(str(exc), 2)
    for line in result.unknown:
        typer.echo(f"warning: {line}", err=True)
    if result.answered == 0:
        fail("nothing refreshed: no AWS source answered; nothing written", 1)
    flags = price_review.review(base, result.catalog)
    fresh = result.catalog if accept_changes else price_review.keep_previous(result.catalog, base, flags)
    guarded(lambda: write_catalog(fresh, out))
    typer.echo(f"wrote {out}: {len(fresh.instance_types)} instance types, regions {', '.join(region)}")
    for change in result.changes:
        typer.echo(f"  {change.instance_type}: {change.what}")
    if not result.changes:
        typer.echo("  no changes against the base catalog")
    for flag in flags:
        typer.echo(f"{'accepted' if accept_changes else 'kept the previous figure'}: {flag}", err=True)
    if flags and not accept_changes:
        fail(f"{len(flags)} price(s) look wrong and were not written; check them and re-run with --accept-changes", 1)
    if result.unknown:
        fail(f"{len(result.unknown)} source(s) did not answer; their figures are the base catalog's", 1)


def write_catalog(cat, out: Path) -> None:
    """Write beside the target and rename over it: a reader never sees half a catalog."""
    import os
    import tempfile

    import yaml

    text = ("# Written by `gpuplan catalog refresh`; use it with --catalog or the spec's catalog: key.\n"
            + yaml.safe_dump(cat.model_dump(by_alias=True, exclude_none=True, mode="json"), sort_keys=False, width=120))
    written: str | None = None
    try:
        if out.exists():
            mode = out.stat().st_mode & 0o7777  # the target keeps its mode (mkstemp makes 0600)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask  # as open() would create it
        with tempfile.NamedTemporaryFile("w", dir=out.parent, prefix=f".{out.name}.", delete=False) as tmp:
            written = tmp.name
            tmp.write(text)
        os.chmod(written, mode)
        os.replace(written, out)
    except OSError as exc:
        if written:
            Path(written).unlink(missing_ok=True)
        raise SpecError(f"cannot write ({exc.strerror})", path="--out", file=str(out)) from None


@app.command()
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


@app.command()
def schema(name: SchemaName = typer.Argument(..., help="workloads, stack, overlay or plan")) -> None:
    """Print the JSON Schema of a file gpuplan reads (workloads, stack, overlay) or writes (plan JSON)."""
    import json

    from planner.report.schemas import schema_for

    typer.echo(json.dumps(schema_for(name.value), indent=2, ensure_ascii=False))


def main() -> None:
    """The console entry point. Once the Pulumi runtime has run (check, cost), the interpreter's own
    teardown of its gRPC and asyncio threads takes longer than the command (~0.6 s of a ~1 s check,
    issue 29) and has nothing left to do for us: the output is flushed, files were written and closed
    by then, so exit at once with the command's code."""
    try:
        app()
    except SystemExit as exc:
        if "pulumi.runtime" not in sys.modules:
            raise
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            sys.stderr.write(f"{exc.code}\n")
        import os

        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:  # a reader that closed the pipe early (| head) gets no more
            code = code or 1
        os._exit(code)


if __name__ == "__main__":
    main()
