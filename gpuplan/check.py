"""`gpuplan check`: plan, synthesize the resources the components would register (offline, under
Pulumi's mocks), and run every policy rule on them, as `pulumi preview --policy-pack` would."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from planner import PlanSet, plan_workloads
from planner.hardware import catalog as catalog_mod
from planner.workload.errors import SpecError
from planner.report.mdsafe import md_code, md_text
from planner.workload.spec import STACK_CATALOG_KEY, STACK_KEY, WorkloadFile, load_workloads

# Stand-ins for the environment inputs a real deployment supplies; no rule reads them.
# (shaped as AWS ids, so the program's own shape checks pass them)
OFFLINE_VPC, OFFLINE_SUBNET, OFFLINE_MODEL = "vpc-00000000", "subnet-00000000", "offline/model-not-deployed"


def offline_model(workload) -> str:
    """The stand-in model id: the planned preset's name, which the memory rule resolves to that preset
    (an id it cannot resolve blocks); a custom architecture travels in the tags instead."""
    preset = getattr(workload.model, "preset", None)
    return f"offline/{preset}" if preset else OFFLINE_MODEL


class CheckViolation(BaseModel):
    policy: str
    level: str
    resource: str
    message: str


class WorkloadVerdict(BaseModel):
    workload: str
    instance_type: str
    nodes: int
    violations: list[CheckViolation]


class CheckReport(BaseModel):
    file: str
    passed: bool
    mandatory: int
    advisory: int
    workloads: list[WorkloadVerdict]
    stack: list[CheckViolation]
    notes: list[str] = []  # stand-ins used for settings the stack does not have yet


def program_config(spec: WorkloadFile, stand_ins: list[str] | None = None) -> dict:
    """The stack config the program runs with: a stack file's own, or a workload file's workloads with
    stand-ins for the environment inputs that only a real deployment needs. With `stand_ins` (a list
    to report into), a stack file's missing model source and network get stand-ins too: pricing and
    sizing a change does not need them, deploying it does."""
    if spec.stack_config is not None:
        config = dict(spec.stack_config)
        if spec.catalog:
            config[STACK_CATALOG_KEY] = spec.catalog
        if stand_ins is not None:
            _fill_stand_ins(config, spec, stand_ins)
        return config
    region = spec.workloads[0].constraints.region
    return {STACK_KEY: [w.model_dump(exclude_none=True, mode="json") for w in spec.workloads], "aws:region": region,
            "gpuplan:vpcId": OFFLINE_VPC, "gpuplan:subnetIds": [OFFLINE_SUBNET],
            "gpuplan:deployments": {w.name: {"hfModelId": offline_model(w)} for w in spec.workloads},
            **({STACK_CATALOG_KEY: spec.catalog} if spec.catalog else {})}


def _fill_stand_ins(config: dict, spec: WorkloadFile, notes: list[str]) -> None:
    deployments = config.get("gpuplan:deployments")
    if deployments is not None and not isinstance(deployments, dict):
        return  # a wrong type is reported by the program, not papered over
    deployments = dict(deployments or {})
    for w in spec.workloads:
        settings = deployments.get(w.name)
        if settings is not None and not isinstance(settings, dict):
            continue
        if w.kind == "inference" and not {"modelDataUrl", "hfModelId"} & set(settings or {}):
            deployments[w.name] = {**(settings or {}), "hfModelId": offline_model(w)}
            notes.append(f"{w.name}: no modelDataUrl or hfModelId yet; checked with the planned model's architecture")
    config["gpuplan:deployments"] = deployments
    if any(w.kind != "inference" for w in spec.workloads) and not (config.get("gpuplan:vpcId")
                                                                  and config.get("gpuplan:subnetIds")):
        config.setdefault("gpuplan:vpcId", OFFLINE_VPC)
        config["gpuplan:subnetIds"] = config.get("gpuplan:subnetIds") or [OFFLINE_SUBNET]
        notes.append("no gpuplan:vpcId / gpuplan:subnetIds yet; training clusters checked in a stand-in subnet")


def validate_deployments(path: str | Path, spec: WorkloadFile) -> dict:
    """A stack file's gpuplan:deployments, read as the program reads them, so `plan`, `cost` and
    `preflight` refuse a wrongly typed setting as `pulumi up` would (SpecError naming the key as
    written). Workload name → Deployment; empty for a workload file."""
    if spec.stack_config is None:
        return {}
    from components.config import read_deployments, read_stack_settings  # a stack file only: start-up
    try:
        read_stack_settings(spec.stack_config)
        return read_deployments(spec.stack_config.get("gpuplan:deployments"), [w.name for w in spec.workloads])
    except ValueError as exc:  # "<key as written>: <what is wrong>"
        key, _, message = str(exc).partition(": ")
        raise SpecError(message, path=f"config.{key}", file=str(path)) from None


def check_tags(path: str | Path, spec: WorkloadFile, plans: PlanSet) -> None:
    """Every tag value the program will write on each planned workload's resources, against AWS's tag
    pattern and length (SageMaker, IAM and FSx refuse the resource otherwise): SpecError naming it."""
    from planner.report.tags import plan_tags, tag_value_problem

    environment = (spec.stack_config or {}).get("gpuplan:environment") or "production"
    by_name = {w.name: w for w in spec.workloads}
    for plan in plans.plans:
        workload = by_name[plan.workload]
        for key, value in plan_tags(plan, workload, environment).items():
            problem = tag_value_problem(value)
            if problem:
                where = "config.gpuplan:environment" if key == "gpuplan:environment" else workload.path
                raise SpecError(f"tag {key}: {problem}", path=where, file=str(path))


def check_file(path: str | Path, policy_config: dict | None = None, spec: WorkloadFile | None = None,
               plans: PlanSet | None = None, strict: bool = True, stand_ins: bool = False) -> CheckReport:
    """`spec` and `plans`, when the caller already has them for `path`, spare a second read and plan.
    Strict (the default, as in CI) synthesizes as `pulumi preview` sees the program, computed values
    unknown, and blocks when a value a gating rule reads is one of them. `stand_ins`: see program_config."""
    from planner import shared_searches

    with shared_searches():  # the program plans the same shapes again: search each once
        return _check(path, policy_config, spec, plans, strict, stand_ins)


def _check(path: str | Path, policy_config: dict | None, spec: WorkloadFile | None, plans: PlanSet | None,
           strict: bool, stand_ins: bool) -> CheckReport:
    import pulumi

    from gpuplan.offline import synthesize
    from policies.resources import Resource
    from policies.rules import evaluate

    spec = spec or load_workloads(path)
    validate_deployments(path, spec)  # the settings as written, before the engine turns them into text
    plans = plans or plan_workloads(spec)  # SpecError / InfeasibleError surface here, with the planner's messages
    check_tags(path, spec, plans)
    try:
        notes: list[str] | None = [] if stand_ins else None
        recorder = synthesize(program_config(spec, notes), preview=strict)
    except pulumi.RunError as exc:
        raise SpecError(str(exc), file=str(path)) from None
    resources = [Resource(r.type, r.name, r.inputs, r.urn, r.parent, r.dependencies) for r in recorder.resources]
    config = dict(policy_config or {})
    if not strict:
        config["gating-values-known"] = {**(config.get("gating-values-known") or {}), "strict": False}
    violations = evaluate(resources, config, catalog_mod.load(spec.catalog))
    by_workload = {p.workload: WorkloadVerdict(workload=p.workload, instance_type=p.choice.instance_type,
                                               nodes=p.choice.nodes, violations=[]) for p in plans.plans}
    stack: list[CheckViolation] = []
    for v in violations:
        item = CheckViolation(policy=v.policy, level=v.level, resource=v.resource, message=v.message)
        (by_workload[v.workload].violations if v.workload in by_workload else stack).append(item)
    mandatory = sum(v.level == "mandatory" for v in violations)
    return CheckReport(file=str(path), passed=mandatory == 0, mandatory=mandatory,
                       advisory=sum(v.level == "advisory" for v in violations),
                       workloads=list(by_workload.values()), stack=stack, notes=notes or [])


def load_policy_config(path: str | Path | None) -> dict | None:
    """The same JSON file `pulumi preview --policy-pack-config` reads."""
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise SpecError("file not found" if not p.exists() else "not a regular file", file=str(path))
    try:
        config = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read file ({exc.__class__.__name__})", file=str(path)) from None
    except ValueError as exc:
        raise SpecError(f"not valid JSON ({exc})", file=str(path)) from None
    if not isinstance(config, dict):
        raise SpecError("expected a JSON object of policy names to levels or settings", file=str(path))
    from policies.config import validate_policy_config
    from policies.rules import RULES

    return validate_policy_config(config, {r.name: set(r.config_schema) for r in RULES}, str(path))


def render_markdown(report: CheckReport) -> str:
    icon = "✅" if report.passed else "❌"
    lines = [f"{icon} **Policies: {report.mandatory} mandatory, {report.advisory} advisory violation(s)**", ""]
    lines += [f"> note: {md_text(note)}" for note in report.notes] + ([""] if report.notes else [])
    for w in report.workloads + ([WorkloadVerdict(workload="(stack)", instance_type="-", nodes=0,
                                                  violations=report.stack)] if report.stack else []):
        named = f"- {md_code(w.workload)} ({md_text(w.instance_type)} × {w.nodes})"
        if not w.violations:
            lines.append(f"{named}: passes")
            continue
        lines.append(f"{named}:")
        lines += [f"  - **{v.level}** {md_code(v.policy)} on {md_code(v.resource)}: {md_text(v.message)}"
                  for v in w.violations]
    return "\n".join(lines) + "\n"


def render_text(report: CheckReport) -> str:
    lines = [f"note: {note}" for note in report.notes]
    for w in report.workloads + ([WorkloadVerdict(workload="(stack)", instance_type="-", nodes=0,
                                                  violations=report.stack)] if report.stack else []):
        lines.append(f"{w.workload} ({w.instance_type} × {w.nodes}): "
                     + ("passes" if not w.violations else f"{len(w.violations)} violation(s)"))
        lines += [f"  [{v.level}] {v.policy} on {v.resource}: {v.message}" for v in w.violations]
    verdict = "PASSED" if report.passed else "BLOCKED"
    lines.append(f"{verdict}: {report.mandatory} mandatory, {report.advisory} advisory violation(s)")
    return "\n".join(lines) + "\n"
