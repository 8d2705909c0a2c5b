"""`catalog list`, `catalog show` and `catalog refresh`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from gpuplan.commands.common import CatalogOpt, fail, guarded
from planner import SpecError


catalog_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="The instance-type catalog: list, show, refresh.")


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


