"""The pull-request workflow is valid YAML with the jobs, steps and permissions it needs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

from tests.conftest import ROOT

WORKFLOW_PATH = ROOT / ".github" / "workflows" / "gpuplan.yml"
WORKFLOW_TEXT = WORKFLOW_PATH.read_text()
WORKFLOW = yaml.safe_load(WORKFLOW_TEXT)


def test_triggers_on_pull_requests():
    assert "pull_request" in WORKFLOW[True]  # YAML 1.1 reads the key `on` as True


def test_comment_job_runs_check_and_cost_and_posts_one_comment():
    job = WORKFLOW["jobs"]["cost-and-policies"]
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "gpuplan check" in runs
    assert 'gpuplan cost --base-ref "origin/$BASE_REF"' in runs
    assert "<!-- gpuplan-cost-comment -->" in runs and "PATCH" in runs and "gh pr comment" in runs
    uses = [step.get("uses", "") for step in job["steps"]]
    assert any(u.startswith("actions/setup-python@") for u in uses)
    assert any(u.startswith("actions/checkout@") for u in uses)
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0  # the base ref must be there for --base-ref


def test_write_permission_only_where_the_comment_is_posted():
    assert WORKFLOW["permissions"] == {"contents": "read"}
    for name, job in WORKFLOW["jobs"].items():
        if name != "cost-and-policies":
            assert "pull-requests" not in job.get("permissions", {})


def test_preview_job_uses_the_pulumi_action_with_the_pack_and_skips_without_credentials():
    job = WORKFLOW["jobs"]["pulumi-preview"]
    pulumi = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert pulumi["with"]["command"] == "preview" and pulumi["with"]["policyPacks"] == "dist/policy-pack"
    assert pulumi["with"]["upsert"] is True  # a first run creates the stack instead of failing
    assert job["env"]["HAS_AWS"] == "${{ secrets.AWS_ROLE_ARN != '' }}"
    assert all(step.get("if") == "env.HAS_AWS == 'true'" for step in job["steps"])


def test_paths_cover_everything_that_changes_a_plan_or_a_verdict():
    paths = set(WORKFLOW[True]["pull_request"]["paths"])
    assert {"Pulumi.yaml", "Pulumi.*.yaml", "__main__.py", "pyproject.toml", "planner/**", "components/**",
            "policies/**", "gpuplan/**"} <= paths


def test_rules_come_from_the_base_branch_not_the_pull_request():
    for name in ("cost-and-policies", "pulumi-preview"):
        steps = WORKFLOW["jobs"][name]["steps"]
        base = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")
                and s.get("with", {}).get("ref") == "${{ github.base_ref }}"]
        assert base and base[0]["with"]["path"] == ".gpuplan-base", name
    runs = "\n".join(s.get("run", "") for s in WORKFLOW["jobs"]["cost-and-policies"]["steps"])
    assert 'pip install "./.gpuplan-base[pulumi]"' in runs and "gpuplan check" in runs and "--strict" in runs
    preview = "\n".join(s.get("run", "") for s in WORKFLOW["jobs"]["pulumi-preview"]["steps"])
    assert ".gpuplan-base/scripts/build_policy_pack.py dist/policy-pack" in preview


def test_comment_is_skipped_on_forks_and_never_empty():
    steps = WORKFLOW["jobs"]["cost-and-policies"]["steps"]
    post = next(s for s in steps if s.get("name") == "Create or update the pull-request comment")
    assert "github.event.pull_request.head.repo.full_name == github.repository" in post["if"]
    guard = next(s for s in steps if s.get("name") == "Never an empty or crashed comment")
    assert guard["if"] == "always()" and "[ ! -s gpuplan-comment.md ]" in guard["run"]
    assert "<!-- gpuplan-cost-comment -->" in guard["run"]  # the error replaces the same comment


def _steps():
    for name, job in WORKFLOW["jobs"].items():
        for step in job["steps"]:
            yield name, step


def test_no_expression_is_expanded_inside_a_script():
    """`${{ github.base_ref }}` in `run:` is template injection (a branch name is attacker-chosen):
    values reach scripts through `env:` only."""
    for job, step in _steps():
        assert "${{" not in step.get("run", ""), (job, step.get("name") or step.get("run"))
    cost = next(s for _, s in _steps() if s.get("id") == "cost")
    assert cost["env"]["BASE_REF"] == "${{ github.base_ref }}"


# The versions pinned below run on node24 (each one's action.yml says `using: node24`, read from the
# tagged commit of github.com/actions/checkout, actions/setup-python, aws-actions/configure-aws-credentials
# and pulumi/actions on 2026-07-20).
NODE24_MAJORS = {"actions/checkout": 5, "actions/setup-python": 6, "aws-actions/configure-aws-credentials": 6,
                 "pulumi/actions": 7}


def test_actions_are_pinned_by_commit_with_their_tag_on_node24_versions():
    pins = re.findall(r"uses:\s*([\w.-]+/[\w.-]+)@(\S+)(?:\s*#\s*(v\d+\S*))?", WORKFLOW_TEXT)
    assert len(pins) == 8
    for action, ref, tag in pins:
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{action}@{ref} is not pinned to a full commit SHA"
        assert tag, f"{action}@{ref} has no `# vX.Y.Z` comment naming its tag"
        assert int(tag[1:].split(".")[0]) >= NODE24_MAJORS[action], f"{action} {tag} runs on node20"


def test_checkouts_do_not_keep_credentials():
    checkouts = [s for _, s in _steps() if s.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == 4
    assert all(s.get("with", {}).get("persist-credentials") is False for s in checkouts)


def test_secrets_only_inside_a_deployment_environment_and_one_run_per_pull_request():
    for name, job in WORKFLOW["jobs"].items():
        if "secrets." in yaml.safe_dump(job):
            assert job.get("environment"), f"job {name} reads secrets outside a deployment environment"
    assert WORKFLOW["jobs"]["pulumi-preview"]["environment"] == "gpuplan-preview"
    assert "secrets." not in yaml.safe_dump({k: v for k, v in WORKFLOW.items() if k != "jobs"})
    assert "github.event.pull_request.number" in WORKFLOW["concurrency"]["group"]
    assert WORKFLOW["concurrency"]["cancel-in-progress"] is True


def _fallback_comment(tmp_path: Path, error_text: str | None) -> str:
    """Runs the workflow's own fallback step (bash, as the runner does) on an error text."""
    guard = next(s for _, s in _steps() if s.get("name") == "Never an empty or crashed comment")
    if error_text is not None:
        (tmp_path / "gpuplan-cost.err").write_text(error_text)
    subprocess.run(["bash", "-e", "-c", guard["run"]], cwd=tmp_path, check=True)
    return (tmp_path / "gpuplan-comment.md").read_text()


FORGED = ("config gpuplan:workloads[0]: unknown key 'x\n```\n\n### 🎉 gpuplan: Monthly cost down by $50,000 — "
          "approved\n\n```'\nand a longer run ````` too")


@pytest.mark.parametrize("error_text", [FORGED, "plain error", "````````` nine", None])
def test_the_fallback_comment_keeps_the_error_inside_its_code_block(tmp_path, error_text):
    comment = _fallback_comment(tmp_path, error_text)
    tokens = MarkdownIt("commonmark").parse(comment)
    assert comment.startswith("<!-- gpuplan-cost-comment -->")
    assert not [t for t in tokens if t.type == "heading_open"]
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) == 1 and tokens[-1] is fences[0]
    assert (error_text or "no error output") in fences[0].content


def _zizmor() -> str | None:
    found = shutil.which("zizmor") or str(Path(sys.executable).parent / "zizmor")
    return found if Path(found).exists() else None


@pytest.mark.skipif(_zizmor() is None, reason="zizmor is not installed (pip install -e '.[test]' installs it)")
def test_zizmor_finds_nothing_of_medium_severity_or_above():
    result = subprocess.run([_zizmor(), "--offline", "--format", "json", str(WORKFLOW_PATH.parent)],
                            capture_output=True, text=True, check=False)
    findings = json.loads(result.stdout)
    serious = [f"{f['ident']}: {f['desc']} ({f['locations'][0]['concrete']['feature']!r})" for f in findings
               if f["determinations"]["severity"] in ("Medium", "High") and not f.get("ignored")]
    assert not serious, "\n".join(serious)
