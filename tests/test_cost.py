"""`gpuplan cost`: golden Markdown and JSON for each kind of change, quiet modes, guardrails, --base-ref."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from gpuplan.cli import app
from gpuplan.costdiff import MARKER
from tests.conftest import ROOT
from tests.golden_files import assert_golden

runner = CliRunner()
FIXTURES = ROOT / "tests" / "fixtures" / "cost"
BASE = str(FIXTURES / "base.yaml")


def cost(head: str, *extra: str, frontier: bool = False):
    """The cost command; the folded frontiers (slow to compute) only where a golden file pins them."""
    flag = "--frontier" if frontier else "--no-frontier"
    return runner.invoke(app, ["cost", "--base", BASE, "--head", str(FIXTURES / head), flag, *extra])


def stable(text: str) -> str:
    return text.replace(str(ROOT) + "/", "")


@pytest.mark.parametrize("head", ["head_changed.yaml", "head_added.yaml", "head_removed.yaml", "base.yaml"])
def test_markdown_and_json_golden(head):
    stem = head.removesuffix(".yaml").replace("base", "head_unchanged")
    markdown = cost(head, frontier=True)
    assert markdown.exit_code == 0, markdown.output
    assert_golden(f"cost_{stem}.md", stable(markdown.output))
    as_json = cost(head, "--format", "json")
    assert as_json.exit_code == 0
    assert_golden(f"cost_{stem}.json", stable(as_json.output))


def test_changed_workload_numbers():
    data = json.loads(cost("head_changed.yaml", "--format", "json").output)
    row = next(r for r in data["workloads"] if r["workload"] == "chat-70b")
    assert row["status"] == "changed" and row["after_usd_per_month"] > row["before_usd_per_month"]
    assert data["change_usd_per_month"] == pytest.approx(row["change_usd_per_month"])
    assert isinstance(data["change_percent"], float)
    assert data["policies"]["passed"] is True
    markdown = cost("head_changed.yaml").output
    assert markdown.startswith(MARKER + "\n### 💰 gpuplan: Monthly cost up by $")
    assert "```mermaid\nxychart-beta" in markdown and "<details><summary>Full plans (head)</summary>" in markdown


def test_added_and_removed_are_marked():
    added = json.loads(cost("head_added.yaml", "--format", "json").output)
    assert [r["status"] for r in added["workloads"]] == ["unchanged", "unchanged", "unchanged", "added"]
    assert added["workloads"][-1]["before_usd_per_month"] is None
    removed = cost("head_removed.yaml").output
    assert "| `finetune-8b` | 🗑️ removed |" in removed


def test_no_change_and_skip_no_diff():
    unchanged = cost("base.yaml")
    assert "Monthly cost unchanged at $" in unchanged.output
    quiet = cost("base.yaml", "--skip-no-diff")
    assert quiet.exit_code == 0 and quiet.output == ""
    assert cost("head_changed.yaml", "--skip-no-diff").output.startswith(MARKER)


def test_policy_violation_on_head_fails(tmp_path):
    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"endpoint-availability": "mandatory"}))
    result = cost("head_changed.yaml", "--policy-config", str(config))
    assert result.exit_code == 1
    assert "❌ **Policies: 1 mandatory, 0 advisory violation(s)**" in result.output
    assert result.output.rstrip().endswith("error: 1 mandatory policy violation(s) on the head")
    assert_golden("cost_policy_violation.md", stable(result.output))


def test_guardrails_fail_ci():
    over = cost("head_changed.yaml", "--fail-above-percent", "10")
    assert over.exit_code == 1 and "error: cost guardrail: monthly cost rises" in over.output
    assert "above --fail-above-percent 10" in over.output
    assert cost("head_changed.yaml", "--fail-above-usd", "1000").exit_code == 1
    assert cost("head_changed.yaml", "--fail-above-usd", "10000000").exit_code == 0
    assert cost("head_removed.yaml", "--fail-above-percent", "0").exit_code == 0  # cost went down


def test_base_and_base_ref_are_exclusive():
    result = runner.invoke(app, ["cost", "--head", BASE])
    assert result.exit_code == 2 and "exactly one of --base FILE or --base-ref REF" in result.output


def test_base_ref_reads_git(tmp_path):
    git = shutil.which("git")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    run = lambda *a: subprocess.run([git, *a], cwd=repo, check=True, capture_output=True, env=env)  # noqa: E731
    run("init", "-q", "-b", "main")
    target = repo / "infra" / "workloads.yaml"
    target.parent.mkdir()
    shutil.copy(FIXTURES / "base.yaml", target)
    run("add", ".")
    run("commit", "-qm", "base")
    shutil.copy(FIXTURES / "head_changed.yaml", target)
    run("commit", "-qam", "head")
    result = runner.invoke(app, ["cost", "--base-ref", "HEAD~1", "--head", str(target), "--format", "json",
                                 "--no-policies"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["base"] == f"HEAD~1:{target}"
    assert [r["status"] for r in data["workloads"]] == ["changed", "unchanged", "unchanged"]
    assert not list(target.parent.glob(".gpuplan-base-*"))  # the temporary base file is gone
    missing = runner.invoke(app, ["cost", "--base-ref", "no-such-ref", "--head", str(target)])
    assert missing.exit_code == 2 and "cannot read git ref 'no-such-ref'" in missing.output
