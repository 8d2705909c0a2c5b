"""The rules as CrossGuard policies. Importing this builds policy objects only; __main__.py alone
constructs the PolicyPack (whose constructor starts the analyzer server and never returns)."""

from __future__ import annotations

from pulumi_policy.proxy import UnknownValueError
from pulumi_policy import (EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs,
                           ResourceValidationPolicy, StackValidationArgs, StackValidationPolicy)

from planner.catalog import bundled
from policies.resources import Resource
from policies.rules import RULES, Rule

LEVELS = {"advisory": EnforcementLevel.ADVISORY, "mandatory": EnforcementLevel.MANDATORY}


def _resource_validator(rule: Rule):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        config = args.get_config() or {}
        resource = Resource(args.resource_type, args.name, args.props, args.urn)
        try:
            for finding in rule.check(resource, config, bundled()):
                report_violation(finding.message, args.urn)
        except UnknownValueError as exc:
            # CrossGuard would report this as an advisory "can't run policy"; strict mode blocks instead.
            if not config.get("strict", True):
                raise
            report_violation(f"{rule.name}: {exc.message}; strict mode blocks a value unknown at preview "
                             "(policy config strict: false accepts it)", args.urn)
    return validate


def _stack_validator(rule: Rule):
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [Resource(r.resource_type, r.name, r.props, r.urn, r.parent.urn if r.parent else None)
                     for r in args.resources]
        for finding in rule.check(resources, args.get_config() or {}, bundled()):
            report_violation(finding.message)
    return validate


STRICT = {"strict": {"type": "boolean", "default": True,
                     "description": "block (not advise) when a value this rule reads is unknown at preview"}}


def _schema(rule: Rule) -> PolicyConfigSchema:
    return PolicyConfigSchema(properties={**STRICT, **rule.config_schema})


def build_policies() -> list:
    policies = []
    for rule in RULES:
        if rule.stack:
            policies.append(StackValidationPolicy(name=rule.name, description=rule.description,
                                                  validate=_stack_validator(rule),
                                                  enforcement_level=LEVELS[rule.level], config_schema=_schema(rule)))
        else:
            policies.append(ResourceValidationPolicy(name=rule.name, description=rule.description,
                                                     validate=_resource_validator(rule),
                                                     enforcement_level=LEVELS[rule.level], config_schema=_schema(rule)))
    return policies
