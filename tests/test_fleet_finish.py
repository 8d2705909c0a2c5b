"""Issue 28, finished: the fleet's prices are explained where a region has none."""

from __future__ import annotations

from typer.testing import CliRunner

from gpuplan.cli import app


def test_catalog_list_says_where_p6_b300_has_a_price():
    """p6-b300.48xlarge is priced in us-west-2 only (vantage 2025-11-30): us-east-1 says so, not a bare dash."""
    out = CliRunner().invoke(app, ["catalog", "list"]).output
    row = next(line for line in out.splitlines() if line.startswith(" p6-b300.48xlarge"))
    assert row.rstrip().endswith("only in us-west-2")
    west = CliRunner().invoke(app, ["catalog", "list", "--region", "us-west-2"]).output
    row = next(line for line in west.splitlines() if line.startswith(" p6-b300.48xlarge"))
    assert "142.4160" in row and "2025-11-30" in row
