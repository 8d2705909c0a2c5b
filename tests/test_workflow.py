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
