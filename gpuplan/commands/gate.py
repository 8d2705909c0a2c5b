"""`check` and `cost`: the policy pack offline and the pull-request cost comment."""

from __future__ import annotations

import functools
import gc
import sys
from pathlib import Path
from typing import Callable, Optional

import typer

from gpuplan.commands.common import (CalibrationOpt, FileArg, FORMAT_HELP, Format, PolicyConfigOpt, calibrated, calibration_of, fail,
                                     guarded)
from planner import SpecError


def collector_paused(command: Callable) -> Callable:
    """Run `command` with Python's cyclic garbage collector off, then put the collector back as it was.
    Importing pulumi_aws's service files and running the program under Pulumi's mocks allocate ~270,000
    objects that live until the process ends; each of the collector's passes walks them again, ~0.2 s of
    CPU in a ~0.9 s `check` on the example stack (bench/plan_speed.py --cli-only, issue 29). Reference
    counting still frees everything else: peak RSS is the same with and without (106 MB for the example
    stack's check, 120 MB for a cost with the 405B frontier at max_nodes 4,096). On the way out, what
    the command allocated joins the oldest generation (gc.freeze then gc.unfreeze, as the gc docs define
    them) instead of being walked by the first young collection after gc.enable(), ~0.07 s spent just
    before the process exits; an in-process caller's next full collection still frees its garbage."""

    @functools.wraps(command)
    def paused(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return command(*args, **kwargs)
        finally:
            if enabled:
                if gc.get_freeze_count() == 0:  # a caller's own frozen objects stay frozen
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()

    return paused


@collector_paused
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


@collector_paused
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


