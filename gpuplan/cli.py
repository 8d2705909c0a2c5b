"""The `gpuplan` command. Errors end here: SpecError → exit 2, InfeasibleError → exit 1, each as
one message without a traceback. The planning path never imports pulumi or boto3.

The commands live in gpuplan/commands/ (one module per group); this module only registers them. None
of those modules imports the planner at load time, so `gpuplan --help` loads typer alone (issue 29)."""

from __future__ import annotations

import os
import sys

import typer

from gpuplan.commands import catalog, gate, measure, planning
from gpuplan.startup import skip_plugin_scan

# rich_markup_mode=None: click's own help, which wraps to the terminal instead of cutting flag names
# (rich's option table truncated `--fail-above-percent` at 80 columns).
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Size GPU and accelerator workloads on AWS, provision them with Pulumi, gate them with policies.")
app.add_typer(catalog.catalog_app, name="catalog")
for command, name in ((planning.plan, None), (planning.frontier, None), (gate.check, None), (gate.cost, None),
                      (measure.calibrate_command, "calibrate"), (measure.observe, None), (planning.models, None),
                      (measure.preflight, None), (planning.schema, None)):
    app.command(name)(command)


def main() -> None:
    """The console entry point. Once the Pulumi runtime has run (check, cost), the interpreter's own
    teardown of its gRPC and asyncio threads takes longer than the command (~0.6 s of a ~1 s check,
    issue 29) and has nothing left to do for us: the output is flushed, files were written and closed
    by then, so exit at once with the command's code."""
    # No pydantic plugin scan, and no importlib.metadata import to learn there is none (gpuplan/startup.py);
    # a PYDANTIC_DISABLE_PLUGINS the user set (even empty) is kept.
    skip_plugin_scan()
    try:
        app()
    except SystemExit as exc:
        if "pulumi.runtime" not in sys.modules:
            raise
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            sys.stderr.write(f"{exc.code}\n")
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:  # a reader that closed the pipe early (| head) gets no more
            code = code or 1
        os._exit(code)


if __name__ == "__main__":
    main()
