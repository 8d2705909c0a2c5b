"""The pull-request workflow is valid YAML with the jobs, steps and permissions it needs."""

from __future__ import annotations

import yaml

from tests.conftest import ROOT

WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "gpuplan.yml").read_text())


def test_triggers_on_pull_requests():
    assert "pull_request" in WORKFLOW[True]  # YAML 1.1 reads the key `on` as True


def test_comment_job_runs_check_and_cost_and_posts_one_comment():
    job = WORKFLOW["jobs"]["cost-and-policies"]
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    assert "gpuplan check" in runs
    assert 'gpuplan cost --base-ref "origin/${{ github.base_ref }}"' in runs
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
    assert pulumi["with"]["command"] == "preview" and pulumi["with"]["policyPacks"] == "policies"
    assert job["env"]["HAS_AWS"] == "${{ secrets.AWS_ROLE_ARN != '' }}"
    assert all(step.get("if") == "env.HAS_AWS == 'true'" for step in job["steps"])
