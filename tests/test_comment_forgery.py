"""Issue 24, "the PR comment can be forged": what a user's overlay or workload file says reaches the
cost comment, the policy lines, the assumptions and the plan Markdown only as inert text; and the
comment stays under GitHub's 65,536-character limit."""

from __future__ import annotations

import re

import yaml
from typer.testing import CliRunner

from gpuplan.cli import app

runner = CliRunner()
EVIL_TYPE = "evil.x|<img src=x>"
EVIL_SOURCE = "@octocat <img src=https://e.com/t.png> </details><h1>approved</h1>"
X1 = {"name": "X1", "memory_mib": 81920, "memory_bandwidth_gb_s": 3000, "intra_node_gb_s": 450, "tflops": {"bf16": 500}}


def _files(tmp_path, workloads: int = 1):
    overlay = {"accelerators": [X1], "instance_types": [
        {"name": EVIL_TYPE, "family": "x1", "accelerator": "X1", "accelerators_per_node": 1, "usd_per_hour": 10.0,
         "source": EVIL_SOURCE, "source_date": "2025-11-30"}]}
    (tmp_path / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    chat = {"kind": "inference", "model": {"preset": "llama-3.1-8b"}, "constraints": {"families": ["x1"]}}
    base = {"catalog": "overlay.yaml", "workloads": [{"name": "chat-0", **chat}]}
    head = {"catalog": "overlay.yaml", "workloads": [{"name": f"chat-{i}", **chat, "serving": {
        "concurrent_requests": 8 + i}} for i in range(workloads)]}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    (tmp_path / "head.yaml").write_text(yaml.safe_dump(head))
    return str(tmp_path / "base.yaml"), str(tmp_path / "head.yaml")


def _no_live_markup(text: str) -> None:
    assert "<img" not in text and "</details><h1>" not in text and "<h1>" not in text
    assert not re.search(r"@octocat", text)  # a mention would notify that user
    assert "https://e.com" not in text  # nor an autolink
    for line in text.splitlines():
        if EVIL_TYPE.split("|")[0] in line and line.startswith("|"):
            assert "x\\|&lt;img" in line  # the pipe does not open a cell


def test_overlay_names_and_sources_are_escaped_in_the_cost_comment(tmp_path):
    base, head = _files(tmp_path, workloads=2)
    result = runner.invoke(app, ["cost", "--base", base, "--head", head, "--no-frontier"])
    assert result.exit_code == 0, result.output
    assert "evil.x\\|&lt;img src=x&gt;" in result.output
    _no_live_markup(result.output)


def test_overlay_names_are_escaped_in_plan_markdown_and_policy_lines(tmp_path):
    _, head = _files(tmp_path)
    plan = runner.invoke(app, ["plan", head, "--format", "markdown"])
    assert plan.exit_code == 0, plan.output
    _no_live_markup(plan.output)
    check = runner.invoke(app, ["check", head, "--format", "markdown"])
    _no_live_markup(check.output)


def test_the_comment_stays_under_githubs_limit(tmp_path):
    """53,178 characters for 10 workloads and 506,723 bytes for 100 before; GitHub refuses over 65,536."""
    base, head = _files(tmp_path, workloads=100)
    result = runner.invoke(app, ["cost", "--base", base, "--head", head, "--no-frontier"])
    assert result.exit_code == 0, result.output
    assert len(result.output) <= 65_536
    assert "left out to stay under GitHub's comment limit: the full plans" in result.output
    assert "| `chat-99` | 🆕 added |" in result.output  # the table itself is kept
