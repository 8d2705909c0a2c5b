"""The rules as CrossGuard policies. Importing this builds policy objects only; __main__.py alone
constructs the PolicyPack (whose constructor starts the analyzer server and never returns)."""

from __future__ import annotations

from pulumi_policy import (EnforcementLevel, PolicyConfigSchema, ReportViolation, ResourceValidationArgs,
                           ResourceValidationPolicy, StackValidationArgs, StackValidationPolicy)

from planner.catalog import bundled
from policies.resources import Resource
from policies.rules import RULES, Rule

LEVELS = {"advisory": EnforcementLevel.ADVISORY, "mandatory": EnforcementLevel.MANDATORY}


def _resource_validator(rule: Rule):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        resource = Resource(args.resource_type, args.name, args.props, args.urn)
        for finding in rule.check(resource, args.get_config() or {}, bundled()):
            report_violation(finding.message, args.urn)
    return validate


def _stack_validator(rule: Rule):
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [Resource(r.resource_type, r.name, r.props, r.urn, r.parent.urn if r.parent else None)
                     for r in args.resources]
        for finding in rule.check(resources, args.get_config() or {}, bundled()):
            report_violation(finding.message)
    return validate


def _schema(rule: Rule) -> PolicyConfigSchema | None:
    return PolicyConfigSchema(properties=rule.config_schema) if rule.config_schema else None


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
