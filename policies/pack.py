"""The rules as CrossGuard policies. Importing this builds policy objects only; __main__.py alone
constructs the PolicyPack (whose constructor starts the analyzer server and never returns)."""

from __future__ import annotations

from pulumi_policy import (EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs,
                           ResourceValidationPolicy, StackValidationArgs, StackValidationPolicy)
from pulumi_policy.proxy import UnknownValueError

from planner.hardware.catalog import bundled
from planner.workload.errors import SpecError
from policies.resources import Resource, plain
from policies.rules import RULES, Rule, catalog_for

LEVELS = {"advisory": EnforcementLevel.ADVISORY, "mandatory": EnforcementLevel.MANDATORY}


def _catalog(rule: Rule, config: dict, report_violation: ReportViolation):
    try:
        return catalog_for(config, bundled())
    except SpecError as exc:
        report_violation(f"{rule.name}: {exc}")
        return None


def _resource_validator(rule: Rule):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        config = args.get_config() or {}
        resource = Resource(args.resource_type, args.name, args.props, args.urn)
        catalog = _catalog(rule, config, report_violation)
        if catalog is None:
            return
        try:
            for finding in rule.check(resource, config, catalog):
                report_violation(finding.message, args.urn)
        except UnknownValueError as exc:
            # CrossGuard would report this as an advisory "can't run policy"; strict mode blocks instead.
            if not config.get("strict", True):
                raise
            report_violation(f"{rule.name}: {exc.message}; strict mode blocks a value unknown at preview "
                             "(policy config strict: false accepts it)", args.urn)
    return validate


def _stack_validator(rule: Rule):
    """Stack rules read every resource; values unknown at preview become the unknown sentinel, so one
    computed value skips what depends on it instead of turning the whole rule into an advisory
    (gating-values-known reports the unknown value itself)."""
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        config = args.get_config() or {}
        catalog = _catalog(rule, config, report_violation)
        if catalog is None:
            return
        resources = [Resource(r.resource_type, r.name, plain(r.props), r.urn, r.parent.urn if r.parent else None,
                              {k: [d.urn for d in v] for k, v in (r.property_dependencies or {}).items()})
                     for r in args.resources]
        urns = {r.name: r.urn for r in resources}
        for finding in rule.check(resources, config, catalog):
            report_violation(finding.message, urns.get(finding.resource or ""))
    return validate


STRICT = {"strict": {"type": "boolean", "default": True,
                     "description": "block (not advise) when a value this rule reads is unknown at preview"}}


def _schema(rule: Rule) -> PolicyConfigSchema:
    return PolicyConfigSchema(properties={**STRICT, **rule.config_schema})


def build_policies() -> list:
    policies = []
    for rule in RULES:
        kind = StackValidationPolicy if rule.stack else ResourceValidationPolicy
        validator = _stack_validator(rule) if rule.stack else _resource_validator(rule)
        policies.append(kind(name=rule.name, description=rule.description, validate=validator,
                             enforcement_level=LEVELS[rule.level], config_schema=_schema(rule)))
    return policies
