"""The `gpuplan` command. Errors end here: SpecError → exit 2, InfeasibleError → exit 1, each as
one message without a traceback. The planning path never imports pulumi or boto3.

The commands live in gpuplan/commands/ (one module per group); this module only registers them. None
of those modules imports the planner at load time, so `gpuplan --help` loads typer alone (issue 29)."""

from __future__ import annotations

import os
import sys

import typer

from gpuplan.commands import catalog, gate, measure, planning
from gpuplan.startup import quiet_collector, skip_plugin_scan

# Every command, in the order `gpuplan --help` lists them, and the name it is called by.
COMMANDS = ((planning.plan, "plan"), (planning.frontier, "frontier"), (gate.check, "check"), (gate.cost, "cost"),
            (measure.calibrate_command, "calibrate"), (measure.observe, "observe"), (planning.models, "models"),
            (measure.preflight, "preflight"), (planning.schema, "schema"))
NAMES = {name for _, name in COMMANDS}


def build_app(only: str | None = None) -> typer.Typer:
    """The command line; with `only`, that command alone (and the catalog group, which keeps the app a
    group of commands, parsed and told exactly as the full one)."""
    # rich_markup_mode=None: click's own help, which wraps to the terminal instead of cutting flag names
    # (rich's option table truncated `--fail-above-percent` at 80 columns).
    built = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                        rich_markup_mode=None, help="Size GPU and accelerator workloads on AWS, provision them with "
                        "Pulumi, gate them with policies.")
    built.add_typer(catalog.catalog_app, name="catalog")
    for command, name in COMMANDS:
        if only is None or name == only:
            built.command(None if command.__name__ == name else name)(command)
    return built


app = build_app()


def app_for(argv: list[str]) -> typer.Typer:
    """The app a run with these arguments needs: typer turns every registered command into a click
    command on each run (~4 ms of a ~0.2 s plan, issue 29), so a run that names a command as its first
    argument gets that command alone; anything else (--help, the catalog group, a typo) the full app."""
    return build_app(argv[0]) if argv and argv[0] in NAMES else app


def main() -> None:
    """The console entry point. Once the Pulumi runtime has run (check, cost), the interpreter's own
    teardown of its gRPC and asyncio threads takes longer than the command (~0.6 s of a ~1 s check,
    issue 29) and has nothing left to do for us: the output is flushed, files were written and closed
    by then, so exit at once with the command's code."""
    # No pydantic plugin scan, and no importlib.metadata import to learn there is none (gpuplan/startup.py);
    # a PYDANTIC_DISABLE_PLUGINS the user set (even empty) is kept.
    skip_plugin_scan()
    quiet_collector()
    try:
        app_for(sys.argv[1:])()
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
